"""Chapter 2: scaled dot-product attention, and the single-head self-attention module.

``softmax(Q K^T / sqrt(d) + bias)`` restricted to the keys a mask allows, applied to ``V``.
Single sequences, rows as tokens; ``jax.vmap`` adds batch and head axes.

Chapter 6: :func:`chunked_attention`, the same function computed in chunks so that no
``Tq x Tk`` array is ever built (Rabe & Staats, 2021), and :func:`flash_attention`, FlashAttention's
algorithm (Dao et al. 2022; Dao 2023): the same tiles, a stored log-sum-exp per query, and a backward
pass that recomputes the tiles instead of differentiating through the loops; :func:`flash_tiles` says which tiles
its two passes compute.

Bad and extreme input (the contract of :mod:`attnbook`):

- A key may be hidden from a query by ``mask=False`` or by ``bias=-inf``; both mean the same,
  exactly. A query that sees no key gets zero weights and a zero output, with zero gradients.
- Hidden inputs may hold anything (NaN, inf): keys and values that no query may see, and queries
  that see nothing, are replaced by zeros with ``where`` before they meet any product, so that
  neither the output nor the gradient ever computes ``0 * NaN``. A non-finite value that only some
  queries see reaches only those queries' outputs (see :func:`_weighted_values`).
- float16/bfloat16 inputs are computed in float32 (queries scaled by ``1/sqrt(d)`` before the
  product, softmax shifted by the row maximum) and the results cast back to the input dtype.
- ``T = 0``: no queries gives empty results; no keys gives zero rows.
- Queries and keys so large that a score could overflow the dtype are scaled down first
  (:func:`score_factor`): the weights are then the row's argmax, one-hot, as the exact softmax is.
"""

from __future__ import annotations

import functools
import inspect
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from . import _checks, nn


# ---------------------------------------------------------------------------------------------
# Helpers


def _boolean_mask(fn):
    """Reject a non-boolean ``mask`` with a ``TypeError`` that points to ``bias=``.

    Applied above :func:`_checks.shaped`, whose generic message ("mask must be a boolean array")
    would not say where an additive ``0 / -inf`` mask belongs. Only the dtype is checked here; the
    shape is left to the annotations.
    """
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        mask = signature.bind(*args, **kwargs).arguments.get("mask")
        dtype = getattr(mask, "dtype", None)
        if dtype is not None and dtype != jnp.bool_:
            raise TypeError(
                f"mask must be a boolean array (True where a query may attend), got dtype {dtype}; "
                "an additive mask (0 / -inf) goes to bias= (scaled_dot_product_attention, masked_softmax)"
            )
        return fn(*args, **kwargs)

    return wrapper


def _compute_dtype(dtype) -> jnp.dtype:
    """float32 for float16/bfloat16 (their range overflows at exp(11.1) and 65504), else ``dtype``."""
    return jnp.promote_types(dtype, jnp.float32)


def _scaled(q: Float[Array, "Tq d"]) -> Float[Array, "Tq d"]:
    """``q / sqrt(d)``: scaling the ``(Tq, d)`` queries, not the ``(Tq, Tk)`` scores, keeps the product small."""
    return q / jnp.sqrt(jnp.asarray(q.shape[-1], dtype=q.dtype))


def _allowed(mask, bias):
    """The boolean "may attend" array from ``mask`` and the ``-inf`` entries of ``bias``; ``None``: all keys."""
    if bias is not None:
        finite = bias != -jnp.inf  # a bias of -inf hides the key exactly as mask=False does
        mask = finite if mask is None else mask & finite
    return mask


def _softmax(scores, allowed):
    """Softmax over the last axis among ``allowed`` entries (all, for ``None``); hidden rows give 0.

    Subtracting the row maximum over *allowed* entries keeps ``exp`` in range; the shift does not
    change the softmax, so its gradient is not needed. Hidden entries are replaced by 0 *before*
    ``exp`` and after it, so no ``-inf``, overflow or ``0 * NaN`` appears, forward or backward.
    """
    if allowed is None:
        return jax.nn.softmax(scores, axis=-1)
    lowest = jnp.finfo(scores.dtype).min
    row_max = jnp.max(jnp.where(allowed, scores, lowest), axis=-1, keepdims=True)
    row_max = jax.lax.stop_gradient(jnp.where(jnp.any(allowed, axis=-1, keepdims=True), row_max, 0.0))
    shifted = jnp.where(allowed, scores - row_max, 0.0)
    unnormalised = jnp.where(allowed, jnp.exp(shifted), 0.0)
    total = jnp.sum(unnormalised, axis=-1, keepdims=True)
    return unnormalised / jnp.where(total > 0, total, 1.0)


def _weighted_values(weights: Float[Array, "Tq Tk"], v: Float[Array, "Tk dv"],
                     allowed: Bool[Array, "Tq Tk"] | None) -> Float[Array, "Tq dv"]:
    """``weights @ v``, where a non-finite value reaches only the queries ``allowed`` to see it.

    The plain product would spread a NaN in ``v[j]`` to every row through ``0 * NaN``, also to the
    queries that may not see key ``j`` (a causal query and a NaN in its future). So the product
    uses finite values only, and, if ``v`` holds any NaN or inf (``lax.cond``: the extra product
    runs only then, except under ``vmap``), each query gets NaN, +inf or -inf in the features
    where a key it may see holds one, as ``w * v`` with ``w > 0`` would.
    """
    if allowed is None:
        return weights @ v
    finite = jnp.isfinite(v)
    out = weights @ jnp.where(finite, v, 0.0)

    def spread(out):
        kinds = jnp.concatenate([jnp.isnan(v), v == jnp.inf, v == -jnp.inf], axis=-1).astype(out.dtype)
        nan, pos, neg = jnp.split(allowed.astype(out.dtype) @ kinds > 0, 3, axis=-1)  # each (Tq, dv)
        spread = jnp.where(pos, jnp.inf, jnp.where(neg, -jnp.inf, out))
        return jnp.where(nan | (pos & neg) | jnp.isnan(out), jnp.nan, spread)

    return jax.lax.cond(jnp.all(finite), lambda out: out, spread, out)


def score_factor(q: Float[Array, "*Tq d"], k: Float[Array, "*Tk d"]) -> Float[Array, ""]:
    """The power of two to multiply ``q`` by so that no score ``q . k / sqrt(d)`` can overflow: 1 almost always.

    A score is at most ``max|q| * max|k| * sqrt(d)`` (Cauchy-Schwarz, with ``sqrt(d)`` of the ``1/sqrt(d)``
    left over). When that bound passes ``2**100`` (about ``1e30``), the factor (exact, a power of two) brings
    it below: unscaled, scores could be ``inf`` or ``inf - inf = NaN`` and the softmax NaN. The softmax of
    such scores is, in float32 as in exact arithmetic, the row's argmax (one-hot, or shared among exact ties):
    two distinct scores above ``1e30`` differ by at least their spacing, about ``1e23``, far above the 104 at
    which ``exp`` underflows, so the scaled scores give the same weights. ``max|x|`` is ``max(max x, -min x)``:
    two reductions that read ``x`` in place, and the factor is folded into the existing scaling of the
    queries, so no ``T x d`` buffer is added (which matters to chunked attention). A non-finite extreme (a
    visible NaN or inf, which has its own stated result) counts as 1; hidden entries are replaced by 0 first.
    """
    def log2_top(x):
        top = jnp.maximum(jnp.max(x, initial=0.0), -jnp.min(x, initial=0.0))
        return jnp.log2(jnp.where(jnp.isfinite(top) & (top > 0), top, 1.0))

    excess = log2_top(q) + log2_top(k) + 0.5 * math.log2(max(q.shape[-1], 1)) - 100.0  # log2(bound / 2**100)
    return jnp.exp2(-jnp.ceil(jnp.maximum(excess, 0.0))).astype(q.dtype)


# ---------------------------------------------------------------------------------------------
# Chapter 2: attention


@_checks.shaped
def attention_scores(q: Float[Array, "Tq d"], k: Float[Array, "Tk d"]) -> Float[Array, "Tq Tk"]:
    """Scaled scores ``(q / sqrt(d)) @ k.T``, shape ``(Tq, Tk)``.

    Dividing by ``sqrt(d)`` keeps the variance of a score near 1 when the entries of ``q`` and
    ``k`` are independent with unit variance, whatever ``d`` is; chapter 2 measures it. The
    queries are scaled before the product, and float16/bfloat16 are multiplied in float32, so a
    score overflows only if it does not fit the input dtype itself.
    """
    q, k = jnp.asarray(q), jnp.asarray(k)  # lists pass the annotations' checks too
    dtype = jnp.result_type(q, k)
    compute = _compute_dtype(dtype)
    q, k = q.astype(compute), k.astype(compute)
    return (_scaled(q) @ k.T).astype(dtype)


@_boolean_mask
@_checks.shaped
def masked_softmax(
    scores: Float[Array, "*rows Tk"],
    mask: Bool[Array, "*rows Tk"] | None = None,
    bias: Float[Array, "*rows Tk"] | None = None,
) -> Float[Array, "*rows Tk"]:
    """Softmax over the last axis of ``scores + bias``, counting only entries where ``mask`` is True.

    Args:
        scores: any leading axes (``*rows``, e.g. ``(heads, Tq)``), keys last.
        mask: optional boolean, the shape of ``scores``; True where the entry counts. A float mask
            is a ``TypeError``: additive terms (``0 / -inf``) go to ``bias``.
        bias: optional additive terms, the shape of ``scores``; an entry of ``-inf`` is excluded
            exactly as ``mask=False`` is.

    Returns:
        Weights of the shape of ``scores``. A row whose entries are all excluded gets all-zero
        weights (not NaN, not uniform), and its gradient is zero and finite; an empty last axis
        gives an empty result. float16/bfloat16 are computed in float32 and cast back.
    """
    scores, mask, bias = (None if a is None else jnp.asarray(a) for a in (scores, mask, bias))
    dtype = jnp.result_type(scores) if bias is None else jnp.result_type(scores, bias)
    if scores.shape[-1] == 0:
        return jnp.zeros(scores.shape, dtype)
    compute = _compute_dtype(dtype)
    scores = scores.astype(compute)
    if bias is not None:
        scores = scores + bias.astype(compute)
    return _softmax(scores, _allowed(mask, bias)).astype(dtype)


@_boolean_mask
@_checks.shaped
def scaled_dot_product_attention(
    q: Float[Array, "Tq d"],
    k: Float[Array, "Tk d"],
    v: Float[Array, "Tk dv"],
    mask: Bool[Array, "Tq Tk"] | None = None,
    bias: Float[Array, "Tq Tk"] | None = None,
) -> tuple[Float[Array, "Tq dv"], Float[Array, "Tq Tk"]]:
    """Scaled dot-product attention for one sequence.

    Args:
        q: queries, shape ``(Tq, d)``.
        k: keys, shape ``(Tk, d)``.
        v: values, shape ``(Tk, dv)``.
        mask: optional boolean ``(Tq, Tk)``; ``mask[i, j]`` True where query ``i`` may attend
            to key ``j``. A float mask is a ``TypeError``: additive masks go to ``bias``.
        bias: optional ``(Tq, Tk)`` added to the scaled scores before the softmax (ALiBi,
            relative-position biases); ``-inf`` hides a key exactly as ``mask=False`` does.

    Returns:
        ``(out, weights)``: ``out`` of shape ``(Tq, dv)`` and the attention weights of shape
        ``(Tq, Tk)``, whose rows sum to 1, or to 0 for a query with no visible key (whose output
        is 0). Both in the dtype of the inputs.

    Hidden keys and values may hold anything, NaN and inf included: they change no output and
    no gradient. ``Tq = 0`` gives empty results, ``Tk = 0`` zero rows.
    """
    q, k, v, mask, bias = (None if a is None else jnp.asarray(a) for a in (q, k, v, mask, bias))
    dtype = jnp.result_type(*(a for a in (q, k, v, bias) if a is not None))
    compute = _compute_dtype(dtype)
    (tq, _), (tk, dv) = q.shape, v.shape
    if tk == 0:
        return jnp.zeros((tq, dv), dtype), jnp.zeros((tq, 0), dtype)
    q, k, v = (a.astype(compute) for a in (q, k, v))
    bias = None if bias is None else bias.astype(compute)
    allowed = _allowed(mask, bias)
    if allowed is not None:
        # Padding: what nobody may see becomes 0 before any product, so neither the output nor
        # the gradient computes 0 * NaN (the gradient of where() is 0 on the replaced side).
        q = jnp.where(jnp.any(allowed, axis=1)[:, None], q, 0.0)  # queries that see nothing
        seen = jnp.any(allowed, axis=0)[:, None]  # keys some query sees
        k, v = jnp.where(seen, k, 0.0), jnp.where(seen, v, 0.0)
    scores = (_scaled(q) * score_factor(q, k)) @ k.T
    if bias is not None:
        scores = scores + bias
    weights = _softmax(scores, allowed)
    return _weighted_values(weights, v, allowed).astype(dtype), weights.astype(dtype)


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
        if not isinstance(causal, bool):
            raise TypeError(f"causal must be True or False, got {causal!r}")
        key = _checks.prng_key("key", key)
        shapes = ((d_in, d_attn), (d_attn,), (d_in, d_attn), (d_attn,), (d_in, d_out), (d_out,))
        # Uniform(-1/sqrt(d_in), 1/sqrt(d_in)), the default of eqx.nn.Linear: unit-scale outputs.
        self.w_q, self.b_q, self.w_k, self.b_k, self.w_v, self.b_v = nn.init(key, shapes, "fan-in", fan_in=d_in,
                                                                               generator="jax")
        self.causal = causal

    @_boolean_mask
    @_checks.shaped
    @_checks.compiled_when_eager
    def __call__(
        self, x: Float[Array, "T d_in"], mask: Bool[Array, "T T"] | None = None
    ) -> tuple[Float[Array, "T d_out"], Float[Array, "T T"]]:
        """``x`` of shape ``(T, d_in)`` -> ``(out (T, d_out), weights (T, T))``.

        ``mask`` (boolean ``(T, T)``) is combined with the causal mask when ``causal`` is set.
        Rows of ``x`` that are neither a query that sees something nor a key that some query
        sees (padding) may hold anything: they are replaced by 0 before the projections.
        """
        x, mask = jnp.asarray(x), None if mask is None else jnp.asarray(mask)
        if x.shape[1] != self.w_q.shape[0]:
            raise ValueError(f"x must have d_in={self.w_q.shape[0]} features, got shape {tuple(x.shape)}")
        if self.causal:
            # Chapter 3's masking.causal_mask, written out: chapter 2's module comes before it.
            causal = jnp.tril(jnp.ones((x.shape[0], x.shape[0]), dtype=bool))
            mask = causal if mask is None else mask & causal
        if mask is not None:  # otherwise every token is used
            used = jnp.any(mask, axis=1) | jnp.any(mask, axis=0)
            x = jnp.where(used[:, None], x, 0.0)
        q = x @ self.w_q + self.b_q
        k = x @ self.w_k + self.b_k
        v = x @ self.w_v + self.b_v
        return scaled_dot_product_attention(q, k, v, mask=mask)

    def last_token(self, x: Float[Array, "T d_in"]) -> Float[Array, " d_out"]:
        """The output of the last token, ``self(x)[0][-1]``: with ``causal=True`` the one token that has seen the
        whole sequence, read as the logits of the next token in chapters 2 and 3."""
        return self(x)[0][-1]


@_checks.shaped
def softmax_gradient_norm(weights: Float[Array, "*rows n"]) -> Float[Array, "*rows"]:
    """The size of a softmax's gradient at its output ``a``: the Frobenius norm of its Jacobian
    ``da/ds = diag(a) - a a^T``, for every row of ``weights`` (chapter 2's measure of saturation).

    The entries are summed as they are, ``a_i (1 - a_i)`` on the diagonal and ``-a_i a_j`` off it, rather than
    through ``sum a^2 - 2 sum a^3 + (sum a^2)^2``, which subtracts numbers near 1 and falls below zero by rounding
    when one weight is within float precision of 1 (exercise 2.2).
    """
    a = jnp.asarray(weights)
    off_diagonal = (a[..., :, None] * a[..., None, :]) * (1 - jnp.eye(a.shape[-1], dtype=a.dtype))
    return jnp.sqrt(((a * (1 - a)) ** 2).sum(axis=-1) + (off_diagonal**2).sum(axis=(-2, -1)))


# ---------------------------------------------------------------------------------------------
# Chapter 6: memory-efficient attention


def _chunk_summary(q_chunk, k_chunk, v_chunk, allowed, clean):
    """One query chunk against one key chunk, shifted by the chunk's own row maxima.

    Returns ``(top, total, weighted)``: per query, the largest allowed score of the chunk (or the
    lowest float when none is allowed), ``sum exp(s - top)`` and ``sum exp(s - top) v`` over the
    allowed keys. Only ``(query_chunk, key_chunk)`` scores exist at a time. With ``clean`` (a mask
    or causal attention: some keys are hidden), queries, keys and values that no pair of this
    chunk uses are replaced by 0 first, as in :func:`scaled_dot_product_attention`.
    """
    if clean:
        q_chunk = jnp.where(jnp.any(allowed, axis=1)[:, None], q_chunk, 0.0)
        seen = jnp.any(allowed, axis=0)[:, None]
        k_chunk, v_chunk = jnp.where(seen, k_chunk, 0.0), jnp.where(seen, v_chunk, 0.0)
    scores = q_chunk @ k_chunk.T
    lowest = jnp.finfo(scores.dtype).min
    top = jax.lax.stop_gradient(jnp.max(jnp.where(allowed, scores, lowest), axis=-1))
    # As in masked_softmax: masked entries are replaced before exp, so no inf or NaN appears.
    weights = jnp.where(allowed, jnp.exp(jnp.where(allowed, scores - top[:, None], 0.0)), 0.0)
    weighted = _weighted_values(weights, v_chunk, allowed) if clean else weights @ v_chunk
    return top, jnp.sum(weights, axis=-1), weighted


def merge_softmax_sums(first, second):
    """Merge two partial softmax sums ``(m, l, a)``: the "online softmax" recurrence (chapter 6's Eq. online).

    Each part holds, over some keys, ``m`` the largest exponent (score), ``l = sum exp(s - m)`` and
    ``a = sum exp(s - m) v``; the result is the same triple over the keys of both. Both sums are rescaled
    to the larger of the two maxima, so every partial sum has its largest term equal to 1 and nothing
    overflows. A part with no key has ``m = -inf`` (or the lowest float), ``l = 0``, ``a = 0``: it meets the
    other as ``exp(-inf) = 0`` and the empty sums stay empty; two empty parts stay empty, never NaN.
    ``a`` may have one more (last) axis than ``m`` and ``l`` (a vector of values per query). The one
    implementation of the recurrence: chunked attention (chapter 6), AFT's causal sums (chapter 5) and
    AFT-simple's decoding state (chapter 7) all use it.
    """
    (m1, l1, a1), (m2, l2, a2) = first, second
    top = jnp.maximum(m1, m2)
    shift = jnp.where(jnp.isfinite(top), top, jnp.zeros((), top.dtype))  # both empty: nothing to shift by
    s1, s2 = jnp.exp(m1 - shift), jnp.exp(m2 - shift)
    t1, t2 = (s[..., None] if a1.ndim > s.ndim else s for s in (s1, s2))
    return top, l1 * s1 + l2 * s2, a1 * t1 + a2 * t2


def _visible_score_factor(q, k, mask):
    """:func:`score_factor` of what some query may see: hidden queries and keys are left out of the bound."""
    if mask is None:
        return score_factor(q, k)
    return score_factor(jnp.where(jnp.any(mask, axis=1)[:, None], q, 0.0),
                        jnp.where(jnp.any(mask, axis=0)[:, None], k, 0.0))


@_boolean_mask
@_checks.shaped
def chunked_attention(
    q: Float[Array, "Tq d"],
    k: Float[Array, "Tk d"],
    v: Float[Array, "Tk dv"],
    *,
    query_chunk: int,
    key_chunk: int,
    mask: Bool[Array, "Tq Tk"] | None = None,
    causal: bool = False,
) -> Float[Array, "Tq dv"]:
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
        query_chunk: queries per chunk (a positive integer; a chunk larger than ``Tq`` is clipped
            to ``Tq``).
        key_chunk: keys per chunk (a positive integer; clipped to ``Tk``). Lengths need not be
            multiples of the chunk sizes: the inputs are padded and the padding keys masked out.
        mask: optional boolean ``(Tq, Tk)``, True where query ``i`` may attend to key ``j``.
            (A mask is itself ``Tq x Tk``; for causal attention use ``causal=True``, which builds
            each chunk's mask from positions and stores nothing.)
        causal: if True, query ``i`` sees keys ``j <= i`` only (combined with ``mask`` by "and").

    Returns:
        ``out`` of shape ``(Tq, dv)``, in the dtype of the inputs (float16/bfloat16 computed in
        float32). A query with no visible key gets a zero row (never NaN), with finite gradients,
        as in :func:`scaled_dot_product_attention`; hidden keys and values may hold anything.
        ``Tq = 0`` gives an empty result, ``Tk = 0`` zero rows.
    """
    query_chunk = _checks.positive_int("query_chunk", query_chunk)
    key_chunk = _checks.positive_int("key_chunk", key_chunk)
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    q, k, v, mask = (None if a is None else jnp.asarray(a) for a in (q, k, v, mask))
    dtype = jnp.result_type(q, k, v)
    (tq, _), (tk, dv) = q.shape, v.shape
    if tq == 0 or tk == 0:
        return jnp.zeros((tq, dv), dtype)
    compute = _compute_dtype(dtype)
    q, k, v = (a.astype(compute) for a in (q, k, v))
    factor = _visible_score_factor(q, k, mask)
    out = _chunked_attention(q, k, v, mask, factor, query_chunk=min(query_chunk, tq), key_chunk=min(key_chunk, tk),
                             causal=causal)
    return out.astype(dtype)


@functools.partial(jax.jit, static_argnames=("query_chunk", "key_chunk", "causal"))
def _chunked_attention(q, k, v, mask, factor, *, query_chunk: int, key_chunk: int, causal: bool):
    """The computation of :func:`chunked_attention`, on checked arguments with chunks of at most ``T``."""
    (tq, d), (tk, dv) = q.shape, v.shape
    n_q, n_k = math.ceil(tq / query_chunk), math.ceil(tk / key_chunk)
    pad_q, pad_k = n_q * query_chunk - tq, n_k * key_chunk - tk
    q = _scaled(q) * factor  # scale once, (Tq, d), not the scores; factor: 1 unless scores could overflow
    q_chunks = jnp.pad(q, ((0, pad_q), (0, 0))).reshape(n_q, query_chunk, d)
    k_chunks = jnp.pad(k, ((0, pad_k), (0, 0))).reshape(n_k, key_chunk, d)
    v_chunks = jnp.pad(v, ((0, pad_k), (0, 0))).reshape(n_k, key_chunk, dv)
    clean = mask is not None or causal  # otherwise every real key is seen and padding keys are zeros
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
            return merge_softmax_sums(carry, _chunk_summary(q_chunk, k_chunk, v_chunk, allowed, clean)), None

        start = (jnp.full((query_chunk,), lowest, q.dtype), jnp.zeros((query_chunk,), q.dtype),
                 jnp.zeros((query_chunk, dv), q.dtype))
        (_, total, weighted), _ = jax.lax.scan(one_key_chunk, start, (k_chunks, v_chunks, key_offsets))
        # A query with no visible key has total == 0 and weighted == 0: its output is 0.
        return weighted / jnp.where(total > 0, total, 1.0)[:, None]

    out = jax.lax.map(one_query_chunk, (q_chunks, jnp.arange(n_q) * query_chunk, mask))
    return out.reshape(n_q * query_chunk, dv)[:tq]


# ---------------------------------------------------------------------------------------------
# Chapter 6: FlashAttention's algorithm, forward and backward
#
# The function is :func:`attnbook.attention.scaled_dot_product_attention`'s output, computed tile by tile
# so that no ``Tq x Tk`` array exists, forward or backward:
#
# - **Forward**, in FlashAttention-2's loop order (queries outside, keys inside): for each block of
#   ``query_block`` queries, a loop over the blocks of ``key_block`` keys keeps the running maximum ``m``, the
#   running sum ``l`` of exponentials and the running weighted sum of values, merged with the one
#   online-softmax recurrence of the book (:func:`attnbook.attention.merge_softmax_sums`). At the end of the
#   key loop it divides once and keeps, besides the output ``O``, one number per query: the log-sum-exp
#   ``L = m + log l`` of its scores. ``O`` and ``L`` are all the backward pass needs besides ``Q, K, V``.
# - **Backward**, a ``jax.custom_vjp``: ``D = rowsum(dO * O)`` per query, then for each block of keys (the
#   outer loop) and each block of queries (the inner loop) it recomputes the tile of scores ``S = Q K^T`` and
#   of weights ``P = exp(S - L)`` from the stored ``L``, and accumulates ``dV += P^T dO``,
#   ``dS = P * (dO V^T - D)``, ``dK += dS^T Q`` and ``dQ += dS K``. Nothing of size ``Tq x Tk`` is stored
#   between the passes, and no autodiff runs through the loops.
# - **Causal block skipping**: with ``causal=True`` a query block visits only the key blocks that hold a key
#   at or before its last query, and a key block only the query blocks from the one holding its first key;
#   tiles entirely above the diagonal are never computed, about half of them at long lengths.
#
# Each step was checked against the authors' Triton implementation, ``flash_attn/flash_attn_triton.py`` of
# Dao-AILab/flash-attention (commit 0251105a, August 2026): the causal end of the key loop (line 160), the
# stored log-sum-exp (lines 252, 264), ``delta = sum(o * do)`` (line 327), the causal start of the query loop
# of the backward pass (line 400) and its updates ``p``, ``dv``, ``dp``, ``ds``, ``dk``, ``dq`` (lines
# 510-565). Causal attention is aligned at the top left there as here: query ``i`` sees keys ``j <= i``.
#
# This is the algorithm, not the kernel. FlashAttention's speed comes from a GPU kernel that keeps each tile
# in on-chip SRAM and reads ``Q, K, V`` from HBM once per tile; here XLA compiles the same loops for whatever
# device runs them, and on a CPU the tiles live in the caches.
#
# The contract of :mod:`attnbook` holds as for :func:`attnbook.attention.chunked_attention`: masks, fully
# masked rows (zero output, zero finite gradients), hidden padding that may hold NaN, float16/bfloat16
# computed in float32, scores scaled down when they could overflow, ``T = 0``.


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
    factor = _visible_score_factor(q, k, mask)
    out, lse = _flash(_scaled(q) * factor, k, v, mask, min(query_block, tq), min(key_block, tk), causal)
    out = out.astype(dtype)
    return (out, lse) if return_lse else out


def _tiles(query_block, key_block, tq, tk):
    """Numbers of query and key blocks and the padding that makes the lengths multiples of the blocks."""
    n_q, n_k = math.ceil(tq / query_block), math.ceil(tk / key_block)
    return n_q, n_k, n_q * query_block - tq, n_k * key_block - tk


def flash_tiles(tq: int, tk: int, query_block: int, key_block: int,
                causal: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The tiles :func:`flash_attention` computes for ``tq`` queries and ``tk`` keys, blocks clipped to the lengths as
    there: boolean ``(n_q, n_k)`` arrays, ``[i, j]`` True where the forward pass (query block ``i``'s loop over key
    blocks) and the backward pass (key block ``j``'s loop over query blocks) compute tile ``(i, j)``. Without
    ``causal``, every tile; with it, the tiles whose first key is at or before their last query (the others hold no
    allowed pair and are skipped)."""
    tq, tk = _checks.positive_int("tq", tq), _checks.positive_int("tk", tk)
    query_block = min(_checks.positive_int("query_block", query_block), tq)
    key_block = min(_checks.positive_int("key_block", key_block), tk)
    causal = _checks.flag("causal", causal)
    n_q, n_k, _, _ = _tiles(query_block, key_block, tq, tk)
    forward, backward = np.zeros((n_q, n_k), bool), np.zeros((n_q, n_k), bool)
    for i in range(n_q):
        forward[i, :int(_key_blocks_seen(i, query_block, key_block, n_k, causal))] = True
    for j in range(n_k):
        backward[int(_first_query_block(j, query_block, key_block, causal)):, j] = True
    return forward, backward


def _tile_allowed(mask, causal, q_start, k_start, query_block, key_block, tk):
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


def _tile_padded(q, k, v, mask, query_block, key_block):
    (tq, _), (tk, _) = q.shape, k.shape
    _, _, pad_q, pad_k = _tiles(query_block, key_block, tq, tk)
    q = jnp.pad(q, ((0, pad_q), (0, 0)))
    k, v = jnp.pad(k, ((0, pad_k), (0, 0))), jnp.pad(v, ((0, pad_k), (0, 0)))
    mask = None if mask is None else jnp.pad(mask, ((0, pad_q), (0, pad_k)))
    return q, k, v, mask


def _flash_pass(q, k, v, mask, query_block, key_block, causal):
    """Output and log-sum-exp; ``q`` is already scaled. FlashAttention-2's forward: queries outside, keys inside."""
    (tq, d), (tk, dv) = q.shape, v.shape
    n_q, n_k, _, _ = _tiles(query_block, key_block, tq, tk)
    clean = mask is not None or causal  # otherwise every real key is seen and padding keys are zeros
    q, k, v, mask = _tile_padded(q, k, v, mask, query_block, key_block)
    lowest = jnp.finfo(q.dtype).min

    def one_query_block(i):
        q_start = i * query_block
        q_tile = jax.lax.dynamic_slice_in_dim(q, q_start, query_block)

        def one_key_block(j, carry):
            k_start = j * key_block
            k_tile = jax.lax.dynamic_slice_in_dim(k, k_start, key_block)
            v_tile = jax.lax.dynamic_slice_in_dim(v, k_start, key_block)
            allowed = _tile_allowed(mask, causal, q_start, k_start, query_block, key_block, tk)
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
    return _flash_pass(q, k, v, mask, query_block, key_block, causal)


def _flash_forward(q, k, v, mask, query_block, key_block, causal):
    out, lse = _flash_pass(q, k, v, mask, query_block, key_block, causal)
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
    q, k, v, mask = _tile_padded(q, k, v, mask, query_block, key_block)
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
            allowed = _tile_allowed(mask, causal, q_start, k_start, query_block, key_block, tk)
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
