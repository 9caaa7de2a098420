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
from jaxtyping import Array, Float, Int

from . import _checks, masking
from .nn import Dense, count_parameters, features as _features, init, split as _keys
from .attention import scaled_dot_product_attention

ROW_BLOCK = 64
"""Rows of AFT-full computed at once: its temporary memory is ``ROW_BLOCK * T * d`` numbers."""

VARIANTS = ("aft-full", "aft-local", "aft-simple", "aft-conv")


# ---------------------------------------------------------------------------------------------
# Argument checks and non-finite input


def _rows(name: str, x, max_len: int) -> None:
    """Raise unless ``x`` has at most ``max_len`` positions (its first axis): the layer's learned positions."""
    if x.shape[0] > max_len:
        raise ValueError(f"{name} must have at most max_len={max_len} positions (first axis), "
                         f"got shape {tuple(x.shape)}")


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
        top = jnp.maximum(m, k_t)
        shift = jnp.where(top == -jnp.inf, jnp.zeros((), top.dtype), top)  # nothing to shift by yet
        old_scale, new_scale = jnp.exp(m - shift), jnp.exp(k_t - shift)
        carry = (top, num * old_scale + v_t * new_scale, den * old_scale + new_scale)
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
        keys = _keys(_checks.prng_key("key", key), 4)
        self.query, self.key_proj, self.value, self.out = (Dense(d_model, d_model, key=k) for k in keys)
        self.heads = heads

    @_checks.shaped
    def __call__(self, x: Float[Array, "T d_model"]) -> Float[Array, "T d_model"]:
        _features("x", x, self.query.weight.shape[0], "d_model")
        length, d_model = x.shape
        if length == 0:  # no positions: nothing to attend to or from
            return jnp.zeros(x.shape, dtype=jnp.result_type(x, self.out.weight))
        split = lambda a: a.reshape(length, self.heads, d_model // self.heads)
        q, k, v = (split(p(x)) for p in (self.query, self.key_proj, self.value))
        mask = masking.causal_mask(length)
        per_head = jax.vmap(lambda q, k, v: scaled_dot_product_attention(q, k, v, mask=mask)[0],
                            in_axes=1, out_axes=1)(q, k, v)
        return self.out(per_head.reshape(length, d_model))


def make_mixer(kind: str, d_model: int, max_len: int, *, key: jax.Array, heads: int = 4, window: int = 9,
               bias_dim: int = 16) -> eqx.Module:
    """A causal token-mixing layer by name: ``"attention"`` or one of :data:`VARIANTS`."""
    if not isinstance(kind, str):
        raise TypeError(f"kind must be a string, 'attention' or one of {VARIANTS}, got {_checks._describe(kind)}")
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
        d_model = _checks.positive_int("d_model", d_model)
        mlp_ratio = _checks.positive_int("mlp_ratio", mlp_ratio)
        k1, k2 = _keys(_checks.prng_key("key", key), 2)
        self.norm_mix, self.norm_mlp = eqx.nn.LayerNorm(d_model), eqx.nn.LayerNorm(d_model)
        self.mixer = mixer
        self.hidden = Dense(d_model, mlp_ratio * d_model, key=k1)
        self.project = Dense(mlp_ratio * d_model, d_model, key=k2)

    @_checks.shaped
    def __call__(self, x: Float[Array, "T d_model"]) -> Float[Array, "T d_model"]:
        _features("x", x, self.hidden.weight.shape[0], "d_model")
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
        if isinstance(kinds, str) or not isinstance(kinds, Sequence):
            raise TypeError("kinds must be a sequence of names such as ('attention', 'aft-full'), "
                            f"got {_checks._describe(kinds)}")
        if not kinds:
            raise ValueError("kinds must name at least one mixer, got an empty sequence")
        self.kinds = tuple(kinds)
        self.mixers = tuple(make_mixer(kind, d_model, max_len, key=k, **options)
                            for kind, k in zip(self.kinds, _keys(_checks.prng_key("key", key), len(self.kinds))))
        self.choice = jnp.asarray(0, dtype=jnp.int32)

    @_checks.shaped
    def __call__(self, x: Float[Array, "T d_model"]) -> Float[Array, "T d_model"]:
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
        keys = _keys(_checks.prng_key("key", key), 3 + 2 * depth)

        def mixer(k):
            if isinstance(kind, str):
                return make_mixer(kind, d_model, max_len, key=k, **mixer_options)
            return MixerChoice(kind, d_model, max_len, key=k, **mixer_options)

        self.embed = init(keys[0], (vocab_size, d_model), "normal", scale=1.0)  # row i: token i
        self.position = init(keys[1], (max_len, d_model), "normal", scale=0.02)
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

    @_checks.shaped
    def __call__(self, tokens: Int[Array, "T"]) -> Float[Array, "T num_classes"]:
        """Next-token logits ``(T, num_classes)`` for integer tokens ``(T,)`` in ``[0, vocab_size)``, ``T <= max_len``.

        Token ids are checked, also under ``jit``/``vmap`` (``-1`` is an error, not the last token).
        """
        _rows("tokens", tokens, self.position.shape[0])
        tokens = _checks.integers_in_range("tokens", tokens, 0, self.embed.shape[0])
        x = self.embed[tokens] + self.position[: tokens.shape[0]]
        for block in self.blocks:
            x = block(x)
        return self.head(jax.vmap(self.norm)(x))


__all__ = [
    "aft_full", "aft_local", "aft_simple", "aft_conv", "conv_bias_matrix", "AFTFull", "AFTLocal", "AFTSimple",
    "AFTConv", "CausalSelfAttention", "Block", "MixerChoice", "NextTokenModel", "make_mixer", "count_parameters",
]
