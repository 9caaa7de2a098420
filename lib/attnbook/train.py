"""The one training loop of the book: minibatch gradient steps inside ``jax.lax.scan``, Optax.

``fit`` compiles the whole run (every step, and the test loss after every step) into one XLA
program, so a 500-step run on a few thousand sequences takes well under a second on a CPU.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import _checks


@dataclasses.dataclass(frozen=True)
class History:
    """Losses recorded during :func:`fit`: one entry per step, shape ``(steps,)``.

    ``train_loss[s]`` is the loss of minibatch ``s`` before its update. ``test_loss[i]`` is the loss
    on the whole test set after step ``test_steps[i]`` (every ``eval_every`` steps; ``None`` when no
    test set was given).
    """

    train_loss: np.ndarray
    test_loss: np.ndarray | None
    eval_every: int = 1

    @property
    def test_steps(self) -> np.ndarray:
        """The step counts after which ``test_loss`` was measured: eval_every, 2 * eval_every, ..."""
        count = 0 if self.test_loss is None else len(self.test_loss)
        return self.eval_every * np.arange(1, count + 1)


@functools.partial(jax.jit, static_argnums=(1, 2, 3))  # one small program, not a dozen eager ops
def minibatch_indices(key: jax.Array, num_examples: int, batch_size: int, steps: int) -> jax.Array:
    """Indices of ``steps`` minibatches, shape ``(steps, batch_size)``.

    Each epoch is a fresh permutation of the data cut into ``num_examples // batch_size`` batches
    (the remainder of an epoch is dropped), so every example is seen once per epoch.
    """
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
    key: jax.Array,
    test_data: tuple | None = None,
    eval_every: int = 1,
) -> tuple[eqx.Module, History]:
    """Train ``model`` for ``steps`` minibatch steps and return it with its loss history.

    Args:
        model: any Equinox module; its floating-point array leaves are trained, everything else is kept.
        loss_fn: ``loss_fn(model, *batch) -> scalar``, e.g. from :func:`classification_loss`.
        train_data: a tuple of arrays with the same leading size ``N`` (inputs, targets, ...).
        optimizer: an Optax transformation, e.g. ``optax.adam(1e-2)``.
        steps: number of gradient steps.
        batch_size: examples per step, at most ``N``.
        key: PRNG key for the minibatch order.
        test_data: optional tuple like ``train_data``; its loss is recorded every ``eval_every`` steps.
        eval_every: how often to evaluate the test loss; must divide ``steps``.
    """
    steps = _checks.positive_int("steps", steps)
    batch_size = _checks.positive_int("batch_size", batch_size)
    sizes = {np.shape(a)[0] for a in train_data}
    if len(sizes) != 1:
        raise ValueError(f"train_data arrays must share their leading size N, got sizes {sorted(sizes)}")
    (num_examples,) = sizes
    eval_every = _checks.positive_int("eval_every", eval_every)
    if steps % eval_every:
        raise ValueError(f"eval_every must divide steps={steps}, got {eval_every}")
    if batch_size > num_examples:
        raise ValueError(f"batch_size must be at most the number of examples N={num_examples}, got {batch_size}")
    train_data = tuple(jnp.asarray(a) for a in train_data)
    test_data = None if test_data is None else tuple(jnp.asarray(a) for a in test_data)
    # Only floating-point leaves are trained; integer and boolean arrays (masks, indices) ride along.
    params, static = eqx.partition(model, eqx.is_inexact_array)
    indices = minibatch_indices(key, num_examples, batch_size, steps).reshape(-1, eval_every, batch_size)
    # Gathering the minibatches before the training program (memory: steps x batch_size examples,
    # small in this book) makes that program independent of N, so runs on data sets of different
    # sizes share one compilation.
    batches = _gather(train_data, indices)
    params, train_loss, test_loss = _run(params, static, loss_fn, optimizer, batches, test_data)
    history = History(np.asarray(train_loss), None if test_data is None else np.asarray(test_loss), eval_every)
    return eqx.combine(params, static), history


@jax.jit
def _gather(train_data, indices):
    """``(steps // eval_every, eval_every, batch_size, ...)`` minibatches of every array."""
    return tuple(a[indices] for a in train_data)


@eqx.filter_jit
def _run(params, static, loss_fn, optimizer, batches, test_data):
    def loss_of(params, *batch):
        return loss_fn(eqx.combine(params, static), *batch)

    def step(carry, batch):
        params, opt_state = carry
        loss, grads = jax.value_and_grad(loss_of)(params, *batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return (params, opt_state), loss

    def steps_then_test(carry, chunk):  # chunk: eval_every minibatches
        carry, losses = jax.lax.scan(step, carry, chunk)
        test = loss_of(carry[0], *test_data) if test_data is not None else jnp.zeros(())
        return carry, (losses, test)

    init = (params, optimizer.init(params))
    (params, _), (train_loss, test_loss) = jax.lax.scan(steps_then_test, init, batches)
    return params, train_loss.reshape(-1), test_loss


def classification_loss(logits_fn: Callable[[eqx.Module, jax.Array], jax.Array]):
    """Mean cross-entropy (negative log-likelihood in nats) of integer targets.

    ``logits_fn(model, x)`` maps one example to logits of shape ``(classes,)``; the returned
    ``loss(model, xs, ys)`` averages over the leading (batch) axis.
    """

    def loss(model, xs, ys):
        logits = jax.vmap(lambda x: logits_fn(model, x))(xs)
        return optax.softmax_cross_entropy_with_integer_labels(logits, ys).mean()

    return loss


def accuracy(logits_fn: Callable[[eqx.Module, jax.Array], jax.Array], model: eqx.Module, xs, ys) -> float:
    """Fraction of predictions (most likely class) equal to the target, over all examples."""
    return float(_accuracy(logits_fn, model, jnp.asarray(xs), jnp.asarray(ys)))


@eqx.filter_jit
def _accuracy(logits_fn, model, xs, ys):
    logits = jax.vmap(lambda x: logits_fn(model, x))(xs)
    return jnp.mean(jnp.argmax(logits, axis=-1) == ys)
