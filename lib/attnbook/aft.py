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
``aft_full``, whose bias ``w`` is ``T x T`` already; it works in blocks of ``ROW_BLOCK`` rows, so its
forward pass needs ``O(ROW_BLOCK T d)`` besides ``w`` (its backward pass: see :func:`aft_full`). The
:class:`AFTFull` layer never forms its factorised bias ``w = u v^T`` beyond ``ROW_BLOCK`` positions.

Bad and extreme input (the contract in :mod:`attnbook`): shapes are the jaxtyping annotations of the
signatures; ``window``, kernel sizes, head counts and ``causal`` are checked; ``T = 0`` gives an empty
``(0, d)`` output. A bias (or key) of ``-inf`` is a weight of exactly 0, and an output whose every weight
is 0 is 0. Non-finite input (NaN anywhere, ``+inf`` in a key or bias, an infinite value) makes NaN exactly
the outputs that see it and nothing else, forward and backward: with ``causal=True``, output ``t`` and
its gradients do not depend on positions after ``t`` even when they hold NaN. The layers' token ids are
checked to lie in ``[0, vocab_size)``, also under ``jax.jit`` and ``jax.vmap``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from . import _checks
from .nn import Dense, features as _features, init, max_rows as _rows, split as _keys
from .attention import merge_softmax_sums

ROW_BLOCK = 64
"""Rows of AFT-full computed at once: its temporary memory is ``ROW_BLOCK * T * d`` numbers."""

VARIANTS = ("aft-full", "aft-local", "aft-simple", "aft-conv")


# ---------------------------------------------------------------------------------------------
# Argument checks and non-finite input


def _same_dtype(*arrays):
    """The arrays in one floating dtype (float16 with float32 is computed in float32)."""
    dtype = jnp.result_type(*arrays)
    return tuple(jnp.asarray(a, dtype=dtype) for a in arrays)


def _undefined_exponent(x):
    """NaN or ``+inf`` in a key or a bias: the weights of every output that sees it are undefined.

    ``-inf`` is not here: it is a weight of exactly 0 (the key is left out of that sum).
    """
    return jnp.isnan(x) | (x == jnp.inf)


def _seen(bad, causal: bool):
    """``out[t] = any(bad[t'])`` over the positions ``t'`` that output ``t`` sums over (time is axis 0)."""
    if causal:
        return jnp.cumsum(bad, axis=0, dtype=jnp.int32) > 0
    return jnp.broadcast_to(jnp.any(bad, axis=0, keepdims=True), bad.shape)


def _clean(x, bad):
    """``x`` with 0 where ``bad``: the arithmetic (and autodiff's ``0 * x`` terms) never meets NaN or inf.

    Non-finite input is removed before the computation and NaN is put back, with ``jnp.where``, into exactly
    the outputs that see it. Multiplying it through instead would leak: the backward pass of a causal
    sum multiplies the zero cotangent of an output that a loss ignores by the NaN of that output's
    inputs, and ``0 * NaN`` reaches the gradients of earlier positions.
    """
    return jnp.where(bad, jnp.zeros((), x.dtype), x)


def _shift(top):
    """A row's largest exponent, the shift that makes its largest weight 1; 0 where it is ``-inf``.

    (Every weight of the row is then exactly 0; shifting by ``-inf`` would give ``-inf - (-inf) = NaN``.)
    No gradient: the shift cancels between numerator and denominator.
    """
    return jax.lax.stop_gradient(jnp.where(jnp.isfinite(top), top, jnp.zeros((), top.dtype)))


def _divide(num, den):
    """``num / den``, and 0 where ``den = 0`` (every weight of the row is 0: ``-inf`` biases or keys)."""
    nonzero = den > 0
    return jnp.where(nonzero, num / jnp.where(nonzero, den, jnp.ones((), den.dtype)), jnp.zeros((), num.dtype))


def _gate(q, averaged, poisoned):
    """``sigmoid(Q) * averaged``, with NaN where ``poisoned`` (a non-finite input seen) or ``Q`` is NaN."""
    q_bad = jnp.isnan(q)
    out = jax.nn.sigmoid(_clean(q, q_bad)) * averaged
    return jnp.where(q_bad | poisoned, jnp.asarray(jnp.nan, out.dtype), out)


def _empty(q, *others):
    """The output for a sequence with no positions (or no channels): ``(T, d)`` with no entries."""
    return jnp.zeros(q.shape, dtype=jnp.result_type(q, *others))


# ---------------------------------------------------------------------------------------------
# Stable building blocks


def _running_sums(k, v, reverse: bool = False):
    """Stable prefix (or suffix) sums over time: for every ``t``, over ``t' <= t`` (``t' >= t`` if reverse),

    ``m[t] = max K[t']``, ``num[t] = sum exp(K[t'] - m[t]) V[t']``, ``den[t] = sum exp(K[t'] - m[t])``.

    ``k`` has shape ``(T, H, 1)`` and ``v`` ``(T, H, G)``: one key per head, shared by its G channels;
    both finite or, for ``k``, ``-inf`` (a weight of 0; while every key so far is ``-inf``, ``m = -inf``
    and the sums are 0). A scan over time that keeps a running maximum and rescales the partial sums
    whenever it grows (the "online softmax" recurrence): ``O(T)`` time and memory, no overflow, and the
    largest term of every partial sum is exactly 1, so nothing that matters underflows.
    """

    def step(carry, new):
        m, num, den = carry
        k_t, v_t = new
        top, den, num = merge_softmax_sums((m, den, num), (k_t, jnp.ones_like(k_t), v_t))
        carry = (top, num, den)
        return carry, carry

    # The first step gives exactly (K[0], V[0], 1), as a start from that position would.
    start = (jnp.full(k.shape[1:], -jnp.inf, k.dtype), jnp.zeros(v.shape[1:], v.dtype), jnp.zeros(k.shape[1:], k.dtype))
    _, sums = jax.lax.scan(step, start, (k, v), reverse=reverse)
    return sums


def _shifted(x, delta: int):
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

    Returns ``(averages, poisoned)``, both ``(T, H, G)``: the averages computed with non-finite input
    (NaN, ``+inf`` keys or biases, infinite values) replaced by 0, and where that input is seen, for
    :func:`_gate` to put NaN there *after* every product (``-inf`` keys and biases are weights of 0).
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

    # Non-finite input: computed as 0, NaN put back at the end into the outputs that see it.
    key_bad, value_bad = _undefined_exponent(k), ~jnp.isfinite(v)
    bias_bad = inside & _undefined_exponent(bias)  # (T, n, H, 1); entries outside the sequence are never read
    poisoned = _seen(key_bad | value_bad, causal) | jnp.any(bias_bad, axis=1)  # (T, H, G)
    k, v, bias = _clean(k, key_bad), _clean(v, value_bad), _clean(bias, bias_bad)

    z = k[gather] + bias  # (T, n, H, 1): exponents K[t + o] + bias[t, o]
    top = jnp.max(jnp.where(inside, z, lowest), axis=1)  # (T, H, 1)

    # Keys before the band (t' < t + first): prefix sums ending at t + first - 1.
    outside = []
    prefix = _running_sums(k, v)
    outside.append((jnp.asarray(_inside(length, first - 1))[:, None, None],
                    tuple(_shifted(x, first - 1) for x in prefix)))
    if not causal:  # keys after the band (t' > t + last): suffix sums starting at t + last + 1
        suffix = _running_sums(k, v, reverse=True)
        outside.append((jnp.asarray(_inside(length, last + 1))[:, None, None],
                        tuple(_shifted(x, last + 1) for x in suffix)))
    for present, (m, _, _) in outside:
        top = jnp.maximum(top, jnp.where(present, m, lowest))
    top = _shift(top)  # the shift cancels between numerator and denominator

    weight = jnp.where(inside, jnp.exp(jnp.where(inside, z - top[:, None], 0.0)), 0.0)  # (T, n, H, 1)
    num = jnp.einsum("tnhx,tnhg->thg", weight, v[gather])
    den = jnp.sum(weight, axis=1)
    for present, (m, part_num, part_den) in outside:
        scale = jnp.where(present, jnp.exp(jnp.where(present, m - top, 0.0)), 0.0)
        num = num + scale * part_num
        den = den + scale * part_den
    # den >= 1 (the largest term of every row is exp(0)) unless every weight of the row is 0.
    return _divide(num, den), poisoned


def _full(q, k, v, rows, row_bias, causal: bool, remat: bool = False):
    """AFT-full where the bias row of output ``t`` is ``row_bias(rows[t])``, shape ``(T,)``.

    ``rows`` is ``w`` itself (``row_bias`` the identity) or the factor ``u`` of ``w = u v^T``
    (``row_bias(u_t) = v u_t``, so that no ``T x T`` array is formed). Rows are processed
    ``ROW_BLOCK`` at a time; with ``remat`` each block is recomputed in the backward pass instead of
    being stored (``jax.checkpoint``), so the backward pass too needs ``O(ROW_BLOCK T d)``.
    """
    length, _ = q.shape
    positions = jnp.arange(length)
    key_bad, value_bad = _undefined_exponent(k), ~jnp.isfinite(v)
    seen_bad = _seen(key_bad | value_bad, causal)  # (T, d): NaN put back here at the end
    k, v = _clean(k, key_bad), _clean(v, value_bad)

    def row(args):
        x_t, t = args
        w_t = row_bias(x_t)  # (T,): w[t, t'] for every t'
        visible = positions <= t if causal else jnp.ones((length,), dtype=bool)
        w_bad = _undefined_exponent(w_t)
        z = k + _clean(w_t, w_bad)[:, None]  # (T', d): the exponents of output t
        top = _shift(jnp.max(jnp.where(visible[:, None], z, -jnp.inf), axis=0))
        weight = jnp.where(visible[:, None], jnp.exp(jnp.where(visible[:, None], z - top, 0.0)), 0.0)
        averaged = _divide(jnp.sum(weight * v, axis=0), jnp.sum(weight, axis=0))
        return averaged, jnp.any(visible & w_bad)  # a visible NaN or +inf bias: the whole row is undefined

    if length <= ROW_BLOCK:
        averaged, row_bad = jax.vmap(row)((rows, positions))
    else:
        averaged, row_bad = jax.lax.map(jax.checkpoint(row) if remat else row, (rows, positions),
                                        batch_size=ROW_BLOCK)
    return _gate(q, averaged, seen_bad | row_bad[:, None])


# ---------------------------------------------------------------------------------------------
# The four variants


@_checks.shaped
def aft_full(q: Float[Array, "T d"], k: Float[Array, "T d"], v: Float[Array, "T d"], w: Float[Array, "T T"],
             causal: bool = False) -> Float[Array, "T d"]:
    """AFT-full (the paper's Eq. 2) for one sequence.

    Args:
        q, k, v: queries, keys and values, each of shape ``(T, d)``.
        w: pair-wise position biases, shape ``(T, T)``; ``w[t, t']`` is added to every key channel
            of position ``t'`` when computing output ``t``. ``-inf`` leaves key ``t'`` out of output
            ``t``; an output whose every weight is 0 is 0.
        causal: if True, output ``t`` sums over ``t' <= t`` only.

    Returns:
        ``Y`` of shape ``(T, d)``: ``Y[t, c] = sigmoid(Q[t, c]) * sum_t' A_c[t, t'] V[t', c]`` with
        ``A_c[t] = softmax_t'(K[:, c] + w[t])`` (over the visible ``t'``). Each row and channel is
        shifted by its own largest exponent, so the result is exact for keys and biases of any size.
        ``T = 0`` gives a ``(0, d)`` array.

    Non-finite input: NaN in ``q[t, c]``, NaN or ``+inf`` in ``k[t', c]`` or ``w[t, t']``, or any
    non-finite ``v[t', c]`` makes NaN exactly the outputs that see it (channel ``c`` of every ``t`` that
    sums over ``t'``; all of row ``t`` for ``w``), and nothing else, in the forward and the backward pass:
    under ``causal`` the future may hold anything.

    Cost: time ``O(T^2 d)``. Memory, besides the ``(T, T)`` input ``w``: the forward pass processes
    ``ROW_BLOCK`` rows at a time, ``O(ROW_BLOCK T d)``; the backward pass (autodiff of that loop) keeps
    every block's weights, ``O(T^2 d)``, and the gradient with respect to ``w`` is ``(T, T)``.
    """
    return _aft_full(q, k, v, w, _checks.flag("causal", causal))


@functools.partial(jax.jit, static_argnames=("causal",))
def _aft_full(q, k, v, w, causal):
    if q.size == 0:
        return _empty(q, k, v, w)
    q, k, v, w = _same_dtype(q, k, v, w)
    return _full(q, k, v, w, lambda w_t: w_t, causal)


@functools.partial(jax.jit, static_argnames=("causal",))
def _aft_full_factorised(q, k, v, u, v_bias, causal):
    """AFT-full with ``w = u v_bias^T`` (``u, v_bias`` of shape ``(T, r)``), never forming ``w`` when ``T`` is long.

    Up to ``ROW_BLOCK`` positions, ``w`` (at most ``ROW_BLOCK x T``) is formed and :func:`aft_full`'s
    computation runs as it is. Beyond, each block of rows computes its own rows of ``w``, and is
    recomputed in the backward pass: memory ``O(ROW_BLOCK T + T (d + r))`` forward and backward, time
    ``O(T^2 (d + r))`` forward and about twice that for the backward pass.
    """
    if q.size == 0:
        return _empty(q, k, v, u, v_bias)
    q, k, v, u, v_bias = _same_dtype(q, k, v, u, v_bias)
    if q.shape[0] <= ROW_BLOCK:
        return _full(q, k, v, u @ v_bias.T, lambda w_t: w_t, causal)
    return _full(q, k, v, u, lambda u_t: v_bias @ u_t, causal, remat=True)


@_checks.shaped
def aft_local(q: Float[Array, "T d"], k: Float[Array, "T d"], v: Float[Array, "T d"], w: Float[Array, "T T"],
              window: int, causal: bool = False) -> Float[Array, "T d"]:
    """AFT-local (the paper's Eq. 4): AFT-full with ``w[t, t']`` replaced by 0 where ``|t - t'| >= window``.

    Outside the window the bias is 0, not ``-inf``: every key still contributes (global
    connectivity), only without a learned position bias. ``window >= T`` gives AFT-full; the paper's
    ``s = 0`` (no bias anywhere) is :func:`aft_simple`, so ``window`` must be a positive integer.
    Computed from the band of ``w`` and prefix/suffix sums, in time ``O(T window d)`` and memory
    ``O(T window d)``; ``w`` must still be ``(T, T)``, and only its band is read (what lies outside
    it, NaN included, changes nothing). ``T = 0`` gives a ``(0, d)`` array; non-finite input as in
    :func:`aft_full` (a bias is seen only inside the band).
    """
    return _aft_local(q, k, v, w, _checks.positive_int("window", window), _checks.flag("causal", causal))


@functools.partial(jax.jit, static_argnames=("window", "causal"))
def _aft_local(q, k, v, w, window, causal):
    if q.size == 0:
        return _empty(q, k, v, w)
    q, k, v, w = _same_dtype(q, k, v, w)
    length = q.shape[0]
    reach = min(window, length) - 1
    offsets = list(range(-reach, 1 if causal else reach + 1))
    columns = np.clip(np.arange(length)[:, None] + np.asarray(offsets)[None, :], 0, length - 1)
    band = jnp.take_along_axis(w, jnp.asarray(columns), axis=1)  # (T, n): w[t, t + o], clipped where absent
    averaged, poisoned = _banded(k[:, :, None], v[:, :, None], band[:, :, None], offsets, causal)
    return _gate(q, averaged[..., 0], poisoned[..., 0])


@_checks.shaped
def aft_simple(q: Float[Array, "T d"], k: Float[Array, "T d"], v: Float[Array, "T d"],
               causal: bool = False) -> Float[Array, "T d"]:
    """AFT-simple (the paper's Eq. 5): ``Y_t = sigmoid(Q_t) * sum_t' softmax(K)_t' * V_t'``.

    The softmax runs over **time, separately for each channel**: ``softmax(K)[t', c] =
    exp(K[t', c]) / sum_t'' exp(K[t'', c])``. Without ``causal`` the weighted average is the same for
    every ``t``. With ``causal`` it is a running average over ``t' <= t``, computed by a stable
    log-sum-exp scan. Time and memory ``O(T d)``; no ``T x T`` array. ``T = 0`` gives a ``(0, d)``
    array; a channel whose visible keys are all ``-inf`` gives 0; non-finite input as in :func:`aft_full`.
    """
    return _aft_simple(q, k, v, _checks.flag("causal", causal))


@functools.partial(jax.jit, static_argnames=("causal",))
def _aft_simple(q, k, v, causal):
    if q.size == 0:
        return _empty(q, k, v)
    q, k, v = _same_dtype(q, k, v)
    key_bad, value_bad = _undefined_exponent(k), ~jnp.isfinite(v)
    poisoned = _seen(key_bad | value_bad, causal)
    k, v = _clean(k, key_bad), _clean(v, value_bad)
    if causal:
        _, num, den = _running_sums(k[:, :, None], v[:, :, None])
        averaged = _divide(num, den)[..., 0]
    else:
        dead = jnp.all(k == -jnp.inf, axis=0, keepdims=True)  # every weight of the channel is 0
        averaged = jnp.sum(jax.nn.softmax(_clean(k, dead), axis=0) * v, axis=0, keepdims=True)
        averaged = _clean(averaged, dead)
    return _gate(q, averaged, poisoned)


@_checks.shaped
def aft_conv(q: Float[Array, "T d"], k: Float[Array, "T heads"], v: Float[Array, "T d"],
             kernel: Float[Array, "heads s"], causal: bool = False) -> Float[Array, "T d"]:
    """AFT-conv (the paper's Eq. 6), per head: a position bias that depends only on the offset.

    Args:
        q, v: shape ``(T, d)``, split into ``heads`` groups of ``d // heads`` channels.
        k: shape ``(T, heads)``: one key per head, shared by the head's channels.
        kernel: shape ``(heads, s)``, ``heads >= 1`` dividing ``d`` and ``s >= 1``. With ``causal``,
            ``kernel[i, j]`` is head ``i``'s bias for the offset ``t - t' = j``, ``0 <= j < s``.
            Without, ``s`` must be odd and ``kernel[i, j]`` is the bias for ``t' - t = j - s // 2``.
            Outside the window the bias is 0.
        causal: if True, output ``t`` sums over ``t' <= t`` only.

    Returns:
        ``(T, d)``, equal to :func:`aft_full` with each head's banded (Toeplitz) ``w``. ``T = 0`` gives
        a ``(0, d)`` array; non-finite input as in :func:`aft_full` (a key or kernel entry counts for
        its head's channels).

    The paper writes the numerator as ``conv1d(exp(K) V, exp(w) - 1) + sum_t' exp(K_t') V_t'``: the
    global sum gives every key weight 1, the convolution corrects the window. Evaluated literally, the
    ``-1`` cancels the window's share of the global sum, and when ``exp(w)`` is much smaller than 1 the
    difference is lost to rounding (chapter 5 shows it). Here the ``-1`` is folded back: the window
    term is ``conv1d(exp(K) V, exp(w))``, the global sum runs over the keys outside the window (prefix
    and suffix sums), every term is non-negative, and each row is rescaled by its own largest term.
    Time ``O(T s d)``, memory ``O(T (d + s heads))``; no ``T x T`` array.
    """
    heads, size = kernel.shape
    d = q.shape[1]
    if heads == 0 or size == 0:
        raise ValueError(f"kernel must have at least one head and one offset, shape (heads, s), "
                         f"got {tuple(kernel.shape)}")
    if d % heads:
        raise ValueError(f"d must be divisible by heads: q has d={d} channels, kernel has heads={heads}")
    causal = _checks.flag("causal", causal)
    if not causal and size % 2 == 0:
        raise ValueError(f"kernel must have an odd size s when causal=False (centred window), got s={size}")
    return _aft_conv(q, k, v, kernel, causal)


@functools.partial(jax.jit, static_argnames=("causal",))
def _aft_conv(q, k, v, kernel, causal):
    if q.size == 0:
        return _empty(q, k, v, kernel)
    q, k, v, kernel = _same_dtype(q, k, v, kernel)
    length, d = q.shape
    heads, size = kernel.shape
    if causal:  # kernel[:, j] is the offset t' - t = -j
        offsets = list(range(-(size - 1), 1))
        bias = kernel[:, ::-1].T  # (n, heads), ordered by offset
    else:  # kernel[:, j] is the offset t' - t = j - s // 2
        offsets = list(range(-(size // 2), size // 2 + 1))
        bias = kernel.T
    averaged, poisoned = _banded(k[:, :, None], v.reshape(length, heads, d // heads), bias[None], offsets, causal)
    return _gate(q, averaged.reshape(length, d), poisoned.reshape(length, d))


@_checks.shaped
def conv_bias_matrix(kernel: Float[Array, "heads s"], length: int, causal: bool = False) -> Float[Array, "heads T T"]:
    """The ``(heads, T, T)`` biases ``w`` that make :func:`aft_full` equal :func:`aft_conv` per head.

    ``w[i, t, t'] = kernel[i, t - t']`` (causal) or ``kernel[i, t' - t + s // 2]`` inside the window,
    0 outside (``T = length``, which may be 0). For tests and for chapter 5's equivalence check;
    AFT-conv itself never builds it.
    """
    length = _checks.nonnegative_int("length", length)
    causal = _checks.flag("causal", causal)
    size = kernel.shape[1]
    if size == 0 or (not causal and size % 2 == 0):
        raise ValueError(f"kernel must have {'an odd' if not causal else 'a positive'} size s"
                         f"{' when causal=False' if not causal else ''}, got s={size}")
    offset = np.arange(length)[:, None] - np.arange(length)[None, :]  # t - t'
    index = offset if causal else size // 2 - offset
    inside = (index >= 0) & (index < size)
    return jnp.where(jnp.asarray(inside), kernel[:, np.clip(index, 0, size - 1)], 0.0)


# ---------------------------------------------------------------------------------------------
# Layers: each maps x (T, d_model) -> (T, d_model), a drop-in replacement for self-attention


class AFTFull(eqx.Module):
    """AFT-full layer: projections ``Q, K, V = x W_q, x W_k, x W_v``, Eq. 2, output projection.

    The bias is factorised as in the paper, ``w = u v^T`` with ``u, v`` of shape
    ``(max_len, bias_dim)`` initialised from N(0, 0.01): ``2 max_len bias_dim`` parameters instead
    of ``max_len^2``. Sequences up to ``max_len`` use the top-left corner of ``w``.

    Memory. Up to ``ROW_BLOCK`` (64) positions the layer forms ``w`` (at most ``64 x 64``) and calls
    :func:`aft_full`'s computation. Beyond, no ``T x T`` array is formed, forward or backward: each block
    of ``ROW_BLOCK`` rows computes its rows ``u[rows] v^T`` and its ``ROW_BLOCK x T x d`` exponents, and
    the backward pass recomputes them block by block (``jax.checkpoint``) instead of storing them. So
    the layer's temporary memory is ``O(ROW_BLOCK T d)`` in both passes (linear in ``T``), and its time
    ``O(T^2 d)`` (the backward pass about twice the forward). The function :func:`aft_full`, given ``w``
    itself, is ``O(T^2)`` in memory through its input and, in the backward pass, ``O(T^2 d)``.
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
        causal = _checks.flag("causal", causal)
        keys = _keys(_checks.prng_key("key", key), 6)
        self.query, self.key_proj, self.value, self.out = (Dense(d_model, d_model, key=k) for k in keys[:4])
        self.u = init(keys[4], (max_len, bias_dim), "normal", scale=0.1)
        self.v = init(keys[5], (max_len, bias_dim), "normal", scale=0.1)
        self.causal = causal

    def bias(self, length: int) -> Float[Array, "T T"]:
        """The ``(T, T)`` position biases ``w = u v^T`` for sequences of length ``T = length`` (for plots and
        tests: the layer itself never forms more than ``ROW_BLOCK`` rows of it at once)."""
        length = _checks.nonnegative_int("length", length)
        if length > self.u.shape[0]:
            raise ValueError(f"length must be at most max_len={self.u.shape[0]}, got {length}")
        return self.u[:length] @ self.v[:length].T

    @_checks.shaped
    def qkv(self, x: Float[Array, "T d_model"]) -> tuple[Float[Array, "T d_model"], ...]:
        """The queries, keys and values ``(T, d_model)`` each, for ``x`` of shape ``(T, d_model)``."""
        _features("x", x, self.query.weight.shape[0], "d_model")
        _rows("x", x, self.u.shape[0])
        return self.query(x), self.key_proj(x), self.value(x)

    @_checks.shaped
    def __call__(self, x: Float[Array, "T d_model"]) -> Float[Array, "T d_model"]:
        """``(T, d_model) -> (T, d_model)``, ``T <= max_len``. The bias ``w = u v^T`` enters row block by row
        block: beyond ``ROW_BLOCK`` positions no ``T x T`` array is formed, forward or backward."""
        q, k, v = self.qkv(x)
        length = x.shape[0]
        return self.out(_aft_full_factorised(q, k, v, self.u[:length], self.v[:length], self.causal))


class AFTLocal(AFTFull):
    """AFT-local layer (Eq. 4): :class:`AFTFull` whose factorised bias applies within ``window`` only."""

    window: int = eqx.field(static=True)

    def __init__(self, d_model: int, max_len: int, window: int, *, bias_dim: int = 16, causal: bool = True,
                 key: jax.Array):
        super().__init__(d_model, max_len, bias_dim=bias_dim, causal=causal, key=key)
        self.window = _checks.positive_int("window", window)

    @_checks.shaped
    def __call__(self, x: Float[Array, "T d_model"]) -> Float[Array, "T d_model"]:
        """``(T, d_model) -> (T, d_model)``, ``T <= max_len``; ``w = u v^T`` is formed, but only its band is read."""
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
        keys = _keys(_checks.prng_key("key", key), 4)
        self.query, self.key_proj, self.value, self.out = (Dense(d_model, d_model, key=k) for k in keys)
        self.causal = _checks.flag("causal", causal)

    @_checks.shaped
    def __call__(self, x: Float[Array, "T d_model"]) -> Float[Array, "T d_model"]:
        _features("x", x, self.query.weight.shape[0], "d_model")
        q, k, v = self.query(x), self.key_proj(x), self.value(x)
        return self.out(aft_simple(q, k, v, causal=self.causal))

    def init_cache(self, length: int) -> tuple[Float[Array, " d_model"], Float[Array, " d_model"],
                                               Float[Array, " d_model"]]:
        """The decoding state, whatever ``length``: the running maximum, numerator and denominator of the causal
        sum, three ``(d_model,)`` vectors (the protocol of :meth:`attnbook.mha.MultiHeadSelfAttention.step`)."""
        _checks.positive_int("length", length)
        d = self.query.weight.shape[1]
        return jnp.full((d,), jnp.finfo(jnp.float32).min), jnp.zeros((d,)), jnp.zeros((d,))

    def step(self, x: Float[Array, "1 d_model"], cache: tuple, t) -> tuple[Float[Array, "1 d_model"], tuple]:
        """One decoding step: ``sigmoid(q_t) * sum_{t'<=t} exp(k_t') v_t' / sum_{t'<=t} exp(k_t')`` for the new row
        ``x (1, d_model)``, per channel, the sums kept rescaled to their running maximum
        (:func:`attnbook.attention.merge_softmax_sums`). ``t`` is not needed (no positions); a causal layer only."""
        if not self.causal:
            raise ValueError("step decodes one token at a time and needs a causal layer")
        m, num, den = cache
        q, k, v = self.query(x)[0], self.key_proj(x)[0], self.value(x)[0]
        top, den, num = merge_softmax_sums((m, den, num), (k, jnp.ones_like(k), v))
        return self.out((jax.nn.sigmoid(q) * num / den)[None]), (top, num, den)


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
        causal = _checks.flag("causal", causal)
        if d_model % heads:
            raise ValueError(f"d_model must be divisible by heads, got d_model={d_model}, heads={heads}")
        if not causal and window % 2 == 0:
            raise ValueError(f"window must be odd when causal=False, got {window}")
        keys = _keys(_checks.prng_key("key", key), 5)
        self.query, self.value, self.out = (Dense(d_model, d_model, key=k) for k in keys[:3])
        self.key_proj = Dense(d_model, heads, key=keys[3])
        self.raw_kernel = init(keys[4], (heads, window), "normal", scale=1.0)
        self.gain = jnp.zeros((heads,))
        self.shift = jnp.zeros((heads,))
        self.causal = causal

    def kernel(self) -> Float[Array, "heads window"]:
        """The ``(heads, window)`` position biases."""
        raw = self.raw_kernel
        normalised = (raw - raw.mean(axis=1, keepdims=True)) / (raw.std(axis=1, keepdims=True) + 1e-5)
        return self.gain[:, None] * normalised + self.shift[:, None]

    @_checks.shaped
    def __call__(self, x: Float[Array, "T d_model"]) -> Float[Array, "T d_model"]:
        _features("x", x, self.query.weight.shape[0], "d_model")
        q, k, v = self.query(x), self.key_proj(x), self.value(x)
        return self.out(aft_conv(q, k, v, self.kernel(), causal=self.causal))


__all__ = [
    "aft_full", "aft_local", "aft_simple", "aft_conv", "conv_bias_matrix", "AFTFull", "AFTLocal", "AFTSimple",
    "AFTConv", "VARIANTS", "ROW_BLOCK",
]
