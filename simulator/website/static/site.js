// Draws the figures embedded in the page, wires the home page's selectors and the URL state,
// and adds copy buttons to command blocks.  Nothing is computed here: every number shown comes
// from the recorded CSV via the page's JSON, and every table is already in the HTML.
"use strict";

(function () {
  function readJson(id) {
    return JSON.parse(document.getElementById(id).textContent);
  }

  // The PNG a reader downloads carries the title, the selection and the caveats: the page shows
  // those around the chart, the image has to hold them itself.
  // The export sets its own size and margins (charts.py's export_layout lays the captions out in
  // pixels below the plot); a figure whose own left margin is wider (long category labels) keeps it.
  function exportLayout(payload) {
    var layout = Object.assign({}, payload.figure.layout, payload.export);
    var own = payload.figure.layout.margin || {};
    var given = payload["export"].margin || {};
    layout.margin = Object.assign({}, own, given, { l: Math.max(own.l || 0, given.l || 0) });
    return layout;
  }

  function downloadPng(payload) {
    var layout = exportLayout(payload);
    var figure = { data: payload.figure.data, layout: layout };
    return Plotly.toImage(figure, { format: "png", width: layout.width || 1100, height: layout.height || 720 }).then(function (url) {
      var link = document.createElement("a");
      link.href = url;
      link.download = payload.filename + ".png";
      document.body.appendChild(link);
      link.click();
      link.remove();
    });
  }

  function configFor(payload, base) {
    var config = Object.assign({}, base);
    config.modeBarButtons = [[{
      name: "download-png",
      title: "Download as PNG (with title, selection and caveats)",
      icon: Plotly.Icons.camera,
      click: function () { downloadPng(payload); }
    }]];
    return config;
  }

  // A payload may carry a phone-width layout ({below_px, layout}, from the page's Python module):
  // merged over the figure's own layout when the chart is narrower than below_px.
  function merge(base, over) {
    var out = Object.assign({}, base);
    Object.keys(over).forEach(function (key) {
      var value = over[key];
      out[key] = value && typeof value === "object" && !Array.isArray(value) && base[key] && typeof base[key] === "object" ? merge(base[key], value) : value;
    });
    return out;
  }

  function isNarrow(div, payload) {
    return !!payload.narrow && div.clientWidth < payload.narrow.below_px;
  }

  function layoutFor(div, payload) {
    return isNarrow(div, payload) ? merge(payload.figure.layout, payload.narrow.layout) : payload.figure.layout;
  }

  // ... and shorter legend names ({long: short}) there.
  function dataFor(div, payload) {
    if (!isNarrow(div, payload) || !payload.narrow.names) return payload.figure.data;
    return payload.figure.data.map(function (trace) {
      var short = payload.narrow.names[trace.name];
      return short ? Object.assign({}, trace, { name: short }) : trace;
    });
  }

  function draw(div, payload, baseConfig) {
    var loading = div.querySelector(".chart-loading");
    if (loading) loading.remove();
    return Plotly.react(div, dataFor(div, payload), layoutFor(div, payload), configFor(payload, baseConfig));
  }

  // For tests and for readers who script the page: what the PNG download contains.
  window.siteCharts = { exportLayout: exportLayout, downloadPng: downloadPng, layoutFor: layoutFor, dataFor: dataFor };

  document.querySelectorAll("[data-figure]").forEach(function (div) {
    var payload = readJson(div.dataset.figure);
    draw(div, payload, payload.config);
  });

  addCopyButtons();
  markWideTables();

  var explorer = document.getElementById("explorer-data");
  if (!explorer) return;
  var data = readJson("explorer-data");
  var load = document.getElementById("load");
  var acceptance = document.getElementById("acceptance");
  var chart = document.getElementById("speedup-chart");
  var title = document.getElementById("chart-title");
  var summary = document.getElementById("selection-summary");
  var notice = document.getElementById("url-notice");
  var section = document.getElementById("explore");
  var selectors = { load: load, acceptance: acceptance };
  var units = { load: " req/s", acceptance: "" };

  function params() {
    // Both forms are accepted: index.html#load=6&acceptance=0.9 and index.html?load=6&acceptance=0.9
    // (the hash wins when both are given).
    var query = new URLSearchParams(window.location.search);
    var hash = new URLSearchParams(window.location.hash.slice(1));
    var out = {};
    ["load", "acceptance"].forEach(function (name) {
      var value = hash.has(name) ? hash.get(name) : query.get(name);
      if (value !== null) out[name] = value;
    });
    return out;
  }

  function optionFor(select, wanted) {
    if (String(wanted).trim() === "" || !isFinite(Number(wanted))) return null;
    return Array.prototype.find.call(select.options, function (o) {
      return Number(o.value) === Number(wanted);
    }) || null;
  }

  function recordedList(name) {
    return Array.prototype.map.call(selectors[name].options, function (o) { return o.value; }).join(", ") + units[name];
  }

  // Apply the URL's selection; say precisely which value was refused and what is shown instead.
  function fromUrl() {
    var given = params();
    var problems = [];
    Object.keys(given).forEach(function (name) {
      var option = optionFor(selectors[name], given[name]);
      if (option) {
        selectors[name].value = option.value;
      } else {
        var fallback = name === "load" ? data["default"].load : data["default"].acceptance;
        selectors[name].value = fallback;
        problems.push(name + "=" + given[name] + " is not a recorded " + (name === "load" ? "load" : "acceptance rate") +
          " (recorded: " + recordedList(name) + "); showing " + name + " " + fallback + units[name] + " instead.");
      }
    });
    notice.hidden = problems.length === 0;
    notice.textContent = problems.join(" ");
    return Object.keys(given).length > 0;
  }

  function hashFor() {
    return "#load=" + load.value + "&acceptance=" + acceptance.value;
  }

  function show() {
    var key = load.value + "|" + acceptance.value;
    var payload = data.figures[key];
    payload.config = data.config;
    draw(chart, payload, data.config);
    title.textContent = data.titles[key];
    summary.textContent = data.summaries[key];
    document.querySelectorAll("[data-selection]").forEach(function (el) {
      var active = el.dataset.selection === key;
      el.classList.toggle("active", active);
      if (active) el.open = true;
    });
    document.querySelectorAll("[data-load]").forEach(function (el) {
      el.classList.toggle("active", el.dataset.load === load.value);
    });
  }

  // A reader's change is a new history entry, so Back returns to the previous selection.
  function onChange() {
    notice.hidden = true;
    var url = window.location.pathname + hashFor();
    if (window.location.hash !== hashFor() || window.location.search) history.pushState({ explorer: true }, "", url);
    show();
  }

  load.addEventListener("change", onChange);
  acceptance.addEventListener("change", onChange);
  window.addEventListener("popstate", function () {
    if (!fromUrl()) {
      load.value = data["default"].load;
      acceptance.value = data["default"].acceptance;
    }
    show();
  });
  window.addEventListener("hashchange", function () {
    // Only a hash that carries a selection changes it; plain anchors (#main, a table) do not.
    if (fromUrl()) show();
  });

  // "Explore the results" scrolls to the chart without replacing a selection held in the URL.
  document.querySelectorAll('a[href="#explore"]').forEach(function (link) {
    link.addEventListener("click", function (event) {
      event.preventDefault();
      section.scrollIntoView();
      title.setAttribute("tabindex", "-1");
      title.focus({ preventScroll: true });
    });
  });

  var shared = fromUrl();
  if (shared && window.location.search) {
    // ?load=6 is rewritten to the canonical #load=6&acceptance=... form, in place.
    history.replaceState(null, "", window.location.pathname + hashFor());
  }
  show();
  if (shared) section.scrollIntoView();

  // A table wider than its box scrolls inside it; the box says so (site.css draws the cue from
  // data-overflows), re-checked whenever the box changes size or is shown.
  function markWideTables() {
    var boxes = document.querySelectorAll(".table-scroll, .table-wrap");
    function mark(box) { box.toggleAttribute("data-overflows", box.scrollWidth > box.clientWidth + 1); }
    boxes.forEach(mark);
    if (typeof ResizeObserver === "undefined") return;
    var observer = new ResizeObserver(function (entries) { entries.forEach(function (e) { mark(e.target); }); });
    boxes.forEach(function (box) { observer.observe(box); });
  }

  function addCopyButtons() {
    document.querySelectorAll("pre > code").forEach(function (code) {
      var pre = code.parentElement;
      var button = document.createElement("button");
      button.type = "button";
      button.className = "copy";
      button.textContent = "Copy";
      button.setAttribute("aria-label", "Copy command");
      button.addEventListener("click", function () {
        copyText(code.textContent.replace(/\n$/, "")).then(function () {
          button.textContent = "Copied";
          setTimeout(function () { button.textContent = "Copy"; }, 1500);
        });
      });
      pre.classList.add("has-copy");
      pre.appendChild(button);
    });
  }

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    document.execCommand("copy");
    area.remove();
    return Promise.resolve();
  }
})();
