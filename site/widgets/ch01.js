/* Chapter 1: the sinusoidal encoding for a chosen d and base (site/widgets/widgets.js explains the runtime).
 * PE[p, 2i] = sin(p * w_i), PE[p, 2i+1] = cos(p * w_i), w_i = base^(-2i/d), as attnbook.positional.sinusoidal_encoding;
 * tests/site/test_site.py compares the heat-map (data-values) and the curve with the library. */
AttnWidgets.register("ch01-sinusoidal", function (root, W) {
  var T = 64, OFFSETS = 64;
  var state = {d: 32, base: 10000, p: 0};

  function encoding(p, d, base) {  // one row PE[p]
    var row = [];
    for (var c = 0; c < d; c++) {
      var angle = p * Math.pow(base, -2 * Math.floor(c / 2) / d);
      row.push(c % 2 === 0 ? Math.sin(angle) : Math.cos(angle));
    }
    return row;
  }

  var f = W.frame(root, W.t("Try it: the sinusoidal encoding", "試してみましょう：正弦波による位置エンコーディング"));
  W.slider(f.controls, {label: "d", name: "d", values: [8, 16, 24, 32, 48, 64, 96, 128], value: state.d,
                        onChange: function (v) { state.d = v; draw(); }});
  W.select(f.controls, {label: W.t("base", "底（base）"), name: "base", value: state.base,
                        options: [[100, "100"], [10000, "10 000"], [1000000, "1 000 000"]],
                        onChange: function (v) { state.base = v; draw(); }});
  W.slider(f.controls, {label: "p", name: "p", min: 0, max: 192, step: 1, value: state.p,
                        onChange: function (v) { state.p = v; draw(); }});
  var left = f.figure(), right = f.figure();

  function draw() {
    var d = state.d, base = state.base, p = state.p, pe = [], k, dots = [];
    for (var pos = 0; pos < T; pos++) pe.push(encoding(pos, d, base));
    var row = encoding(p, d, base);
    for (k = 0; k < OFFSETS; k++) dots.push(W.dot(row, encoding(p + k, d, base)));
    root.setAttribute("data-d", d);
    root.setAttribute("data-base", base);
    root.setAttribute("data-p", p);
    var heat = W.heatmap(left, pe, {
      vmin: -1, vmax: 1, map: "diverging", height: 256, title: "PE",
      xlabel: W.t("column (2i: sin, 2i+1: cos)", "列（2i: sin, 2i+1: cos）"), ylabel: W.t("position p", "位置 p"),
      xticks: [0, d / 2, d - 1], yticks: [0, 16, 32, 48, 63],
      label: W.t("Heat-map of the sinusoidal encoding, 64 positions down, " + d + " columns across, base " + base,
                 "正弦波による位置エンコーディングのヒートマップ。縦に 64 の位置、横に " + d + " 列、基数 " + base)});
    heat.setAttribute("data-figure", "encoding");
    var plot = W.lineplot(right, [{x: W.range(OFFSETS), y: dots, name: "dots"}], {
      title: "PE[" + p + "] \u00b7 PE[" + p + "+\u0394]", xlabel: W.t("offset \u0394", "ずれ \u0394"), ylim: [Math.min(0, Math.min.apply(null, dots)), d / 2],
      label: W.t("Dot product of the encodings of positions " + p + " and " + p + " + \u0394 against the offset \u0394",
                 "位置 " + p + " と " + p + " + \u0394 のエンコーディングの内積を、ずれ \u0394 に対して描いたもの")});
    plot.setAttribute("data-figure", "dots");
    f.note.textContent = W.t(
      "At k = 0 the dot product is d/2 = " + d / 2 + ". Move p: the curve stays the same, since it depends on the offset only.",
      "k = 0 で内積は d/2 = " + d / 2 + " です。p を動かしても曲線は変わりません。内積はずれだけで決まるからです。");
  }
  draw();
});
