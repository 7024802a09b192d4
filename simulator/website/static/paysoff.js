// The pays-off page: draws the selected deployment's charts, shows its schedule card and the
// charts' text descriptions, and keeps the choice in the URL (#deployment=...).
// Every number comes from the page's JSON (the recorded CSVs); nothing is computed here.
"use strict";

(function () {
  var dataNode = document.getElementById("paysoff-data");
  if (!dataNode || typeof Plotly === "undefined") return;
  var data = JSON.parse(dataNode.textContent);
  var select = document.getElementById("pay-deployment");
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
    Plotly.react(div, window.siteCharts.dataFor(div, payload), window.siteCharts.layoutFor(div, payload), configFor(payload));
  }

  function description(key, mode) {
    var card = document.querySelector('.pay-selection[data-paysoff-key="' + key + '"]');
    return card ? card.getAttribute("data-desc-" + mode) || "" : "";
  }

  function show() {
    var k = select.value;
    draw("paysoff-closed", data.figures["closed|" + k]);
    document.getElementById("closed-desc").textContent = description(k, "closed");
    var open = data.figures["open|" + k];
    document.getElementById("open-block").hidden = !open;
    document.getElementById("open-missing").hidden = !!open;
    if (open) {
      draw("paysoff-open", open);
      document.getElementById("open-desc").textContent = description(k, "open");
    }
    document.querySelectorAll("[data-paysoff-key]").forEach(function (el) {
      el.hidden = el.getAttribute("data-paysoff-key") !== k;
    });
    document.querySelectorAll("[data-answer-key]").forEach(function (el) {
      el.hidden = el.getAttribute("data-answer-key") !== k;
    });
  }

  function fromUrl() {
    var text = window.location.hash.replace(/^#/, "") || window.location.search.replace(/^\?/, "");
    if (!text) return;
    var wanted = new URLSearchParams(text).get("deployment");
    if (wanted === null) return;
    if (data.keys.indexOf(wanted) >= 0) {
      select.value = wanted;
      notice.textContent = "";
    } else {
      select.value = data["default"];
      notice.textContent = "Link: deployment '" + wanted + "' is not recorded; showing the default instead.";
    }
  }

  function onChange() {
    notice.textContent = "";
    history.replaceState(null, "", "#deployment=" + encodeURIComponent(select.value));
    show();
  }

  // Crossing the phone-width threshold redraws with the other layout.
  var narrow = null;
  window.addEventListener("resize", function () {
    var now = document.getElementById("paysoff-closed").clientWidth < (data.figures["closed|" + select.value].narrow || {}).below_px;
    if (now !== narrow) { narrow = now; show(); }
  });

  select.addEventListener("change", onChange);
  window.addEventListener("hashchange", function () { fromUrl(); show(); });
  fromUrl();
  show();
})();
