/* Chapter 11: scrub through training and watch the induction score appear (site/widgets/widgets.js explains the
 * runtime). For the chosen run (variant, depth, seed) and stored step it shows every head's induction and
 * previous-token score (two layer x head heat-maps), the highest of each against the step with a cursor at the
 * chosen one, beside the scores of uniform causal attention, which it computes: the induction score
 * (1/P) sum_{i=P}^{2P-1} 1/(i+1) on sequences of period P repeated twice, and the previous-token score
 * (1/(T-1)) sum_{i=1}^{T-1} 1/(i+1) on windows of T characters (attnbook.induction on the uniform pattern); and the
 * loss on the first and the second copy of repeated held-out code. The runs are site/widgets/ch11-data.js,
 * exported by tools/export_widget_data.py from lib/attnbook/experiments/results/induction_heads_scores.csv and
 * induction_heads_training.csv. The root carries data-variant, data-depth, data-seed, data-step, data-code-loss
 * ([first, second]) and data-baselines; tests/site/test_site.py compares them and the plots with the CSV files and
 * the library. */
(function () {
  "use strict";
  AttnWidgets.registerWithData("ch11-induction", init);  // loads ch11-data.js first

  /** The scores of uniform causal attention (query i gives 1/(i+1) to each of its keys 0..i). */
  function uniformScores(period, context) {
    var induction = 0, previous = 0, i;
    for (i = period; i < 2 * period; i++) induction += 1 / (i + 1);
    for (i = 1; i < context; i++) previous += 1 / (i + 1);
    return {induction: induction / period, previous_token: previous / (context - 1)};
  }

  function init(root, W) {
    var DATA = window.AttnWidgetData.ch11, steps = DATA.steps, heads = DATA.heads;
    var base = uniformScores(DATA.period, DATA.context);
    var last = steps[steps.length - 1];
    // Ticks every 500 steps, short of the last step: a label at the plot's right edge would be cut.
    var xticks = steps.filter(function (s) { return s % 500 === 0 && s < last; });
    var state = {variant: DATA.variants.indexOf("curriculum") >= 0 ? "curriculum" : DATA.variants[0],
                 depth: DATA.depths[DATA.depths.length - 1], seed: DATA.seeds[0],
                 step: steps[Math.floor(steps.length / 3)]};  // early: the reader moves on to see the scores rise
    var NAMES = {plain: W.t("plain: code only", "コードのみ（plain）"),
                 curriculum: W.t("curriculum: random repeats, then code", "カリキュラム（ランダム周期系列→コード）")};
    var f = W.frame(root, W.t("Try it: scrub through training and watch the induction score appear",
                              "試してみましょう：学習ステップに沿って現れる帰納スコア"));
    W.select(f.controls, {label: W.t("data", "データ"), name: "variant", value: state.variant,
                          options: DATA.variants.map(function (v) { return [v, NAMES[v] || v]; }),
                          onChange: function (v) { state.variant = v; draw(); }});
    W.select(f.controls, {label: W.t("layers", "層数"), name: "depth", value: state.depth,
                          options: DATA.depths.map(function (d) { return [d, String(d)]; }),
                          onChange: function (v) { state.depth = v; draw(); }});
    W.select(f.controls, {label: W.t("seed", "シード"), name: "seed", value: state.seed,
                          options: DATA.seeds.map(function (s) { return [s, String(s)]; }),
                          onChange: function (v) { state.seed = v; draw(); }});
    W.slider(f.controls, {label: W.t("training step", "学習ステップ"), name: "step", values: steps, value: state.step,
                          onChange: function (v) { state.step = v; draw(); }});
    var curves = f.figure(), inductionMap = f.figure(), previousMap = f.figure(), code = f.figure();

    function best(row) {  // the highest score of a step's heads, and its head as [layer, head]
      var k = 0;
      for (var i = 1; i < row.length; i++) if (row[i] > row[k]) k = i;
      return {value: row[k], layer: Math.floor(k / heads), head: k % heads};
    }

    function matrix(row, depth) {  // layer x head
      return W.range(depth).map(function (l) { return row.slice(l * heads, (l + 1) * heads); });
    }

    function headsMap(parent, row, depth, name, title, label) {
      var node = W.heatmap(parent, matrix(row, depth), {
        vmin: 0, vmax: 1, map: "viridis", numbers: true, height: Math.max(80, 48 * depth), title: title,
        xticks: W.range(heads), yticks: W.range(depth), xlabel: W.t("head", "ヘッド"), ylabel: W.t("layer", "層"),
        label: label + W.t(" (rows: layers, columns: heads)", "（行：層、列：ヘッド）。")});
      node.setAttribute("data-figure", name);
    }

    function draw() {
      var run = DATA.runs[state.variant + "-" + state.depth + "-" + state.seed], depth = state.depth;
      var at = steps.indexOf(state.step), lo = steps[0];
      var ind = run.induction[at], prev = run.previous_token[at];
      var codeLoss = [run.code_first[at], run.code_second[at]];
      root.setAttribute("data-variant", state.variant);
      root.setAttribute("data-depth", depth);
      root.setAttribute("data-seed", state.seed);
      root.setAttribute("data-step", state.step);
      root.setAttribute("data-code-loss", W.json(codeLoss));
      root.setAttribute("data-baselines", W.json(base));
      var cursor = {x: [state.step, state.step], y: [0, 1], colour: "#000000", dash: "4 3", name: "chosen"};
      var series = [
        {x: steps, y: run.induction.map(function (r) { return best(r).value; }), colour: W.PALETTE[0],
         name: "induction", label: W.t("induction score", "帰納スコア")},
        {x: steps, y: run.previous_token.map(function (r) { return best(r).value; }), colour: W.PALETTE[2],
         name: "previous_token", label: W.t("previous-token score", "直前トークンスコア")},
        {x: [lo, last], y: [base.induction, base.induction], colour: W.GREY, dash: "6 4", name: "uniform_induction",
         label: W.t("uniform causal attention (both scores)", "一様な因果的アテンション（両スコア）")},
        {x: [lo, last], y: [base.previous_token, base.previous_token], colour: W.GREY, dash: "6 4",
         name: "uniform_previous_token"}];
      if (state.variant === "curriculum") {
        series.push({x: [DATA.curriculum_steps, DATA.curriculum_steps], y: [0, 1], colour: W.PALETTE[3], dash: "2 3",
                     name: "curriculum_end", label: W.t("code from this step on", "このステップ以降はコード")});
      }
      series.push(cursor);
      var plot = W.lineplot(curves, series, {
        ylim: [0, 1], height: 190, xticks: xticks, title: W.t("highest score of any head", "全ヘッドでの最大スコア"),
        xlabel: W.t("training step", "学習ステップ"),
        label: W.t("The highest induction and previous-token scores of any head against the training step, with " +
                   "uniform attention's and the chosen step marked",
                   "全ヘッドでの帰納スコアと直前トークンスコアの最大値を学習ステップに対して描いた図。" +
                   "一様なアテンションの値と選んだステップには印を付けた。")});
      plot.setAttribute("data-figure", "scores");
      var title = W.t("step " + state.step + ": ", "ステップ " + state.step + "：");
      var induction = W.t("induction score", "帰納スコア"), previous = W.t("previous-token score", "直前トークンスコア");
      headsMap(inductionMap, ind, depth, "induction", title + induction,
               W.t(title + induction + " of each head", "ステップ " + state.step + " での各ヘッドの" + induction));
      headsMap(previousMap, prev, depth, "previous_token", title + previous,
               W.t(title + previous + " of each head", "ステップ " + state.step + " での各ヘッドの" + previous));
      var top = Math.max.apply(null, run.code_first.concat(run.code_second));
      var losses = W.lineplot(code, [
        {x: steps, y: run.code_first, colour: W.PALETTE[0], name: "first", label: W.t("first copy", "1 回目")},
        {x: steps, y: run.code_second, colour: W.PALETTE[1], name: "second", label: W.t("second copy", "2 回目")},
        {x: [state.step, state.step], y: [0, Math.ceil(top)], colour: "#000000", dash: "4 3", name: "chosen"}], {
        ylim: [0, Math.ceil(top)], height: 170, xticks: xticks,
        title: W.t("loss on held-out code repeated twice (nats)", "2 回繰り返したテスト用のコードでの損失（ナット）"),
        xlabel: W.t("training step", "学習ステップ"),
        label: W.t("Loss on the first and the second copy of repeated held-out code against the training step",
                   "2 回繰り返したテスト用のコードの 1 回目と 2 回目での損失を学習ステップに対して描いた図。")});
      losses.setAttribute("data-figure", "code");
      var i = best(ind), p = best(prev);
      f.note.textContent = W.t(
        "Step " + state.step + ": the highest induction score is " + W.fmt(i.value, 3) + " (layer " + i.layer +
        ", head " + i.head + "), the highest previous-token score " + W.fmt(p.value, 3) + " (layer " + p.layer +
        ", head " + p.head + "); uniform attention scores " + W.fmt(base.induction, 3) + " and " +
        W.fmt(base.previous_token, 3) + ". On repeated held-out code the loss is " + W.fmt(codeLoss[0], 2) +
        " nats on the first copy and " + W.fmt(codeLoss[1], 2) + " on the second.",
        "ステップ " + state.step + "：帰納スコアの最大値は " + W.fmt(i.value, 3) + "（層 " + i.layer + "、ヘッド " +
        i.head + "）です。直前トークンスコアの最大値は " + W.fmt(p.value, 3) + "（層 " + p.layer + "、ヘッド " + p.head +
        "）です。一様なアテンションではそれぞれ " + W.fmt(base.induction, 3) + " と " + W.fmt(base.previous_token, 3) +
        " です。繰り返したテスト用のコードでの損失は、1 回目が " + W.fmt(codeLoss[0], 2) + " ナット、2 回目が " +
        W.fmt(codeLoss[1], 2) + " ナットです。");
    }
    draw();
  }
})();
