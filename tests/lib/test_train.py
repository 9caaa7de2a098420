"""attnbook.train.fit, the models of chapter 2, and their argument checks."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from attnbook import data, masking, train
from attnbook.attention import SelfAttention, scaled_dot_product_attention
from attnbook.baselines import LinearClassifier


def last_position(model, x):
    return model(x)[0][-1]


def test_minibatch_indices_cover_each_epoch_once():
    idx = np.asarray(train.minibatch_indices(jax.random.key(0), 250, 100, steps=5))
    assert idx.shape == (5, 100)
    for epoch in (idx[:2].ravel(), idx[2:4].ravel()):  # 2 full batches per epoch, 50 dropped
        assert len(set(epoch.tolist())) == 200


def test_fit_reaches_bayes_accuracy_on_markov():
    rng = np.random.default_rng(0)
    x, y = data.markov(1000, rng)
    x_test, y_test = data.markov(20_000, rng)
    model = SelfAttention(4, 6, 3, key=jax.random.key(0))
    loss = train.classification_loss(last_position)
    model, history = train.fit(model, loss, (data.features(x), y), optimizer=optax.adam(1e-2), steps=500,
                               batch_size=100, key=jax.random.key(1),
                               test_data=(data.features(x_test[:1000]), y_test[:1000]))
    assert history.train_loss.shape == (500,) and history.test_loss.shape == (500,)
    assert np.isfinite(history.test_loss).all()
    assert history.test_loss[-1] < history.test_loss[0] - 0.05
    acc = train.accuracy(last_position, model, data.features(x_test), y_test)
    assert abs(acc - data.markov_bayes_accuracy().value) < 0.02


def test_fit_matches_a_hand_written_loop():
    """Same batches, same optimizer: fit's scan equals a Python loop of optax steps."""
    rng = np.random.default_rng(1)
    x, y = data.markov(300, rng)
    xs, ys = jnp.asarray(data.features(x)), jnp.asarray(y)
    model = LinearClassifier(10, 4, 3, key=jax.random.key(2))
    loss = train.classification_loss(lambda m, x: m(x))
    opt = optax.sgd(0.1)
    fitted, history = train.fit(model, loss, (xs, ys), optimizer=opt, steps=7, batch_size=64, key=jax.random.key(3))
    batches = train.minibatch_indices(jax.random.key(3), 300, 64, 7)
    state = opt.init(model)
    for s, idx in enumerate(batches):
        value, grads = eqx.filter_value_and_grad(loss)(model, xs[idx], ys[idx])
        np.testing.assert_allclose(value, history.train_loss[s], rtol=1e-5)
        updates, state = opt.update(grads, state)
        model = eqx.apply_updates(model, updates)
    np.testing.assert_allclose(fitted.weight, model.weight, atol=1e-6)
    assert history.test_loss is None


def test_self_attention_is_causal_scaled_dot_product_attention():
    model = SelfAttention(4, 6, 3, key=jax.random.key(4))
    x = jnp.asarray(np.random.default_rng(2).normal(size=(5, 4)), dtype=jnp.float32)
    out, weights = model(x)
    q, k, v = x @ model.w_q + model.b_q, x @ model.w_k + model.b_k, x @ model.w_v + model.b_v
    ref_out, ref_weights = scaled_dot_product_attention(q, k, v, mask=masking.causal_mask(5))
    np.testing.assert_allclose(out, ref_out, atol=1e-6)
    np.testing.assert_allclose(weights, ref_weights, atol=1e-6)
    n_params = sum(a.size for a in jax.tree.leaves(eqx.filter(model, eqx.is_array)))
    assert n_params == (4 + 1) * (2 * 6 + 3) == 75
    linear = LinearClassifier(10, 4, 3, key=jax.random.key(5))
    assert sum(a.size for a in jax.tree.leaves(linear)) == (4 * 10 + 1) * 3 == 123


@pytest.mark.parametrize(
    "call, names",
    [
        (lambda: train.fit(LinearClassifier(10, 4, 3, key=jax.random.key(0)), lambda m, x, y: 0.0,
                           (np.zeros((50, 10, 4)), np.zeros(50, int)), optimizer=optax.adam(1e-2), steps=5,
                           batch_size=100, key=jax.random.key(0)), ["batch_size", "N=50", "100"]),
        (lambda: train.fit(LinearClassifier(10, 4, 3, key=jax.random.key(0)), lambda m, x, y: 0.0,
                           (np.zeros((50, 10, 4)), np.zeros(40, int)), optimizer=optax.adam(1e-2), steps=5,
                           batch_size=10, key=jax.random.key(0)), ["train_data", "[40, 50]"]),
        (lambda: train.fit(LinearClassifier(10, 4, 3, key=jax.random.key(0)), lambda m, x, y: 0.0,
                           (np.zeros((50, 10, 4)),), optimizer=optax.adam(1e-2), steps=0,
                           batch_size=10, key=jax.random.key(0)), ["steps", "0"]),
        (lambda: SelfAttention(4, 0, 3, key=jax.random.key(0)), ["d_attn", "0"]),
        (lambda: SelfAttention(4, 6, 3, key=jax.random.key(0))(jnp.ones((5, 3))), ["d_in=4", "(5, 3)"]),
        (lambda: LinearClassifier(10, 4, 3, key=jax.random.key(0))(jnp.ones((9, 4))), ["40", "(9, 4)"]),
    ],
)
def test_bad_arguments(call, names):
    with pytest.raises(ValueError) as info:
        call()
    for name in names:
        assert name in str(info.value)


def test_eval_every_records_the_same_losses_less_often():
    rng = np.random.default_rng(3)
    x, y = data.markov(400, rng)
    xt, yt = data.markov(200, rng)
    train_set, test_set = (data.features(x), y), (data.features(xt), yt)
    loss = train.classification_loss(last_position)
    opt = optax.adam(1e-2)
    runs = [train.fit(SelfAttention(4, 6, 3, key=jax.random.key(0)), loss, train_set, optimizer=opt, steps=60,
                      batch_size=50, key=jax.random.key(1), test_data=test_set, eval_every=k) for k in (1, 20)]
    (_, every), (_, sparse) = runs
    assert every.test_loss.shape == (60,) and sparse.test_loss.shape == (3,)
    np.testing.assert_array_equal(sparse.test_steps, [20, 40, 60])
    np.testing.assert_allclose(sparse.test_loss, every.test_loss[[19, 39, 59]], rtol=1e-5)
    np.testing.assert_allclose(sparse.train_loss, every.train_loss, rtol=1e-5)
    with pytest.raises(ValueError, match="eval_every.*steps=60.*7"):
        train.fit(SelfAttention(4, 6, 3, key=jax.random.key(0)), loss, train_set, optimizer=opt, steps=60,
                  batch_size=50, key=jax.random.key(1), eval_every=7)


def test_minibatch_indices_match_a_plain_reference():
    """An eager reference written for the test: one key per epoch, a permutation, cut into batches.

    train.minibatch_indices is compiled without XLA's backend optimisations (to compile faster);
    the indices must be exactly the eager ones.
    """
    for n, batch, steps in ((7, 5, 300), (1000, 5, 300), (1201, 5, 300), (250, 100, 5)):
        key = jax.random.key(n)
        per_epoch = n // batch
        epochs = -(-steps // per_epoch)
        rows = []
        for epoch_key in jax.random.split(key, epochs):
            perm = np.asarray(jax.random.permutation(epoch_key, n))
            rows += [perm[i * batch:(i + 1) * batch] for i in range(per_epoch)]
        np.testing.assert_array_equal(train.minibatch_indices(key, n, batch, steps), np.stack(rows[:steps]))


def test_cross_entropy_against_numpy_log_softmax():
    logits = np.random.default_rng(0).normal(size=(4, 5, 3)).astype(np.float32)
    labels = np.random.default_rng(1).integers(0, 3, (4, 5))
    shifted = logits - logits.max(-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    expected = -np.take_along_axis(log_p, labels[..., None], -1)[..., 0]
    np.testing.assert_allclose(train.cross_entropy(logits, labels), expected, rtol=1e-5, atol=1e-6)


def test_fit_seeds_matches_a_hand_written_loop_per_model(monkeypatch):
    """fit_seeds runs fit's step per model on its own batches: equal to a Python loop of optax steps, model by model."""
    monkeypatch.delenv(train.NUDGE_VARIABLE, raising=False)
    rng = np.random.default_rng(4)
    x, y = data.markov(2 * 3 * 16, rng)
    xs = jnp.asarray(data.features(x)).reshape(2, 3, 16, 10, 4)
    ys = jnp.asarray(y).reshape(2, 3, 16)
    models = [LinearClassifier(10, 4, 3, key=jax.random.key(s)) for s in (0, 1)]
    loss = train.classification_loss(lambda m, x: m(x))
    opt = optax.adam(0.05)
    stacked, losses = train.fit_seeds(models, loss, (xs, ys), optimizer=opt)
    assert losses.shape == (2, 3)
    for r, model in enumerate(models):
        state = opt.init(model)
        for s in range(3):
            value, grads = eqx.filter_value_and_grad(loss)(model, xs[r, s], ys[r, s])
            np.testing.assert_allclose(value, losses[r, s], rtol=1e-5)
            updates, state = opt.update(grads, state)
            model = eqx.apply_updates(model, updates)
        np.testing.assert_allclose(train.select(stacked, r).weight, model.weight, atol=1e-6)


def test_fit_seeds_nudges_every_start(monkeypatch):
    models = [LinearClassifier(10, 4, 3, key=jax.random.key(0))]
    xs = jnp.zeros((1, 1, 8, 10, 4))
    ys = jnp.zeros((1, 1, 8), jnp.int32)
    loss = train.classification_loss(lambda m, x: m(x))
    opt = optax.sgd(0.0 + 1e-30)
    monkeypatch.delenv(train.NUDGE_VARIABLE, raising=False)
    plain, _ = train.fit_seeds(models, loss, (xs, ys), optimizer=opt)
    monkeypatch.setenv(train.NUDGE_VARIABLE, "up")
    nudged, _ = train.fit_seeds(models, loss, (xs, ys), optimizer=opt)
    assert np.all(np.asarray(nudged.weight) > np.asarray(plain.weight))


def test_classification_loss_is_one_function_per_logits_fn():
    """The same logits_fn gives the same loss, so fit traces and compiles its program once for every run of a
    chapter (chapter 2 trains ten models with two logits functions); an unhashable callable still gets a loss."""
    assert train.classification_loss(LinearClassifier.__call__) is train.classification_loss(LinearClassifier.__call__)
    assert train.classification_loss(LinearClassifier.__call__) is not train.classification_loss(SelfAttention.last_token)

    class Unhashable:
        __hash__ = None

        def __call__(self, model, x):
            return model(x)

    model = LinearClassifier(10, 4, 3, key=jax.random.key(0))
    xs, ys = jnp.zeros((2, 10, 4)), jnp.array([0, 2])
    assert np.isclose(train.classification_loss(Unhashable())(model, xs, ys),
                      train.classification_loss(LinearClassifier.__call__)(model, xs, ys))
    traces = []

    def logits(model, x):  # runs once per trace of fit's program
        traces.append(1)
        return model(x)

    counts, optimizer = [], optax.sgd(0.1)  # one optimizer too: a new one is a new program
    for seed in range(3):  # three fits, each asking for the loss anew: traced for the first only
        train.fit(model, train.classification_loss(logits), (xs, ys), optimizer=optimizer, steps=2,
                  batch_size=2, key=jax.random.key(seed))
        counts.append(len(traces))
    assert counts[0] > 0 and counts[2] == counts[0], counts
    train.fit(model, train.classification_loss(lambda m, x: logits(m, x)), (xs, ys), optimizer=optimizer,
              steps=2, batch_size=2, key=jax.random.key(0))  # a new function: traced again
    assert len(traces) > counts[2], (counts, len(traces))
