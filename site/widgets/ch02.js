/* Chapter 2: the softmax of one query's scores with and without the 1/sqrt(d_k) scale (site/widgets/widgets.js
 * explains the runtime). One fixed draw of standard normal numbers (seed 2): a query and 8 keys of 256
 * components, of which the first d_k are used. The root carries the draw (data-q, data-keys); each bar group
 * carries its weights (data-values), which tests/site/test_site.py compares with jax.nn.softmax. */
AttnWidgets.register("ch02-saturation", function (root, W) {
  var KEYS = 8, DMAX = 256, random = W.rng(2);
  var q = random.normals(DMAX), keys = [];
  for (var j = 0; j < KEYS; j++) keys.push(random.normals(DMAX));
  root.setAttribute("data-q", W.json(q));
  root.setAttribute("data-keys", W.json(keys));
  var state = {d: 64, tau: 1};

  var f = W.frame(root, W.t("Try it: when the softmax saturates", "試してみましょう：softmax が飽和するとき"));
  W.slider(f.controls, {label: "d_k", name: "d", values: [1, 2, 4, 8, 16, 32, 64, 128, 256], value: state.d,
                        onChange: function (v) { state.d = v; draw(); }});
  W.slider(f.controls, {label: W.t("temperature \u03c4", "温度 \u03c4"), name: "tau", values: [0.25, 0.5, 1, 2, 4],
                        value: state.tau, onChange: function (v) { state.tau = v; draw(); }});
  var figure = f.figure();

  function draw() {
    var d = state.d, tau = state.tau;
    var scores = keys.map(function (k) { return W.dot(q.slice(0, d), k.slice(0, d)) / tau; });
    var plain = W.softmax(scores);
    var scaled = W.softmax(scores.map(function (s) { return s / Math.sqrt(d); }));
    root.setAttribute("data-d", d);
    root.setAttribute("data-tau", tau);
    var plot = W.lineplot(figure, [
      {x: W.range(KEYS), y: plain, name: "plain", label: "softmax(q\u00b7k/\u03c4)"},
      {x: W.range(KEYS), y: scaled, name: "scaled", label: "softmax(q\u00b7k/(\u221ad_k \u03c4))"}], {
      bars: true, ylim: [0, 1], height: 240, xlabel: W.t("key j", "キー j"),
      ylabel: W.t("weight", "重み"),
      label: W.t("Attention weights of one query over 8 keys, without and with the scale 1/\u221ad_k, d_k = " + d +
                 ", temperature " + tau,
                 "1 つのクエリの 8 個のキーへのアテンション重み。1/\u221ad_k で割らない場合と割る場合、d_k = " + d + "、温度 " + tau)});
    plot.setAttribute("data-figure", "weights");
    function describe(p) { return W.fmt(Math.max.apply(null, p), 2) + ", " + W.fmt(W.entropy(p), 2); }
    f.note.textContent = W.t(
      "Largest weight, entropy (nats; uniform: ln 8 = 2.08). Without the scale: " + describe(plain) +
      ". With it: " + describe(scaled) + ".",
      "最大の重み、エントロピー（ナット。一様なら ln 8 = 2.08）。割らない場合：" + describe(plain) +
      "。割る場合：" + describe(scaled) + "。");
  }
  draw();
});
