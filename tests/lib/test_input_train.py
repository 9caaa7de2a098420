"""attnbook.train under bad and extreme input: every error names the argument, also inside jit and fit."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from attnbook import data, train
from attnbook.baselines import LinearClassifier


def flat(model, x):
    return model(x)


class PerPosition(eqx.Module):
    """(T, 4) features -> (T, 3) logits: one prediction per position, labels of shape (N, T)."""

    weight: jax.Array

    def __call__(self, x):
        return x @ self.weight


MODEL = LinearClassifier(10, 4, 3, key=jax.random.key(0))
PER_POSITION = PerPosition(jax.random.normal(jax.random.key(1), (4, 3)))
_x, _y = data.markov(64, np.random.default_rng(0))
XS, YS = jnp.asarray(data.features(_x)), jnp.asarray(_y)
LOSS = train.classification_loss(flat)
FIT = dict(optimizer=optax.adam(1e-2), steps=4, batch_size=16, key=jax.random.key(1))


def with_label(ys, value, at=3):
    return jnp.asarray(ys).at[at].set(value)


# ------------------------------------------------------------------------------------ accuracy


def test_accuracy_is_the_fraction_of_correct_predictions():
    predictions = np.asarray(jax.vmap(MODEL)(XS)).argmax(axis=-1)
    assert train.accuracy(flat, MODEL, XS, YS) == pytest.approx(np.mean(predictions == np.asarray(YS)))
    # One prediction per position: labels (N, T), predictions (N, T).
    labels = np.asarray(_x)
    per_position = np.asarray(jax.vmap(PER_POSITION)(XS)).argmax(axis=-1)
    assert train.accuracy(flat, PER_POSITION, XS, labels) == pytest.approx(np.mean(per_position == labels))


@pytest.mark.parametrize(
    "model, ys, error, match",
    [
        # (N, 1) labels against (N,) predictions broadcast to an (N, N) comparison: a wrong number before.
        (MODEL, YS[:, None], ValueError, r"ys must have the shape of the logits \(64, 3\) without .*\(64,\), got \(64, 1\)"),
        (MODEL, with_label(YS, -1), ValueError, r"ys must be class labels: integers in \[0, 3\), got -1 at index 3"),
        (MODEL, with_label(YS, 3), ValueError, r"ys must be class labels: integers in \[0, 3\), got 3"),
        (MODEL, YS[:10], ValueError, r"ys must have shape \(N=64, \*batch\), got \(10,\)"),
        (MODEL, YS.astype(jnp.float32), TypeError, "ys must be an integer array, got dtype float32"),
        (MODEL, "labels", TypeError, "ys must be an array"),
        (PER_POSITION, YS, ValueError, r"ys must have the shape of the logits \(64, 10, 3\) without .*\(64, 10\), got \(64,\)"),
    ],
)
def test_accuracy_bad_labels(model, ys, error, match):
    with pytest.raises(error, match=match):
        train.accuracy(flat, model, XS, ys)


def test_accuracy_of_nan_logits_is_nan():
    """argmax picks an arbitrary class for a row of NaN: that used to count as a prediction."""
    broken = eqx.tree_at(lambda m: m.weight, MODEL, MODEL.weight.at[0, 0].set(jnp.nan))
    assert np.isnan(train.accuracy(flat, broken, XS, YS))
    # Only the predictions with a NaN logit are undefined; a model without NaN is unaffected.
    assert np.isfinite(train.accuracy(flat, MODEL, XS, YS))


def test_accuracy_bad_inputs():
    with pytest.raises(ValueError, match=r"xs must hold at least one example, got shape \(0, 10, 4\)"):
        train.accuracy(flat, MODEL, XS[:0], YS[:0])
    with pytest.raises(ValueError, match=r"xs must have shape \(N, \.\.\.\)"):
        train.accuracy(flat, MODEL, XS[0, 0, 0], YS)
    with pytest.raises(TypeError, match="logits_fn must be a function"):
        train.accuracy(None, MODEL, XS, YS)


# ------------------------------------------------------------------------------------ classification_loss


def test_classification_loss_is_the_mean_cross_entropy():
    logits = jax.vmap(MODEL)(XS)
    expected = -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), YS[:, None], axis=1))
    np.testing.assert_allclose(LOSS(MODEL, XS, YS), expected, rtol=1e-6)


@pytest.mark.parametrize("label", [5, 3, -1])
def test_classification_loss_rejects_labels_out_of_range(label):
    # Label 5 of 3 classes gave NaN, label -1 the loss of label 2.
    ys = with_label(YS, label)
    with pytest.raises(ValueError, match=rf"ys must be class labels: integers in \[0, 3\), got {label} at index 3"):
        LOSS(MODEL, XS, ys)
    # Traced labels: the check is compiled into the program (equinox.error_if) and stops it.
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"ys must be class labels: integers in \[0, 3\)"):
        eqx.filter_jit(LOSS)(MODEL, XS, ys)
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"ys must be class labels: integers in \[0, 3\)"):
        jax.jit(lambda xs, ys: LOSS(MODEL, xs, ys))(XS, ys)
    with pytest.raises(eqx.EquinoxRuntimeError, match="ys must be class labels"):  # under vmap, in a batch of batches
        eqx.filter_jit(jax.vmap(LOSS, in_axes=(None, 0, 0)))(MODEL, XS.reshape(4, 16, 10, 4), ys.reshape(4, 16))


def test_classification_loss_under_jit_gives_the_same_loss():
    np.testing.assert_allclose(jax.jit(lambda xs, ys: LOSS(MODEL, xs, ys))(XS, YS), LOSS(MODEL, XS, YS), rtol=1e-6)


@pytest.mark.parametrize(
    "ys, error, match",
    [
        (YS[:, None], ValueError, r"ys must have the shape of the logits .* got \(64, 1\)"),
        (YS.astype(jnp.float32), TypeError, "ys must be an integer array"),
        (YS[:-1], ValueError, r"ys must have shape \(N=64, \*batch\), got \(63,\)"),
    ],
)
def test_classification_loss_bad_label_shapes(ys, error, match):
    with pytest.raises(error, match=match):
        LOSS(MODEL, XS, ys)


def test_classification_loss_needs_a_function():
    with pytest.raises(TypeError, match="logits_fn must be a function"):
        train.classification_loss(MODEL.weight)


# ------------------------------------------------------------------------------------ fit


def test_fit_stops_on_labels_out_of_range():
    """fit is compiled: the label check inside classification_loss holds there too."""
    for label in (5, -1):
        with pytest.raises(eqx.EquinoxRuntimeError, match=r"ys must be class labels: integers in \[0, 3\)"):
            train.fit(MODEL, LOSS, (XS, with_label(YS, label)), **FIT)


@pytest.mark.parametrize(
    "optimizer, match",
    [
        (optax.adam(float("nan")), "optimizer must give finite updates.*NaN or infinite learning rate"),
        (optax.sgd(float("inf")), "optimizer must give finite updates"),
        (optax.adam(float("-inf")), "optimizer must give finite updates"),
        (optax.adam(-1e-2), "optimizer must move the parameters against the gradient.*negative learning rate"),
        (optax.sgd(-0.1), "optimizer must move the parameters against the gradient"),
        (optax.identity(), "optimizer must move the parameters against the gradient"),  # adds the gradient
    ],
)
def test_fit_rejects_bad_learning_rates_before_training(optimizer, match):
    # A NaN learning rate used to run to NaN parameters without a word.
    with pytest.raises(ValueError, match=match):
        train.fit(MODEL, LOSS, (XS, YS), **{**FIT, "optimizer": optimizer})


@pytest.mark.parametrize(
    "optimizer",
    [
        optax.adamw(1e-2, weight_decay=10.0),
        optax.adam(optax.warmup_cosine_decay_schedule(0.0, 1e-2, warmup_steps=2, decay_steps=4)),  # starts at 0
        optax.MultiSteps(optax.adam(1e-2), every_k_schedule=2),  # first update zero: accumulates
        optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(0.1, momentum=0.9)),
    ],
)
def test_fit_accepts_working_optimizers(optimizer):
    fitted, history = train.fit(MODEL, LOSS, (XS, YS), **{**FIT, "optimizer": optimizer})
    assert np.isfinite(history.train_loss).all() and np.isfinite(fitted.weight).all()


def test_fit_warns_when_the_training_loss_is_not_finite():
    xs = XS.at[:].set(jnp.nan)  # NaN in every example: the loss is NaN from step 0
    with pytest.warns(RuntimeWarning, match="training loss is nan at step 0"):
        train.fit(MODEL, LOSS, (xs, YS), **FIT)


@pytest.mark.parametrize(
    "change, error, match",
    [
        (dict(train_data=XS), TypeError, r"train_data must be a non-empty tuple of arrays.*shape \(64, 10, 4\)"),
        (dict(train_data=()), TypeError, "train_data must be a non-empty tuple"),
        (dict(train_data=(XS[:0], YS[:0])), ValueError, "train_data must hold at least one example, got N=0"),
        (dict(train_data=(XS, YS[:40])), ValueError, r"train_data arrays must share their leading size N, got sizes \[40, 64\]"),
        (dict(train_data=(XS, jnp.asarray(1))), ValueError, r"train_data\[1\] must have a leading axis of N examples"),
        (dict(test_data=(XS,)), ValueError, r"test_data must hold as many arrays as train_data \(2\), got 1"),
        (dict(test_data=(XS, YS[:3])), ValueError, "test_data arrays must share their leading size N"),
        (dict(test_data=XS), TypeError, "test_data must be a non-empty tuple"),
        (dict(steps=0), ValueError, "steps must be a positive integer, got 0"),
        (dict(steps=2.5), TypeError, "steps must be a positive integer, got float 2.5"),
        (dict(batch_size=0), ValueError, "batch_size must be a positive integer, got 0"),
        (dict(batch_size=65), ValueError, "batch_size must be at most the number of examples N=64, got 65"),
        (dict(eval_every=3), ValueError, "eval_every must divide steps=4, got 3"),
        (dict(eval_every=-1), ValueError, "eval_every must be a positive integer"),
        (dict(key=0), TypeError, r"key must be a JAX random key such as jax.random.key\(0\), got int 0"),
        (dict(optimizer=1e-2), TypeError, "optimizer must be an Optax GradientTransformation"),
        (dict(loss_fn="cross-entropy"), TypeError, "loss_fn must be a function"),
        (dict(model=jnp.zeros(3, int)), ValueError, "model must have floating-point arrays to train"),
    ],
)
def test_fit_bad_arguments(change, error, match):
    arguments = dict(model=MODEL, loss_fn=LOSS, train_data=(XS, YS), **FIT) | change
    with pytest.raises(error, match=match):
        train.fit(**arguments)


def test_fit_edge_sizes():
    # batch_size = N and a single example are valid: every step sees the whole set.
    _, history = train.fit(MODEL, LOSS, (XS, YS), **{**FIT, "batch_size": 64})
    assert history.train_loss.shape == (4,)
    _, history = train.fit(MODEL, LOSS, (XS[:1], YS[:1]), **{**FIT, "batch_size": 1}, test_data=(XS[:1], YS[:1]))
    np.testing.assert_allclose(history.train_loss[1:], history.test_loss[:-1], rtol=1e-6)


# ------------------------------------------------------------------------------------ minibatch_indices


@pytest.mark.parametrize(
    "args, error, match",
    [
        ((jax.random.key(0), 10, 20, 5), ValueError, "batch_size must be at most the number of examples N=10, got 20"),
        ((jax.random.key(0), 0, 1, 5), ValueError, "num_examples must be a positive integer, got 0"),
        ((jax.random.key(0), 10, 2, 0), ValueError, "steps must be a positive integer, got 0"),
        ((0, 10, 2, 5), TypeError, "key must be a JAX random key"),
    ],
)
def test_minibatch_indices_bad_arguments(args, error, match):
    # batch_size > num_examples ended in a ZeroDivisionError from inside.
    with pytest.raises(error, match=match):
        train.minibatch_indices(*args)


# ------------------------------------------------------------------------------------ cross_entropy, fit_seeds


@pytest.mark.parametrize(
    "logits, labels, error, match",
    [
        (jnp.zeros((4, 3)), jnp.asarray([0, 1, 2, 3]), ValueError, r"labels must be class labels: integers in \[0, 3\), got 3"),
        (jnp.zeros((4, 3)), jnp.asarray([0, 1, 2, -1]), ValueError, r"labels must be class labels: integers in \[0, 3\), got -1"),
        (jnp.zeros((4, 3)), jnp.zeros(4), TypeError, "labels must be an integer array"),
        (jnp.zeros((4, 3)), jnp.zeros(5, jnp.int32), ValueError, r"labels must have shape \(\*batch=\(4,\),\)"),
    ],
)
def test_cross_entropy_bad_labels(logits, labels, error, match):
    with pytest.raises(error, match=match):
        train.cross_entropy(logits, labels)


def test_cross_entropy_checks_labels_under_jit():
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"labels must be class labels: integers in \[0, 3\)"):
        eqx.filter_jit(train.cross_entropy)(jnp.zeros((2, 3)), jnp.asarray([0, 3]))


SEED_BATCHES = (jnp.zeros((2, 3, 8, 10, 4)), jnp.zeros((2, 3, 8), jnp.int32))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(models=MODEL), TypeError, "models must be a non-empty sequence of models"),
        (dict(batches=SEED_BATCHES[0]), TypeError, "batches must be a non-empty tuple of arrays"),
        (dict(batches=(SEED_BATCHES[0], SEED_BATCHES[1][:1])), ValueError, r"batches\[1\] must have shape \(runs=2, steps"),
        (dict(optimizer=optax.adam(float("nan"))), ValueError, "optimizer must give finite updates"),
        (dict(optimizer=optax.sgd(-0.1)), ValueError, "optimizer must move the parameters against the gradient"),
        (dict(loss_fn=3), TypeError, "loss_fn must be a function"),
    ],
)
def test_fit_seeds_bad_arguments(kwargs, error, match):
    args = dict(models=[MODEL, MODEL], loss_fn=LOSS, batches=SEED_BATCHES, optimizer=optax.adam(1e-2)) | kwargs
    with pytest.raises(error, match=match):
        train.fit_seeds(args.pop("models"), args.pop("loss_fn"), args.pop("batches"), **args)


def test_fit_seeds_warns_when_a_run_diverges():
    xs = SEED_BATCHES[0].at[1, 1].set(jnp.nan)
    with pytest.warns(RuntimeWarning, match=r"fit_seeds: the training loss of run 1 is nan at step 1"):
        train.fit_seeds([MODEL, MODEL], LOSS, (xs, SEED_BATCHES[1]), optimizer=optax.adam(1e-2))
