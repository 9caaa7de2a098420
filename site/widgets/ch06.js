/* Chapter 6: each method's stored time and memory at a chosen T, and where it runs out (site/widgets/widgets.js
 * explains the runtime). The data (site/widgets/ch06-data.js) is exported by tools/export_widget_data.py from
 * lib/attnbook/experiments/results/attention_cost.csv: median time per call (ms) where the benchmark ran, the temporary memory of
 * XLA's analysis (MiB, planned at every T), and the status (measured, or skipped over the time or the memory
 * limit). Each table row carries data-method, data-status, data-ms and data-mib; the two plots (log2 T across,
 * log10 of the value up) carry each method's series. tests/site/test_site.py compares them with the CSV file. */
(function () {
  "use strict";
  AttnWidgets.registerWithData("ch06-cost", init);  // loads ch06-data.js first

  function length(t) { return t < 1024 ? String(t) : (t / 1024) + "k"; }

  function init(root, W) {
    var D = window.AttnWidgetData.ch06;
    if (!document.getElementById("aw-ch06-style")) {
      document.head.appendChild(W.el("style", {id: "aw-ch06-style", text:
        ".attn-widget .aw-table{border-collapse:collapse;font-size:.9rem;margin:0 0 .5rem;width:100%}" +
        ".attn-widget .aw-table caption{caption-side:top;text-align:left;font-size:.9rem;padding:0 0 .3rem}" +
        ".attn-widget .aw-table th,.attn-widget .aw-table td{padding:.15rem .4rem;border-bottom:1px solid #ddd;text-align:left}" +
        ".attn-widget .aw-table td{font-variant-numeric:tabular-nums}"}));
    }
    var state = {T: 16384, mode: "forward"};
    var f = W.frame(root, W.t("Try it: time and memory against T", "試してみましょう：T に対する時間とメモリ"));
    W.slider(f.controls, {label: W.t("sequence length T", "系列長 T"), name: "T", values: D.lengths, value: state.T,
                          format: String, onChange: function (v) { state.T = v; draw(); }});
    W.select(f.controls, {label: W.t("pass", "計算"), name: "mode", value: state.mode,
                          options: [["forward", W.t("forward", "順伝播")],
                                    ["forward+backward", W.t("forward+backward", "順伝播 + 逆伝播")]],
                          onChange: function (v) { state.mode = v; draw(); }});
    var tableBox = f.figure(), timeBox = f.figure(), memoryBox = f.figure();

    function name(m) {
      return {attention: W.t("attention (attnbook)", "アテンション（attnbook）"), "jax.nn": "jax.nn",
              chunked: W.t("chunked attention", "チャンク分割したアテンション")}[m] || m.replace("aft", "AFT");
    }

    function number(x) { return x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x >= 1 ? x.toFixed(2) : x.toPrecision(3); }

    function draw() {
      var T = state.T, i = D.lengths.indexOf(T), table = D.table[state.mode];
      root.setAttribute("data-t", T);
      root.setAttribute("data-mode", state.mode);
      // The table at T.
      var head = W.el("tr", {}, [W.t("method", "方法"), W.t("time (ms)", "時間（ms）"), W.t("memory (MiB)", "メモリ（MiB）")]
        .map(function (h) { return W.el("th", {scope: "col", text: h}); }));
      var body = D.methods.map(function (m) {
        var r = table[m], status = r.status[i], ms = r.ms[i], mib = r.mib[i];
        var time = status === "measured" ? number(ms) : status === "time"
          ? W.t("not run: over " + D.limits.seconds + " s", "未実行：" + D.limits.seconds + " 秒超")
          : W.t("not run: over " + D.limits.gib + " GiB", "未実行：" + D.limits.gib + " GiB 超");
        var row = W.el("tr", {"data-method": m, "data-status": status, "data-mib": String(mib),
                              "data-ms": ms === null ? "null" : String(ms)},
                       [W.el("th", {scope: "row", text: name(m)}), W.el("td", {text: time}),
                        W.el("td", {text: number(mib) + (status === "measured" ? "" : W.t(" (planned)", "（計画）"))})]);
        return row;
      });
      var caption = W.el("caption", {text: W.t("T = " + T + ", d = " + D.d + ", float32: median time per call and temporary memory",
                                                "T = " + T + "、d = " + D.d + "、float32：呼び出しごとの時間の中央値と一時メモリ")});
      var tableNode = W.el("table", {class: "aw-table", "data-figure": "table"}, [caption, W.el("thead", {}, [head]),
                                                                               W.el("tbody", {}, body)]);
      tableBox.textContent = "";
      tableBox.appendChild(tableNode);
      // Log-log plots: log2 T across, log10 of the value up; the chosen T marked.
      var x = D.lengths.map(function (t) { return Math.log2(t); });
      function plot(box, field, title, figure) {
        var series = D.methods.map(function (m, k) {
          var r = table[m], xs = [], ys = [];
          r[field].forEach(function (v, j) { if (v !== null && (field === "mib" || r.status[j] === "measured")) { xs.push(x[j]); ys.push(Math.log10(v)); } });
          return {x: xs, y: ys, colour: W.PALETTE[k], name: m, label: figure === "time" ? name(m) : null};
        });
        var all = [].concat.apply([], series.map(function (s) { return s.y; }));
        var lo = Math.floor(Math.min.apply(null, all)), hi = Math.ceil(Math.max.apply(null, all));
        series.push({x: [Math.log2(T), Math.log2(T)], y: [lo, hi], colour: W.GREY, dash: "2 3", name: "chosen"});
        var node = W.lineplot(box, series, {
          ylim: [lo, hi], xticks: [7, 9, 11, 13, 15, 17], height: 180, title: title,
          xlabel: W.t("log\u2082 T (7: T = 128, 17: T = 128k)", "log\u2082 T（7：T = 128、17：T = 128k）"),
          label: W.t(title + " against log2 T, one line per method", "方法ごとの " + title + " と log2 T の関係")});
        node.setAttribute("data-figure", figure);
      }
      plot(timeBox, "ms", W.t("log\u2081\u2080 time (ms), where run", "log\u2081\u2080 時間（ms）、実行したもの"), "time");
      plot(memoryBox, "mib", W.t("log\u2081\u2080 temporary memory (MiB), planned", "log\u2081\u2080 一時メモリ（MiB）、計画"), "memory");
      var out = D.methods.filter(function (m) { return table[m].status[i] !== "measured"; }).map(name);
      f.note.textContent = out.length ? W.t("At T = " + length(T) + " the benchmark did not run: " + out.join(", ") + ".",
                                            "T = " + length(T) + " でベンチマークが実行しなかった方法：" + out.join("、") + "。")
                                      : W.t("At T = " + length(T) + " every method ran.", "T = " + length(T) + " ではすべての方法を実行しました。");
    }
    draw();
  }
})();
