/*
 * The book's interactive figures: a small shared runtime, plain JavaScript with no dependency.
 *
 * A notebook's Markdown cell holds
 *
 *     <div class="attn-widget" data-widget="ch01-sinusoidal">
 *
 *     *This interactive figure runs on the book's website.*
 *
 *     </div>
 *
 * Jupyter shows the fallback text; on the website site/widgets.html (included after every page's body)
 * loads this file and site/widgets/chNN.js (the prefix of the widget's name) on the pages that have such a
 * div, by a relative url, so it works over file:// and HTTP. A chapter's file calls
 *
 *     AttnWidgets.register("ch01-sinusoidal", function (el, W) { ... });
 *
 * and `init(el, W)` replaces the div's content with controls and figures (W is this object). When the
 * figure is drawn the widget sets el.dataset.ready = "true"; every figure writes the numbers it shows
 * into data attributes (data-values: JSON, rounded to 1e-7), which tests/site/test_site.py compares with
 * attnbook. Labels follow <html lang> (W.t(en, ja)); colours are lib/attnbook/plotting.py's palette.
 */
(function () {
  "use strict";
  if (window.AttnWidgets) return;

  var SVG = "http://www.w3.org/2000/svg";
  // lib/attnbook/plotting.py: Okabe & Ito's palette without its yellow, black last; GREY for references.
  var PALETTE = ["#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#000000"];
  var GREY = "#555555";
  var registry = {};

  var CSS = [
    ".attn-widget{margin:1rem 0 1.5rem;padding:.75rem;border:1px solid #ccc;border-radius:.4rem;max-width:100%;",
    "box-sizing:border-box;overflow-wrap:anywhere}",
    ".attn-widget .aw-title{font-weight:600;margin:0 0 .5rem}",
    ".attn-widget .aw-controls{display:flex;flex-wrap:wrap;gap:.4rem 1.2rem;align-items:center;margin-bottom:.5rem}",
    ".attn-widget .aw-control{display:flex;flex-wrap:wrap;align-items:center;gap:.3rem;font-size:.95rem}",
    ".attn-widget .aw-control input[type=range]{width:9rem;max-width:60vw}",
    ".attn-widget output{font-variant-numeric:tabular-nums;min-width:3ch;font-weight:600}",
    ".attn-widget .aw-buttons{display:flex;flex-wrap:wrap;gap:.3rem}",
    ".attn-widget button{font-size:.9rem;padding:.15rem .5rem;border:1px solid #555;border-radius:.25rem;",
    "background:#fff;color:#222}",
    ".attn-widget button[aria-pressed=true]{background:#0072b2;color:#fff}",
    ".attn-widget .aw-figures{display:flex;flex-wrap:wrap;gap:.5rem 1rem}",
    ".attn-widget .aw-figure{flex:1 1 100%;min-width:0;max-width:100%}",
    ".attn-widget svg{display:block;width:100%;height:auto;max-width:32rem}",
    "@media (max-width:575.98px){.attn-widget{padding:.4rem}}",
    ".attn-widget .aw-note{font-size:.9rem;margin:.4rem 0 0}"
  ].join("\n");

  function addStyle() {
    if (document.getElementById("attn-widget-style")) return;
    var style = document.createElement("style");
    style.id = "attn-widget-style";
    style.textContent = CSS;
    document.head.appendChild(style);
  }

  // ------------------------------------------------------------------------------------------
  // Language

  function lang() {
    return (document.documentElement.lang || "en").slice(0, 2) === "ja" ? "ja" : "en";
  }

  /** The string of the page's language, as attnbook.plotting.tr does in the notebooks. */
  function t(en, ja) { return lang() === "ja" ? ja : en; }

  // ------------------------------------------------------------------------------------------
  // Numbers

  /** mulberry32: a seeded generator of uniforms in [0, 1); normal() by Box-Muller (a fresh pair each call,
   *  the second value dropped). The page writes what it drew into data attributes: tests read them. */
  function rng(seed) {
    var a = seed >>> 0;
    function uniform() {
      a = (a + 0x6D2B79F5) >>> 0;
      var x = a;
      x = Math.imul(x ^ (x >>> 15), x | 1);
      x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
      return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
    }
    function normal() {
      var u = 1 - uniform(), v = uniform();  // u in (0, 1]: log(u) is finite
      return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
    }
    function normals(n) { var out = []; for (var i = 0; i < n; i++) out.push(normal()); return out; }
    return {uniform: uniform, normal: normal, normals: normals};
  }

  /** Softmax of one row; `allowed` (optional booleans) excludes entries. A row with no allowed entry gives
   *  zeros, never NaN, as attnbook.attention.masked_softmax does (the book's contract). */
  function softmax(row, allowed) {
    var top = -Infinity, i, n = row.length, out = new Array(n), total = 0;
    for (i = 0; i < n; i++) if ((!allowed || allowed[i]) && row[i] > top) top = row[i];
    for (i = 0; i < n; i++) {
      out[i] = (!allowed || allowed[i]) ? Math.exp(row[i] - top) : 0;
      total += out[i];
    }
    for (i = 0; i < n; i++) out[i] = total > 0 ? out[i] / total : 0;
    return out;
  }

  function dot(a, b) { var s = 0; for (var i = 0; i < a.length; i++) s += a[i] * b[i]; return s; }

  /** Entropy in nats of a probability vector (0 log 0 = 0). */
  function entropy(p) { var h = 0; for (var i = 0; i < p.length; i++) if (p[i] > 0) h -= p[i] * Math.log(p[i]); return h; }

  function range(n, start) { var out = []; for (var i = 0; i < n; i++) out.push((start || 0) + i); return out; }

  /** JSON of numbers (any nesting) rounded to 1e-7, for data attributes. */
  function json(values) {
    return JSON.stringify(values, function (key, v) {
      return typeof v === "number" ? Math.round(v * 1e7) / 1e7 : v;
    });
  }

  /** A number for people: `digits` decimals, a true minus sign. */
  function fmt(x, digits) {
    var s = x.toFixed(digits === undefined ? 2 : digits);
    return s.replace(/^-/, "\u2212");
  }

  // ------------------------------------------------------------------------------------------
  // Colours

  function mix(stops, x) {
    x = Math.max(0, Math.min(1, x));
    var n = stops.length - 1, i = Math.min(n - 1, Math.floor(x * n)), f = x * n - i, a = stops[i], b = stops[i + 1];
    var c = [0, 1, 2].map(function (k) { return Math.round(a[k] + (b[k] - a[k]) * f); });
    return "rgb(" + c.join(",") + ")";
  }
  // matplotlib's RdBu_r (the book's diverging map, chapter 1) and viridis (its default map), sampled.
  var RDBU_R = [[5, 48, 97], [33, 102, 172], [67, 147, 195], [146, 197, 222], [209, 229, 240], [247, 247, 247],
                [253, 219, 199], [244, 165, 130], [214, 96, 77], [178, 24, 43], [103, 0, 31]];
  var VIRIDIS = [[68, 1, 84], [72, 40, 120], [62, 74, 137], [49, 104, 142], [38, 130, 142], [31, 158, 137],
                 [53, 183, 121], [109, 205, 89], [180, 222, 44], [253, 231, 37]];
  var COLOURMAPS = {diverging: RDBU_R, viridis: VIRIDIS};

  function colour(map, v, vmin, vmax) { return mix(COLOURMAPS[map] || VIRIDIS, (v - vmin) / (vmax - vmin)); }

  /** Dark text on light cells and white text on dark ones. */
  function textOn(map, v, vmin, vmax) {
    var x = (v - vmin) / (vmax - vmin);
    if (map === "diverging") return (x < 0.2 || x > 0.8) ? "#fff" : "#000";
    return x < 0.55 ? "#fff" : "#000";
  }

  // ------------------------------------------------------------------------------------------
  // DOM helpers

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    for (var k in attrs || {}) {
      if (k === "text") node.textContent = attrs[k];
      else if (k === "class") node.className = attrs[k];
      else node.setAttribute(k, attrs[k]);
    }
    (children || []).forEach(function (c) { if (c) node.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return node;
  }

  var counter = 0;
  function uid(prefix) { counter += 1; return "aw-" + prefix + "-" + counter; }

  /** A labelled range input with its current value shown in an <output>. `values` (optional) maps the
   *  input's integer positions 0..n-1 to the values it stands for (a log scale, a list). onChange(value). */
  function slider(parent, o) {
    var id = uid("range"), values = o.values;
    var input = el("input", {type: "range", id: id, min: values ? 0 : o.min, max: values ? values.length - 1 : o.max,
                             step: values ? 1 : (o.step || 1), value: values ? values.indexOf(o.value) : o.value});
    if (o.name) input.setAttribute("data-control", o.name);
    if (values) input.setAttribute("data-choices", JSON.stringify(values));
    var out = el("output", {"for": id, "aria-live": "polite"});
    var box = el("div", {class: "aw-control"}, [el("label", {"for": id, text: o.label}), input, out]);
    parent.appendChild(box);
    function value() { return values ? values[+input.value] : +input.value; }
    function show() {
      var v = value(), text = o.format ? o.format(v) : String(v);
      out.textContent = text;
      input.setAttribute("aria-valuetext", text);
    }
    input.addEventListener("input", function () { show(); o.onChange(value()); });
    show();
    return {input: input, value: value};
  }

  /** A labelled <select>; options [[value, text], ...]. onChange(value as given). */
  function select(parent, o) {
    var id = uid("select");
    var input = el("select", {id: id});
    if (o.name) input.setAttribute("data-control", o.name);
    input.setAttribute("data-choices", JSON.stringify(o.options.map(function (opt) { return opt[0]; })));
    o.options.forEach(function (opt, i) {
      var option = el("option", {value: String(i), text: opt[1]});
      if (opt[0] === o.value) option.selected = true;
      input.appendChild(option);
    });
    parent.appendChild(el("div", {class: "aw-control"}, [el("label", {"for": id, text: o.label}), input]));
    function value() { return o.options[+input.value][0]; }
    input.addEventListener("change", function () { o.onChange(value()); });
    return {input: input, value: value};
  }

  /** A labelled checkbox. onChange(checked). */
  function checkbox(parent, o) {
    var id = uid("check");
    var input = el("input", {type: "checkbox", id: id});
    if (o.name) input.setAttribute("data-control", o.name);
    input.checked = !!o.value;
    parent.appendChild(el("div", {class: "aw-control"}, [input, el("label", {"for": id, text: o.label})]));
    input.addEventListener("change", function () { o.onChange(input.checked); });
    return {input: input, value: function () { return input.checked; }};
  }

  // ------------------------------------------------------------------------------------------
  // Plots: SVG with a viewBox, so they scale with the column: 480 units wide, at most 32rem (512 px) on a
  // desktop and about 325 px on a phone, so 14-unit text is about 15 px and 9.5 px (at least 12 and 9).

  var FONT = 14;

  function svg(width, height, label) {
    var node = document.createElementNS(SVG, "svg");
    node.setAttribute("viewBox", "0 0 " + width + " " + height);
    node.setAttribute("role", "img");
    node.setAttribute("aria-label", label);
    node.setAttribute("font-size", FONT);
    node.setAttribute("font-family", "system-ui, sans-serif");
    node.setAttribute("shape-rendering", "crispEdges");
    return node;
  }

  function esc(s) { return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;"); }

  function text(x, y, s, extra) {
    extra = extra || "";
    return '<text x="' + x + '" y="' + y + '"' + (/ fill=/.test(extra) ? "" : ' fill="#222"') + extra + ">" + esc(s) + "</text>";
  }

  /** Nice round ticks from lo to hi, about `n` of them. */
  function ticks(lo, hi, n) {
    var span = hi - lo, step = Math.pow(10, Math.floor(Math.log10(span / n)));
    [1, 2, 5, 10].some(function (m) { if (span / (step * m) <= n) { step *= m; return true; } return false; });
    var out = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + 1e-9; v += step) out.push(Math.round(v * 1e9) / 1e9);
    return out;
  }

  /**
   * A heat-map of `values` (rows down, columns across) into `parent`, replacing what it held. Options:
   * vmin, vmax, map ("diverging" | "viridis"), xlabel, ylabel, title, label (the accessible name),
   * numbers (print each value in its cell, for small matrices), outline (a function (i, j) -> true for
   * cells to frame), xticks / yticks (lists of indices). The <svg> carries data-values (the matrix).
   */
  function heatmap(parent, values, o) {
    var rows = values.length, cols = values[0].length, W = 480;
    var left = 46, top = o.title ? 24 : 8, right = 58, bottom = 40;
    var cw = (W - left - right) / cols, ch = Math.min(cw * (o.aspect || 1), 300 / rows);
    if (o.height) ch = o.height / rows;
    var H = top + ch * rows + bottom;
    var node = svg(W, H, o.label), parts = [];
    var vmin = o.vmin, vmax = o.vmax;
    if (o.title) parts.push(text(left + (cw * cols) / 2, 16, o.title, ' text-anchor="middle" font-weight="600"'));
    for (var i = 0; i < rows; i++) {
      for (var j = 0; j < cols; j++) {
        var v = values[i][j], x = left + j * cw, y = top + i * ch;
        parts.push('<rect x="' + x.toFixed(2) + '" y="' + y.toFixed(2) + '" width="' + (cw + 0.05).toFixed(2) +
                   '" height="' + (ch + 0.05).toFixed(2) + '" fill="' + colour(o.map, v, vmin, vmax) + '"/>');
        if (o.numbers) {
          parts.push(text(x + cw / 2, y + ch / 2 + 4, v === 0 ? "0" : v.toFixed(2).replace(/^0/, ""),
                          ' text-anchor="middle" fill="' + textOn(o.map, v, vmin, vmax) + '"'));
        }
        if (o.outline && o.outline(i, j)) {
          parts.push('<rect x="' + (x + 1).toFixed(2) + '" y="' + (y + 1).toFixed(2) + '" width="' + (cw - 2).toFixed(2) +
                     '" height="' + (ch - 2).toFixed(2) + '" fill="none" stroke="#000" stroke-width="2"/>');
        }
      }
    }
    (o.xticks || ticks(0, cols - 1, 5)).forEach(function (j) {
      parts.push(text(left + (j + 0.5) * cw, top + rows * ch + 14, j, ' text-anchor="middle"'));
    });
    (o.yticks || ticks(0, rows - 1, 5)).forEach(function (i) {
      parts.push(text(left - 4, top + (i + 0.5) * ch + 4, i, ' text-anchor="end"'));
    });
    if (o.xlabel) parts.push(text(left + (cw * cols) / 2, top + rows * ch + 32, o.xlabel, ' text-anchor="middle"'));
    if (o.ylabel) {
      parts.push(text(12, top + (rows * ch) / 2, o.ylabel,
                      ' text-anchor="middle" transform="rotate(-90 12 ' + (top + (rows * ch) / 2) + ')"'));
    }
    // Colour bar.
    var bx = W - right + 10, bh = rows * ch, steps = 32;
    for (var s = 0; s < steps; s++) {
      var val = vmax - (s + 0.5) / steps * (vmax - vmin);
      parts.push('<rect x="' + bx + '" y="' + (top + s * bh / steps).toFixed(2) + '" width="10" height="' +
                 (bh / steps + 0.05).toFixed(2) + '" fill="' + colour(o.map, val, vmin, vmax) + '"/>');
    }
    [vmax, (vmin + vmax) / 2, vmin].forEach(function (v, k) {
      parts.push(text(bx + 13, top + k * bh / 2 + (k === 0 ? 9 : k === 2 ? 0 : 4), String(+v.toFixed(2)).replace(/^-/, "\u2212")));
    });
    node.innerHTML = parts.join("");
    node.setAttribute("data-values", json(values));
    parent.textContent = "";
    parent.appendChild(node);
    return node;
  }

  /**
   * A line plot into `parent`, replacing what it held: series [{x: [...], y: [...], colour, label, dash}],
   * options xlabel, ylabel, title, label (the accessible name), ylim [lo, hi], bars (draw the first
   * series as bars). Each series' <path> (or bar group) carries data-values (its y) and data-x.
   */
  function lineplot(parent, series, o) {
    var named = series.filter(function (s) { return s.label; });
    var W = 480, left = 50, right = 12, legend = (o.title ? 26 : 4) + 4, top = legend + 18 * named.length + 6;
    var bottom = 40, H = (o.height || 230) + top;
    var xs = [].concat.apply([], series.map(function (s) { return s.x; }));
    var ys = [].concat.apply([], series.map(function (s) { return s.y; }));
    var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs);
    if (o.bars) { x0 -= 0.5; x1 += 0.5; }
    var y0 = o.ylim ? o.ylim[0] : Math.min(0, Math.min.apply(null, ys));
    var y1 = o.ylim ? o.ylim[1] : Math.max.apply(null, ys);
    if (y1 === y0) y1 = y0 + 1;
    function X(v) { return left + (v - x0) / (x1 - x0) * (W - left - right); }
    function Y(v) { return top + (1 - (v - y0) / (y1 - y0)) * (H - top - bottom); }
    var node = svg(W, H, o.label), parts = [];
    if (o.title) parts.push(text((left + W - right) / 2, 17, o.title, ' text-anchor="middle" font-weight="600"'));
    parts.push('<path d="M' + left + " " + top + "V" + (H - bottom) + "H" + (W - right) + '" fill="none" stroke="#222"/>');
    ticks(y0, y1, 4).forEach(function (v) {
      parts.push('<path d="M' + (left - 4) + " " + Y(v).toFixed(1) + "H" + left + '" stroke="#222"/>');
      parts.push(text(left - 6, Y(v) + 4, fmt(v, Math.abs(y1 - y0) < 5 ? (Math.abs(y1 - y0) < 0.5 ? 2 : 1) : 0),
                      ' text-anchor="end"'));
    });
    (o.xticks || ticks(o.bars ? x0 + 0.5 : x0, o.bars ? x1 - 0.5 : x1, 6)).forEach(function (v) {
      parts.push('<path d="M' + X(v).toFixed(1) + " " + (H - bottom) + "v4" + '" stroke="#222"/>');
      parts.push(text(X(v), H - bottom + 16, fmt(v, 0), ' text-anchor="middle"'));
    });
    if (o.xlabel) parts.push(text((left + W - right) / 2, H - 6, o.xlabel, ' text-anchor="middle"'));
    if (o.ylabel) parts.push(text(12, (top + H - bottom) / 2, o.ylabel,
                                  ' text-anchor="middle" transform="rotate(-90 12 ' + (top + H - bottom) / 2 + ')"'));
    series.forEach(function (s, k) {
      var c = s.colour || PALETTE[k % PALETTE.length];
      var data = ' data-values="' + esc(json(s.y)) + '" data-x="' + esc(json(s.x)) + '"' +
                 (s.name ? ' data-series="' + esc(s.name) + '"' : "");
      if (o.bars) {
        var n = series.length, bw = (X(1) - X(0)) * 0.8 / n, bars = [];
        s.x.forEach(function (xv, i) {
          var yv = s.y[i], bx = X(xv) - (X(1) - X(0)) * 0.4 + k * bw;
          bars.push('<rect x="' + bx.toFixed(2) + '" y="' + Math.min(Y(yv), Y(0)).toFixed(2) + '" width="' +
                    bw.toFixed(2) + '" height="' + Math.abs(Y(0) - Y(yv)).toFixed(2) + '" fill="' + c + '"/>');
        });
        parts.push("<g" + data + ">" + bars.join("") + "</g>");
      } else {
        var d = s.x.map(function (xv, i) { return (i ? "L" : "M") + X(xv).toFixed(2) + " " + Y(s.y[i]).toFixed(2); });
        parts.push('<path d="' + d.join("") + '" fill="none" stroke="' + c + '" stroke-width="2"' +
                   (s.dash ? ' stroke-dasharray="' + s.dash + '"' : "") + data + "/>");
      }
    });
    // Legend above the plot: one line per named series.
    named.forEach(function (s, k) {
      var c = s.colour || PALETTE[series.indexOf(s) % PALETTE.length], y = legend + 12 + k * 18;
      parts.push('<rect x="' + left + '" y="' + (y - 10) + '" width="14" height="10" fill="' + c + '"/>');
      parts.push(text(left + 20, y, s.label));
    });
    node.innerHTML = parts.join("");
    parent.textContent = "";
    parent.appendChild(node);
    return node;
  }

  // ------------------------------------------------------------------------------------------
  // Registration

  /** Build the widget's frame: a title, a controls row, figures; returns {controls, figure(n), note}. */
  function frame(root, title) {
    root.textContent = "";
    root.appendChild(el("p", {class: "aw-title", text: title}));
    var controls = el("div", {class: "aw-controls"});
    var figures = el("div", {class: "aw-figures"});
    var note = el("p", {class: "aw-note", "aria-live": "polite"});
    root.appendChild(controls);
    root.appendChild(figures);
    root.appendChild(note);
    return {
      controls: controls, note: note,
      figure: function () { var f = el("div", {class: "aw-figure"}); figures.appendChild(f); return f; }
    };
  }

  function start(root) {
    var init = registry[root.getAttribute("data-widget")];
    if (!init || root.getAttribute("data-started")) return;
    root.setAttribute("data-started", "true");
    try {
      init(root, api);
      root.setAttribute("data-ready", "true");
    } catch (e) {
      root.setAttribute("data-error", String(e && e.stack || e));
      throw e;
    }
  }

  function startAll(name) {
    var roots = document.querySelectorAll('.attn-widget[data-widget="' + name + '"]');
    for (var i = 0; i < roots.length; i++) start(roots[i]);
  }

  /** Register a widget: `init(root, AttnWidgets)` runs for every <div class="attn-widget" data-widget=name>. */
  function register(name, init) {
    registry[name] = init;
    addStyle();
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", function () { startAll(name); });
    else startAll(name);
  }

  // This script's folder: the chapters' data files (tools/export_widget_data.py) sit beside it.
  var HERE = document.currentScript ? document.currentScript.src.replace(/[^\/]*$/, "") : "";

  /** Register a widget that shows exported data: load `<chapter>-data.js` from this folder (a script, not a fetch,
   *  so that it works over file:// too), which sets window.AttnWidgetData[chapter], then register as above. */
  function registerWithData(name, init) {
    var script = document.createElement("script");
    script.src = HERE + name.split("-")[0] + "-data.js";
    script.onload = function () { register(name, init); };
    document.body.appendChild(script);
  }

  var api = {
    register: register, registerWithData: registerWithData, lang: lang, t: t, rng: rng, softmax: softmax, dot: dot,
    entropy: entropy, range: range,
    json: json, fmt: fmt, colour: colour, el: el, uid: uid, slider: slider, select: select, checkbox: checkbox,
    heatmap: heatmap, lineplot: lineplot, frame: frame, PALETTE: PALETTE, GREY: GREY
  };
  window.AttnWidgets = api;
})();
