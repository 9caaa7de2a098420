/* Chapter 9: the stored loss at each position of chapter 8's RoPE models read longer than trained, with RoPE
 * stretched or not, beside ALiBi (site/widgets/widgets.js explains the runtime). The data
 * (site/widgets/ch09-data.js) is exported by tools/export_widget_data.py from lib/attnbook/experiments/results/
 * rope_scaling_per_position.csv (mean over the seeds) and rope_scaling.csv (each seed's excess over the optimum
 * beyond L). The figure's series carry data-values; the root carries data-method, data-length and data-excess
 * (one value per seed). tests/site/test_site.py compares them with the CSV files. */
(function () {
  "use strict";
  AttnWidgets.registerWithData("ch09-scaling", init);  // loads ch09-data.js first

  function init(root, W) {
    var D = window.AttnWidgetData.ch09, L = D.train_length;
    var NAMES = {rope: W.t("RoPE, plain", "素の RoPE"), pi: "PI", ntk: "NTK-aware", yarn: "YaRN",
                 yarn_no_temperature: W.t("YaRN without temperature", "温度なしの YaRN"), alibi: "ALiBi"};
    var state = {method: "yarn", length: D.lengths[1]};
    var f = W.frame(root, W.t("Try it: stretching RoPE, no fine-tuning", "試してみましょう：微調整なしでの RoPE の引き伸ばし"));
    W.select(f.controls, {label: W.t("method", "手法"), name: "method", value: state.method,
                          options: D.methods.map(function (m) { return [m, NAMES[m]]; }),
                          onChange: function (v) { state.method = v; draw(); }});
    W.slider(f.controls, {label: W.t("length T", "長さ T"), name: "length", values: D.lengths, value: state.length,
                          format: function (v) { return v + " = " + (v / L) + "L"; },
                          onChange: function (v) { state.length = v; draw(); }});
    var figure = f.figure();

    function mean(v) { return v.reduce(function (a, b) { return a + b; }, 0) / v.length; }

    function draw() {
      var m = state.method, T = state.length, key = String(T), x = W.range(T);
      var y = D.curves[m][key], top = Math.max(2.4, Math.ceil(Math.max.apply(null, y.concat(D.curves.rope[key])) * 5) / 5);
      var series = [
        {x: x, y: D.curves.optimum[key], colour: W.GREY, name: "optimum", label: W.t("optimum", "最適値")},
        {x: x, y: D.curves.current_token[key], colour: "#000000", dash: "7 3 2 3", name: "current_token",
         label: W.t("current token only (dash-dot)", "現在のトークンだけ（一点鎖線）")}];
      if (m !== "rope") series.push({x: x, y: D.curves.rope[key], colour: W.PALETTE[1], dash: "4 2", name: "rope",
                                     label: NAMES.rope});
      series.push({x: x, y: y, colour: W.PALETTE[0], name: m, label: NAMES[m] + W.t(", mean of 5 seeds", "、5 シードの平均")});
      series.push({x: [L - 0.5, L - 0.5], y: [0.6, top], colour: "#000000", dash: "6 4", name: "L"});
      var plot = W.lineplot(figure, series, {
        ylim: [0.6, top], xticks: [0, L, T / 2, T - 1].filter(function (v, i, a) { return a.indexOf(v) === i; }), height: 220,
        xlabel: W.t("position (dashed: the training length L = " + L + ")", "位置（破線：学習時の長さ L = " + L + "）"),
        ylabel: W.t("loss (nats per token)", "損失（1 トークンあたりのナット）"),
        label: W.t("Line plot of the loss at each position 0 to " + (T - 1) + " with " + NAMES[m] + ", mean of 5 seeds, " +
                   "beside plain RoPE, the optimum and the current-token baseline",
                   NAMES[m] + " での位置 0 から " + (T - 1) + " の損失（5 シードの平均）の折れ線グラフ。" +
                   "素の RoPE、最適値、現在のトークンだけのベースラインも示す。")});
      plot.setAttribute("data-figure", "loss");
      var excess = D.excess[m][key], current = D.excess.current_token[key][0];
      root.setAttribute("data-method", m);
      root.setAttribute("data-length", T);
      root.setAttribute("data-excess", JSON.stringify(excess));
      var scale = (m === "rope" || m === "alibi") ? "" : W.t(" (stretched by s = " + D.scales[key] + ")", "（s = " + D.scales[key] + " で引き伸ばし）");
      var list = excess.map(function (v) { return W.fmt(v, 2); }).join(W.t(", ", "、"));
      f.note.textContent = W.t(
        NAMES[m] + scale + " at T = " + T + ": excess over the optimum beyond L, mean " + W.fmt(mean(excess), 3) +
        " nats; seeds 0 to 4: " + list + ". Current token only: " + W.fmt(current, 2) + ".",
        "T = " + T + " の " + NAMES[m] + scale + "：L より先の最適値との差は平均 " + W.fmt(mean(excess), 3) +
        " ナットです。シード 0 から 4 では " + list + " です。現在のトークンだけでは " + W.fmt(current, 2) + " です。");
    }
    draw();
  }
})();
