"""Chapter 5: the Attention Free Transformer (AFT) of Zhai et al. (2021), exact and numerically stable.

All four variants of the paper, on single sequences (``jax.vmap`` adds a batch axis), rows as tokens:

``aft_full``    Eq. 2:  ``Y_t = sigmoid(Q_t) * sum_t' exp(K_t' + w[t, t']) V_t' / sum_t' exp(K_t' + w[t, t'])``
``aft_local``   Eq. 4:  the same with ``w[t, t']`` kept where ``|t - t'| < window`` and 0 (not -inf) elsewhere
``aft_simple``  Eq. 5:  no position bias: ``sigmoid(Q_t) * sum_t' softmax_over_time(K)_t' * V_t'``
``aft_conv``    Eq. 6:  per head, a bias that depends only on the offset ``t - t'``, within a window

Every product and division is element-wise: channel ``c`` of ``Y_t`` averages channel ``c`` of the values
with its own weights, so AFT is attention with as many heads as channels, each head's weights being
``softmax_t'(K[t', c] + w[t, t'])``. With ``causal=True`` the sums run over ``t' <= t`` only.

Numerical stability. Each weight is ``exp(K_t' + w[t, t'])``; with keys or biases of size 1000 the
exponential overflows in any precision. Every function here divides numerator and denominator by
``exp(M)``, with ``M`` the largest exponent *of that row and channel among the visible terms*, so the
largest term is exactly 1, nothing overflows, the denominator is at least 1, and the result is exact
to rounding, whatever the sizes of ``K`` and ``w``. A shift by "the maximum of K plus the maximum of w"
is not enough: when the largest key meets a very negative bias, every term of a row can underflow to 0.
Causal sums keep a running maximum (a log-sum-exp scan). No function builds a ``T x T`` array except
``aft_full``, whose bias ``w`` is ``T x T`` already; it works in blocks of rows, so its extra memory is
``O(T d)`` per block.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import _checks, masking
from .attention import scaled_dot_product_attention

ROW_BLOCK = 64
"""Rows of AFT-full computed at once: its temporary memory is ``ROW_BLOCK * T * d`` numbers."""

VARIANTS = ("aft-full", "aft-local", "aft-simple", "aft-conv")


# ---------------------------------------------------------------------------------------------
# Argument checks


def _check_qkv(q, k, v) -> tuple[int, int]:
    """q, k, v must all be ``(T, d)`` with the same T and d; returns ``(T, d)``."""
    _checks.ndim("q", q, 2, "(T, d)")
    _checks.shape("k", k, q.shape, "(T, d) like q")
    _checks.shape("v", v, q.shape, "(T, d) like q")
    return q.shape


def _check_bias(w, length: int) -> None:
    _checks.shape("w", w, (length, length), "(T, T)")


# ---------------------------------------------------------------------------------------------
# Stable building blocks


def _running_sums(k, v, reverse: bool = False):
    """Stable prefix (or suffix) sums over time: for every ``t``, over ``t' <= t`` (``t' >= t`` if reverse),

    ``m[t] = max K[t']``, ``num[t] = sum exp(K[t'] - m[t]) V[t']``, ``den[t] = sum exp(K[t'] - m[t])``.

    ``k`` has shape ``(T, H, 1)`` and ``v`` ``(T, H, G)``: one key per head, shared by its G channels.
    A scan over time that keeps a running maximum and rescales the partial sums whenever it grows
    (the "online softmax" recurrence): ``O(T)`` time and memory, no overflow, and the largest term
    of every partial sum is exactly 1, so nothing that matters underflows.
    """

    def step(carry, new):
        m, num, den = carry
        k_t, v_t = new
        top = jnp.maximum(m, k_t)
        old_scale, new_scale = jnp.exp(m - top), jnp.exp(k_t - top)
        carry = (top, num * old_scale + v_t * new_scale, den * old_scale + new_scale)
        return carry, carry

    if reverse:
        k, v = k[::-1], v[::-1]
    first = (k[0], v[0], jnp.ones_like(k[0]))
    _, rest = jax.lax.scan(step, first, (k[1:], v[1:]))
    sums = tuple(jnp.concatenate([a[None], b], axis=0) for a, b in zip(first, rest))
    return tuple(x[::-1] for x in sums) if reverse else sums


def _shift(x, delta: int):
    """``out[t] = x[t + delta]``, zero where ``t + delta`` falls outside ``[0, T)`` (static shift)."""
    length = x.shape[0]
    if delta == 0:
        return x
    if abs(delta) >= length:
        return jnp.zeros_like(x)
    zeros = jnp.zeros((abs(delta),) + x.shape[1:], dtype=x.dtype)
    if delta > 0:
        return jnp.concatenate([x[delta:], zeros], axis=0)
    return jnp.concatenate([zeros, x[:delta]], axis=0)


def _inside(length: int, delta: int) -> np.ndarray:
    """Static boolean ``(T,)``: True where ``t + delta`` is a position of the sequence."""
    t = np.arange(length)
    return (t + delta >= 0) & (t + delta < length)


def _banded(k, v, bias, offsets: Sequence[int], causal: bool):
    """``sum_t' exp(K_t' + b[t, t']) V_t' / sum_t' exp(K_t' + b[t, t'])`` with a banded bias.

    ``b[t, t + offsets[o]] = bias[t, o]`` inside the band (the contiguous offsets ``offsets``, which
    contain 0) and ``b = 0`` outside it. ``k`` is ``(T, H, 1)``, ``v`` ``(T, H, G)``, ``bias``
    ``(T or 1, len(offsets), H or 1)``. With ``causal`` the visible keys are ``t' <= t`` (the band's
    offsets are then <= 0).

    This is the decomposition of the paper's Eq. 6 with every term non-negative: the sum over the band
    (``conv1d(exp(K) V, exp(w))``) plus the sum over the keys outside the band, which is a prefix sum
    (keys before the band) and, without ``causal``, a suffix sum (keys after it). Each row is divided by
    its own largest term, found from the band's exponents and the running maxima of the prefix and
    suffix sums. A convolution with a fixed filter cannot rescale row by row, so the band's sum is
    formed from the ``len(offsets)`` shifted copies of ``K`` and ``V`` that the filter would combine.
    Time ``O(T len(offsets) H G)``, memory ``O(T (len(offsets) H + H G))``.
    """
    length = k.shape[0]
    lowest = jnp.finfo(k.dtype).min
    keep = [i for i, o in enumerate(offsets) if abs(o) < length]  # offsets beyond the sequence never apply
    bias = jnp.broadcast_to(bias, (length, len(offsets), k.shape[1]))[:, keep[0] : keep[-1] + 1, :, None]
    offsets = [int(offsets[i]) for i in keep]  # (the band is contiguous, so is what remains of it)
    first, last = offsets[0], offsets[-1]

    # The band as arrays indexed (t, o): position t + offsets[o], flagged where it exists.
    where_key = np.arange(length)[:, None] + np.asarray(offsets)[None, :]  # (T, n)
    inside = jnp.asarray((where_key >= 0) & (where_key < length))[..., None, None]  # (T, n, 1, 1)
    gather = jnp.asarray(np.clip(where_key, 0, length - 1))
    z = k[gather] + bias  # (T, n, H, 1): exponents K[t + o] + bias[t, o]
    top = jnp.max(jnp.where(inside, z, lowest), axis=1)  # (T, H, 1)

    # Keys before the band (t' < t + first): prefix sums ending at t + first - 1.
    outside = []
    prefix = _running_sums(k, v)
    outside.append((jnp.asarray(_inside(length, first - 1))[:, None, None],
                    tuple(_shift(x, first - 1) for x in prefix)))
    if not causal:  # keys after the band (t' > t + last): suffix sums starting at t + last + 1
        suffix = _running_sums(k, v, reverse=True)
        outside.append((jnp.asarray(_inside(length, last + 1))[:, None, None],
                        tuple(_shift(x, last + 1) for x in suffix)))
    for present, (m, _, _) in outside:
        top = jnp.maximum(top, jnp.where(present, m, lowest))
    top = jax.lax.stop_gradient(top)  # the shift cancels between numerator and denominator

    weight = jnp.where(inside, jnp.exp(jnp.where(inside, z - top[:, None], 0.0)), 0.0)  # (T, n, H, 1)
    num = jnp.einsum("tnhx,tnhg->thg", weight, v[gather])
    den = jnp.sum(weight, axis=1)
    for present, (m, part_num, part_den) in outside:
        scale = jnp.where(present, jnp.exp(jnp.where(present, m - top, 0.0)), 0.0)
        num = num + scale * part_num
        den = den + scale * part_den
    return num / den  # den >= 1: the largest term of every row is exp(0)


# ---------------------------------------------------------------------------------------------
# The four variants


@functools.partial(jax.jit, static_argnames=("causal",))
def aft_full(q, k, v, w, causal: bool = False):
    """AFT-full (the paper's Eq. 2) for one sequence.

    Args:
        q, k, v: queries, keys and values, each of shape ``(T, d)``.
        w: pair-wise position biases, shape ``(T, T)``; ``w[t, t']`` is added to every key channel
            of position ``t'`` when computing output ``t``.
        causal: if True, output ``t`` sums over ``t' <= t`` only.

    Returns:
        ``Y`` of shape ``(T, d)``: ``Y[t, c] = sigmoid(Q[t, c]) * sum_t' A_c[t, t'] V[t', c]`` with
        ``A_c[t] = softmax_t'(K[:, c] + w[t])`` (over the visible ``t'``). Each row and channel is
        shifted by its own largest exponent, so the result is exact for keys and biases of any size.
        Time ``O(T^2 d)``; rows are processed ``ROW_BLOCK`` at a time, so temporary memory is
        ``O(ROW_BLOCK T d)`` rather than ``O(T^2 d)``.
    """
    length, _ = _check_qkv(q, k, v)
    _check_bias(w, length)
    lowest = jnp.finfo(k.dtype).min
    positions = jnp.arange(length)

    def row(args):
        w_t, t = args  # (T,), ()
        z = k + w_t[:, None]  # (T', d): the exponents of output t
        visible = (positions <= t)[:, None] if causal else jnp.ones((length, 1), dtype=bool)
        top = jax.lax.stop_gradient(jnp.max(jnp.where(visible, z, lowest), axis=0))
        weight = jnp.where(visible, jnp.exp(jnp.where(visible, z - top, 0.0)), 0.0)
        return jnp.sum(weight * v, axis=0) / jnp.sum(weight, axis=0)

    if length <= ROW_BLOCK:
        averaged = jax.vmap(row)((w, positions))
    else:
        averaged = jax.lax.map(row, (w, positions), batch_size=ROW_BLOCK)
    return jax.nn.sigmoid(q) * averaged


@functools.partial(jax.jit, static_argnames=("window", "causal"))
def aft_local(q, k, v, w, window: int, causal: bool = False):
    """AFT-local (the paper's Eq. 4): AFT-full with ``w[t, t']`` replaced by 0 where ``|t - t'| >= window``.

    Outside the window the bias is 0, not ``-inf``: every key still contributes (global
    connectivity), only without a learned position bias. ``window >= T`` gives AFT-full; the paper's
    ``s = 0`` (no bias anywhere) is :func:`aft_simple`. Computed from the band of ``w`` and prefix/suffix
    sums, in time ``O(T window d)``; ``w`` must still be ``(T, T)`` (only its band is read).
    """
    length, _ = _check_qkv(q, k, v)
    _check_bias(w, length)
    window = _checks.positive_int("window", window)
    reach = min(window, length) - 1
    offsets = list(range(-reach, 1 if causal else reach + 1))
    columns = np.clip(np.arange(length)[:, None] + np.asarray(offsets)[None, :], 0, length - 1)
    band = jnp.take_along_axis(w, jnp.asarray(columns), axis=1)  # (T, n): w[t, t + o], clipped where absent
    averaged = _banded(k[:, :, None], v[:, :, None], band[:, :, None], offsets, causal)
    return jax.nn.sigmoid(q) * averaged[..., 0]


@functools.partial(jax.jit, static_argnames=("causal",))
def aft_simple(q, k, v, causal: bool = False):
    """AFT-simple (the paper's Eq. 5): ``Y_t = sigmoid(Q_t) * sum_t' softmax(K)_t' * V_t'``.

    The softmax runs over **time, separately for each channel**: ``softmax(K)[t', c] =
    exp(K[t', c]) / sum_t'' exp(K[t'', c])``. Without ``causal`` the weighted average is the same for
    every ``t``. With ``causal`` it is a running average over ``t' <= t``, computed by a stable
    log-sum-exp scan. Time and memory ``O(T d)``; no ``T x T`` array.
    """
    _check_qkv(q, k, v)
    if causal:
        _, num, den = _running_sums(k[:, :, None], v[:, :, None])
        averaged = (num / den)[..., 0]
    else:
        averaged = jnp.sum(jax.nn.softmax(k, axis=0) * v, axis=0, keepdims=True)
    return jax.nn.sigmoid(q) * averaged


@functools.partial(jax.jit, static_argnames=("causal",))
def aft_conv(q, k, v, kernel, causal: bool = False):
    """AFT-conv (the paper's Eq. 6), per head: a position bias that depends only on the offset.

    Args:
        q, v: shape ``(T, d)``, split into ``heads`` groups of ``d // heads`` channels.
        k: shape ``(T, heads)``: one key per head, shared by the head's channels.
        kernel: shape ``(heads, s)``. With ``causal``, ``kernel[i, j]`` is head ``i``'s bias for the
            offset ``t - t' = j``, ``0 <= j < s``. Without, ``s`` must be odd and ``kernel[i, j]`` is the
            bias for ``t' - t = j - s // 2``. Outside the window the bias is 0.
        causal: if True, output ``t`` sums over ``t' <= t`` only.

    Returns:
        ``(T, d)``, equal to :func:`aft_full` with each head's banded (Toeplitz) ``w``.

    The paper writes the numerator as ``conv1d(exp(K) V, exp(w) - 1) + sum_t' exp(K_t') V_t'``: the
    global sum gives every key weight 1, the convolution corrects the window. Evaluated literally, the
    ``-1`` cancels the window's share of the global sum, and when ``exp(w)`` is much smaller than 1 the
    difference is lost to rounding (chapter 5 shows it). Here the ``-1`` is folded back: the window
    term is ``conv1d(exp(K) V, exp(w))``, the global sum runs over the keys outside the window (prefix
    and suffix sums), every term is non-negative, and each row is rescaled by its own largest term.
    Time ``O(T s d)``, memory ``O(T (d + s heads))``; no ``T x T`` array.
    """
    _checks.ndim("q", q, 2, "(T, d)")
    _checks.shape("v", v, q.shape, "(T, d) like q")
    _checks.ndim("kernel", kernel, 2, "(heads, s)")
    length, d = q.shape
    heads, size = kernel.shape
    _checks.shape("k", k, (length, heads), "(T, heads)")
    if d % heads:
        raise ValueError(f"d must be divisible by heads: q has d={d} channels, kernel has heads={heads}")
    if not causal and size % 2 == 0:
        raise ValueError(f"kernel must have an odd size s when causal=False (centred window), got s={size}")
    if causal:  # kernel[:, j] is the offset t' - t = -j
        offsets = list(range(-(size - 1), 1))
        bias = kernel[:, ::-1].T  # (n, heads), ordered by offset
    else:  # kernel[:, j] is the offset t' - t = j - s // 2
        offsets = list(range(-(size // 2), size // 2 + 1))
        bias = kernel.T
    averaged = _banded(k[:, :, None], v.reshape(length, heads, d // heads), bias[None], offsets, causal)
    return jax.nn.sigmoid(q) * averaged.reshape(length, d)


def conv_bias_matrix(kernel, length: int, causal: bool = False):
    """The ``(heads, T, T)`` biases ``w`` that make :func:`aft_full` equal :func:`aft_conv` per head.

    ``w[i, t, t'] = kernel[i, t - t']`` (causal) or ``kernel[i, t' - t + s // 2]`` inside the window,
    0 outside. For tests and for chapter 5's equivalence check; AFT-conv itself never builds it.
    """
    _checks.ndim("kernel", kernel, 2, "(heads, s)")
    length = _checks.positive_int("length", length)
    size = kernel.shape[1]
    offset = np.arange(length)[:, None] - np.arange(length)[None, :]  # t - t'
    index = offset if causal else size // 2 - offset
    inside = (index >= 0) & (index < size)
    return jnp.where(jnp.asarray(inside), kernel[:, np.clip(index, 0, size - 1)], 0.0)


# ---------------------------------------------------------------------------------------------
# Layers: each maps x (T, d_model) -> (T, d_model), a drop-in replacement for self-attention


def _keys(key, n: int) -> list:
    """``n`` independent keys derived from ``key`` (``fold_in`` compiles once for every ``n``, ``split`` does not)."""
    return [jax.random.fold_in(key, i) for i in range(n)]


def _random(key, shape: tuple[int, ...], scale: float, normal: bool = False) -> jax.Array:
    """``scale`` times uniform(-1, 1) (or standard normal) numbers of ``shape``, determined by ``key``.

    With a concrete key the numbers come from NumPy's generator seeded with the key's data (as in
    :mod:`attnbook.mha`): the same key gives the same numbers, and no random-number kernel is compiled
    for every new shape (``jax.random`` compiles one per shape, a noticeable wait on a small CPU when a
    model has a dozen layer shapes). Under ``jit`` or ``vmap`` (a traced key) ``jax.random`` is used.
    """
    if _checks.is_concrete(key):
        data = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
        rng = np.random.default_rng(np.asarray(data).ravel().tolist())
        numbers = rng.standard_normal(shape) if normal else rng.uniform(-1.0, 1.0, size=shape)
        return jnp.asarray(scale * numbers, dtype=jnp.float32)
    numbers = jax.random.normal(key, shape) if normal else jax.random.uniform(key, shape, minval=-1.0, maxval=1.0)
    return scale * numbers


class Dense(eqx.Module):
    """``x W + b`` on the last axis, rows as tokens; uniform(-1/sqrt(d_in), 1/sqrt(d_in)) initialisation
    (the default of ``Dense``). ``W`` has shape ``(d_in, d_out)``."""

    weight: jax.Array
    bias: jax.Array

    def __init__(self, d_in: int, d_out: int, *, key: jax.Array):
        d_in = _checks.positive_int("d_in", d_in)
        d_out = _checks.positive_int("d_out", d_out)
        w_key, b_key = _keys(key, 2)
        self.weight = _random(w_key, (d_in, d_out), 1.0 / np.sqrt(d_in))
        self.bias = _random(b_key, (d_out,), 1.0 / np.sqrt(d_in))

    def __call__(self, x):
        return x @ self.weight + self.bias


class AFTFull(eqx.Module):
    """AFT-full layer: projections ``Q, K, V = x W_q, x W_k, x W_v``, Eq. 2, output projection.

    The bias is factorised as in the paper, ``w = u v^T`` with ``u, v`` of shape
    ``(max_len, bias_dim)`` initialised from N(0, 0.01): ``2 max_len bias_dim`` parameters instead
    of ``max_len^2``. Sequences up to ``max_len`` use the top-left corner of ``w``.
    """

    query: Dense
    key_proj: Dense
    value: Dense
    out: Dense
    u: jax.Array
    v: jax.Array
    causal: bool = eqx.field(static=True)

    def __init__(self, d_model: int, max_len: int, *, bias_dim: int = 16, causal: bool = True, key: jax.Array):
        d_model = _checks.positive_int("d_model", d_model)
        max_len = _checks.positive_int("max_len", max_len)
        bias_dim = _checks.positive_int("bias_dim", bias_dim)
        keys = _keys(key, 6)
        self.query, self.key_proj, self.value, self.out = (Dense(d_model, d_model, key=k) for k in keys[:4])
        self.u = _random(keys[4], (max_len, bias_dim), 0.1, normal=True)
        self.v = _random(keys[5], (max_len, bias_dim), 0.1, normal=True)
        self.causal = causal

    def bias(self, length: int):
        """The ``(T, T)`` position biases ``w = u v^T`` for sequences of length ``T``."""
        if length > self.u.shape[0]:
            raise ValueError(f"sequences may have at most max_len={self.u.shape[0]} tokens, got {length}")
        return self.u[:length] @ self.v[:length].T

    def qkv(self, x):
        """The queries, keys and values ``(T, d_model)`` each, for ``x`` of shape ``(T, d_model)``."""
        _checks.ndim("x", x, 2, "(T, d_model)")
        return self.query(x), self.key_proj(x), self.value(x)

    def __call__(self, x):
        q, k, v = self.qkv(x)
        return self.out(aft_full(q, k, v, self.bias(x.shape[0]), causal=self.causal))


class AFTLocal(AFTFull):
    """AFT-local layer (Eq. 4): :class:`AFTFull` whose factorised bias applies within ``window`` only."""

    window: int = eqx.field(static=True)

    def __init__(self, d_model: int, max_len: int, window: int, *, bias_dim: int = 16, causal: bool = True,
                 key: jax.Array):
        super().__init__(d_model, max_len, bias_dim=bias_dim, causal=causal, key=key)
        self.window = _checks.positive_int("window", window)

    def __call__(self, x):
        q, k, v = self.qkv(x)
        return self.out(aft_local(q, k, v, self.bias(x.shape[0]), self.window, causal=self.causal))


class AFTSimple(eqx.Module):
    """AFT-simple layer (Eq. 5): projections, no position bias, ``O(T d)``."""

    query: Dense
    key_proj: Dense
    value: Dense
    out: Dense
    causal: bool = eqx.field(static=True)

    def __init__(self, d_model: int, *, causal: bool = True, key: jax.Array):
        d_model = _checks.positive_int("d_model", d_model)
        keys = _keys(key, 4)
        self.query, self.key_proj, self.value, self.out = (Dense(d_model, d_model, key=k) for k in keys)
        self.causal = causal

    def __call__(self, x):
        _checks.ndim("x", x, 2, "(T, d_model)")
        q, k, v = self.query(x), self.key_proj(x), self.value(x)
        return self.out(aft_simple(q, k, v, causal=self.causal))


class AFTConv(eqx.Module):
    """AFT-conv layer (Eq. 6): ``heads`` keys per position, one learned kernel of size ``window`` per head.

    The kernel is re-parameterised as in the paper, ``w_i = gamma_i (r_i - mean(r_i)) / std(r_i) + beta_i``
    with ``gamma = beta = 0`` at initialisation (so every bias starts at 0). Causal kernels cover the
    offsets ``t - t' = 0 .. window - 1``; non-causal ones need an odd ``window``.
    """

    query: Dense
    key_proj: Dense
    value: Dense
    out: Dense
    raw_kernel: jax.Array
    gain: jax.Array
    shift: jax.Array
    causal: bool = eqx.field(static=True)

    def __init__(self, d_model: int, heads: int, window: int, *, causal: bool = True, key: jax.Array):
        d_model = _checks.positive_int("d_model", d_model)
        heads = _checks.positive_int("heads", heads)
        window = _checks.positive_int("window", window)
        if d_model % heads:
            raise ValueError(f"d_model must be divisible by heads, got d_model={d_model}, heads={heads}")
        if not causal and window % 2 == 0:
            raise ValueError(f"window must be odd when causal=False, got {window}")
        keys = _keys(key, 5)
        self.query, self.value, self.out = (Dense(d_model, d_model, key=k) for k in keys[:3])
        self.key_proj = Dense(d_model, heads, key=keys[3])
        self.raw_kernel = _random(keys[4], (heads, window), 1.0, normal=True)
        self.gain = jnp.zeros((heads,))
        self.shift = jnp.zeros((heads,))
        self.causal = causal

    def kernel(self):
        """The ``(heads, window)`` position biases."""
        raw = self.raw_kernel
        normalised = (raw - raw.mean(axis=1, keepdims=True)) / (raw.std(axis=1, keepdims=True) + 1e-5)
        return self.gain[:, None] * normalised + self.shift[:, None]

    def __call__(self, x):
        _checks.ndim("x", x, 2, "(T, d_model)")
        q, k, v = self.query(x), self.key_proj(x), self.value(x)
        return self.out(aft_conv(q, k, v, self.kernel(), causal=self.causal))


class CausalSelfAttention(eqx.Module):
    """The baseline: multi-head scaled dot-product self-attention with a causal mask (chapters 2-4)."""

    query: Dense
    key_proj: Dense
    value: Dense
    out: Dense
    heads: int = eqx.field(static=True)

    def __init__(self, d_model: int, heads: int, *, key: jax.Array):
        d_model = _checks.positive_int("d_model", d_model)
        heads = _checks.positive_int("heads", heads)
        if d_model % heads:
            raise ValueError(f"d_model must be divisible by heads, got d_model={d_model}, heads={heads}")
        keys = _keys(key, 4)
        self.query, self.key_proj, self.value, self.out = (Dense(d_model, d_model, key=k) for k in keys)
        self.heads = heads

    def __call__(self, x):
        _checks.ndim("x", x, 2, "(T, d_model)")
        length, d_model = x.shape
        split = lambda a: a.reshape(length, self.heads, d_model // self.heads)
        q, k, v = (split(p(x)) for p in (self.query, self.key_proj, self.value))
        mask = masking.causal_mask(length)
        per_head = jax.vmap(lambda q, k, v: scaled_dot_product_attention(q, k, v, mask=mask)[0],
                            in_axes=1, out_axes=1)(q, k, v)
        return self.out(per_head.reshape(length, d_model))


def make_mixer(kind: str, d_model: int, max_len: int, *, key: jax.Array, heads: int = 4, window: int = 9,
               bias_dim: int = 16) -> eqx.Module:
    """A causal token-mixing layer by name: ``"attention"`` or one of :data:`VARIANTS`."""
    if kind == "attention":
        return CausalSelfAttention(d_model, heads, key=key)
    if kind == "aft-full":
        return AFTFull(d_model, max_len, bias_dim=bias_dim, key=key)
    if kind == "aft-local":
        return AFTLocal(d_model, max_len, window, bias_dim=bias_dim, key=key)
    if kind == "aft-simple":
        return AFTSimple(d_model, key=key)
    if kind == "aft-conv":
        return AFTConv(d_model, heads, window, key=key)
    raise ValueError(f"kind must be 'attention' or one of {VARIANTS}, got {kind!r}")


class Block(eqx.Module):
    """A pre-norm Transformer block: ``x + mixer(LN(x))``, then ``x + MLP(LN(x))`` (GELU, width ``4 d``)."""

    norm_mix: eqx.nn.LayerNorm
    mixer: eqx.Module
    norm_mlp: eqx.nn.LayerNorm
    hidden: Dense
    project: Dense

    def __init__(self, mixer: eqx.Module, d_model: int, *, mlp_ratio: int = 4, key: jax.Array):
        k1, k2 = _keys(key, 2)
        self.norm_mix, self.norm_mlp = eqx.nn.LayerNorm(d_model), eqx.nn.LayerNorm(d_model)
        self.mixer = mixer
        self.hidden = Dense(d_model, mlp_ratio * d_model, key=k1)
        self.project = Dense(mlp_ratio * d_model, d_model, key=k2)

    def __call__(self, x):
        x = x + self.mixer(jax.vmap(self.norm_mix)(x))
        h = jax.nn.gelu(self.hidden(jax.vmap(self.norm_mlp)(x)))
        return x + self.project(h)


class MixerChoice(eqx.Module):
    """Several token-mixing layers and an integer array that picks the one applied (``jax.lax.switch``).

    The choice is an array, not a static field, so a model that differs only in its choice runs in
    the *same* compiled program: :func:`attnbook.train.fit` compiles once for every kind. The layers
    that are not chosen get zero gradients, so training leaves them as they were.
    """

    kinds: tuple = eqx.field(static=True)
    mixers: tuple
    choice: jax.Array

    def __init__(self, kinds: Sequence[str], d_model: int, max_len: int, *, key: jax.Array, **options):
        if not kinds:
            raise ValueError("kinds must name at least one mixer, got an empty sequence")
        self.kinds = tuple(kinds)
        self.mixers = tuple(make_mixer(kind, d_model, max_len, key=k, **options)
                            for kind, k in zip(self.kinds, _keys(key, len(self.kinds))))
        self.choice = jnp.asarray(0, dtype=jnp.int32)

    def __call__(self, x):
        return jax.lax.switch(self.choice, [lambda x, m=m: m(x) for m in self.mixers], x)


class NextTokenModel(eqx.Module):
    """Token and learned position embeddings, ``depth`` pre-norm blocks, a final norm and a linear head.

    ``model(tokens)`` maps integer tokens ``(T,)`` to next-token logits ``(T, num_classes)``; with a
    causal mixer, row ``t`` depends on tokens ``0..t`` only. ``kind`` names the mixer (``"attention"``
    or one of :data:`VARIANTS`); a tuple of names builds a :class:`MixerChoice` in every block, and
    ``model.using(kind)`` picks one of them.
    """

    embed: jax.Array
    position: jax.Array
    blocks: tuple
    norm: eqx.nn.LayerNorm
    head: Dense

    def __init__(self, kind: str | Sequence[str], *, vocab_size: int, num_classes: int, max_len: int,
                 d_model: int = 32, depth: int = 1, key: jax.Array, **mixer_options):
        vocab_size = _checks.positive_int("vocab_size", vocab_size)
        num_classes = _checks.positive_int("num_classes", num_classes)
        max_len = _checks.positive_int("max_len", max_len)
        d_model = _checks.positive_int("d_model", d_model)
        depth = _checks.positive_int("depth", depth)
        keys = _keys(key, 3 + 2 * depth)

        def mixer(k):
            if isinstance(kind, str):
                return make_mixer(kind, d_model, max_len, key=k, **mixer_options)
            return MixerChoice(kind, d_model, max_len, key=k, **mixer_options)

        self.embed = _random(keys[0], (vocab_size, d_model), 1.0, normal=True)  # row i: token i
        self.position = _random(keys[1], (max_len, d_model), 0.02, normal=True)
        self.blocks = tuple(Block(mixer(keys[3 + 2 * i]), d_model, key=keys[4 + 2 * i]) for i in range(depth))
        self.norm = eqx.nn.LayerNorm(d_model)
        self.head = Dense(d_model, num_classes, key=keys[2])

    def using(self, kind: str) -> "NextTokenModel":
        """The same model with every :class:`MixerChoice` set to ``kind``."""
        choices = [b.mixer for b in self.blocks if isinstance(b.mixer, MixerChoice)]
        if not choices:
            raise ValueError("using() needs a model built with a tuple of kinds")
        if kind not in choices[0].kinds:
            raise ValueError(f"kind must be one of {choices[0].kinds}, got {kind!r}")
        index = jnp.asarray(choices[0].kinds.index(kind), dtype=jnp.int32)
        return eqx.tree_at(lambda m: [b.mixer.choice for b in m.blocks], self, [index] * len(self.blocks))

    def parameters(self) -> int:
        """Trainable numbers that the model uses: only the chosen layer of a :class:`MixerChoice` counts."""
        total = count_parameters(self)
        for block in self.blocks:
            if isinstance(block.mixer, MixerChoice):
                chosen = int(block.mixer.choice)
                total -= sum(count_parameters(m) for i, m in enumerate(block.mixer.mixers) if i != chosen)
        return total

    def __call__(self, tokens):
        _checks.ndim("tokens", tokens, 1, "(T,)")
        x = self.embed[tokens] + self.position[: tokens.shape[0]]
        for block in self.blocks:
            x = block(x)
        return self.head(jax.vmap(self.norm)(x))


def count_parameters(model: eqx.Module) -> int:
    """Number of trainable (floating-point) numbers in ``model``."""
    return int(sum(x.size for x in jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))))


__all__ = [
    "aft_full", "aft_local", "aft_simple", "aft_conv", "conv_bias_matrix", "AFTFull", "AFTLocal", "AFTSimple",
    "AFTConv", "CausalSelfAttention", "Block", "MixerChoice", "NextTokenModel", "make_mixer", "count_parameters",
]
