"""Chapter 6: FlashAttention's algorithm, forward and backward, in JAX (Dao et al. 2022; Dao 2023).

The function is :func:`attnbook.attention.scaled_dot_product_attention`'s output, computed tile by tile
so that no ``Tq x Tk`` array exists, forward or backward:

- **Forward**, in FlashAttention-2's loop order (queries outside, keys inside): for each block of
  ``query_block`` queries, a loop over the blocks of ``key_block`` keys keeps the running maximum ``m``, the
  running sum ``l`` of exponentials and the running weighted sum of values, merged with the one
  online-softmax recurrence of the book (:func:`attnbook.attention.merge_softmax_sums`). At the end of the
  key loop it divides once and keeps, besides the output ``O``, one number per query: the log-sum-exp
  ``L = m + log l`` of its scores. ``O`` and ``L`` are all the backward pass needs besides ``Q, K, V``.
- **Backward**, a ``jax.custom_vjp``: ``D = rowsum(dO * O)`` per query, then for each block of keys (the
  outer loop) and each block of queries (the inner loop) it recomputes the tile of scores ``S = Q K^T`` and
  of weights ``P = exp(S - L)`` from the stored ``L``, and accumulates ``dV += P^T dO``,
  ``dS = P * (dO V^T - D)``, ``dK += dS^T Q`` and ``dQ += dS K``. Nothing of size ``Tq x Tk`` is stored
  between the passes, and no autodiff runs through the loops.
- **Causal block skipping**: with ``causal=True`` a query block visits only the key blocks that hold a key
  at or before its last query, and a key block only the query blocks from the one holding its first key;
  tiles entirely above the diagonal are never computed, about half of them at long lengths.

Each step was checked against the authors' Triton implementation, ``flash_attn/flash_attn_triton.py`` of
Dao-AILab/flash-attention (commit 0251105a, August 2026): the causal end of the key loop (line 160), the
stored log-sum-exp (lines 252, 264), ``delta = sum(o * do)`` (line 327), the causal start of the query loop
of the backward pass (line 400) and its updates ``p``, ``dv``, ``dp``, ``ds``, ``dk``, ``dq`` (lines
510-565). Causal attention is aligned at the top left there as here: query ``i`` sees keys ``j <= i``.

This is the algorithm, not the kernel. FlashAttention's speed comes from a GPU kernel that keeps each tile
in on-chip SRAM and reads ``Q, K, V`` from HBM once per tile; here XLA compiles the same loops for whatever
device runs them, and on a CPU the tiles live in the caches.

The contract of :mod:`attnbook` holds as for :func:`attnbook.attention.chunked_attention`: masks, fully
masked rows (zero output, zero finite gradients), hidden padding that may hold NaN, float16/bfloat16
computed in float32, scores scaled down when they could overflow, ``T = 0``.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from . import _checks
from .attention import _boolean_mask, _chunk_summary, _compute_dtype, _scaled, merge_softmax_sums, score_factor


@_boolean_mask
@_checks.shaped
def flash_attention(
    q: Float[Array, "Tq d"],
    k: Float[Array, "Tk d"],
    v: Float[Array, "Tk dv"],
    *,
    query_block: int,
    key_block: int,
    mask: Bool[Array, "Tq Tk"] | None = None,
    causal: bool = False,
    return_lse: bool = False,
):
    """Scaled dot-product attention by FlashAttention's algorithm, with its recomputing backward pass.

    The output equals ``scaled_dot_product_attention(q, k, v, mask)[0]`` (up to float rounding), and so
    does its gradient; only ``(query_block, key_block)`` tiles of scores exist at a time.

    Args:
        q: queries, shape ``(Tq, d)``.
        k: keys, shape ``(Tk, d)``.
        v: values, shape ``(Tk, dv)``.
        query_block: queries per tile (``B_r`` in the papers), a positive integer, clipped to ``Tq``.
        key_block: keys per tile (``B_c``), a positive integer, clipped to ``Tk``. Lengths need not be
            multiples of the block sizes: the inputs are padded and the padding keys masked out.
        mask: optional boolean ``(Tq, Tk)``, True where query ``i`` may attend to key ``j``.
        causal: if True, query ``i`` sees keys ``j <= i`` only (combined with ``mask`` by "and"), and the
            tiles entirely above the diagonal are skipped.
        return_lse: if True, also return the log-sum-exp of each query's scores, the one number per
            query that the backward pass keeps (``-inf`` for a query that sees no key; differentiable).

    Returns:
        ``out`` of shape ``(Tq, dv)`` in the dtype of the inputs, or ``(out, lse)`` with ``lse`` of shape
        ``(Tq,)`` in float32 or wider. The scores of ``lse`` are ``q . k / sqrt(d)``, scaled down by a power
        of two in the rare case where they could overflow (:func:`attnbook.attention.score_factor`).
    """
    query_block = _checks.positive_int("query_block", query_block)
    key_block = _checks.positive_int("key_block", key_block)
    causal = _checks.flag("causal", causal)
    return_lse = _checks.flag("return_lse", return_lse)
    q, k, v, mask = (None if a is None else jnp.asarray(a) for a in (q, k, v, mask))
    dtype = jnp.result_type(q, k, v)
    compute = _compute_dtype(dtype)
    (tq, _), (tk, dv) = q.shape, v.shape
    if tq == 0 or tk == 0:
        out, lse = jnp.zeros((tq, dv), dtype), jnp.full((tq,), -jnp.inf, compute)
        return (out, lse) if return_lse else out
    q, k, v = (a.astype(compute) for a in (q, k, v))
    if mask is not None:  # what no query may see is left out of the bound, as in scaled_dot_product_attention
        factor = score_factor(jnp.where(jnp.any(mask, axis=1)[:, None], q, 0.0),
                              jnp.where(jnp.any(mask, axis=0)[:, None], k, 0.0))
    else:
        factor = score_factor(q, k)
    out, lse = _flash(_scaled(q) * factor, k, v, mask, min(query_block, tq), min(key_block, tk), causal)
    out = out.astype(dtype)
    return (out, lse) if return_lse else out


def _tiles(query_block, key_block, tq, tk):
    """Numbers of query and key blocks and the padding that makes the lengths multiples of the blocks."""
    n_q, n_k = math.ceil(tq / query_block), math.ceil(tk / key_block)
    return n_q, n_k, n_q * query_block - tq, n_k * key_block - tk


def _allowed(mask, causal, q_start, k_start, query_block, key_block, tk):
    """The tile's "may attend" array: real keys, the causal triangle, the mask's tile."""
    query_pos = q_start + jnp.arange(query_block)
    key_pos = k_start + jnp.arange(key_block)
    allowed = jnp.broadcast_to(key_pos < tk, (query_block, key_block))  # padding keys never
    if causal:
        allowed = allowed & (key_pos[None, :] <= query_pos[:, None])
    if mask is not None:
        allowed = allowed & jax.lax.dynamic_slice(mask, (q_start, k_start), (query_block, key_block))
    return allowed


def _key_blocks_seen(i, query_block, key_block, n_k, causal):
    """How many key blocks query block ``i`` visits: all, or (causal) those with a key <= its last query."""
    if not causal:
        return n_k
    return jnp.minimum(n_k, (i * query_block + query_block - 1) // key_block + 1)


def _first_query_block(j, query_block, key_block, causal):
    """The first query block that sees key block ``j``: 0, or (causal) the block of query ``j * key_block``."""
    return (j * key_block) // query_block if causal else 0


def _padded(q, k, v, mask, query_block, key_block):
    (tq, _), (tk, _) = q.shape, k.shape
    _, _, pad_q, pad_k = _tiles(query_block, key_block, tq, tk)
    q = jnp.pad(q, ((0, pad_q), (0, 0)))
    k, v = jnp.pad(k, ((0, pad_k), (0, 0))), jnp.pad(v, ((0, pad_k), (0, 0)))
    mask = None if mask is None else jnp.pad(mask, ((0, pad_q), (0, pad_k)))
    return q, k, v, mask


def _forward(q, k, v, mask, query_block, key_block, causal):
    """Output and log-sum-exp; ``q`` is already scaled. FlashAttention-2's forward: queries outside, keys inside."""
    (tq, d), (tk, dv) = q.shape, v.shape
    n_q, n_k, _, _ = _tiles(query_block, key_block, tq, tk)
    clean = mask is not None or causal  # otherwise every real key is seen and padding keys are zeros
    q, k, v, mask = _padded(q, k, v, mask, query_block, key_block)
    lowest = jnp.finfo(q.dtype).min

    def one_query_block(i):
        q_start = i * query_block
        q_tile = jax.lax.dynamic_slice_in_dim(q, q_start, query_block)

        def one_key_block(j, carry):
            k_start = j * key_block
            k_tile = jax.lax.dynamic_slice_in_dim(k, k_start, key_block)
            v_tile = jax.lax.dynamic_slice_in_dim(v, k_start, key_block)
            allowed = _allowed(mask, causal, q_start, k_start, query_block, key_block, tk)
            return merge_softmax_sums(carry, _chunk_summary(q_tile, k_tile, v_tile, allowed, clean))

        start = (jnp.full((query_block,), lowest, q.dtype), jnp.zeros((query_block,), q.dtype),
                 jnp.zeros((query_block, dv), q.dtype))
        top, total, weighted = jax.lax.fori_loop(
            0, _key_blocks_seen(i, query_block, key_block, n_k, causal), one_key_block, start)
        seen = total > 0  # a query with no visible key: output 0, log-sum-exp -inf
        out = weighted / jnp.where(seen, total, 1.0)[:, None]
        lse = jnp.where(seen, top + jnp.log(jnp.where(seen, total, 1.0)), -jnp.inf)
        return out, lse

    out, lse = jax.lax.map(one_query_block, jnp.arange(n_q))
    return out.reshape(n_q * query_block, dv)[:tq], lse.reshape(n_q * query_block)[:tq]


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5, 6))
def _flash(q, k, v, mask, query_block, key_block, causal):
    return _forward(q, k, v, mask, query_block, key_block, causal)


def _flash_forward(q, k, v, mask, query_block, key_block, causal):
    out, lse = _forward(q, k, v, mask, query_block, key_block, causal)
    return (out, lse), (q, k, v, mask, out, lse)  # the residuals: inputs, output and one number per query


def _flash_backward(query_block, key_block, causal, residuals, cotangents):
    """FlashAttention-2's backward: key blocks outside, query blocks inside, every tile recomputed from L."""
    q, k, v, mask, out, lse = residuals
    d_out, d_lse = cotangents
    (tq, d), (tk, dv) = q.shape, v.shape
    n_q, n_k, pad_q, _ = _tiles(query_block, key_block, tq, tk)
    clean = mask is not None or causal
    # D_i = rowsum(dO_i * O_i) = sum_j P_ij dP_ij: the softmax's Jacobian without the T x T weights.
    delta = jnp.sum(d_out * jnp.where(jnp.isfinite(lse)[:, None], out, 0.0), axis=-1)
    q, k, v, mask = _padded(q, k, v, mask, query_block, key_block)
    d_out, delta, d_lse = (jnp.pad(a, [(0, pad_q)] + [(0, 0)] * (a.ndim - 1)) for a in (d_out, delta, d_lse))
    lse = jnp.pad(lse, (0, pad_q), constant_values=-jnp.inf)  # padding queries: no gradient flows from them

    def one_key_block(d_q, j):
        k_start = j * key_block
        k_tile = jax.lax.dynamic_slice_in_dim(k, k_start, key_block)
        v_tile = jax.lax.dynamic_slice_in_dim(v, k_start, key_block)

        def one_query_block(i, carry):
            d_k, d_v, d_q = carry
            q_start = i * query_block
            q_tile, do_tile, lse_tile, delta_tile, dlse_tile = (
                jax.lax.dynamic_slice_in_dim(a, q_start, query_block) for a in (q, d_out, lse, delta, d_lse))
            allowed = _allowed(mask, causal, q_start, k_start, query_block, key_block, tk)
            allowed = allowed & jnp.isfinite(lse_tile)[:, None]
            qt, kt, vt = q_tile, k_tile, v_tile
            if clean:  # as in the forward pass: what no pair of this tile uses is 0, so no 0 * NaN
                qt = jnp.where(jnp.any(allowed, axis=1)[:, None], qt, 0.0)
                seen = jnp.any(allowed, axis=0)[:, None]
                kt, vt = jnp.where(seen, kt, 0.0), jnp.where(seen, vt, 0.0)
            scores = qt @ kt.T
            weights = jnp.where(allowed, jnp.exp(jnp.where(allowed, scores - lse_tile[:, None], 0.0)), 0.0)
            d_v = d_v + weights.T @ do_tile
            d_weights = do_tile @ vt.T
            d_scores = jnp.where(allowed, weights * (d_weights - delta_tile[:, None] + dlse_tile[:, None]), 0.0)
            d_k = d_k + d_scores.T @ qt
            d_q_tile = jax.lax.dynamic_slice_in_dim(d_q, q_start, query_block) + d_scores @ kt
            return d_k, d_v, jax.lax.dynamic_update_slice_in_dim(d_q, d_q_tile, q_start, axis=0)

        start = (jnp.zeros((key_block, d), q.dtype), jnp.zeros((key_block, dv), q.dtype), d_q)
        d_k, d_v, d_q = jax.lax.fori_loop(_first_query_block(j, query_block, key_block, causal), n_q,
                                          one_query_block, start)
        return d_q, (d_k, d_v)

    d_q, (d_k, d_v) = jax.lax.scan(one_key_block, jnp.zeros_like(q), jnp.arange(n_k))
    d_k, d_v = d_k.reshape(n_k * key_block, d)[:tk], d_v.reshape(n_k * key_block, dv)[:tk]
    return d_q[:tq], d_k, d_v, None


_flash.defvjp(_flash_forward, _flash_backward)
