/* rocketq console: line charts that refresh themselves, body preview tabs, confirmations.
   Shipped in the package; no library, nothing fetched from elsewhere. A chart is a <canvas class="chart"
   data-source="/api/..."> whose JSON is {t: [ms...], put: [...], get: [...]} or {t: [...], series: {name: [...]}}. */
"use strict";
(function () {
  var COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
  var REFRESH_MS = 2000;

  function seriesOf(data, names) {
    if (data.series) { return data.series; }
    var out = {};
    names.forEach(function (n) { out[n] = data[n] || []; });
    return out;
  }

  function draw(canvas, data) {
    var ctx = canvas.getContext("2d"), w = canvas.width, h = canvas.height, pad = 40;
    var names = (canvas.dataset.series || "").split(" ").filter(Boolean);
    var series = seriesOf(data, names), keys = Object.keys(series), t = data.t || [];
    ctx.clearRect(0, 0, w, h);
    ctx.font = "12px sans-serif";
    ctx.fillStyle = "#666";
    if (t.length < 2) { ctx.fillText("collecting samples...", pad, h / 2); return; }
    var max = 1;
    keys.forEach(function (k) { series[k].forEach(function (v) { if (v > max) { max = v; } }); });
    var t0 = t[0], span = Math.max(1, t[t.length - 1] - t0);
    ctx.strokeStyle = "#ccc";
    ctx.beginPath(); ctx.moveTo(pad, 10); ctx.lineTo(pad, h - 20); ctx.lineTo(w - 10, h - 20); ctx.stroke();
    ctx.fillText(String(Math.round(max)), 2, 16);
    ctx.fillText("0", 2, h - 20);
    ctx.fillText(new Date(t0).toLocaleTimeString(), pad, h - 4);
    ctx.fillText(new Date(t[t.length - 1]).toLocaleTimeString(), w - 80, h - 4);
    keys.forEach(function (k, i) {
      var ys = series[k];
      ctx.strokeStyle = COLORS[i % COLORS.length];
      ctx.beginPath();
      ys.forEach(function (v, j) {
        var x = pad + (t[j] - t0) / span * (w - pad - 10), y = h - 20 - v / max * (h - 30);
        if (j === 0) { ctx.moveTo(x, y); } else { ctx.lineTo(x, y); }
      });
      ctx.stroke();
      ctx.fillStyle = COLORS[i % COLORS.length];
      ctx.fillText(k, pad + 10 + (i % 4) * 200, 14 + Math.floor(i / 4) * 14);
    });
  }

  function refresh(canvas) {
    fetch(canvas.dataset.source, {credentials: "same-origin"})
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) { if (data) { draw(canvas, data); canvas.dataset.drawn = String(data.t.length); } })
      .catch(function () { /* the server restarting: the next round tries again */ });
  }

  function tabs(nav) {
    nav.addEventListener("click", function (ev) {
      var a = ev.target.closest("a[data-show]");
      if (!a) { return; }
      ev.preventDefault();
      nav.querySelectorAll("a[data-show]").forEach(function (other) {
        other.classList.toggle("on", other === a);
        var pane = document.getElementById(other.dataset.show);
        if (pane) { pane.hidden = other !== a; }
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("canvas.chart").forEach(function (c) {
      refresh(c);
      setInterval(function () { refresh(c); }, REFRESH_MS);
    });
    document.querySelectorAll("nav[data-tabs]").forEach(tabs);
    document.querySelectorAll("form[data-confirm]").forEach(function (f) {
      f.addEventListener("submit", function (ev) { if (!window.confirm(f.dataset.confirm)) { ev.preventDefault(); } });
    });
  });
})();
