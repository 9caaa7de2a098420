"""The basic layers every chapter builds on: one initialiser, ``Dense``, the feed-forward layer, parameter counts.

Shared by the chapters (no chapter's module is needed to import it): :func:`init` turns a key into weights for
every layer of the book, :class:`Dense` is ``x W + b`` on rows of tokens, :class:`FeedForward` the position-wise
two-layer network of the Transformer, :func:`count_parameters` counts the trainable numbers of any model, and
:func:`split` derives independent keys.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from . import _checks

SCHEMES = ("uniform", "normal", "fan-in", "glorot")
"""The initialisation schemes of :func:`init`."""


def split(key: jax.Array, n: int) -> list:
    """``n`` independent keys derived from ``key`` (``fold_in`` compiles once for every ``n``, ``split`` does not)."""
    return [jax.random.fold_in(key, i) for i in range(n)]


def _is_shape(shape) -> bool:
    return isinstance(shape, tuple) and all(isinstance(s, (int, np.integer)) for s in shape)


def _limit(scheme: str, scale: float, fan_in, fan_out) -> float:
    if scheme == "glorot":
        return float(np.sqrt(6.0 / (fan_in + fan_out)))
    return scale


def init(key: jax.Array, shape, scheme: str = "uniform", *, scale: float = 1.0, fan_in=None, fan_out=None,
         generator: str = "numpy"):
    """Initial weights of ``shape`` drawn from ``key``: the one way the book turns a key into weights.

    Schemes:

    - ``"uniform"``: ``scale * Uniform(-1, 1)``; ``"normal"``: ``scale * Normal(0, 1)``;
    - ``"fan-in"``: ``Uniform(-1/sqrt(fan_in), 1/sqrt(fan_in))``, the default of ``equinox.nn.Linear``;
    - ``"glorot"``: ``Uniform(-sqrt(6 / (fan_in + fan_out)), +sqrt(...))``, the default of Keras.

    ``shape`` is one shape (returns one array) or a tuple of shapes (returns a tuple of arrays, drawn one
    after the other; ``fan_in`` and ``fan_out`` are then sequences, one per shape, or one number for all).

    ``generator="numpy"`` (the default): with a concrete key the numbers come from NumPy's generator seeded
    with the key's data, so no random-number kernel is compiled for every new layer shape (``jax.random``
    compiles one per shape, about a second each on a small CPU); under ``jit`` or ``vmap`` (a traced key),
    ``jax.random`` is used, with one split key per shape. ``generator="jax"``: always ``jax.random``, every
    shape of one call in one compiled program (chapter 2's self-attention, whose published runs used it).
    """
    key = _checks.prng_key("key", key)
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    if generator not in ("numpy", "jax"):
        raise ValueError(f"generator must be 'numpy' or 'jax', got {generator!r}")
    single = _is_shape(shape)
    shapes = (shape,) if single else tuple(shape)
    if not shapes or not all(_is_shape(s) for s in shapes):
        raise TypeError(f"shape must be a tuple of integers or a tuple of such tuples, got {_checks.describe(shape)}")
    per = lambda x: tuple(x) if isinstance(x, (tuple, list)) else (x,) * len(shapes)
    fans_in, fans_out = per(fan_in), per(fan_out)
    if scheme in ("fan-in", "glorot"):
        for name, fans in (("fan_in", fans_in), ("fan_out", fans_out)):
            if name == "fan_out" and scheme == "fan-in":
                continue
            if len(fans) != len(shapes):
                raise ValueError(f"{name} must give one fan per shape ({len(shapes)}), got {len(fans)}")
            for f in fans:
                _checks.positive_int(name, f)
    shapes = tuple(tuple(int(s) for s in sh) for sh in shapes)
    if generator == "jax" or not _checks.is_concrete(key):
        out = _jax_draw(key, shapes, scheme, float(scale), fans_in, fans_out)
    else:
        data = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
        rng = np.random.default_rng(np.asarray(data).ravel().tolist())
        out = []
        for sh, f_in, f_out in zip(shapes, fans_in, fans_out):
            if scheme == "normal":
                numbers = scale * rng.standard_normal(sh)
            elif scheme == "fan-in":
                numbers = (1.0 / np.sqrt(f_in)) * rng.uniform(-1.0, 1.0, size=sh)
            else:
                limit = _limit(scheme, scale, f_in, f_out)
                numbers = rng.uniform(-limit, limit, size=sh) if scheme == "glorot" else limit * rng.uniform(-1.0, 1.0, size=sh)
            out.append(jnp.asarray(numbers, dtype=jnp.float32))
        out = tuple(out)
    return out[0] if single else out


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4, 5))
def _jax_draw(key, shapes, scheme, scale, fans_in, fans_out):
    """:func:`init` with ``jax.random``, jitted as a whole (drawn eagerly, every new shape compiles its own kernel)."""
    keys = [key] if len(shapes) == 1 else jax.random.split(key, len(shapes))
    out = []
    for k, sh, f_in, f_out in zip(keys, shapes, fans_in, fans_out):
        if scheme == "normal":
            out.append(scale * jax.random.normal(k, sh))
        elif scheme == "fan-in":
            out.append(jax.random.uniform(k, sh, minval=-1.0, maxval=1.0) / jnp.sqrt(f_in))
        elif scheme == "glorot":
            limit = _limit(scheme, scale, f_in, f_out)
            out.append(jax.random.uniform(k, sh, minval=-limit, maxval=limit))
        else:
            out.append(scale * jax.random.uniform(k, sh, minval=-1.0, maxval=1.0))
    return tuple(out)


def features(name: str, x, expected: int, axis: str) -> None:
    """Raise unless the last axis of ``x`` has ``expected`` entries (a size fixed by a layer, not by an argument)."""
    if x.shape[-1] != expected:
        raise ValueError(f"{name} must have {axis}={expected} features in its last axis, got shape {tuple(x.shape)}")


def max_rows(name: str, x, max_len: int) -> None:
    """Raise unless ``x`` has at most ``max_len`` positions (its first axis): a layer's learned positions."""
    if x.shape[0] > max_len:
        raise ValueError(f"{name} must have at most max_len={max_len} positions (first axis), "
                         f"got shape {tuple(x.shape)}")


class Dense(eqx.Module):
    """``x W + b`` on the last axis, rows as tokens; ``"fan-in"`` initialisation (uniform within
    ``±1/sqrt(d_in)``, the default of ``equinox.nn.Linear``). ``W`` has shape ``(d_in, d_out)``."""

    weight: jax.Array
    bias: jax.Array

    def __init__(self, d_in: int, d_out: int, *, key: jax.Array):
        d_in = _checks.positive_int("d_in", d_in)
        d_out = _checks.positive_int("d_out", d_out)
        w_key, b_key = split(_checks.prng_key("key", key), 2)
        self.weight = init(w_key, (d_in, d_out), "fan-in", fan_in=d_in)
        self.bias = init(b_key, (d_out,), "fan-in", fan_in=d_in)

    @_checks.shaped
    def __call__(self, x: Float[Array, "*batch d_in"]) -> Float[Array, "*batch d_out"]:
        features("x", x, self.weight.shape[0], "d_in")
        return x @ self.weight + self.bias


ACTIVATIONS: dict[str, Callable] = {"relu": jax.nn.relu, "gelu": jax.nn.gelu}
"""The feed-forward layer's activations by name."""


class FeedForward(eqx.Module):
    """The position-wise feed-forward layer: ``act(x W1 + b1) W2 + b2`` on every row of ``x (T, d_model)``.

    The same two-layer network is applied to each token on its own; it mixes features, never tokens.
    ``activation`` is ``"relu"`` (the Transformer paper's ``max(0, .)``, the default) or ``"gelu"``.
    """

    hidden: Dense
    project: Dense
    activation: str = eqx.field(static=True)

    def __init__(self, d_model: int, d_hidden: int, *, activation: str = "relu", key: jax.Array):
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {tuple(ACTIVATIONS)}, got {activation!r}")
        k1, k2 = split(_checks.prng_key("key", key), 2)
        self.hidden = Dense(d_model, d_hidden, key=k1)
        self.project = Dense(d_hidden, d_model, key=k2)
        self.activation = activation

    @_checks.shaped
    @_checks.compiled_when_eager
    def __call__(self, x: Float[Array, "*batch d_model"]) -> Float[Array, "*batch d_model"]:
        """``x (T, d_model) -> (T, d_model)``."""
        features("x", x, self.hidden.weight.shape[0], "d_model")
        return self.project(ACTIVATIONS[self.activation](self.hidden(x)))


class Block(eqx.Module):
    """One Transformer block: a token mixer, optional cross-attention, an optional feed-forward layer.

    Each sub-layer sits in a residual connection with a LayerNorm, placed as in the original paper
    (post-LN, ``x = LN(x + f(x))``) or before the sub-layer (pre-LN, ``x = x + f(LN(x))``, the default).
    The one block of the book: chapter 5's next-token model (pre-LN, GELU), chapter 7's encoder and decoder
    (pre- or post-LN, ReLU, cross-attention in the decoder) and chapter 8's models are all built of it.

    Args:
        mixer: the token mixer, any module ``(T, d_model) -> (T, d_model)``.
        d_model: features per token.
        cross: optional cross-attention, ``cross(x, memory, memory) -> (out, weights)`` (a
            :class:`attnbook.mha.MultiHeadAttention`); the block then needs ``memory``.
        feed_forward: include the feed-forward layer (width ``ff_ratio * d_model``, ``activation``).
        pre_norm: LayerNorm before each sub-layer (pre-LN) if True, after its residual sum (post-LN) if False.
        residual: add each sub-layer's input to its output; False removes every residual connection.
        key: PRNG key of the feed-forward layer (the mixer and cross-attention come built).
    """

    mixer: eqx.Module
    cross: eqx.Module | None
    feed_forward: FeedForward | None
    norms: tuple
    pre_norm: bool = eqx.field(static=True)
    residual: bool = eqx.field(static=True)

    def __init__(self, mixer: eqx.Module, d_model: int, *, cross: eqx.Module | None = None, feed_forward: bool = True,
                 ff_ratio: int = 4, activation: str = "relu", pre_norm: bool = True, residual: bool = True,
                 key: jax.Array):
        d_model = _checks.positive_int("d_model", d_model)
        ff_ratio = _checks.positive_int("ff_ratio", ff_ratio)
        feed_forward = _checks.flag("feed_forward", feed_forward)
        key = _checks.prng_key("key", key)
        self.mixer = _checks.function("mixer", mixer)
        self.cross = cross
        self.feed_forward = (FeedForward(d_model, ff_ratio * d_model, activation=activation, key=key)
                             if feed_forward else None)
        self.norms = tuple(eqx.nn.LayerNorm(d_model) for _ in range(1 + (cross is not None) + feed_forward))
        self.pre_norm, self.residual = _checks.flag("pre_norm", pre_norm), _checks.flag("residual", residual)

    def _sublayer(self, norm, f, x):
        """One sub-layer ``f`` with its residual connection and LayerNorm, pre- or post-LN."""
        layer_norm = jax.vmap(norm)  # LayerNorm normalises each token (row) on its own
        if self.pre_norm:
            y = f(layer_norm(x))
            return x + y if self.residual else y
        y = f(x)
        return layer_norm(x + y if self.residual else y)

    def cross_attend(self, x, memory):
        """Cross-attention alone: queries from ``x (T, d_model)``, keys and values from ``memory (S, d_model)``.

        Returns ``(out (T, d_model), weights (heads, T, S))``.
        """
        if self.cross is None:
            raise ValueError("cross_attend needs a block built with cross-attention")
        return self.cross(x, memory, memory)

    @_checks.shaped
    @_checks.compiled_when_eager
    def __call__(self, x: Float[Array, "T d_model"], memory: Float[Array, "S d_model"] | None = None,
                 **mixer_options) -> Float[Array, "T d_model"]:
        """``x (T, d_model)``, and for a block with cross-attention the encoder's output ``memory (S, d_model)``.

        ``mixer_options`` go to the mixer (e.g. ``bias=`` and ``process_heads=`` of multi-head self-attention).
        """
        features("x", x, self.norms[0].weight.shape[-1], "d_model")
        if (memory is None) != (self.cross is None):
            raise ValueError("memory must be given exactly when the block has cross-attention, "
                             f"got memory={'None' if memory is None else tuple(memory.shape)}")
        norms = iter(self.norms)
        x = self._sublayer(next(norms), lambda h: self.mixer(h, **mixer_options), x)
        if self.cross is not None:
            x = self._sublayer(next(norms), lambda h: self.cross_attend(h, memory)[0], x)
        if self.feed_forward is not None:
            x = self._sublayer(next(norms), self.feed_forward, x)
        return x


def count_parameters(model) -> int:
    """Number of trainable (floating-point) numbers in ``model``, any Equinox module or pytree."""
    return int(sum(x.size for x in jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))))


__all__ = ["SCHEMES", "split", "init", "max_rows", "Dense", "ACTIVATIONS", "FeedForward", "Block", "count_parameters"]
