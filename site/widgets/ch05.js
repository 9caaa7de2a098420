/* Chapter 5: AFT-local's window (site/widgets/widgets.js explains the runtime). Query t gives key t' the weight
 * exp(K[t'] + w'[t, t']) / sum over t'', with w'[t, t'] = w[t, t'] inside the window |t - t'| < s and 0 outside
 * (not -inf: every key keeps a weight), as attnbook.aft.aft_local (one channel; causal: t' <= t only).
 * A fixed draw (seed 5, standard normal): K (16) and w (16 x 16), on the root as data-k and data-w; the
 * heat-map carries the weights (data-values) and the window (data-window), which tests/site/test_site.py compares
 * with attnbook.aft.aft_local. */
AttnWidgets.register("ch05-aft-local", function (root, W) {
  var TMAX = 16, random = W.rng(5), i;
  var K = random.normals(TMAX), w = [];
  for (i = 0; i < TMAX; i++) w.push(random.normals(TMAX));
  root.setAttribute("data-k", W.json(K));
  root.setAttribute("data-w", W.json(w));
  var state = {T: 12, s: 3, causal: false};

  var f = W.frame(root, W.t("Try it: AFT-local's window", "試してみましょう：AFT-local の窓"));
  W.slider(f.controls, {label: "T", name: "T", min: 2, max: TMAX, value: state.T,
                        onChange: function (v) { state.T = v; draw(); }});
  W.slider(f.controls, {label: W.t("window size s", "窓幅 s"), name: "s", min: 1, max: TMAX, value: state.s,
                        onChange: function (v) { state.s = v; draw(); }});
  W.checkbox(f.controls, {label: W.t("causal", "因果的"), name: "causal", value: state.causal,
                          onChange: function (v) { state.causal = v; draw(); }});
  var figure = f.figure();

  function draw() {
    var T = state.T, s = state.s, causal = state.causal, weights = [], inside = [];
    for (var t = 0; t < T; t++) {
      var row = [], allowed = [], band = [];
      for (var u = 0; u < T; u++) {
        band.push(Math.abs(t - u) < s);
        row.push(K[u] + (band[u] ? w[t][u] : 0));
        allowed.push(!causal || u <= t);
      }
      weights.push(W.softmax(row, allowed));
      inside.push(band);
    }
    root.setAttribute("data-t", T);
    root.setAttribute("data-s", s);
    root.setAttribute("data-causal", causal);
    var heat = W.heatmap(figure, weights, {
      vmin: 0, vmax: Math.max(0.5, Math.max.apply(null, weights.map(function (r) { return Math.max.apply(null, r); }))),
      map: "viridis", height: 300, title: W.t("weights of AFT-local (one channel)", "AFT-local の重み（1 チャネル）"),
      xlabel: W.t("key t\u2032", "キー t\u2032"), ylabel: W.t("query t", "クエリ t"),
      outline: function (a, b) { return inside[a][b] && (!causal || b <= a); },
      label: W.t("Weights of AFT-local for " + T + " positions and window size " + s + "; the window is framed",
                 "位置 " + T + " 個、窓幅 " + s + " の AFT-local の重み。窓の中を枠で囲んでいます")});
    heat.setAttribute("data-figure", "weights");
    heat.setAttribute("data-window", JSON.stringify(inside));
    f.note.textContent = s >= T ? W.t(
      "s \u2265 T: the window holds every key, and AFT-local is AFT-full.",
      "s \u2265 T なので窓がすべてのキーを含み、AFT-local は AFT-full と同じです。") : W.t(
      "Framed: the keys inside the window |t \u2212 t\u2032| < s, where the position bias w applies. " +
      "Outside it the bias is 0, not \u2212\u221e: every key still gets a weight.",
      "枠の中が窓 |t \u2212 t\u2032| < s のキーで、位置バイアス w がかかります。窓の外のバイアスは \u2212\u221e ではなく 0 です。" +
      "そのため、どのキーにも重みが残ります。");
  }
  draw();
});
