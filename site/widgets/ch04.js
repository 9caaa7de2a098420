/* Chapter 4: every head's attention weights from one query token, in the key-bias layer trained on 'add token 2'
 * (site/widgets/widgets.js explains the runtime). The data (site/widgets/ch04-data.js) is exported by
 * tools/export_widget_data.py from the layer stored in tools/widget_models/ (trained as the chapter trains it)
 * applied to input 0 of the chapter's 1000 inputs; the heat-map (8 heads down, 5 keys across) carries data-values,
 * the root data-query (the token, 1 to 5, as the chapter numbers them). tests/site/test_site.py recomputes the weights
 * with attnbook from the stored layer. */
(function () {
  "use strict";
  AttnWidgets.registerWithData("ch04-heads", init);  // loads ch04-data.js first

  function init(root, W) {
    var D = window.AttnWidgetData.ch04, heads = D.weights[0].length, tokens = D.weights.length;
    var state = {query: 1};
    var f = W.frame(root, W.t("Try it: every head's attention from one token", "試してみましょう：1 つのトークンからの全ヘッドのアテンション"));
    W.slider(f.controls, {label: W.t("query token", "クエリのトークン"), name: "query", min: 1, max: tokens, value: state.query,
                          onChange: function (v) { state.query = v; draw(); }});
    var figure = f.figure();

    function draw() {
      var q = state.query, rows = D.weights[q - 1];
      root.setAttribute("data-query", q);
      var heat = W.heatmap(figure, rows, {
        vmin: 0, vmax: 1, map: "viridis", numbers: true, height: 8 * 30, xticks: W.range(tokens), yticks: W.range(heads),
        title: W.t("weights from token " + q + " (framed: the token itself)", "トークン " + q + " からの重み（枠：自分自身）"),
        xlabel: W.t("key token", "キーのトークン"), ylabel: W.t("head", "ヘッド"),
        outline: function (h, j) { return j === q - 1; },
        label: W.t("Heat-map of the attention weights from query token " + q + ": " + heads + " heads down, " + tokens +
                   " key tokens across", "クエリのトークン " + q + " からのアテンション重みのヒートマップ。縦に " + heads +
                   " ヘッド、横に " + tokens + " 個のキーのトークン")});
      heat.setAttribute("data-figure", "weights");
      // Number the tokens and heads from 1, as the chapter does: the tick labels follow the title and the cells.
      var texts = heat.querySelectorAll("text"), first = 1 + heads * tokens;
      for (var j = 0; j < tokens; j++) texts[first + j].textContent = String(j + 1);
      for (var h = 0; h < heads; h++) texts[first + tokens + h].textContent = String(h + 1);
      var onTwo = [], onSelf = [];
      rows.forEach(function (r, k) { if (r[1] > 0.5) onTwo.push(k + 1); if (r[q - 1] > 0.5) onSelf.push(k + 1); });
      f.note.textContent = W.t(
        "Input " + D.input_index + " of the chapter's 1000. Heads putting over half their weight on token 2: " +
        (onTwo.join(", ") || "none") + "; on token " + q + " itself: " + (onSelf.join(", ") || "none") + ".",
        "この章の 1000 個の入力のうち入力 " + D.input_index + " です。重みの半分より多くをトークン 2 に割り当てるヘッド：" +
        (onTwo.join("、") || "なし") + "。トークン " + q + " 自身に割り当てるヘッド：" + (onSelf.join("、") || "なし") + "。");
    }
    draw();
  }
})();
