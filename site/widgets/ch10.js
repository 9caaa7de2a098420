/* Chapter 10: the KV cache and the stored quality against kv_heads G (site/widgets/widgets.js explains the runtime).
 * The cache of T tokens in l layers is 2 T l G d_h x 4 bytes (float32), attnbook.kv.cache_bytes_per_token times
 * T l; the quality is each seed's stored result at that G (site/widgets/ch10-data.js, exported by
 * tools/export_widget_data.py from lib/attnbook/experiments/results/kv_heads_quality.csv and kv_heads_recall.csv). The root carries
 * data-task, data-g, data-t, data-layers, data-bytes (the cache in bytes) and data-quality (one value per seed);
 * tests/site/test_site.py compares them with the library and the CSV files. */
(function () {
  "use strict";
  AttnWidgets.registerWithData("ch10-kv-heads", init);  // loads ch10-data.js first

  var CONTEXTS = [256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072];

  function size(bytes) {  // binary units, 3 significant digits at most
    var units = ["B", "KiB", "MiB", "GiB"], u = 0;
    while (bytes >= 1024 && u < units.length - 1) { bytes /= 1024; u += 1; }
    return (bytes >= 100 || u === 0 ? bytes.toFixed(0) : bytes >= 10 ? bytes.toFixed(1) : bytes.toFixed(2)) + " " + units[u];
  }

  function init(root, W) {
    var DATA = window.AttnWidgetData.ch10.tasks;
    var state = {task: "recall", g: 1, T: 4096, layers: DATA.recall.layers};
    var f = W.frame(root, W.t("Try it: the KV cache against kv_heads G", "試してみましょう：kv_heads G と KV キャッシュ"));
    W.select(f.controls, {label: W.t("task", "課題"), name: "task", value: state.task,
                          options: [["recall", W.t("recall task (H = 8)", "想起課題（H = 8）")],
                                    ["markov", W.t("Markov task (H = 4)", "マルコフ課題（H = 4）")]],
                          onChange: function (v) { state.task = v; makeG(); draw(); }});
    var gBox = W.el("div", {class: "aw-control-group"});
    f.controls.appendChild(gBox);
    W.slider(f.controls, {label: W.t("context T", "コンテキスト長 T"), name: "T", values: CONTEXTS, value: state.T,
                          format: function (v) { return String(v); },
                          onChange: function (v) { state.T = v; draw(); }});
    W.slider(f.controls, {label: W.t("layers l", "層数 l"), name: "layers", min: 1, max: 96, value: state.layers,
                          onChange: function (v) { state.layers = v; draw(); }});
    var left = f.figure(), right = f.figure();

    function makeG() {  // the G slider holds the stored values of G for the task
      var task = DATA[state.task], values = task.kv_heads.slice().sort(function (a, b) { return a - b; });
      if (values.indexOf(state.g) < 0) state.g = values[0];
      gBox.textContent = "";
      W.slider(gBox, {label: W.t("key/value heads G", "キー・バリューヘッド G"), name: "g", values: values, value: state.g,
                      onChange: function (v) { state.g = v; draw(); }});
    }

    function bytes(g) {
      var task = DATA[state.task];
      return 2 * state.T * state.layers * g * task.d_head * 4;  // a key and a value per token, layer and head, float32
    }

    function mean(v) { return v.reduce(function (a, b) { return a + b; }, 0) / v.length; }

    function draw() {
      var task = DATA[state.task], gs = task.kv_heads.slice().sort(function (a, b) { return a - b; });
      var g = state.g, values = task.values[String(g)], recall = task.metric === "accuracy";
      root.setAttribute("data-task", state.task);
      root.setAttribute("data-g", g);
      root.setAttribute("data-t", state.T);
      root.setAttribute("data-layers", state.layers);
      root.setAttribute("data-bytes", bytes(g));
      root.setAttribute("data-quality", JSON.stringify(values));
      var kib = gs.map(function (x) { return bytes(x) / 1024; });
      var cache = W.lineplot(left, [{x: gs, y: kib, name: "cache", colour: W.PALETTE[0]}], {
        bars: true, xticks: gs, title: W.t("KV cache (KiB, float32)", "KV キャッシュ（KiB、float32）"),
        xlabel: W.t("key/value heads G", "キー・バリューヘッド G"), height: 170,
        label: W.t("Bar chart of the KV cache in KiB for G = " + gs.join(", ") + " at T = " + state.T + " and " +
                   state.layers + " layers", "T = " + state.T + "、" + state.layers + " 層での G = " + gs.join("、") +
                   " の KV キャッシュ（KiB）の棒グラフ。")});
      cache.setAttribute("data-figure", "cache");
      var bars = cache.querySelectorAll("rect");  // the chosen G's bar in the second colour
      bars[gs.indexOf(g)].setAttribute("fill", W.PALETTE[1]);
      var series = task.seeds.map(function (s, k) {
        return {x: gs, y: gs.map(function (x) { return task.values[String(x)][k]; }), colour: "#bbbbbb", name: "seed-" + s};
      });
      series.push({x: gs, y: gs.map(function (x) { return mean(task.values[String(x)]); }), colour: W.PALETTE[0],
                   name: "mean", label: W.t("mean of " + task.seeds.length + " seeds (grey: each seed)",
                                            task.seeds.length + " シードの平均（灰色：各シード）")});
      var lo = recall ? 0 : 0, hi = recall ? 1.05 : Math.max(0.7, task.baselines.current_token + 0.05);
      var base = recall ? ["bag_of_values", W.t("the sequence's values, not whose", "系列の値（どのキーの値かは不明）")]
                        : ["current_token", W.t("current token only", "現在のトークンだけ")];
      series.push({x: [gs[0], gs[gs.length - 1]], y: [task.baselines[base[0]], task.baselines[base[0]]],
                   colour: W.PALETTE[3], dash: "6 4", name: base[0], label: base[1]});
      series.push({x: [g, g], y: [lo, hi], colour: W.PALETTE[1], dash: "4 3", name: "chosen"});
      var plot = W.lineplot(right, series, {
        xticks: gs, ylim: [lo, hi], height: 170,
        title: recall ? W.t("held-out accuracy after " + task.steps + " steps", task.steps + " ステップ後のテスト用データでの正解率")
                      : W.t("excess over the optimum (nats), " + task.steps + " steps", task.steps + " ステップ後の最適値との差（ナット）"),
        xlabel: W.t("key/value heads G", "キー・バリューヘッド G"),
        label: W.t("Stored results per seed against G, the chosen G marked", "シードごとの保存済みの結果を G に対して描いた図。選んだ G に印を付けた。")});
      plot.setAttribute("data-figure", "quality");
      var shown = values.map(function (v) { return W.fmt(v, recall ? 2 : 3); }).join(W.t(", ", "、"));
      f.note.textContent = W.t(
        "G = " + g + ": cache 2 \u00d7 T \u00d7 l \u00d7 G \u00d7 d_h \u00d7 4 B = " + size(bytes(g)) + " (d_h = " + task.d_head +
        "), " + (g === task.heads ? "as for MHA. " : (bytes(task.heads) / bytes(g)) + " times smaller than MHA's. ") +
        (recall ? "Accuracy" : "Excess") + " of the 5 seeds: " + shown + ".",
        "G = " + g + "：キャッシュは 2 \u00d7 T \u00d7 l \u00d7 G \u00d7 d_h \u00d7 4 B = " + size(bytes(g)) + "（d_h = " + task.d_head +
        "）で、" + (g === task.heads ? "MHA と同じです。" : "MHA の " + (bytes(task.heads) / bytes(g)) + " 分の 1 です。") + "5 シードの" + (recall ? "正解率" : "最適値との差") +
        "は " + shown + " です。");
    }
    makeG();
    draw();
  }
})();
