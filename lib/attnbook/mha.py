"""Chapter 4: multi-head attention, with its weights laid out as Keras lays them out.

Rows are tokens. For head ``h``, with ``X_q`` of shape ``(Tq, d_model)`` and ``X_k``, ``X_v`` of
shape ``(Tk, d_model)``::

    Q_h = X_q W_q[:, h] + b_q[h]        (Tq, key_dim)
    K_h = X_k W_k[:, h] + b_k[h]        (Tk, key_dim)
    V_h = X_v W_v[:, h] + b_v[h]        (Tk, value_dim)
    A_h = softmax(Q_h K_h^T / sqrt(key_dim))            (Tq, Tk), masked entries excluded
    out = sum_h A_h V_h W_o[h] + b_o                    (Tq, d_out)

The sum over heads in the last line is the same as concatenating the heads' outputs and
multiplying by one ``(heads * value_dim, d_out)`` matrix, as the Transformer paper writes it.
Weights: ``w_q, w_k (d_model, heads, key_dim)``, ``b_q, b_k (heads, key_dim)``,
``w_v (d_model, heads, value_dim)``, ``b_v (heads, value_dim)``, ``w_o (heads, value_dim, d_out)``,
``b_o (d_out,)``: the shapes ``tf.keras.layers.MultiHeadAttention`` reports.

With ``key_bias_positions=T`` the key bias has shape ``(heads, T, key_dim)``, one vector per head
and key position, as in the custom Keras layer of source article 004: a learned position
embedding added to the keys only. Keys of such a layer must have length ``T``.

With ``kv_heads=G`` (chapter 10) the layer has ``heads`` query heads but only ``G`` key and value heads,
each shared by a group of ``heads / G`` consecutive query heads: query head ``h`` reads key/value head
``h // (heads / G)``. ``G = heads`` (the default) is the layer above, bit for bit; ``G = 1`` is multi-query
attention (Shazeer 2019), ``1 < G < heads`` grouped-query attention (Ainslie et al. 2023). Then
``w_k (d_model, G, key_dim)``, ``b_k (G, key_dim)``, ``w_v (d_model, G, value_dim)``, ``b_v (G, value_dim)``.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from . import _checks, masking, nn
from .attention import masked_softmax, scaled_dot_product_attention, score_factor


# Below this many score terms (Tq * Tk * key_dim) a head's products are written as broadcast-and-sum, which XLA
# on a CPU runs about twice as fast as matrix products for chapter 4's 5 x 7 inputs; above it, matrix products.
_SMALL = 4096


class MultiHeadAttention(eqx.Module):
    """Multi-head attention, all heads at once (no loop over heads); weights in the Keras layout.

    The projections are ``einsum`` contractions with the Keras-shaped kernels, as in Keras. The
    scores and the weighted sum of values are formed by broadcasting, which holds a
    ``(Tq, Tk, heads, key_dim)`` array: meant for the short sequences of this book (chapter 6
    measures attention at scale with ``jax.nn.dot_product_attention``).

    Args:
        d_model: features per input token (the last axis of query, key and value).
        num_heads: number of heads.
        key_dim: size of each head's queries and keys.
        value_dim: size of each head's values; defaults to ``key_dim`` (as in Keras).
        d_out: features per output token; defaults to ``d_model`` (as in Keras).
        key_bias_positions: if given (an integer ``T``), the key bias is ``(heads, T, key_dim)``,
            one learned vector per head and key position, instead of ``(heads, key_dim)``.
        kv_heads: number of key/value heads ``G``, a divisor of ``num_heads``; ``None`` (the default) means
            ``num_heads`` (chapter 4's layer). ``1``: multi-query attention; between: grouped-query attention.
        key: PRNG key for the initial weights (``jax.random.key(0)``; an int is a ``TypeError``).

    Kernels start Glorot-uniform (fans of the ``(d_model, heads * key_dim)`` and
    ``(heads * value_dim, d_out)`` matrices they reshape to) and biases at zero.
    Parameters: ``2 * (d_model + 1) * heads * key_dim + (d_model + 1) * heads * value_dim
    + (heads * value_dim + 1) * d_out``, plus ``(T - 1) * heads * key_dim`` with the per-position key bias.
    With ``kv_heads = G``: ``(d_model + 1) * (heads + G) * key_dim + (d_model + 1) * G * value_dim
    + (heads * value_dim + 1) * d_out`` (plus ``(T - 1) * G * key_dim`` with the per-position key bias).
    """

    w_q: jax.Array
    b_q: jax.Array
    w_k: jax.Array
    b_k: jax.Array
    w_v: jax.Array
    b_v: jax.Array
    w_o: jax.Array
    b_o: jax.Array

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        key_dim: int,
        *,
        value_dim: int | None = None,
        d_out: int | None = None,
        key_bias_positions: int | None = None,
        kv_heads: int | None = None,
        key: jax.Array,
    ):
        d_model = _checks.positive_int("d_model", d_model)
        heads = _checks.positive_int("num_heads", num_heads)
        key_dim = _checks.positive_int("key_dim", key_dim)
        value_dim = key_dim if value_dim is None else _checks.positive_int("value_dim", value_dim)
        d_out = d_model if d_out is None else _checks.positive_int("d_out", d_out)
        groups = _checks.kv_heads(heads, kv_heads, "num_heads")
        key = _checks.prng_key("key", key)
        self.w_q, self.w_k, self.w_v, self.w_o = nn.init(
            key, ((d_model, heads, key_dim), (d_model, groups, key_dim), (d_model, groups, value_dim),
                  (heads, value_dim, d_out)), "glorot",
            fan_in=(d_model, d_model, d_model, heads * value_dim),
            fan_out=(heads * key_dim, groups * key_dim, groups * value_dim, d_out))
        zeros = lambda *shape: jnp.asarray(np.zeros(shape, dtype=np.float32))
        self.b_q = zeros(heads, key_dim)
        if key_bias_positions is None:
            self.b_k = zeros(groups, key_dim)
        else:
            positions = _checks.positive_int("key_bias_positions", key_bias_positions)
            self.b_k = zeros(groups, positions, key_dim)
        self.b_v = zeros(groups, value_dim)
        self.b_o = zeros(d_out)

    @property
    def d_model(self) -> int:
        return self.w_q.shape[0]

    @property
    def num_heads(self) -> int:
        return self.w_q.shape[1]

    @property
    def kv_heads(self) -> int:
        """Key/value heads ``G`` (chapter 10): ``num_heads`` unless the layer shares them."""
        return self.w_k.shape[1]

    @property
    def key_dim(self) -> int:
        return self.w_q.shape[2]

    @property
    def value_dim(self) -> int:
        return self.w_v.shape[2]

    @property
    def d_out(self) -> int:
        return self.w_o.shape[2]

    @property
    def key_bias_positions(self) -> int | None:
        """``T`` for the per-position key bias of source 004, ``None`` for the standard layer."""
        return self.b_k.shape[1] if self.b_k.ndim == 3 else None

    def _check_features(self, query, key, value) -> None:
        for name, x in (("query", query), ("key", key), ("value", value)):
            if x.shape[1] != self.d_model:  # three names in the annotations: each is checked against the layer
                raise ValueError(f"{name} must have d_model={self.d_model} features, shape (T, d_model), "
                                 f"got shape {tuple(x.shape)}")

    @_checks.shaped
    def project(
        self, query: Float[Array, "Tq d_query"], key: Float[Array, "Tk d_key"], value: Float[Array, "Tk d_value"]
    ) -> tuple[Float[Array, "Tq heads key_dim"], Float[Array, "Tk kv_heads key_dim"], Float[Array, "Tk kv_heads value_dim"]]:
        """The per-head queries ``(Tq, heads, key_dim)``, keys ``(Tk, heads, key_dim)`` and values ``(Tk, heads, value_dim)``.

        The first half of the layer: einsums over the Keras-shaped kernels, all heads at once. Used alone to
        keep the keys and values of earlier tokens (a KV cache, chapter 7) and to project each token once.
        With ``kv_heads = G`` the keys and values have ``G`` heads, ``(Tk, G, key_dim)`` and ``(Tk, G, value_dim)``:
        the cache is ``heads / G`` times smaller.
        """
        self._check_features(query, key, value)
        positions = self.key_bias_positions
        if positions is not None and key.shape[0] != positions:
            raise ValueError(
                f"key length must equal key_bias_positions={positions} (one key bias per position), "
                f"got key of shape {tuple(key.shape)}"
            )
        b_k = jnp.swapaxes(self.b_k, 0, 1) if positions is not None else self.b_k  # (Tk, G, key_dim) or (G, key_dim)
        q = jnp.einsum("td,dhk->thk", query, self.w_q) + self.b_q  # (Tq, heads, key_dim): token, head, feature
        k = jnp.einsum("sd,dhk->shk", key, self.w_k) + b_k  # (Tk, G, key_dim), G = kv_heads (= heads by default)
        v = jnp.einsum("sd,dhv->shv", value, self.w_v) + self.b_v  # (Tk, G, value_dim)
        return q, k, v

    def _visible(self, mask, bias, tq: int, tk: int):
        """``mask`` and ``bias`` checked and broadcast to ``(heads, Tq, Tk)``, and where a query may see a key
        (``mask`` and a bias above ``-inf``); ``None`` for each that is absent (then every key is visible)."""
        full = (self.num_heads, tq, tk)
        for name, a in (("mask", mask), ("bias", bias)):
            if a is not None and tuple(a.shape[:-2]) not in ((), (self.num_heads,)):
                raise ValueError(f"{name} must have shape (Tq, Tk) = {(tq, tk)} or (heads, Tq, Tk) = {full}, "
                                 f"got {tuple(a.shape)}")
        mask = None if mask is None else jnp.broadcast_to(jnp.asarray(mask), full)
        bias = None if bias is None else jnp.broadcast_to(jnp.asarray(bias), full)
        visible = mask
        if bias is not None:
            visible = (bias != -jnp.inf) if visible is None else visible & (bias != -jnp.inf)
        return mask, bias, visible

    @_checks.shaped
    def attend(
        self,
        q: Float[Array, "Tq heads key_dim"],
        k: Float[Array, "Tk kv_heads key_dim"],
        v: Float[Array, "Tk kv_heads value_dim"],
        mask: Bool[Array, "*mask_heads Tq Tk"] | None = None,
        bias: Float[Array, "*bias_heads Tq Tk"] | None = None,
    ) -> tuple[Float[Array, "Tq d_out"], Float[Array, "heads Tq Tk"]]:
        """The second half of the layer: scaled dot-product attention per head on projected ``q``, ``k``, ``v``,
        then the output projection. Returns ``(out (Tq, d_out), weights (heads, Tq, Tk))``.

        ``mask`` (boolean, True where a query may attend) and ``bias`` (added to the scaled scores, ``-inf``
        hides a key as ``mask=False`` does) are ``(Tq, Tk)`` for every head or ``(heads, Tq, Tk)`` per head.
        What a query may not see is replaced by 0 before any product, so a NaN there reaches no output and
        no gradient; a query that sees no key in any head gets a zero output.

        With ``kv_heads = G < heads``, ``k`` and ``v`` have ``G`` heads (as :meth:`project` returns them), each read
        by its group of ``heads / G`` query heads (grouped-query attention): for long sequences the group's query
        heads are stacked as extra query rows against their one key/value head, so the keys and values (a KV
        cache) are read once per group and never copied; for tiny ones each head is repeated. Keys and values
        already repeated to ``heads`` heads (as :meth:`__call__` hands them to ``process_heads``) are taken as
        they are.
        """
        heads, tq, tk = q.shape[1], q.shape[0], k.shape[0]
        if heads != self.num_heads or q.shape[2] != self.key_dim or v.shape[2] != self.value_dim:
            raise ValueError(f"q, k, v must have heads={self.num_heads}, key_dim={self.key_dim} and "
                             f"value_dim={self.value_dim}, got shapes {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
        if v.shape[0] != tk:
            raise ValueError(f"v must have one row per key, Tk={tk}, got shape {tuple(v.shape)}")
        if k.shape[1] not in (self.kv_heads, heads):
            raise ValueError(f"k and v must have kv_heads={self.kv_heads} heads (or heads={heads}, repeated per "
                             f"group), got shapes {tuple(k.shape)}, {tuple(v.shape)}")
        grouped = k.shape[1] != heads  # grouped-query attention: query head h reads key/value head h // group
        mask, bias, visible = self._visible(mask, bias, tq, tk)
        if tq * tk * self.key_dim <= _SMALL:
            if grouped:  # tiny: repeat each key/value head for its group
                group = heads // self.kv_heads
                k, v = jnp.repeat(k, group, axis=1), jnp.repeat(v, group, axis=1)
            context, weights = self._heads_small(q, k, v, mask, bias, visible)
        elif grouped:
            context, weights = self._groups(q, k, v, mask, bias)
        else:
            # Chapter 2's attention once per head (vmap over the head axis): its matrix products scale to long
            # sequences, and it keeps the same contract (hidden keys and values may hold anything, rows that
            # see nothing are zero, scores that could overflow are scaled first).
            axes = (1, 1, 1, None if mask is None else 0, None if bias is None else 0)
            context, weights = jax.vmap(scaled_dot_product_attention, in_axes=axes, out_axes=(1, 0))(q, k, v, mask, bias)
        out = jnp.einsum("thv,hvo->to", context, self.w_o) + self.b_o  # the sum over heads
        if visible is not None:
            out = jnp.where(jnp.any(visible, axis=(0, 2))[:, None], out, 0.0)
        elif tk == 0:  # no key at all: every query sees nothing
            out = jnp.zeros_like(out)
        return out, weights

    def _groups(self, q, k, v, mask, bias):
        """Grouped-query attention on long sequences without copying keys and values: the query heads of a group
        become extra query rows of one call of chapter 2's attention against their shared key/value head (vmap
        over the ``G`` groups), so each cached key and value is read once per group, not once per query head."""
        (tq, heads, dk), (tk, groups, dv) = q.shape, v.shape
        size = heads // groups  # query head h = g * size + i is row block i of group g
        rows = lambda a: None if a is None else a.reshape(groups, size * tq, tk)  # (heads, Tq, Tk) -> (G, size Tq, Tk)
        q = jnp.transpose(q.reshape(tq, groups, size, dk), (1, 2, 0, 3)).reshape(groups, size * tq, dk)
        axes = (0, 1, 1, None if mask is None else 0, None if bias is None else 0)
        context, weights = jax.vmap(scaled_dot_product_attention, in_axes=axes)(q, k, v, rows(mask), rows(bias))
        context = jnp.transpose(context.reshape(groups, size, tq, dv), (2, 0, 1, 3)).reshape(tq, heads, dv)
        return context, weights.reshape(heads, tq, tk)

    def _heads_small(self, q, k, v, mask, bias, visible):
        """Every head's ``(context (Tq, heads, value_dim), weights (heads, Tq, Tk))`` for tiny sequences
        (chapter 4's 5 x 7), with the products as broadcast-and-sum."""
        k, v = k[None], v[None]  # (1, Tk, heads, features), broadcast against the queries
        if visible is not None:
            # Per (query, key, head): what the query may not see is 0, not merely weighted by 0, so a
            # NaN there stays out of the scores, the weighted sum and their gradients (0 * NaN = NaN).
            # For valid inputs nothing changes: those entries were multiplied by a zero weight.
            q = jnp.where(jnp.any(visible, axis=(0, 2))[:, None, None], q, 0)
            hidden = jnp.transpose(visible, (1, 2, 0))[..., None]  # (Tq, Tk, heads, 1)
            k, v = jnp.where(hidden, k, 0), jnp.where(hidden, v, 0)
        # The two products inside attention are written as broadcast-and-sum; they are the einsums
        # "thk,shk->hts" and "hts,shv->thv". XLA on a CPU runs these tiny per-head matrix products
        # (5 x 7 by 7 x 5) about twice as slowly as the fused elementwise form, gradient included.
        q = q * score_factor(q, k)
        scale = jnp.sqrt(jnp.asarray(self.key_dim, dtype=q.dtype))
        scores = jnp.sum(q[:, None] * k, axis=-1) / scale  # (Tq, Tk, heads): q_t . k_s per head
        weights = masked_softmax(jnp.transpose(scores, (2, 0, 1)), mask, bias)  # (heads, Tq, Tk), softmax over keys
        context = jnp.sum(jnp.transpose(weights, (1, 2, 0))[..., None] * v, axis=1)  # (Tq, heads, value_dim)
        return context, weights

    @_checks.shaped
    @_checks.compiled_when_eager
    def __call__(
        self,
        query: Float[Array, "Tq d_query"],
        key: Float[Array, "Tk d_key"],
        value: Float[Array, "Tv d_value"],
        mask: Bool[Array, "*heads Tq Tk"] | None = None,
        bias: Float[Array, "*bias_heads Tq Tk"] | None = None,
        *,
        process_heads: Callable | None = None,
    ) -> tuple[Float[Array, "Tq d_out"], Float[Array, "heads Tq Tk"]]:
        """Attend from ``query (Tq, d_model)`` to ``key``, ``value (Tk, d_model)``: :meth:`project`, then :meth:`attend`.

        (In the annotations, ``d_query``, ``d_key`` and ``d_value`` must all equal the layer's ``d_model``
        and ``Tv`` must equal ``Tk``; both are checked after the annotations, with their own messages.)

        ``mask`` is boolean, True where a query may attend to a key: ``(Tq, Tk)`` for every head
        or ``(heads, Tq, Tk)`` per head. ``bias`` (same shapes) is added to the scaled scores (ALiBi, T5's
        relative bias); ``-inf`` hides a key exactly as ``mask=False`` does. A query that sees no key in a
        head gets zero weights there (and that head contributes nothing to it); a query that sees no key in
        any head (or a query against ``Tk = 0`` keys) gets a zero output, as everywhere in the book.

        ``process_heads(q, k, v) -> (q, k, v)``, as in ``equinox.nn.MultiheadAttention``, transforms the
        projected heads (``(T, heads, features)`` each) before the scores: RoPE rotates ``q`` and ``k`` there.
        With ``kv_heads = G < heads`` the hook receives the ``G`` key/value heads repeated for their groups, so
        ``(T, heads, features)`` as for every other layer (RoPE commutes with that repetition).

        Padding may hold anything: a key or value that a query may not see (in any head) does not
        reach that query's output or its gradient, even if it is NaN or inf, and a key, value or
        query row that no query sees in any head (padding) reaches no output and no gradient at
        all, parameters' included. A NaN that some query may see is visible input: it makes
        that query's output NaN, and with it any loss that sums over all queries.

        Returns ``(out (Tq, d_out), weights (heads, Tq, Tk))``.
        """
        tq, tk = query.shape[0], key.shape[0]
        self._check_features(query, key, value)
        if value.shape[0] != tk:
            raise ValueError(f"value must have one row per key, shape (Tk, d_model) = {(tk, self.d_model)}, "
                             f"got {tuple(value.shape)}")
        if process_heads is not None:
            _checks.function("process_heads", process_heads)
        _, _, visible = self._visible(mask, bias, tq, tk)
        if visible is not None:
            # Rows that no query sees in any head (padding) are set to 0 before the projections: a
            # gradient of 0 times a NaN input is NaN, and would reach the kernels' gradients.
            key_seen = jnp.any(visible, axis=(0, 1))  # (Tk,)
            query_sees = jnp.any(visible, axis=(0, 2))  # (Tq,)
            query = jnp.where(query_sees[:, None], query, 0)
            key = jnp.where(key_seen[:, None], key, 0)
            value = jnp.where(key_seen[:, None], value, 0)
        q, k, v = self.project(query, key, value)
        if process_heads is not None:
            if self.kv_heads != self.num_heads:  # hooks see (T, heads, features), as for chapter 4's layer
                group = self.num_heads // self.kv_heads
                k, v = jnp.repeat(k, group, axis=1), jnp.repeat(v, group, axis=1)
            q, k, v = process_heads(q, k, v)
        return self.attend(q, k, v, mask, bias)


def parameter_count(layer: MultiHeadAttention) -> int:
    """Number of trainable numbers in ``layer`` (751 for d_model 7, 3 heads, key_dim 8)."""
    if not isinstance(layer, MultiHeadAttention):  # any other pytree would be counted without a word
        raise TypeError(f"layer must be a MultiHeadAttention, got {type(layer).__name__}")
    return nn.count_parameters(layer)


class MultiHeadSelfAttention(eqx.Module):
    """Multi-head self-attention as a token mixer ``(T, d_model) -> (T, d_model)``, causal or not.

    One :class:`MultiHeadAttention` (``key_dim = d_model // heads``) with queries, keys and values all ``x``:
    the attention of chapter 5's language model, chapter 7's blocks and chapter 8's models. ``__call__``
    takes an optional score ``bias`` (ALiBi, T5) and a ``process_heads`` hook (RoPE).

    ``init="glorot"`` (the default) draws the kernels as :class:`MultiHeadAttention` does (Keras);
    ``init="fan-in"`` draws each of the four projections as an :class:`attnbook.nn.Dense` of
    ``(d_model, d_model)`` (chapter 5's published runs, whose baseline was built that way).

    ``kv_heads`` (chapter 10; ``None`` means ``heads``): key/value heads shared by groups of query heads, as in
    :class:`MultiHeadAttention`; with ``init="fan-in"`` the key and value projections are then ``Dense`` of
    ``(d_model, kv_heads * d_model // heads)``.
    """

    attention: MultiHeadAttention
    causal: bool = eqx.field(static=True)

    def __init__(self, d_model: int, heads: int, *, causal: bool = True, init: str = "glorot",
                 kv_heads: int | None = None, key: jax.Array):
        d_model = _checks.positive_int("d_model", d_model)
        heads = _checks.positive_int("heads", heads)
        if d_model % heads:
            raise ValueError(f"d_model must be divisible by heads, got d_model={d_model}, heads={heads}")
        if init not in ("glorot", "fan-in"):
            raise ValueError(f"init must be 'glorot' or 'fan-in', got {init!r}")
        groups = _checks.kv_heads(heads, kv_heads, "heads")
        key = _checks.prng_key("key", key)
        layer = MultiHeadAttention(d_model, heads, d_model // heads, kv_heads=groups, key=key)
        if init == "fan-in":
            dk = d_model // heads
            k_q, k_k, k_v, k_o = nn.split(key, 4)
            q, o = nn.Dense(d_model, d_model, key=k_q), nn.Dense(d_model, d_model, key=k_o)
            k, v = nn.Dense(d_model, groups * dk, key=k_k), nn.Dense(d_model, groups * dk, key=k_v)
            layer = eqx.tree_at(
                lambda m: (m.w_q, m.b_q, m.w_k, m.b_k, m.w_v, m.b_v, m.w_o, m.b_o), layer,
                (q.weight.reshape(d_model, heads, dk), q.bias.reshape(heads, dk),
                 k.weight.reshape(d_model, groups, dk), k.bias.reshape(groups, dk),
                 v.weight.reshape(d_model, groups, dk), v.bias.reshape(groups, dk),
                 o.weight.reshape(heads, dk, d_model), o.bias))
        self.attention = layer
        self.causal = _checks.flag("causal", causal)

    @property
    def heads(self) -> int:
        return self.attention.num_heads

    @property
    def kv_heads(self) -> int:
        """Key/value heads (chapter 10): ``heads`` unless they are shared."""
        return self.attention.kv_heads

    @_checks.shaped
    @_checks.compiled_when_eager
    def __call__(self, x: Float[Array, "T d_model"], bias: Float[Array, "*heads T T"] | None = None, *,
                 process_heads: Callable | None = None) -> Float[Array, "T d_model"]:
        """``x (T, d_model) -> (T, d_model)``; ``bias`` ``(T, T)`` or ``(heads, T, T)`` is added to the scores."""
        nn.features("x", x, self.attention.d_model, "d_model")
        mask = masking.causal_mask(x.shape[0]) if self.causal else None
        return self.attention(x, x, x, mask, bias, process_heads=process_heads)[0]

    # The decoding protocol of every layer that decodes one token at a time (this one, AFT-simple, latent
    # attention): ``cache = layer.init_cache(length)``, then ``y, cache = layer.step(x, cache, t)`` per position.

    def init_cache(self, length: int) -> tuple[Float[Array, "length kv_heads key_dim"],
                                               Float[Array, "length kv_heads value_dim"]]:
        """An empty cache for ``length`` tokens: keys ``(length, kv_heads, key_dim)`` and values
        ``(length, kv_heads, value_dim)``, zero until :meth:`step` writes row ``t`` (``kv_heads = heads`` unless
        the layer shares its keys and values, chapter 10)."""
        length = _checks.positive_int("length", length)
        mha = self.attention
        return jnp.zeros((length, mha.kv_heads, mha.key_dim)), jnp.zeros((length, mha.kv_heads, mha.value_dim))

    def step(self, x: Float[Array, "1 d_model"], cache: tuple, t) -> tuple[Float[Array, "1 d_model"], tuple]:
        """One decoding step: the output for the new row ``x (1, d_model)`` at position ``t`` and the cache with
        its key and value written at row ``t`` (in place under jit). Attends over the cache rows ``<= t``, which
        is the causal layer's row ``t``; a causal layer only."""
        if not self.causal:
            raise ValueError("step decodes one token at a time and needs a causal layer")
        mha = self.attention
        k_cache, v_cache = cache
        q, k, v = mha.project(x, x, x)
        k_cache = jax.lax.dynamic_update_slice(k_cache, k, (t, 0, 0))
        v_cache = jax.lax.dynamic_update_slice(v_cache, v, (t, 0, 0))
        visible = (jnp.arange(k_cache.shape[0]) <= t)[None]  # (1, length): the rows written so far
        return mha.attend(q, k_cache, v_cache, visible)[0], (k_cache, v_cache)

def to_equinox(layer: MultiHeadAttention) -> eqx.nn.MultiheadAttention:
    """``equinox.nn.MultiheadAttention`` with the weights of ``layer`` (chapter 4's independent reference).

    Equinox stores each projection as a ``Linear`` whose weight is ``(out, in)``, the heads one after another along
    the output axis: the Keras kernels are reshaped head by head. Only a layer without shared key/value heads and
    without the per-position key bias has an Equinox twin.
    """
    if not isinstance(layer, MultiHeadAttention):
        raise TypeError(f"layer must be a MultiHeadAttention, got {type(layer).__name__}")
    if layer.kv_heads != layer.num_heads or layer.b_k.ndim != 2:
        raise ValueError("only a layer with num_heads key/value heads and no per-position key bias has an Equinox twin")
    d, h, k = layer.w_q.shape
    v, d_out = layer.w_v.shape[2], layer.w_o.shape[2]
    # Only Equinox's structure is needed, not its random weights: eval_shape builds it without drawing them.
    reference = eqx.filter_eval_shape(
        eqx.nn.MultiheadAttention, num_heads=h, query_size=d, output_size=d_out, qk_size=k, vo_size=v,
        use_query_bias=True, use_key_bias=True, use_value_bias=True, use_output_bias=True, key=jax.random.key(0))
    return eqx.tree_at(
        lambda m: [m.query_proj.weight, m.query_proj.bias, m.key_proj.weight, m.key_proj.bias,
                   m.value_proj.weight, m.value_proj.bias, m.output_proj.weight, m.output_proj.bias],
        reference,
        [layer.w_q.reshape(d, h * k).T, layer.b_q.ravel(), layer.w_k.reshape(d, h * k).T, layer.b_k.ravel(),
         layer.w_v.reshape(d, h * v).T, layer.b_v.ravel(), layer.w_o.reshape(h * v, d_out).T, layer.b_o])


class SelfAttentionModel(eqx.Module):
    """Chapter 4's model: ``x (T, d) ->`` the multi-head self-attention of ``x`` (output, weights), with a learned
    position table ``positions (T, d)`` added to the tokens first when there is one."""

    attention: MultiHeadAttention
    positions: jax.Array | None = None

    def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        if self.positions is not None:
            x = x + self.positions
        return self.attention(x, x, x)


def mse(model: eqx.Module, xs: jax.Array, ys: jax.Array) -> jax.Array:
    """Mean squared error of ``model``'s outputs on a batch ``xs (N, T, d)`` against ``ys (N, T, d_out)``."""
    outputs = jax.vmap(lambda x: model(x)[0])(xs)
    return jnp.mean((outputs - ys) ** 2)


@eqx.filter_jit
def all_weights(model: eqx.Module, xs: jax.Array) -> jax.Array:
    """Every input's attention weights, ``(N, heads, T, T)``."""
    return jax.vmap(model)(xs)[1]


@eqx.filter_jit
def evaluate(model: eqx.Module, xs: jax.Array, ys: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Mean squared error and the attention weights averaged over the data, ``(heads, T, T)``."""
    outputs, weights = jax.vmap(model)(xs)
    return jnp.mean((outputs - ys) ** 2), weights.mean(axis=0)


def fit_and_evaluate(model: eqx.Module, inputs, target, *, optimizer, steps: int, batch_size: int,
                     key: jax.Array) -> dict:
    """Train ``model`` on ``(inputs, target)`` with :func:`mse` (``attnbook.train.fit``), then evaluate it there:
    ``{"model", "loss" (a float), "maps" (heads, T, T), the weights averaged over the inputs}``."""
    from . import train  # train imports nothing of this module; imported here to keep mha light

    model, _ = train.fit(model, mse, (inputs, target), optimizer=optimizer, steps=steps, batch_size=batch_size,
                         key=key)
    loss, maps = evaluate(model, inputs, target)
    return {"model": model, "loss": float(loss), "maps": np.asarray(maps)}


def format_loss(loss: float) -> str:
    """A loss at two significant digits, as chapter 4 prints it, in e-notation with one digit below 1e-3."""
    return f"{loss:.0e}" if loss < 1e-3 else f"{loss:#.2g}"
