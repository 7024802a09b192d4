// The pays-off page: draws the selected acceptance profile and verify-attention bound, shows
// that selection's schedule and tables, and keeps the choice in the URL (#acceptance=...&bound=...).
// Every number comes from the page's JSON (the recorded CSVs); nothing is computed here.
"use strict";

(function () {
  var dataNode = document.getElementById("paysoff-data");
  if (!dataNode || typeof Plotly === "undefined") return;
  var data = JSON.parse(dataNode.textContent);
  var acceptance = document.getElementById("pay-acceptance");
  var bound = document.getElementById("pay-bound");
  var notice = document.getElementById("pay-notice");

  function configFor(payload) {
    var config = Object.assign({}, data.config);
    config.modeBarButtons = [[{
      name: "download-png",
      title: "Download as PNG (with title and caveats)",
      icon: Plotly.Icons.camera,
      click: function () {
        window.siteCharts.downloadPng(payload);
      }
    }]];
    return config;
  }

  function draw(id, payload) {
    var div = document.getElementById(id);
    var loading = div.querySelector(".chart-loading");
    if (loading) loading.remove();
    Plotly.react(div, payload.figure.data, payload.figure.layout, configFor(payload));
  }

  function key() {
    return acceptance.value + "|" + bound.value;
  }

  function show() {
    var k = key();
    draw("paysoff-closed", data.figures["closed|" + k]);
    draw("paysoff-open", data.figures["open|" + k]);
    draw("paysoff-map", data.maps[bound.value]);
    document.querySelectorAll("[data-paysoff-key]").forEach(function (el) {
      el.hidden = el.getAttribute("data-paysoff-key") !== k;
    });
  }

  function fromUrl() {
    var text = window.location.hash.replace(/^#/, "");
    if (!text) return;
    var params = new URLSearchParams(text);
    var problems = [];
    [["acceptance", acceptance], ["bound", bound]].forEach(function (pair) {
      var wanted = params.get(pair[0]);
      if (wanted === null) return;
      var found = Array.prototype.some.call(pair[1].options, function (o) { return o.value === wanted; });
      if (found) pair[1].value = wanted;
      else problems.push(pair[0] + " '" + wanted + "' is not recorded");
    });
    notice.textContent = problems.length ? "Link: " + problems.join("; ") + "; showing the default instead." : "";
  }

  function onChange() {
    notice.textContent = "";
    history.replaceState(null, "", "#acceptance=" + encodeURIComponent(acceptance.value) + "&bound=" + encodeURIComponent(bound.value));
    show();
  }

  acceptance.addEventListener("change", onChange);
  bound.addEventListener("change", onChange);
  window.addEventListener("hashchange", function () { fromUrl(); show(); });
  fromUrl();
  show();
})();
