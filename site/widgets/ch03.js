/* Chapter 3: build a 6 x 6 boolean mask by clicking its cells (or a preset) and see the attention weights of
 * fixed queries and keys under it (site/widgets/widgets.js explains the runtime). mask[i][j] is true where
 * query i may attend to key j; a query with no allowed key gets zero weights, as attnbook's attention returns.
 * The root carries the draw (data-q, data-k: seed 3, standard normal, 6 x 4) and the mask (data-mask); the
 * heat-map carries the weights (data-values), which tests/site/test_site.py compares with
 * attnbook.attention.scaled_dot_product_attention. */
AttnWidgets.register("ch03-mask", function (root, W) {
  var T = 6, D = 4, random = W.rng(3), i, j;
  var q = [], k = [];
  for (i = 0; i < T; i++) q.push(random.normals(D));
  for (i = 0; i < T; i++) k.push(random.normals(D));
  root.setAttribute("data-q", W.json(q));
  root.setAttribute("data-k", W.json(k));
  var scores = q.map(function (qi) { return k.map(function (kj) { return W.dot(qi, kj) / Math.sqrt(D); }); });

  function make(rule) {
    var m = [];
    for (var a = 0; a < T; a++) { m.push([]); for (var b = 0; b < T; b++) m[a].push(rule(a, b)); }
    return m;
  }
  // The presets, as attnbook.masking builds them: causal_mask(6), padding_mask([4], 6)[0], sliding_window_mask(6, 3).
  var PRESETS = [
    ["none", W.t("no mask", "マスクなし"), function () { return true; }],
    ["causal", W.t("causal", "因果マスク"), function (a, b) { return b <= a; }],
    ["padding", W.t("padding (length 4)", "パディング（長さ 4）"), function (a, b) { return a < 4 && b < 4; }],
    ["window", W.t("sliding window (3)", "スライディングウィンドウ（3）"), function (a, b) { return a - b >= 0 && a - b < 3; }]];
  var mask = make(PRESETS[1][2]);

  var f = W.frame(root, W.t("Try it: build a mask", "試してみましょう：マスクを作る"));
  var presets = W.el("div", {class: "aw-buttons", role: "group", "aria-label": W.t("Presets", "プリセット")});
  f.controls.appendChild(presets);
  PRESETS.forEach(function (p) {
    var b = W.el("button", {type: "button", "data-preset": p[0], text: p[1]});
    b.addEventListener("click", function () { mask = make(p[2]); draw(); });
    presets.appendChild(b);
  });

  // The mask as a grid of toggle buttons: row = query, column = key.
  var gridFigure = f.figure(), weightsFigure = f.figure();
  var caption = W.el("p", {class: "aw-note", id: W.uid("mask-caption"),
                           text: W.t("The mask: click a cell (or press Enter or Space on it) to allow (1) or forbid (0) " +
                                     "that key for that query. Rows are queries, columns keys.",
                                     "マスク：セルを押す（Enter か Space キーでも）と、そのクエリがそのキーを見ることを許可（1）" +
                                     "または禁止（0）します。行がクエリ、列がキーです。")});
  var grid = W.el("div", {role: "group", "aria-labelledby": caption.id,
                          style: "display:grid;grid-template-columns:repeat(" + (T + 1) + ",minmax(0,2.6rem));gap:3px;" +
                                 "align-items:center;justify-items:center;margin:.3rem 0"});
  gridFigure.appendChild(caption);
  gridFigure.appendChild(grid);
  var cells = [];
  grid.appendChild(W.el("span", {"aria-hidden": "true"}));
  for (j = 0; j < T; j++) grid.appendChild(W.el("span", {"aria-hidden": "true", text: "k" + j}));
  for (i = 0; i < T; i++) {
    grid.appendChild(W.el("span", {"aria-hidden": "true", text: "q" + i}));
    cells.push([]);
    for (j = 0; j < T; j++) {
      (function (a, b) {
        var cell = W.el("button", {type: "button", "data-cell": a + "," + b, style: "width:100%;padding:.2rem 0"});
        cell.addEventListener("click", function () { mask[a][b] = !mask[a][b]; draw(); });
        grid.appendChild(cell);
        cells[a].push(cell);
      })(i, j);
    }
  }

  function draw() {
    for (var a = 0; a < T; a++) for (var b = 0; b < T; b++) {
      cells[a][b].setAttribute("aria-pressed", mask[a][b] ? "true" : "false");
      cells[a][b].textContent = mask[a][b] ? "1" : "0";
      // The accessible name starts with the visible text (axe: label-content-name-mismatch).
      cells[a][b].setAttribute("aria-label", cells[a][b].textContent +
                               W.t(": query " + a + ", key " + b, "：クエリ " + a + "、キー " + b));
    }
    root.setAttribute("data-mask", JSON.stringify(mask));
    var weights = scores.map(function (row, a) { return W.softmax(row, mask[a]); });
    var heat = W.heatmap(weightsFigure, weights, {
      vmin: 0, vmax: 1, map: "viridis", numbers: true, height: 216, title: W.t("attention weights", "アテンション重み"),
      xlabel: W.t("key j", "キー j"), ylabel: W.t("query i", "クエリ i"), xticks: W.range(T), yticks: W.range(T),
      label: W.t("Attention weights of 6 queries over 6 keys under the mask", "マスクをかけた 6 個のクエリと 6 個のキーのアテンション重み")});
    heat.setAttribute("data-figure", "weights");
    var empty = mask.filter(function (row) { return !row.some(Boolean); }).length;
    f.note.textContent = W.t(
      "Each row sums to 1, except a query with no allowed key: its weights are all 0 (" + empty + " such row" +
      (empty === 1 ? "" : "s") + " now).",
      "各行の和は 1 です。ただし見てよいキーが 1 つもないクエリの重みはすべて 0 です（いまは " + empty + " 行）。");
  }
  draw();
});
