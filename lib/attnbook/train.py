"""The one training loop of the book: minibatch gradient steps inside ``jax.lax.scan``, Optax.

:func:`fit_seeds` runs the same step for several models at once (``vmap``), each on its own data; every
loss is :func:`cross_entropy` (or a mean of it).

``fit`` compiles the whole run (every step, and the test loss every ``eval_every`` steps) into one
XLA program, so a 500-step run on a few thousand sequences takes well under a second on a CPU.

Bad input is rejected before anything is trained (see the contract in :mod:`attnbook`): data that
do not share a leading size, batch sizes larger than the data, step counts that ``eval_every`` does
not divide, and optimizers whose first updates are not finite (a NaN or infinite learning rate) or
climb the loss (a negative one). Class labels out of range stop :func:`classification_loss` even
inside the compiled training program, where ``-1`` would otherwise be read as the last class and
``classes`` would give NaN.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import warnings
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float, Int, Num, PRNGKeyArray

from . import _checks


@dataclasses.dataclass(frozen=True)
class History:
    """Losses recorded during :func:`fit`.

    ``train_loss[s]``, shape ``(steps,)``, is the loss of minibatch ``s`` before its update.
    ``test_loss[i]``, shape ``(steps // eval_every,)``, is the loss on the whole test set after step
    ``test_steps[i]`` (every ``eval_every`` steps; ``None`` when no test set was given).
    """

    train_loss: np.ndarray
    test_loss: np.ndarray | None
    eval_every: int = 1

    @property
    def test_steps(self) -> np.ndarray:
        """The step counts after which ``test_loss`` was measured: eval_every, 2 * eval_every, ..."""
        count = 0 if self.test_loss is None else len(self.test_loss)
        return self.eval_every * np.arange(1, count + 1)


# --------------------------------------------------------------------------- argument checks


def _data(name: str, arrays) -> tuple[jax.Array, ...]:
    """A tuple of arrays with one leading size ``N >= 1``, as JAX arrays."""
    if not isinstance(arrays, (tuple, list)) or not arrays:
        raise TypeError(f"{name} must be a non-empty tuple of arrays such as (inputs, targets), got {_checks.describe(arrays)}")
    for i, a in enumerate(arrays):
        if np.ndim(a) < 1:
            raise ValueError(f"{name}[{i}] must have a leading axis of N examples, got {_checks.describe(a)}")
    sizes = {np.shape(a)[0] for a in arrays}
    if len(sizes) != 1:
        raise ValueError(f"{name} arrays must share their leading size N, got sizes {sorted(sizes)}")
    if sizes == {0}:
        raise ValueError(f"{name} must hold at least one example, got N=0")
    return tuple(jnp.asarray(a) for a in arrays)


def _labels(name: str, ys, logits_shape: tuple[int, ...]):
    """``ys`` (called ``name``) checked against logits of shape ``(*batch, classes)``: shape ``batch``, values in ``[0, classes)``.

    A shape mismatch would broadcast (labels ``(N, 1)`` against predictions ``(N,)`` compare every
    prediction with every label); ``-1`` would pick the last class and ``classes`` give NaN. Returns
    ``ys``: use it, so that under ``jit`` the value check stays in the program.
    """
    if tuple(ys.shape) != tuple(logits_shape[:-1]):
        raise ValueError(f"{name} must have the shape of the logits {tuple(logits_shape)} without their class axis, "
                         f"{tuple(logits_shape[:-1])}, got {tuple(ys.shape)}")
    classes = logits_shape[-1]
    return _checks.values(name, ys, (ys < 0) | (ys >= classes), f"class labels: integers in [0, {classes})")


@eqx.filter_jit
def _optimizer_probe(optimizer, params):
    """Two updates from zero parameters with all-one gradients: are they finite, and do they descend?

    Any working optimizer's update has a negative dot product with a positive gradient (zero
    parameters keep weight decay out of it); a NaN or infinite learning rate makes it non-finite, a
    negative one positive. Returns ``(finite, (dot of update 1, dot of update 2))``.
    """
    zeros = jax.tree.map(jnp.zeros_like, params)
    ones = jax.tree.map(jnp.ones_like, params)
    state = optimizer.init(zeros)
    first, state = optimizer.update(ones, state, zeros)
    second, _ = optimizer.update(ones, state, zeros)
    leaves = jax.tree.leaves((first, second))
    finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(u)) for u in leaves]))
    dots = [sum(jnp.sum(u) for u in jax.tree.leaves(update)) for update in (first, second)]
    return finite, jnp.stack(dots)


def _check_optimizer(optimizer, params) -> None:
    if not (hasattr(optimizer, "init") and hasattr(optimizer, "update")):
        raise TypeError(f"optimizer must be an Optax GradientTransformation such as optax.adam(1e-2), "
                        f"got {_checks.describe(optimizer)}")
    finite, dots = _optimizer_probe(optimizer, params)
    if not bool(finite):
        raise ValueError("optimizer must give finite updates for finite gradients, got NaN or infinite ones "
                         "(a NaN or infinite learning rate?)")
    if np.any(np.asarray(dots) > 0):
        raise ValueError("optimizer must move the parameters against the gradient, got updates along it "
                         "(a negative learning rate?)")


# --------------------------------------------------------------------------- robustness hook

NUDGE_VARIABLE = "ATTNBOOK_NUDGE"


def nudged(params):
    """``params`` as they are, or moved by one ulp when ``$ATTNBOOK_NUDGE`` asks for it (tests only).

    Another CPU (AVX2 or AVX-512, Intel or AMD or ARM), another thread count or another XLA build
    changes the last bits of a computation, and a training run amplifies them. ``tools.robustness``
    reproduces that on one machine by setting ``ATTNBOOK_NUDGE=up`` (or ``down``): every
    floating-point array that :func:`fit` (or chapter 8's training over seeds) starts from is then moved to the next
    representable number above (below) it, the smallest change there is. An output that changes under
    it would change on a reader's machine. Readers never set it; with the variable unset or empty
    this returns ``params`` itself.
    """
    direction = os.environ.get(NUDGE_VARIABLE, "")
    if not direction:
        return params
    if direction not in ("up", "down"):
        raise ValueError(f"${NUDGE_VARIABLE} must be 'up', 'down' or empty, got {direction!r}")
    target = jnp.inf if direction == "up" else -jnp.inf
    return jax.tree.map(lambda p: jnp.nextafter(p, jnp.asarray(target, p.dtype)) if eqx.is_inexact_array(p) else p,
                        params)


# --------------------------------------------------------------------------- training


def minibatch_indices(key: PRNGKeyArray, num_examples: int, batch_size: int, steps: int) -> Int[Array, "steps batch_size"]:
    """Indices of ``steps`` minibatches, shape ``(steps, batch_size)``.

    Each epoch is a fresh permutation of the data cut into ``num_examples // batch_size`` batches
    (the remainder of an epoch is dropped), so every example is seen once per epoch; hence
    ``batch_size <= num_examples``.
    """
    key = _checks.prng_key("key", key)
    num_examples = _checks.positive_int("num_examples", num_examples)
    batch_size = _checks.positive_int("batch_size", batch_size)
    steps = _checks.positive_int("steps", steps)
    if batch_size > num_examples:
        raise ValueError(f"batch_size must be at most the number of examples N={num_examples}, got {batch_size}")
    return _minibatch_indices(key, num_examples, batch_size, steps)


# One small program, not a dozen eager ops. It is compiled anew for every data-set size, and XLA's
# backend optimisations buy nothing on these integer shuffles (the indices are the same without
# them) while costing a third of the compile time: off.
@functools.partial(jax.jit, static_argnums=(1, 2, 3), compiler_options={"xla_backend_optimization_level": 0})
def _minibatch_indices(key, num_examples, batch_size, steps):
    per_epoch = num_examples // batch_size
    epochs = -(-steps // per_epoch)  # ceil
    perms = jax.vmap(lambda k: jax.random.permutation(k, num_examples))(jax.random.split(key, epochs))
    batches = perms[:, : per_epoch * batch_size].reshape(epochs * per_epoch, batch_size)
    return batches[:steps]


def fit(
    model: eqx.Module,
    loss_fn: Callable[..., jax.Array],
    train_data: tuple,
    *,
    optimizer: optax.GradientTransformation,
    steps: int,
    batch_size: int,
    key: PRNGKeyArray,
    test_data: tuple | None = None,
    eval_every: int = 1,
) -> tuple[eqx.Module, History]:
    """Train ``model`` for ``steps`` minibatch steps and return it with its loss history.

    Args:
        model: any Equinox module; its floating-point array leaves are trained, everything else is kept.
        loss_fn: ``loss_fn(model, *batch) -> scalar``, e.g. from :func:`classification_loss`.
        train_data: a tuple of arrays with the same leading size ``N >= 1`` (inputs, targets, ...).
        optimizer: an Optax transformation, e.g. ``optax.adam(1e-2)``; its first two updates must be
            finite and descend (rejects a NaN, infinite or negative learning rate).
        steps: number of gradient steps.
        batch_size: examples per step, at most ``N``.
        key: PRNG key for the minibatch order, e.g. ``jax.random.key(1)``.
        test_data: optional tuple like ``train_data`` (as many arrays, its own ``N``); its loss is
            recorded every ``eval_every`` steps.
        eval_every: how often to evaluate the test loss; must divide ``steps``.

    A run whose training loss becomes NaN or infinite (a diverging learning rate, NaN in the data)
    returns what it reached, with a ``RuntimeWarning`` that names the first such step.
    """
    _checks.function("loss_fn", loss_fn)
    steps = _checks.positive_int("steps", steps)
    batch_size = _checks.positive_int("batch_size", batch_size)
    key = _checks.prng_key("key", key)
    train_data = _data("train_data", train_data)
    num_examples = train_data[0].shape[0]
    eval_every = _checks.positive_int("eval_every", eval_every)
    if steps % eval_every:
        raise ValueError(f"eval_every must divide steps={steps}, got {eval_every}")
    if batch_size > num_examples:
        raise ValueError(f"batch_size must be at most the number of examples N={num_examples}, got {batch_size}")
    if test_data is not None:
        test_data = _data("test_data", test_data)
        if len(test_data) != len(train_data):
            raise ValueError(f"test_data must hold as many arrays as train_data ({len(train_data)}), got {len(test_data)}")
    # Only floating-point leaves are trained; integer and boolean arrays (masks, indices) ride along.
    params, static = eqx.partition(model, eqx.is_inexact_array)
    if not jax.tree.leaves(params):
        raise ValueError(f"model must have floating-point arrays to train, got none in {type(model).__name__}")
    _check_optimizer(optimizer, params)
    params = nudged(params)  # every training start goes through the robustness hook
    indices = _minibatch_indices(key, num_examples, batch_size, steps).reshape(-1, eval_every, batch_size)
    # Gathering the minibatches before the training program (memory: steps x batch_size examples,
    # small in this book) makes that program independent of N, so runs on data sets of different
    # sizes share one compilation.
    batches = _gather(train_data, indices)
    params, train_loss, test_loss = _run(params, static, loss_fn, optimizer, batches, test_data)
    history = History(np.asarray(train_loss), None if test_data is None else np.asarray(test_loss), eval_every)
    _warn_if_diverged("fit", history.train_loss[None])
    return eqx.combine(params, static), history


def _warn_if_diverged(caller: str, losses: np.ndarray) -> None:
    """A ``RuntimeWarning`` naming the first step (of the first run) whose training loss is NaN or infinite."""
    bad = ~np.isfinite(losses)  # (runs, steps)
    if bad.any():
        run, first = (int(i) for i in np.argwhere(bad)[0])
        which = f" of run {run}" if losses.shape[0] > 1 else ""
        warnings.warn(f"{caller}: the training loss{which} is {losses[run, first]} at step {first} (of {losses.shape[1]}); "
                      "the returned model is not trained (a learning rate too large, or NaN in the data?)",
                      RuntimeWarning, stacklevel=3)


def fit_seeds(
    models,
    loss_fn: Callable[..., jax.Array],
    batches: tuple,
    *,
    optimizer: optax.GradientTransformation,
) -> tuple[eqx.Module, np.ndarray]:
    """:func:`fit`'s training step for several models at once: ``vmap`` over models, ``lax.scan`` over steps.

    Args:
        models: a sequence of Equinox modules of one structure (e.g. one per initialisation seed).
        loss_fn: ``loss_fn(model, *batch) -> scalar``, as for :func:`fit`.
        batches: a tuple of arrays of shape ``(runs, steps, batch, ...)``: model ``r`` trains at step ``s``
            on ``tuple(a[r, s] for a in batches)`` (each run its own data, drawn beforehand).
        optimizer: an Optax transformation, checked as in :func:`fit`.

    Returns the trained models stacked (every array with a leading axis of ``runs``; take one with
    :func:`select`) and the training losses ``(runs, steps)``. Every start goes through :func:`nudged`,
    and a run whose loss becomes NaN or infinite gets :func:`fit`'s warning.
    """
    _checks.function("loss_fn", loss_fn)
    if isinstance(models, eqx.Module) or not isinstance(models, (list, tuple)) or not models:
        raise TypeError(f"models must be a non-empty sequence of models, got {_checks.describe(models)}")
    if not isinstance(batches, (tuple, list)) or not batches:
        raise TypeError(f"batches must be a non-empty tuple of arrays such as (inputs, targets), got {_checks.describe(batches)}")
    batches = tuple(jnp.asarray(b) for b in batches)
    for i, b in enumerate(batches):
        if b.ndim < 2 or b.shape[:2] != batches[0].shape[:2] or b.shape[0] != len(models):
            raise ValueError(f"batches[{i}] must have shape (runs={len(models)}, steps, ...) like batches[0] "
                             f"{tuple(batches[0].shape)}, got {tuple(b.shape)}")
    if batches[0].shape[1] == 0:
        raise ValueError(f"batches must hold at least one step, got shape {tuple(batches[0].shape)}")
    parts = [eqx.partition(m, eqx.is_inexact_array) for m in models]
    static = parts[0][1]
    if not jax.tree.leaves(parts[0][0]):
        raise ValueError(f"models must have floating-point arrays to train, got none in {type(models[0]).__name__}")
    _check_optimizer(optimizer, parts[0][0])
    params = jax.tree.map(lambda *a: jnp.stack(a), *[p for p, _ in parts])
    params, losses = _run_seeds(nudged(params), static, loss_fn, optimizer, batches)
    losses = np.asarray(losses)
    _warn_if_diverged("fit_seeds", losses)
    return eqx.combine(params, static), losses


def select(models, index: int):
    """Model ``index`` out of the stacked models that :func:`fit_seeds` returns."""
    index = _checks.nonnegative_int("index", index)
    return jax.tree.map(lambda a: a[index] if eqx.is_array(a) else a, models)


@jax.jit
def _gather(train_data, indices):
    """``(steps // eval_every, eval_every, batch_size, ...)`` minibatches of every array."""
    return tuple(a[indices] for a in train_data)


def training_step(static, loss_fn, optimizer):
    """The one training step of the book, ``step((params, opt_state), batch) -> (carry, loss)``, and the loss of params."""

    def loss_of(params, *batch):
        return loss_fn(eqx.combine(params, static), *batch)

    def step(carry, batch):
        params, opt_state = carry
        loss, grads = jax.value_and_grad(loss_of)(params, *batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return (params, opt_state), loss

    return step, loss_of


@_checks.jit
def _run(params, static, loss_fn, optimizer, batches, test_data):
    step, loss_of = training_step(static, loss_fn, optimizer)

    def steps_then_test(carry, chunk):  # chunk: eval_every minibatches
        carry, losses = jax.lax.scan(step, carry, chunk)
        test = loss_of(carry[0], *test_data) if test_data is not None else jnp.zeros(())
        return carry, (losses, test)

    init = (params, optimizer.init(params))
    (params, _), (train_loss, test_loss) = jax.lax.scan(steps_then_test, init, batches)
    return params, train_loss.reshape(-1), test_loss


@_checks.jit
def _run_seeds(params, static, loss_fn, optimizer, batches):
    step, _ = training_step(static, loss_fn, optimizer)

    def one(params, batches):  # batches: (steps, batch, ...) arrays of one run
        (params, _), losses = jax.lax.scan(step, (params, optimizer.init(params)), batches)
        return params, losses

    if batches[0].shape[0] == 1:  # one run: vmap over a size-1 axis would only batch every matmul (1.7x slower on CPU)
        params, losses = one(*jax.tree.map(lambda a: a[0], (params, batches)))
        return jax.tree.map(lambda a: a[None], (params, losses))
    return jax.vmap(one)(params, batches)


# --------------------------------------------------------------------------- classification


def classification_loss(logits_fn: Callable[[eqx.Module, jax.Array], jax.Array]):
    """Mean cross-entropy (negative log-likelihood in nats) of integer targets.

    ``logits_fn(model, x)`` maps one example to logits of shape ``(*batch, classes)`` (``(classes,)``
    for one prediction per example, ``(T, classes)`` for one per position); the returned
    ``loss(model, xs, ys)`` takes ``xs`` of shape ``(N, ...)`` and labels ``ys`` of shape
    ``(N, *batch)`` in ``[0, classes)``, and averages over all of them. Labels out of range are an
    error, also inside :func:`fit`'s compiled program (``equinox.error_if``: one comparison per label).
    """
    _checks.function("logits_fn", logits_fn)
    try:  # the same logits_fn gives the same loss function, so fit traces and compiles its program once
        return _classification_loss(logits_fn)
    except TypeError:  # an unhashable callable: a loss of its own
        return _classification_loss.__wrapped__(logits_fn)


@functools.cache
def _classification_loss(logits_fn):
    @_checks.shaped
    def loss(model, xs: Num[Array, "N ..."], ys: Int[Array, "N *batch"]) -> Float[Array, ""]:
        logits = jax.vmap(lambda x: logits_fn(model, x))(xs)
        return cross_entropy(logits, _labels("ys", ys, logits.shape)).mean()

    return loss


@_checks.shaped
def cross_entropy(logits: Float[Array, "*batch classes"], labels: Int[Array, "*batch"]) -> Float[Array, "*batch"]:
    """Cross-entropy (negative log-likelihood, nats) of integer ``labels`` under ``logits``, one per label.

    The one loss of the book: :func:`classification_loss`, the Transformer's ``sequence_loss`` (chapter 7)
    and chapter 8's per-position losses are its mean or its average over sequences. ``labels`` must lie in
    ``[0, classes)``, also under ``jit`` (``-1`` is never the last class).
    """
    labels = _labels("labels", labels, logits.shape)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels)


@_checks.shaped
def accuracy(
    logits_fn: Callable[[eqx.Module, jax.Array], jax.Array], model: eqx.Module, xs: Num[Array, "N ..."],
    ys: Int[Array, "N *batch"],
) -> float:
    """Fraction of predictions (most likely class) equal to the target, over all examples.

    ``logits_fn`` as in :func:`classification_loss`; ``ys`` has the shape of the logits without
    their class axis, ``(N, *batch)``, and holds labels in ``[0, classes)``. A prediction whose
    logits hold a NaN (a diverged model) has no most likely class: the accuracy is then NaN, not the
    hit rate of ``argmax``'s arbitrary pick.
    """
    _checks.function("logits_fn", logits_fn)
    xs, ys = jnp.asarray(xs), jnp.asarray(ys)
    if xs.shape[0] == 0:
        raise ValueError(f"xs must hold at least one example, got shape {tuple(xs.shape)}")
    logits = eqx.filter_eval_shape(_logits, logits_fn, model, xs)  # shape only: nothing is computed
    ys = _labels("ys", ys, logits.shape)
    return float(_accuracy(logits_fn, model, xs, ys))


def _logits(logits_fn, model, xs):
    return jax.vmap(lambda x: logits_fn(model, x))(xs)


@_checks.jit
def _accuracy(logits_fn, model, xs, ys):
    logits = jax.vmap(lambda x: logits_fn(model, x))(xs)
    hits = (jnp.argmax(logits, axis=-1) == ys).astype(jnp.float32)
    return jnp.mean(jnp.where(jnp.isnan(logits).any(axis=-1), jnp.nan, hits))
