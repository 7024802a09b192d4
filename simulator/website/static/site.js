// Draws the figures embedded in the page and wires the home page's selectors.
// Nothing is computed here: every number shown comes from the recorded CSV via the page's JSON.
"use strict";

(function () {
  function readJson(id) {
    return JSON.parse(document.getElementById(id).textContent);
  }

  function draw(div, figure, config) {
    var loading = div.querySelector(".chart-loading");
    if (loading) loading.remove();
    div.setAttribute("aria-busy", "false");
    return Plotly.react(div, figure.data, figure.layout, config);
  }

  document.querySelectorAll("[data-figure]").forEach(function (div) {
    var payload = readJson(div.dataset.figure);
    draw(div, payload.figure, payload.config);
  });

  var explorer = document.getElementById("explorer-data");
  if (!explorer) return;
  var data = readJson("explorer-data");
  var load = document.getElementById("load");
  var acceptance = document.getElementById("acceptance");
  var chart = document.getElementById("speedup-chart");
  var summary = document.getElementById("selection-summary");
  var notice = document.getElementById("url-notice");

  // Select the option numerically equal to `wanted` ("4", "4.0"); false if there is none.
  function choose(select, wanted) {
    var match = Array.prototype.find.call(select.options, function (o) {
      return Number(o.value) === Number(wanted);
    });
    if (match) select.value = match.value;
    return Boolean(match);
  }

  function fromHash() {
    var params = new URLSearchParams(window.location.hash.slice(1));
    var unknown = [];
    [["load", load], ["acceptance", acceptance]].forEach(function (pair) {
      var value = params.get(pair[0]);
      if (value !== null && !choose(pair[1], value)) unknown.push(pair[0] + "=" + value);
    });
    notice.hidden = unknown.length === 0;
    notice.textContent = unknown.length ? "No recorded rows for " + unknown.join(" and ") + "; showing the default selection instead." : "";
  }

  function show() {
    var key = load.value + "|" + acceptance.value;
    draw(chart, data.figures[key], data.config);
    summary.textContent = data.summaries[key];
    document.querySelectorAll("[data-selection]").forEach(function (el) {
      el.hidden = el.dataset.selection !== key;
    });
    document.querySelectorAll("[data-load]").forEach(function (el) {
      el.hidden = el.dataset.load !== load.value;
    });
  }

  function onChange() {
    var hash = "#load=" + load.value + "&acceptance=" + acceptance.value;
    if (window.location.hash !== hash) history.replaceState(null, "", hash);
    notice.hidden = true;
    show();
  }

  load.addEventListener("change", onChange);
  acceptance.addEventListener("change", onChange);
  window.addEventListener("hashchange", function () {
    fromHash();
    show();
  });
  fromHash();
  show();
})();
