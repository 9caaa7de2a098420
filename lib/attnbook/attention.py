"""Chapter 2: scaled dot-product attention, and the single-head self-attention module.

``softmax(Q K^T / sqrt(d) + bias)`` restricted to the keys a mask allows, applied to ``V``.
Single sequences, rows as tokens; ``jax.vmap`` adds batch and head axes.
"""

from __future__ import annotations

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
        keys = jax.random.split(key, 6)
        # Uniform(-1/sqrt(d_in), 1/sqrt(d_in)), the default of eqx.nn.Linear: unit-scale outputs.
        init = lambda k, shape: jax.random.uniform(k, shape, minval=-1.0, maxval=1.0) / jnp.sqrt(d_in)
        self.w_q, self.b_q = init(keys[0], (d_in, d_attn)), init(keys[1], (d_attn,))
        self.w_k, self.b_k = init(keys[2], (d_in, d_attn)), init(keys[3], (d_attn,))
        self.w_v, self.b_v = init(keys[4], (d_in, d_out)), init(keys[5], (d_out,))
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
