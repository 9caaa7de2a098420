/* Chapter 7: greedy decoding step by step, with and without the KV cache (site/widgets/widgets.js explains the
 * runtime). The strings and what chapter 7's trained model decodes from them (site/widgets/ch07-data.js) are
 * exported by tools/export_widget_data.py from the model stored in tools/widget_models/. The counts follow the
 * library's definitions: transformer.greedy_decode runs the decoder over its fixed buffer of n tokens at every
 * step (n rows, n keys and values per block, the source's S keys and values projected again, n x n scores per head);
 * transformer.greedy_decode_cached computes the new row only (1 key and value per block, written at row t of the
 * preallocated cache), projects the source's keys and values once, and scores its one query against the n rows
 * of the cache, masking those after t. The root carries data-string, data-step, data-source, data-decoded and
 * data-counts; each cell of the two rows carries data-state. tests/site/test_site.py compares them with attnbook. */
(function () {
  "use strict";
  AttnWidgets.registerWithData("ch07-decoding", init);  // loads ch07-data.js first

  var COLOURS = {computed: "#0072b2", padding: "#56b4e9", cached: "#e8e8e8", empty: "#ffffff"};

  function init(root, W) {
    var D = window.AttnWidgetData.ch07, n = D.strings[0].length, S = n;
    var state = {string: 0, step: 1};
    if (!document.getElementById("aw-ch07-style")) {
      document.head.appendChild(W.el("style", {id: "aw-ch07-style", text:
        ".attn-widget .aw-row{display:flex;gap:3px;margin:.15rem 0 .5rem;flex-wrap:nowrap}" +
        ".attn-widget .aw-cell{flex:1 1 0;min-width:0;max-width:2.6rem;height:2rem;display:flex;align-items:center;" +
        "justify-content:center;border:1px solid #555;border-radius:.2rem;font-variant-numeric:tabular-nums;font-size:.9rem}" +
        ".attn-widget .aw-cell[data-state=empty]{border-style:dashed;color:#555}" +
        ".attn-widget .aw-key{display:flex;flex-wrap:wrap;gap:.2rem .8rem;font-size:.85rem;margin:.2rem 0 .6rem}" +
        ".attn-widget .aw-key span::before{content:'';display:inline-block;width:.8rem;height:.8rem;margin-right:.25rem;" +
        "vertical-align:-.1rem;border:1px solid #555;background:var(--c)}" +
        ".attn-widget .aw-table{border-collapse:collapse;font-size:.9rem;width:100%}" +
        ".attn-widget .aw-table th,.attn-widget .aw-table td{padding:.15rem .35rem;border-bottom:1px solid #ddd;text-align:left}" +
        ".attn-widget .aw-table td{font-variant-numeric:tabular-nums;text-align:right}" +
        ".attn-widget .aw-table th[scope=col]{white-space:nowrap}"}));
    }
    var f = W.frame(root, W.t("Try it: greedy decoding, with and without the cache", "試してみましょう：キャッシュありとなしの貪欲デコーディング"));
    W.select(f.controls, {label: W.t("source", "入力"), name: "string", value: 0,
                          options: D.strings.map(function (s, i) { return [i, s.join(" ")]; }),
                          onChange: function (v) { state.string = v; draw(); }});
    W.slider(f.controls, {label: W.t("step t", "ステップ t"), name: "step", min: 1, max: n, value: state.step,
                          onChange: function (v) { state.step = v; draw(); }});
    var box = f.figure();

    function token(v) { return v === D.start ? "S" : String(v); }

    function row(title, cells) {
      var line = W.el("div", {class: "aw-row", role: "list", "aria-label": title});
      cells.forEach(function (c) {
        line.appendChild(W.el("div", {class: "aw-cell", role: "listitem", "data-state": c.state, title: c.help,
                                      "aria-label": c.help, style: "background:" + COLOURS[c.state] +
                                      (c.state === "computed" ? ";color:#fff" : ";color:#222"), text: c.text}));
      });
      return [W.el("p", {class: "aw-note", text: title}), line];
    }

    function draw() {
      var t = state.step, source = D.strings[state.string], out = D.decoded[state.string].slice(0, t);
      var input = [D.start].concat(D.decoded[state.string]).slice(0, n);  // the decoder's buffer when it is full
      var counts = {
        plain: {rows: n, self_kv: n, self_kv_total: n * t, cross_kv_total: S * t, scores: n * n, scores_total: n * n * t},
        cached: {rows: 1, self_kv: 1, self_kv_total: t, cross_kv_total: S, scores: n, scores_total: n * t}};
      root.setAttribute("data-string", state.string);
      root.setAttribute("data-step", t);
      root.setAttribute("data-source", JSON.stringify(source));
      root.setAttribute("data-decoded", JSON.stringify(out));
      root.setAttribute("data-counts", JSON.stringify(counts));
      box.textContent = "";
      // The decoder's rows at step t (0-based row t - 1 produces output t).
      var plain = [], cached = [];
      for (var p = 0; p < n; p++) {
        var known = p < t, text = known ? token(input[p]) : "0";
        plain.push({state: known ? "computed" : "padding", text: text,
                    help: W.t("row " + p + ": computed", "行 " + p + "：計算する")});
        cached.push({state: p === t - 1 ? "computed" : p < t - 1 ? "cached" : "empty", text: known ? token(input[p]) : "",
                     help: p === t - 1 ? W.t("row " + p + ": computed", "行 " + p + "：計算する") : p < t - 1
                       ? W.t("row " + p + ": keys and values read from the cache", "行 " + p + "：キャッシュからキーとバリューを読む")
                       : W.t("row " + p + ": not written yet, masked", "行 " + p + "：未記入、マスクする")});
      }
      box.appendChild(W.el("p", {class: "aw-note", text: W.t(
        "Source " + source.join(" ") + "; decoded so far: " + out.join(" ") + " (step " + t + " of " + n + ").",
        "入力 " + source.join(" ") + "。ここまでの出力：" + out.join(" ") + "（" + n + " ステップ中 " + t + "）。")}));
      row(W.t("without the cache: the decoder's " + n + " rows at step " + t, "キャッシュなし：ステップ " + t + " のデコーダの " + n + " 行"), plain)
        .forEach(function (e) { box.appendChild(e); });
      row(W.t("with the cache: the same rows at step " + t, "キャッシュあり：ステップ " + t + " の同じ行"), cached)
        .forEach(function (e) { box.appendChild(e); });
      var key = W.el("div", {class: "aw-key"});
      [["computed", W.t("computed", "計算する")], ["padding", W.t("computed, zero padding", "計算する（ゼロ埋め）")],
       ["cached", W.t("read from the cache", "キャッシュから読む")], ["empty", W.t("not written, masked", "未記入、マスク")]]
        .forEach(function (k) { key.appendChild(W.el("span", {style: "--c:" + COLOURS[k[0]], text: k[1]})); });
      box.appendChild(key);
      var lines = [
        ["rows", W.t("decoder rows computed at step t", "ステップ t で計算するデコーダの行")],
        ["self_kv", W.t("self-attention keys and values computed at step t, per block", "ステップ t で計算する自己アテンションのキーとバリュー（ブロックあたり）")],
        ["self_kv_total", W.t("the same, steps 1 to t", "同じもの、ステップ 1 から t の合計")],
        ["cross_kv_total", W.t("source keys and values projected, steps 1 to t, per block", "入力のキーとバリューの射影、ステップ 1 から t の合計（ブロックあたり）")],
        ["scores", W.t("self-attention scores at step t, per head and block", "ステップ t の自己アテンションのスコア（ヘッドとブロックあたり）")],
        ["scores_total", W.t("the same, steps 1 to t", "同じもの、ステップ 1 から t の合計")]];
      var head = W.el("tr", {}, [W.el("th", {scope: "col", text: W.t("at step " + t, "ステップ " + t)}),
                                 W.el("th", {scope: "col", text: W.t("no cache", "なし")}),
                                 W.el("th", {scope: "col", text: W.t("cache", "あり")})]);
      var body = lines.map(function (l) {
        return W.el("tr", {"data-count": l[0]}, [W.el("th", {scope: "row", text: l[1]}),
                                                 W.el("td", {text: String(counts.plain[l[0]])}),
                                                 W.el("td", {text: String(counts.cached[l[0]])})]);
      });
      box.appendChild(W.el("table", {class: "aw-table"}, [W.el("thead", {}, [head]), W.el("tbody", {}, body)]));
      f.note.textContent = W.t(
        "Both decode the same tokens. Without the cache every step reruns all " + n + " rows of the fixed buffer, " +
        "the rows not yet generated included (zeros, which the causal mask keeps from the rows before them).",
        "どちらも同じトークンを出力します。キャッシュなしでは、各ステップが固定長のバッファの " + n + " 行すべてを計算し直します。" +
        "まだ生成していない行（ゼロ）も計算しますが、因果マスクのため前の行には影響しません。");
    }
    draw();
  }
})();
