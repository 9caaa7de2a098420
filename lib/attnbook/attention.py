"""Chapter 2: scaled dot-product attention, and the single-head self-attention module.

``softmax(Q K^T / sqrt(d) + bias)`` restricted to the keys a mask allows, applied to ``V``.
Single sequences, rows as tokens; ``jax.vmap`` adds batch and head axes.

Chapter 6: :func:`chunked_attention`, the same function computed in chunks so that no
``Tq x Tk`` array is ever built (Rabe & Staats, 2021).
"""

from __future__ import annotations

import functools
import math

import equinox as eqx
import jax
import jax.numpy as jnp

from . import _checks, masking


def attention_scores(q: jnp.ndarray, k: jnp.ndarray) -> jnp.ndarray:
    """Scaled scores ``q @ k.T / sqrt(d)``, shape ``(Tq, Tk)`` for q ``(Tq, d)``, k ``(Tk, d)``.

    Dividing by ``sqrt(d)`` keeps the variance of a score near 1 when the entries of ``q`` and
    ``k`` are independent with unit variance, whatever ``d`` is; chapter 2 measures it.
    """
    _checks.ndim("q", q, 2, "(Tq, d)")
    _checks.ndim("k", k, 2, "(Tk, d)")
    if q.shape[1] != k.shape[1]:
        raise ValueError(
            f"q and k must have the same feature size d, got q {q.shape} and k {k.shape}"
        )
    return q @ k.T / jnp.sqrt(jnp.asarray(q.shape[1], dtype=q.dtype))


def masked_softmax(scores: jnp.ndarray, mask: jnp.ndarray | None = None) -> jnp.ndarray:
    """Softmax over the last axis, counting only entries where ``mask`` is True.

    A row whose entries are all masked gets all-zero weights (not NaN, not uniform), and its
    gradient is zero and finite. No ``-inf`` enters the computation: masked entries are
    excluded with ``where`` after the exponential.
    """
    if mask is None:
        return jax.nn.softmax(scores, axis=-1)
    # Subtracting the row maximum over *allowed* entries keeps exp() in range; the shift does
    # not change the softmax, so its gradient is not needed.
    lowest = jnp.finfo(scores.dtype).min
    row_max = jnp.max(jnp.where(mask, scores, lowest), axis=-1, keepdims=True)
    row_max = jax.lax.stop_gradient(jnp.where(jnp.any(mask, axis=-1, keepdims=True), row_max, 0.0))
    # The masked branch is replaced by 0 *before* exp so that no overflow or inf*0 appears.
    shifted = jnp.where(mask, scores - row_max, 0.0)
    unnormalised = jnp.where(mask, jnp.exp(shifted), 0.0)
    total = jnp.sum(unnormalised, axis=-1, keepdims=True)
    return unnormalised / jnp.where(total > 0, total, 1.0)


def scaled_dot_product_attention(
    q: jnp.ndarray,
    k: jnp.ndarray,
    v: jnp.ndarray,
    mask: jnp.ndarray | None = None,
    bias: jnp.ndarray | None = None,
) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Scaled dot-product attention for one sequence.

    Args:
        q: queries, shape ``(Tq, d)``.
        k: keys, shape ``(Tk, d)``.
        v: values, shape ``(Tk, dv)``.
        mask: optional boolean ``(Tq, Tk)``; ``mask[i, j]`` True where query ``i`` may attend
            to key ``j``.
        bias: optional ``(Tq, Tk)`` added to the scaled scores before the softmax (ALiBi,
            relative-position biases).

    Returns:
        ``(out, weights)``: ``out`` of shape ``(Tq, dv)`` and the attention weights of shape
        ``(Tq, Tk)``, whose rows sum to 1, or to 0 for a query with no visible key.
    """
    scores = attention_scores(q, k)
    _checks.ndim("v", v, 2, "(Tk, dv)")
    if v.shape[0] != k.shape[0]:
        raise ValueError(
            f"k and v must have the same length Tk, got k {k.shape} and v {v.shape}"
        )
    if bias is not None:
        _checks.shape("bias", bias, scores.shape, "(Tq, Tk)")
        scores = scores + bias
    if mask is not None:
        _checks.shape("mask", mask, scores.shape, "(Tq, Tk)")
        if jnp.asarray(mask).dtype != jnp.bool_:
            # An additive mask (0 / -inf) passed here would be silently misread; say so.
            raise ValueError(
                f"mask must be boolean (True where a query may attend), got dtype "
                f"{jnp.asarray(mask).dtype}; pass additive terms as bias="
            )
    weights = masked_softmax(scores, mask)
    return weights @ v, weights


class SelfAttention(eqx.Module):
    """Single-head self-attention, the model of chapters 2 and 3 (and of source articles 000/003).

    ``Q = X W_q + b_q``, ``K = X W_k + b_k``, ``V = X W_v + b_v`` with rows as tokens, then
    :func:`scaled_dot_product_attention`. With ``causal=True`` token ``t`` sees tokens ``0..t``
    only, so the last row of the output has seen the whole sequence. Parameters:
    ``(d_in + 1) * (2 * d_attn + d_out)``.
    """

    w_q: jax.Array
    b_q: jax.Array
    w_k: jax.Array
    b_k: jax.Array
    w_v: jax.Array
    b_v: jax.Array
    causal: bool = eqx.field(static=True)

    def __init__(self, d_in: int, d_attn: int, d_out: int, *, causal: bool = True, key: jax.Array):
        d_in = _checks.positive_int("d_in", d_in)
        d_attn = _checks.positive_int("d_attn", d_attn)
        d_out = _checks.positive_int("d_out", d_out)
        shapes = ((d_in, d_attn), (d_attn,), (d_in, d_attn), (d_attn,), (d_in, d_out), (d_out,))
        # Uniform(-1/sqrt(d_in), 1/sqrt(d_in)), the default of eqx.nn.Linear: unit-scale outputs.
        self.w_q, self.b_q, self.w_k, self.b_k, self.w_v, self.b_v = _checks.uniform_init(key, shapes, d_in)
        self.causal = causal

    def __call__(self, x: jax.Array, mask: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
        """``x`` of shape ``(T, d_in)`` -> ``(out (T, d_out), weights (T, T))``.

        ``mask`` (boolean ``(T, T)``) is combined with the causal mask when ``causal`` is set.
        """
        _checks.ndim("x", x, 2, "(T, d_in)")
        if x.shape[1] != self.w_q.shape[0]:
            raise ValueError(f"x must have d_in={self.w_q.shape[0]} features, got shape {x.shape}")
        if self.causal:
            causal = masking.causal_mask(x.shape[0])
            mask = causal if mask is None else mask & causal
        q = x @ self.w_q + self.b_q
        k = x @ self.w_k + self.b_k
        v = x @ self.w_v + self.b_v
        return scaled_dot_product_attention(q, k, v, mask=mask)


# ---------------------------------------------------------------------------------------------
# Chapter 6: memory-efficient attention


def _chunk_summary(q_chunk, k_chunk, v_chunk, allowed):
    """One query chunk against one key chunk, shifted by the chunk's own row maxima.

    Returns ``(top, total, weighted)``: per query, the largest allowed score of the chunk (or the
    lowest float when none is allowed), ``sum exp(s - top)`` and ``sum exp(s - top) v`` over the
    allowed keys. Only ``(query_chunk, key_chunk)`` scores exist at a time.
    """
    scores = q_chunk @ k_chunk.T
    lowest = jnp.finfo(scores.dtype).min
    top = jax.lax.stop_gradient(jnp.max(jnp.where(allowed, scores, lowest), axis=-1))
    # As in masked_softmax: masked entries are replaced before exp, so no inf or NaN appears.
    weights = jnp.where(allowed, jnp.exp(jnp.where(allowed, scores - top[:, None], 0.0)), 0.0)
    return top, jnp.sum(weights, axis=-1), weights @ v_chunk


def _merge(carry, summary):
    """Add a chunk's summary to the running ``(top, total, weighted)`` of the keys seen so far.

    Both sums are rescaled to the larger of the two maxima (the "online softmax" recurrence), so
    every partial sum has its largest term equal to 1 and nothing overflows. A running maximum
    that is still the lowest float (no allowed key yet) meets a real one as ``exp(lowest - m)``,
    which is 0: the empty sums stay empty.
    """
    top, total, weighted = carry
    chunk_top, chunk_total, chunk_weighted = summary
    new_top = jnp.maximum(top, chunk_top)
    old_scale, chunk_scale = jnp.exp(top - new_top), jnp.exp(chunk_top - new_top)
    return (new_top, total * old_scale + chunk_total * chunk_scale,
            weighted * old_scale[:, None] + chunk_weighted * chunk_scale[:, None])


@functools.partial(jax.jit, static_argnames=("query_chunk", "key_chunk", "causal"))
def chunked_attention(
    q: jnp.ndarray,
    k: jnp.ndarray,
    v: jnp.ndarray,
    *,
    query_chunk: int,
    key_chunk: int,
    mask: jnp.ndarray | None = None,
    causal: bool = False,
) -> jnp.ndarray:
    """Scaled dot-product attention without the ``Tq x Tk`` matrices (Rabe & Staats, 2021).

    The output equals ``scaled_dot_product_attention(q, k, v, mask)[0]`` (up to float rounding),
    but the scores are computed ``query_chunk x key_chunk`` at a time. For each chunk of queries
    (``jax.lax.map``), a ``jax.lax.scan`` runs over the chunks of keys and keeps, per query, the
    running maximum of the scores, the running sum of their exponentials and the running weighted
    sum of values, rescaling both sums whenever the maximum grows. Both loop bodies are wrapped in
    ``jax.checkpoint``, so the backward pass recomputes each chunk's scores instead of storing them:
    forward and backward need ``O(query_chunk * key_chunk)`` temporary memory for the scores plus
    ``O(T d)`` for inputs, outputs and per-chunk running sums, never ``O(Tq Tk)``.

    Args:
        q: queries, shape ``(Tq, d)``.
        k: keys, shape ``(Tk, d)``.
        v: values, shape ``(Tk, dv)``.
        query_chunk: queries per chunk (positive; clipped to ``Tq``).
        key_chunk: keys per chunk (positive; clipped to ``Tk``). Lengths need not be multiples
            of the chunk sizes: the inputs are padded and the padding keys masked out.
        mask: optional boolean ``(Tq, Tk)``, True where query ``i`` may attend to key ``j``.
            (A mask is itself ``Tq x Tk``; for causal attention use ``causal=True``, which builds
            each chunk's mask from positions and stores nothing.)
        causal: if True, query ``i`` sees keys ``j <= i`` only (combined with ``mask`` by "and").

    Returns:
        ``out`` of shape ``(Tq, dv)``. A query with no visible key gets a zero row (never NaN),
        with finite gradients, as in :func:`scaled_dot_product_attention`.
    """
    _checks.ndim("q", q, 2, "(Tq, d)")
    _checks.ndim("k", k, 2, "(Tk, d)")
    _checks.ndim("v", v, 2, "(Tk, dv)")
    if q.shape[1] != k.shape[1]:
        raise ValueError(f"q and k must have the same feature size d, got q {q.shape} and k {k.shape}")
    if v.shape[0] != k.shape[0]:
        raise ValueError(f"k and v must have the same length Tk, got k {k.shape} and v {v.shape}")
    query_chunk = _checks.positive_int("query_chunk", query_chunk)
    key_chunk = _checks.positive_int("key_chunk", key_chunk)
    (tq, d), (tk, dv) = q.shape, v.shape
    if mask is not None:
        _checks.shape("mask", mask, (tq, tk), "(Tq, Tk)")
        if jnp.asarray(mask).dtype != jnp.bool_:
            raise ValueError(f"mask must be boolean (True where a query may attend), got dtype "
                             f"{jnp.asarray(mask).dtype}")

    query_chunk, key_chunk = min(query_chunk, tq), min(key_chunk, tk)
    n_q, n_k = math.ceil(tq / query_chunk), math.ceil(tk / key_chunk)
    pad_q, pad_k = n_q * query_chunk - tq, n_k * key_chunk - tk
    q = q / jnp.sqrt(jnp.asarray(d, dtype=q.dtype))  # scale once, (Tq, d), not the scores
    q_chunks = jnp.pad(q, ((0, pad_q), (0, 0))).reshape(n_q, query_chunk, d)
    k_chunks = jnp.pad(k, ((0, pad_k), (0, 0))).reshape(n_k, key_chunk, d)
    v_chunks = jnp.pad(v, ((0, pad_k), (0, 0))).reshape(n_k, key_chunk, dv)
    if mask is not None:  # (n_q, query_chunk, Tk + pad_k): a reshape, no copy of the mask's layout
        mask = jnp.pad(mask, ((0, pad_q), (0, pad_k))).reshape(n_q, query_chunk, n_k * key_chunk)
    key_offsets = jnp.arange(n_k) * key_chunk
    lowest = jnp.finfo(q.dtype).min

    @jax.checkpoint
    def one_query_chunk(args):
        q_chunk, q_start, mask_rows = args
        query_pos = q_start + jnp.arange(query_chunk)

        @jax.checkpoint  # the backward pass recomputes this chunk's scores instead of storing them
        def one_key_chunk(carry, chunk):
            k_chunk, v_chunk, k_start = chunk
            key_pos = k_start + jnp.arange(key_chunk)
            allowed = jnp.broadcast_to(key_pos < tk, (query_chunk, key_chunk))  # padding keys never
            if causal:
                allowed = allowed & (key_pos[None, :] <= query_pos[:, None])
            if mask_rows is not None:
                allowed = allowed & jax.lax.dynamic_slice_in_dim(mask_rows, k_start, key_chunk, axis=1)
            return _merge(carry, _chunk_summary(q_chunk, k_chunk, v_chunk, allowed)), None

        start = (jnp.full((query_chunk,), lowest, q.dtype), jnp.zeros((query_chunk,), q.dtype),
                 jnp.zeros((query_chunk, dv), q.dtype))
        (_, total, weighted), _ = jax.lax.scan(one_key_chunk, start, (k_chunks, v_chunks, key_offsets))
        # A query with no visible key has total == 0 and weighted == 0: its output is 0.
        return weighted / jnp.where(total > 0, total, 1.0)[:, None]

    out = jax.lax.map(one_query_chunk, (q_chunks, jnp.arange(n_q) * query_chunk, mask))
    return out.reshape(n_q * query_chunk, dv)[:tq]
