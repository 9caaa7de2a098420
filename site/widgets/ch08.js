/* Chapter 8: the stored loss at each position, per encoding and evaluation length (site/widgets/widgets.js explains
 * the runtime). The data (site/widgets/ch08-data.js) is exported by tools/export_widget_data.py from
 * lib/attnbook/experiments/results/positions_per_position.csv (mean over the seeds) and positions_extrapolation.csv (each seed's loss
 * over all positions at L, beyond L at longer lengths); the models are causal and every length reads prefixes of
 * the same sequences, so the curve at T is the first T positions of the 8L curve (the tool checks it). The figure's
 * series carry data-values; the root carries data-encoding, data-length and data-summary (one loss per seed).
 * tests/site/test_site.py compares them with the CSV files. */
(function () {
  "use strict";
  AttnWidgets.registerWithData("ch08-per-position", init);  // loads ch08-data.js first

  function init(root, W) {
    var D = window.AttnWidgetData.ch08, L = D.train_length, longest = String(D.lengths[D.lengths.length - 1]);
    var NAMES = {nope: "NoPE", sinusoidal: W.t("sinusoidal", "正弦波"), learned: W.t("learned absolute", "学習する絶対位置"),
                 rope: "RoPE", alibi: "ALiBi", t5: W.t("T5 bias", "T5 バイアス")};
    var state = {encoding: "rope", length: D.lengths[D.lengths.length - 1]};
    var f = W.frame(root, W.t("Try it: the loss at each position", "試してみましょう：位置ごとの損失"));
    W.select(f.controls, {label: W.t("encoding", "エンコーディング"), name: "encoding", value: state.encoding,
                          options: D.methods.map(function (m) { return [m, NAMES[m]]; }),
                          onChange: function (v) { state.encoding = v; draw(); }});
    W.slider(f.controls, {label: W.t("evaluation length T", "評価の長さ T"), name: "length", values: D.lengths,
                          value: state.length, format: function (v) { return v + " = " + (v / L) + "L"; },
                          onChange: function (v) { state.length = v; draw(); }});
    var figure = f.figure();

    function mean(v) { return v.reduce(function (a, b) { return a + b; }, 0) / v.length; }

    function draw() {
      var e = state.encoding, T = state.length, x = W.range(T);
      function curve(m) { return D.curves[m][longest].slice(0, T); }
      var y = curve(e), top = Math.max(2.4, Math.ceil(Math.max.apply(null, y) * 5) / 5);
      var series = [
        {x: x, y: curve("optimum"), colour: W.GREY, name: "optimum", label: W.t("optimum", "最適値")},
        {x: x, y: curve("current_token"), colour: "#000000", dash: "7 3 2 3", name: "current_token",
         label: W.t("current token only (dash-dot)", "現在のトークンだけ（一点鎖線）")},
        {x: [0, T - 1], y: [Math.log(8), Math.log(8)], colour: "#000000", dash: "2 3", name: "uniform",
         label: W.t("uniform guess, ln 8 (dotted)", "一様な予測、ln 8（点線）")},
        {x: x, y: y, colour: W.PALETTE[D.methods.indexOf(e)], name: e, label: NAMES[e] + W.t(", mean of 5 seeds", "、5 シードの平均")}
      ];
      if (T > L) series.push({x: [L - 0.5, L - 0.5], y: [0.6, top], colour: "#000000", dash: "6 4", name: "L"});
      var ticks = [0, L, T / 2, T - 1].filter(function (v, i, a) { return a.indexOf(v) === i && v <= T - 1; });
      var plot = W.lineplot(figure, series, {
        ylim: [0.6, top], xticks: ticks, height: 220,
        xlabel: W.t("position (dashed: the training length L = " + L + ")", "位置（破線：学習時の長さ L = " + L + "）"),
        ylabel: W.t("loss (nats per token)", "損失（ナット）"),
        label: W.t("Line plot of the loss at each position 0 to " + (T - 1) + " of " + NAMES[e] + ", mean of 5 seeds, " +
                   "beside the optimum, the current-token baseline and a uniform guess",
                   NAMES[e] + " の位置 0 から " + (T - 1) + " の損失（5 シードの平均）の折れ線グラフ。" +
                   "最適値、現在のトークンだけのベースライン、一様な予測も示します")});
      plot.setAttribute("data-figure", "loss");
      var losses = D.summary[e][String(T)], optimum = D.summary.optimum[String(T)][0];
      var excess = losses.map(function (v) { return v - optimum; });
      root.setAttribute("data-encoding", e);
      root.setAttribute("data-length", T);
      root.setAttribute("data-summary", JSON.stringify(losses));
      var where = T === L ? W.t("over all positions", "全位置で") : W.t("beyond L", "L より先で");
      f.note.textContent = W.t(
        NAMES[e] + " at T = " + T + ", " + where + ": excess over the optimum " + W.fmt(mean(excess), 3) +
        " nats, mean of 5 seeds (lowest " + W.fmt(Math.min.apply(null, excess), 3) + ", highest " +
        W.fmt(Math.max.apply(null, excess), 3) + ").",
        "T = " + T + " の " + NAMES[e] + " の、" + where + "の最適値との差は " + W.fmt(mean(excess), 3) +
        " ナットです（5 シードの平均。最小 " + W.fmt(Math.min.apply(null, excess), 3) + "、最大 " +
        W.fmt(Math.max.apply(null, excess), 3) + "）。");
    }
    draw();
  }
})();
