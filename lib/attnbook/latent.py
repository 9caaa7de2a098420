"""Chapter 10: multi-head latent attention (MLA, DeepSeek-AI 2024, "DeepSeek-V2", arXiv 2405.04434, section 2.1).

Rows are tokens here (the paper writes column vectors, ``c = W h``; here ``c = h W``, as everywhere in the book).
For token ``t`` with input ``h_t`` (``d_model`` features), ``n_h`` heads of size ``d_h`` (``key_dim``; values
``value_dim``), a latent of rank ``d_c`` (``rank``) and a decoupled RoPE part of size ``d_h^R`` (``rope_dim``),
the paper's equations (9)-(11) and (14)-(19) are::

    c_t^KV  = W^DKV h_t                                     (9)   the latent, d_c numbers      <- cached
    k_t^C   = W^UK c_t^KV                                   (10)  content keys, n_h heads of d_h
    v_t^C   = W^UV c_t^KV                                   (11)  values, n_h heads of d_h
    q_t^R   = RoPE(W^QR c_t^Q)                              (14)  RoPE queries, n_h heads of d_h^R
    k_t^R   = RoPE(W^KR h_t)                                (15)  one RoPE key shared by the heads <- cached
    q_t,i   = [q_t,i^C ; q_t,i^R]                           (16)
    k_t,i   = [k_t,i^C ; k_t^R]                             (17)
    o_t,i   = sum_{j<=t} softmax_j(q_t,i . k_j,i / sqrt(d_h + d_h^R)) v_j,i^C      (18)
    u_t     = W^O [o_t,1 ; ... ; o_t,n_h]                   (19)

The paper also compresses the queries through a second latent, ``c_t^Q = W^DQ h_t``, ``q_t^C = W^UQ c_t^Q``
(equations 12-13), to save activation memory in training; it does not touch the cache, and this layer, like
DeepSeek-V2-Lite, projects the queries from ``h_t`` directly: ``q_t^C = W^Q h_t``, ``q_t^R = RoPE(W^QR h_t)``.
The reference implementation (Hugging Face ``modeling_deepseek.py``) also normalises the latent with an
RMSNorm (``kv_a_layernorm``) before ``W^UK``, ``W^UV``; the paper's equations do not, and neither does this
layer. No projection has a bias, as in the paper.

**The cache.** A decoder keeps ``c_t^KV`` and ``k_t^R`` per token: ``d_c + d_h^R`` numbers per layer, against
``2 n_h d_h`` for multi-head attention (DeepSeek-V2 uses ``d_c = 4 d_h``, ``d_h^R = d_h / 2``: ``4.5 d_h``).

**Absorption** (section 2.1.2): ``q_t,i^C . k_j,i^C = q_t,i^C . (W^UK_i c_j) = ((W^UK_i)^T q_t,i^C) . c_j``, so
``W^UK`` folds into the query and the scores read the cached latent directly; likewise ``W^UV`` folds into
``W^O``. In the absorbed form every head attends over the same cached rows ``[c_j ; k_j^R]`` with values
``c_j``: multi-query attention over the latent (:meth:`MultiHeadLatentAttention.absorbed`, and the one-token
:meth:`MultiHeadLatentAttention.step` that decoding with a cache uses).

**Why RoPE is decoupled** (section 2.1.3): RoPE on the content keys would give
``RoPE_t(q^C) . RoPE_j(W^UK c_j) = q^C . R_{j-t} W^UK c_j``: the matrix between query and latent depends on the
key's position ``j``, so no single matrix can be folded into the query, and every cached latent would have to be
up-projected again at every step. :meth:`MultiHeadLatentAttention.scores` computes both forms with RoPE on the
content part (``rope_on_content=True``) to show the difference numerically.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from . import _checks, masking, nn, positional
from .attention import scaled_dot_product_attention


def rotate(x: Float[Array, "T *heads d"], positions, base: float = 10000.0) -> Float[Array, "T *heads d"]:
    """RoPE (chapter 1's pairs ``(2i, 2i + 1)``, frequencies ``base ** (-2i / d)``) of ``x``, row ``t`` rotated by
    position ``positions[t]`` (any integers, traced ones included: a cache writes token ``t`` at position ``t``).

    With ``positions = arange(T)`` and ``x (T, d)`` this is :func:`attnbook.positional.rope`.
    """
    x = jnp.asarray(x)
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"x must have an even number of features for RoPE, got shape {tuple(x.shape)}")
    if d == 0:
        return x
    omega = jnp.asarray(positional.frequencies(d, base), dtype=jnp.float32)
    angles = jnp.asarray(positions, dtype=jnp.float32)[:, None] * omega  # (T, d/2)
    angles = angles.reshape(angles.shape[:1] + (1,) * (x.ndim - 2) + angles.shape[1:])
    cos, sin = jnp.cos(angles).astype(x.dtype), jnp.sin(angles).astype(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return jnp.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1).reshape(x.shape)


class MultiHeadLatentAttention(eqx.Module):
    """Multi-head latent attention (DeepSeek-V2): self-attention whose keys and values come from a cached latent.

    Args:
        d_model: features per token.
        heads: query heads ``n_h``.
        key_dim: size ``d_h`` of each head's content queries and keys.
        rank: size ``d_c`` of the latent ``c^KV`` shared by keys and values.
        rope_dim: size ``d_h^R`` of the decoupled RoPE query (per head) and key (shared); even; 0 for none
            (then the layer knows no positions).
        value_dim: size of each head's values; defaults to ``key_dim``.
        d_out: features per output token; defaults to ``d_model``.
        causal: token ``t`` attends to tokens ``<= t`` (a decoder).
        key: PRNG key; kernels start Glorot-uniform, as :class:`attnbook.mha.MultiHeadAttention`'s.

    Weights (rows are tokens): ``w_dkv (d_model, rank)`` = W^DKV, ``w_uk (rank, heads, key_dim)`` = W^UK,
    ``w_uv (rank, heads, value_dim)`` = W^UV, ``w_q (d_model, heads, key_dim)`` = W^Q,
    ``w_qr (d_model, heads, rope_dim)`` = W^QR, ``w_kr (d_model, rope_dim)`` = W^KR,
    ``w_o (heads, value_dim, d_out)`` = W^O. Parameters: ``d_model * (rank + heads * (key_dim + rope_dim)
    + rope_dim) + rank * heads * (key_dim + value_dim) + heads * value_dim * d_out``.

    ``layer(x)`` is the paper's equations computed as written (keys and values up-projected for every head);
    :meth:`absorbed` is the same function with ``W^UK`` and ``W^UV`` folded away, attending over the latent.
    """

    w_dkv: jax.Array
    w_uk: jax.Array
    w_uv: jax.Array
    w_q: jax.Array
    w_qr: jax.Array
    w_kr: jax.Array
    w_o: jax.Array
    causal: bool = eqx.field(static=True)

    def __init__(self, d_model: int, heads: int, key_dim: int, rank: int, rope_dim: int, *,
                 value_dim: int | None = None, d_out: int | None = None, causal: bool = True, key: jax.Array):
        d_model = _checks.positive_int("d_model", d_model)
        heads = _checks.positive_int("heads", heads)
        key_dim = _checks.positive_int("key_dim", key_dim)
        rank = _checks.positive_int("rank", rank)
        rope_dim = _checks.nonnegative_int("rope_dim", rope_dim)
        if rope_dim % 2:
            raise ValueError(f"rope_dim must be even (RoPE rotates pairs of features), got {rope_dim}")
        value_dim = key_dim if value_dim is None else _checks.positive_int("value_dim", value_dim)
        d_out = d_model if d_out is None else _checks.positive_int("d_out", d_out)
        self.causal = _checks.flag("causal", causal)
        key = _checks.prng_key("key", key)
        self.w_dkv, self.w_uk, self.w_uv, self.w_q, self.w_qr, self.w_kr, self.w_o = nn.init(
            key, ((d_model, rank), (rank, heads, key_dim), (rank, heads, value_dim), (d_model, heads, key_dim),
                  (d_model, heads, rope_dim), (d_model, rope_dim), (heads, value_dim, d_out)), "glorot",
            fan_in=(d_model, rank, rank, d_model, d_model, d_model, heads * value_dim),
            fan_out=(rank, heads * key_dim, heads * value_dim, heads * key_dim, max(heads * rope_dim, 1),
                     max(rope_dim, 1), d_out))  # rope_dim = 0: empty kernels, any fan

    @property
    def d_model(self) -> int:
        return self.w_dkv.shape[0]

    @property
    def heads(self) -> int:
        return self.w_q.shape[1]

    @property
    def key_dim(self) -> int:
        return self.w_q.shape[2]

    @property
    def value_dim(self) -> int:
        return self.w_uv.shape[2]

    @property
    def rank(self) -> int:
        return self.w_dkv.shape[1]

    @property
    def rope_dim(self) -> int:
        return self.w_kr.shape[1]

    def _check(self, x):
        _checks.ndim("x", x, 2, "(T, d_model)")
        nn.features("x", x, self.d_model, "d_model")

    def latent(self, x: Float[Array, "T d_model"], start=0) -> tuple[Float[Array, "T rank"], Float[Array, "T rope_dim"]]:
        """What a decoder caches per token: ``c^KV = x W^DKV`` (9) and ``k^R = RoPE(x W^KR)`` (15), the rows at
        positions ``start, start + 1, ...``. Shapes ``(T, rank)`` and ``(T, rope_dim)``."""
        self._check(x)
        positions = start + jnp.arange(x.shape[0])
        return x @ self.w_dkv, rotate(x @ self.w_kr, positions)

    def queries(self, x: Float[Array, "T d_model"], start=0, *, rope_on_content: bool = False
                ) -> tuple[Float[Array, "T heads key_dim"], Float[Array, "T heads rope_dim"]]:
        """Content queries ``q^C = x W^Q`` and RoPE queries ``q^R = RoPE(x W^QR)`` (14), ``(T, heads, ...)``.

        ``rope_on_content=True`` rotates the content queries too (the coupled variant the paper rejects)."""
        self._check(x)
        positions = start + jnp.arange(x.shape[0])
        q_c = jnp.einsum("td,dhk->thk", x, self.w_q)
        if rope_on_content:
            q_c = rotate(q_c, positions)
        return q_c, rotate(jnp.einsum("td,dhr->thr", x, self.w_qr), positions)

    def _mask(self, tq, tk):
        return masking.causal_mask(tk)[tk - tq:] if self.causal else None

    def __call__(self, x: Float[Array, "T d_model"], bias: Float[Array, "*heads T T"] | None = None, *,
                 process_heads=None) -> Float[Array, "T d_out"]:
        """Equations (9)-(19) as written: every head's keys ``[W^UK c ; k^R]`` and values ``W^UV c`` formed,
        then scaled dot-product attention per head (chapter 2's), then ``W^O``. ``x (T, d_model) -> (T, d_out)``.

        ``bias`` (``(T, T)`` or ``(heads, T, T)``) is added to the scaled scores. ``process_heads`` is accepted
        for the interface of :class:`attnbook.nn.Block` and must be ``None``: the layer applies RoPE itself, to
        its decoupled parts only.
        """
        if process_heads is not None:
            raise ValueError("process_heads must be None: multi-head latent attention applies RoPE itself, "
                             "to its decoupled query and key parts")
        c, k_r = self.latent(x)
        q_c, q_r = self.queries(x)
        k_c = jnp.einsum("tr,rhk->thk", c, self.w_uk)  # (10)
        v = jnp.einsum("tr,rhv->thv", c, self.w_uv)  # (11)
        heads, t = self.heads, x.shape[0]
        q = jnp.concatenate([q_c, q_r], axis=-1)  # (16)
        k = jnp.concatenate([k_c, jnp.broadcast_to(k_r[:, None], (t, heads, self.rope_dim))], axis=-1)  # (17)
        mask = self._mask(t, t)
        bias = None if bias is None else jnp.broadcast_to(bias, (heads, t, t))
        context, _ = jax.vmap(scaled_dot_product_attention, in_axes=(1, 1, 1, None, None if bias is None else 0),
                              out_axes=(1, 0))(q, k, v, mask, bias)  # (18), one head at a time
        return jnp.einsum("thv,hvo->to", context, self.w_o)  # (19)

    def attend_latent(self, q_c: Float[Array, "Tq heads key_dim"], q_r: Float[Array, "Tq heads rope_dim"],
                      c: Float[Array, "Tk rank"], k_r: Float[Array, "Tk rope_dim"], mask=None
                      ) -> Float[Array, "Tq d_out"]:
        """The absorbed form on queries and cached rows: ``W^UK`` folded into the queries, ``W^UV`` into ``W^O``.

        Scores ``((W^UK_i)^T q_i^C) . c_j + q_i^R . k_j^R``, over ``sqrt(key_dim + rope_dim)`` as in (18); the
        context ``sum_j a_ij c_j`` (``rank`` numbers per head) goes through ``W^UV_i`` and ``W^O_i``. ``mask``
        (boolean ``(Tq, Tk)``, True where a query may attend) is optional. Every head reads the same keys and
        values: multi-query attention over the latent.
        """
        q_lat = jnp.einsum("thk,rhk->thr", q_c, self.w_uk)  # (W^UK_i)^T q_i^C, per head: (Tq, heads, rank)
        # scaled_dot_product_attention divides by sqrt(rank + rope_dim), (18) by sqrt(key_dim + rope_dim)
        factor = np.sqrt((self.rank + self.rope_dim) / (self.key_dim + self.rope_dim))
        q = jnp.concatenate([q_lat, q_r], axis=-1) * jnp.asarray(factor, q_lat.dtype)
        k = jnp.concatenate([c, k_r], axis=-1)  # (Tk, rank + rope_dim), shared by every head
        context, _ = jax.vmap(scaled_dot_product_attention, in_axes=(1, None, None, None), out_axes=(1, 0))(
            q, k, c, mask)  # (Tq, heads, rank)
        return jnp.einsum("thr,rhv,hvo->to", context, self.w_uv, self.w_o)

    def absorbed(self, x: Float[Array, "T d_model"]) -> Float[Array, "T d_out"]:
        """The same function as ``layer(x)``, computed in the absorbed form (:meth:`attend_latent`)."""
        c, k_r = self.latent(x)
        q_c, q_r = self.queries(x)
        return self.attend_latent(q_c, q_r, c, k_r, self._mask(x.shape[0], x.shape[0]))

    def init_cache(self, length: int) -> tuple[Float[Array, "length rank"], Float[Array, "length rope_dim"]]:
        """An empty cache for ``length`` tokens: latents ``(length, rank)`` and RoPE keys ``(length, rope_dim)``."""
        length = _checks.positive_int("length", length)
        return jnp.zeros((length, self.rank)), jnp.zeros((length, self.rope_dim))

    def step(self, x: Float[Array, "1 d_model"], cache: tuple, t) -> tuple[Float[Array, "1 d_out"], tuple]:
        """One decoding step: the output for the new row ``x (1, d_model)`` at position ``t`` and the cache with
        row ``t`` written. Attends (absorbed) over the cache rows ``<= t``; a causal layer only."""
        if not self.causal:
            raise ValueError("step decodes one token at a time and needs a causal layer")
        c_cache, r_cache = cache
        c, k_r = self.latent(x, t)
        c_cache = jax.lax.dynamic_update_slice(c_cache, c, (t, 0))
        r_cache = jax.lax.dynamic_update_slice(r_cache, k_r, (t, 0))
        q_c, q_r = self.queries(x, t)
        visible = (jnp.arange(c_cache.shape[0]) <= t)[None]
        return self.attend_latent(q_c, q_r, c_cache, r_cache, visible), (c_cache, r_cache)

    def scores(self, x: Float[Array, "T d_model"], *, absorbed: bool = False, rope_on_content: bool = False
               ) -> Float[Array, "heads T T"]:
        """Every head's scaled scores ``(heads, T, T)`` (before mask and softmax), computed two ways.

        ``absorbed=False``: from the up-projected keys, ``q_t,i . k_j,i / sqrt(key_dim + rope_dim)``.
        ``absorbed=True``: from the latent, with ``W^UK`` folded into the query, which is all a cache of latents
        allows. With the decoupled RoPE of the paper (``rope_on_content=False``) the two are equal. With RoPE also
        on the content queries and keys (``rope_on_content=True``: ``k_j^C = RoPE_j(W^UK c_j)``), the naive form
        rotates each key by its position, while the absorbed form can only fold the position-free ``W^UK`` into
        the rotated query: they differ wherever ``j > 0``.
        """
        c, k_r = self.latent(x)
        q_c, q_r = self.queries(x, rope_on_content=rope_on_content)
        scale = np.sqrt(self.key_dim + self.rope_dim)
        decoupled = jnp.einsum("thr,sr->hts", q_r, k_r)
        if absorbed:
            content = jnp.einsum("thr,sr->hts", jnp.einsum("thk,rhk->thr", q_c, self.w_uk), c)
        else:
            k_c = jnp.einsum("sr,rhk->shk", c, self.w_uk)
            if rope_on_content:
                k_c = rotate(k_c, jnp.arange(x.shape[0]))
            content = jnp.einsum("thk,shk->hts", q_c, k_c)
        return (content + decoupled) / scale


def parameter_count(layer: MultiHeadLatentAttention) -> int:
    """Number of trainable numbers in ``layer`` (the formula of :class:`MultiHeadLatentAttention`)."""
    if not isinstance(layer, MultiHeadLatentAttention):
        raise TypeError(f"layer must be a MultiHeadLatentAttention, got {type(layer).__name__}")
    return nn.count_parameters(layer)


__all__ = ["rotate", "MultiHeadLatentAttention", "parameter_count"]
