"""Chapter 7: a Transformer assembled from the book's parts, and greedy decoding with and without a cache.

Rows are tokens. One block applies its sub-layers in turn, each wrapped in a residual connection and a
LayerNorm, placed either as in the original paper (post-LN, Vaswani et al. 2017)::

    x = LN(x + sublayer(x))

or before the sub-layer (pre-LN, Xiong et al. 2020), with one more LayerNorm after the last block::

    x = x + sublayer(LN(x))

The sub-layers are: a token mixer (multi-head attention of chapter 4, or an AFT variant of chapter 5),
then, in a decoder, cross-attention (queries from the decoder, keys and values from the encoder's
output, ``attnbook.mha.MultiHeadAttention``), then the position-wise feed-forward layer
``max(0, x W1 + b1) W2 + b2``. Tokens enter as a learned embedding plus the sinusoidal encoding of
chapter 1, which needs no parameters and so works for any length.

Greedy decoding runs as one jitted ``lax.scan``: :func:`greedy_decode` recomputes the decoder over the
whole (fixed-size) prefix at every step, :func:`greedy_decode_cached` keeps the keys and values of the
tokens generated so far in preallocated arrays (the KV cache) and computes only the new token's row.
With AFT-simple as the mixer the cache is three vectors per layer, whatever the length (chapter 6).
"""

from __future__ import annotations


import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import _checks, masking
from .aft import AFTConv, AFTFull, AFTLocal, AFTSimple
from .nn import Dense, FeedForward, init, split as _keys
from .attention import masked_softmax
from .mha import MultiHeadAttention
from .positional import sinusoidal_encoding

MIXERS = ("attention", "aft-full", "aft-local", "aft-simple", "aft-conv")
CACHED_MIXERS = ("attention", "aft-simple")
"""Mixers that :func:`greedy_decode_cached` can run one token at a time."""


# ---------------------------------------------------------------------------------------------
# Sub-layers


class SelfAttention(eqx.Module):
    """Multi-head self-attention (chapter 4's layer, queries, keys and values all ``x``), causal or not."""

    attention: MultiHeadAttention
    causal: bool = eqx.field(static=True)

    def __init__(self, d_model: int, heads: int, *, causal: bool, key: jax.Array):
        d_model = _checks.positive_int("d_model", d_model)
        heads = _checks.positive_int("heads", heads)
        if d_model % heads:
            raise ValueError(f"d_model must be divisible by heads, got d_model={d_model}, heads={heads}")
        self.attention = MultiHeadAttention(d_model, heads, d_model // heads, key=key)
        self.causal = causal

    def __call__(self, x):
        """``x (T, d_model) -> (T, d_model)``."""
        mask = masking.causal_mask(x.shape[0]) if self.causal else None
        return self.attention(x, x, x, mask)[0]


def make_mixer(kind: str, d_model: int, *, causal: bool, heads: int = 4, window: int = 9, max_len: int = 64,
               key: jax.Array) -> eqx.Module:
    """A token mixer ``(T, d_model) -> (T, d_model)`` by name, one of :data:`MIXERS`.

    ``heads`` serves attention and AFT-conv, ``window`` AFT-local and AFT-conv (odd, so that the
    non-causal window is centred), ``max_len`` the position biases of AFT-full and AFT-local.
    """
    if kind == "attention":
        return SelfAttention(d_model, heads, causal=causal, key=key)
    if kind == "aft-full":
        return AFTFull(d_model, max_len, causal=causal, key=key)
    if kind == "aft-local":
        return AFTLocal(d_model, max_len, window, causal=causal, key=key)
    if kind == "aft-simple":
        return AFTSimple(d_model, causal=causal, key=key)
    if kind == "aft-conv":
        return AFTConv(d_model, heads, window, causal=causal, key=key)
    raise ValueError(f"kind must be one of {MIXERS}, got {kind!r}")


class Block(eqx.Module):
    """One encoder or decoder block: mixer, cross-attention (decoder only), feed-forward layer.

    Args:
        d_model: features per token.
        mixer: the token mixer, one of :data:`MIXERS`.
        causal: mask the mixer so that row ``t`` sees rows ``<= t`` (decoder self-attention).
        cross: add cross-attention to an encoder's output after the mixer (decoder).
        pre_norm: LayerNorm before each sub-layer (pre-LN) if True, after its residual sum (post-LN) if False.
        residual: add each sub-layer's input to its output; False removes every residual connection.
        feed_forward: include the feed-forward layer (width ``ff_ratio * d_model``).
        heads: heads of attention, cross-attention and AFT-conv.
    """

    mixer: eqx.Module
    cross: MultiHeadAttention | None
    feed_forward: FeedForward | None
    norms: tuple
    pre_norm: bool = eqx.field(static=True)
    residual: bool = eqx.field(static=True)

    def __init__(self, d_model: int, *, mixer: str = "attention", causal: bool = False, cross: bool = False,
                 pre_norm: bool = True, residual: bool = True, feed_forward: bool = True, heads: int = 4,
                 ff_ratio: int = 4, window: int = 9, max_len: int = 64, key: jax.Array):
        d_model = _checks.positive_int("d_model", d_model)
        heads = _checks.positive_int("heads", heads)
        ff_ratio = _checks.positive_int("ff_ratio", ff_ratio)
        k_mix, k_cross, k_ff = _keys(key, 3)
        self.mixer = make_mixer(mixer, d_model, causal=causal, heads=heads, window=window, max_len=max_len,
                                key=k_mix)
        self.cross = MultiHeadAttention(d_model, heads, d_model // heads, key=k_cross) if cross else None
        self.feed_forward = FeedForward(d_model, ff_ratio * d_model, key=k_ff) if feed_forward else None
        self.norms = tuple(eqx.nn.LayerNorm(d_model) for _ in range(1 + cross + feed_forward))
        self.pre_norm, self.residual = pre_norm, residual

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
            raise ValueError("cross_attend needs a block built with cross=True")
        return self.cross(x, memory, memory)

    def __call__(self, x, memory=None):
        """``x (T, d_model)``, and for a decoder block the encoder's output ``memory (S, d_model)``."""
        _checks.ndim("x", x, 2, "(T, d_model)")
        if (memory is None) != (self.cross is None):
            raise ValueError("memory must be given exactly when the block has cross-attention, "
                             f"got memory={'None' if memory is None else tuple(memory.shape)}")
        norms = iter(self.norms)
        x = self._sublayer(next(norms), self.mixer, x)
        if self.cross is not None:
            x = self._sublayer(next(norms), lambda h: self.cross_attend(h, memory)[0], x)
        if self.feed_forward is not None:
            x = self._sublayer(next(norms), self.feed_forward, x)
        return x


# ---------------------------------------------------------------------------------------------
# Encoder, decoder, and the two together


def _embed(table, tokens):
    """Token embedding plus the sinusoidal encoding of positions ``0 .. T-1`` (chapter 1)."""
    return table[tokens] + sinusoidal_encoding(tokens.shape[0], table.shape[1])


def _check_tokens(name: str, tokens, vocab_size: int):
    _checks.ndim(name, tokens, 1, "(T,)")
    if not jnp.issubdtype(jnp.asarray(tokens).dtype, jnp.integer):
        raise TypeError(f"{name} must be integer token ids, got dtype {jnp.asarray(tokens).dtype}")
    return _checks.integers_in_range(name, tokens, 0, vocab_size)


class Stack(eqx.Module):
    """An embedding, ``depth`` blocks and, with pre-LN, a final LayerNorm: the encoder or the decoder body."""

    embedding: jax.Array
    blocks: tuple
    final_norm: eqx.nn.LayerNorm | None

    def __init__(self, vocab_size: int, d_model: int, depth: int, *, decoder: bool, key: jax.Array, **block):
        vocab_size = _checks.positive_int("vocab_size", vocab_size)
        depth = _checks.positive_int("depth", depth)
        keys = _keys(key, depth + 1)
        self.embedding = init(keys[0], (vocab_size, d_model), "normal")
        self.blocks = tuple(Block(d_model, causal=decoder, cross=decoder, key=k, **block) for k in keys[1:])
        # Pre-LN leaves the residual stream un-normalised after the last block; post-LN ends with a LayerNorm.
        self.final_norm = eqx.nn.LayerNorm(d_model) if block.get("pre_norm", True) else None

    def apply(self, x, memory=None):
        """The blocks on embedded tokens ``x (T, d_model)``: used for Jacobians with respect to the inputs."""
        for block in self.blocks:
            x = block(x, memory)
        return x if self.final_norm is None else jax.vmap(self.final_norm)(x)

    def __call__(self, tokens, memory=None):
        return self.apply(_embed(self.embedding, tokens), memory)


class EncoderDecoder(eqx.Module):
    """The encoder-decoder Transformer of the original paper, small and with every choice a switch.

    ``model(source (S,), target_in (T,))`` returns next-token logits ``(T, vocab_size)``: row ``t``
    predicts target token ``t`` from the whole source and from ``target_in[0..t]`` (the target shifted
    right behind a start token). Keyword options go to every :class:`Block` (``mixer``, ``pre_norm``,
    ``residual``, ``feed_forward``, ``heads``, ``ff_ratio``, ``window``, ``max_len``); cross-attention is
    always multi-head attention.
    """

    encoder: Stack
    decoder: Stack
    head: Dense

    def __init__(self, vocab_size: int, *, d_model: int = 32, depth: int = 2, key: jax.Array, **block):
        d_model = _checks.positive_int("d_model", d_model)
        k_enc, k_dec, k_head = _keys(key, 3)
        self.encoder = Stack(vocab_size, d_model, depth, decoder=False, key=k_enc, **block)
        self.decoder = Stack(vocab_size, d_model, depth, decoder=True, key=k_dec, **block)
        self.head = Dense(d_model, vocab_size, key=k_head)

    @property
    def vocab_size(self) -> int:
        return self.head.weight.shape[1]

    def encode(self, source):
        """``source (S,)`` integer tokens to the encoder's output ``(S, d_model)``."""
        source = _check_tokens("source", source, self.vocab_size)
        return self.encoder(source)

    def decode(self, target_in, memory):
        """Logits ``(T, vocab_size)`` for decoder inputs ``target_in (T,)`` and encoder output ``memory (S, d_model)``."""
        target_in = _check_tokens("target_in", target_in, self.vocab_size)
        _checks.ndim("memory", memory, 2, "(S, d_model)")
        d_model = self.head.weight.shape[0]
        if memory.shape[1] != d_model:
            raise ValueError(f"memory must have shape (S, d_model={d_model}), got {tuple(memory.shape)}")
        return self.head(self.decoder(target_in, memory))

    def __call__(self, source, target_in):
        return self.decode(target_in, self.encode(source))

    def cross_weights(self, source, target_in):
        """Cross-attention weights of every decoder block, ``(depth, heads, T, S)``."""
        memory = self.encode(source)
        x = _embed(self.decoder.embedding, jnp.asarray(target_in))
        maps = []
        for block in self.decoder.blocks:
            # Recompute the block's input to its cross-attention, as Block.__call__ does.
            norms = iter(block.norms)
            h = block._sublayer(next(norms), block.mixer, x)
            cross_in = jax.vmap(block.norms[1])(h) if block.pre_norm else h
            maps.append(block.cross_attend(cross_in, memory)[1])
            x = block(x, memory)
        return jnp.stack(maps)


def sequence_loss(model: EncoderDecoder, sources, targets_in, targets):
    """Mean cross-entropy over every target token of a batch: ``sources (N, S)``, ``targets_in, targets (N, T)``."""
    logits = jax.vmap(model)(sources, targets_in)
    log_p = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(log_p, targets[..., None], axis=-1))


# ---------------------------------------------------------------------------------------------
# Greedy decoding


def _check_decode(model, source, length, start):
    if not isinstance(model, EncoderDecoder):
        raise TypeError(f"model must be an EncoderDecoder, got {type(model).__name__}")
    _checks.ndim("source", source, 1, "(S,)")
    length = _checks.positive_int("length", length)
    start = _checks.nonnegative_int("start", start)
    if start >= model.vocab_size:
        raise ValueError(f"start must be a token id below vocab_size={model.vocab_size}, got {start}")
    return length, start


def greedy_decode(model: EncoderDecoder, source, length: int, start: int):
    """Greedy decoding that reruns the decoder over the whole prefix at every step (no cache).

    Args:
        model: an :class:`EncoderDecoder`.
        source: the source tokens ``(S,)``.
        length: number of tokens to generate.
        start: the start token fed to the decoder at position 0.

    Returns ``(tokens (length,), logits (length, vocab_size))``; ``logits[t]`` is the row the decoder
    produced for position ``t``, from which ``tokens[t]`` is the argmax. The decoder always runs on a
    buffer of ``length`` tokens (a fixed shape, so one compiled step serves every position); entries after
    the current position are still zero and, by the causal mask, change nothing at or before it.
    Step ``t`` therefore costs a full decoder pass: ``O(length^2)`` work per sequence at least.
    """
    length, start = _check_decode(model, source, length, start)
    return _greedy(model, jnp.asarray(source), length, start)


@eqx.filter_jit
def _greedy(model, source, length, start):
    memory = model.encode(source)
    buffer = jnp.zeros(length, dtype=jnp.int32).at[0].set(start)

    def step(buffer, t):
        logits = model.decode(buffer, memory)[t]  # the whole prefix again, every step
        token = jnp.argmax(logits).astype(jnp.int32)
        buffer = jnp.where(t + 1 < length, buffer.at[jnp.minimum(t + 1, length - 1)].set(token), buffer)
        return buffer, (token, logits)

    _, (tokens, logits) = jax.lax.scan(step, buffer, jnp.arange(length))
    return tokens, logits


def _attend(mha: MultiHeadAttention, q, k, v, mask=None):
    """Attention of projected queries ``q (Tq, heads, key_dim)`` to projected ``k``, ``v`` ``(Tk, heads, ·)``.

    The second half of :class:`attnbook.mha.MultiHeadAttention`, for keys and values computed earlier
    (a cache). ``mask (Tq, Tk)`` is True where a query may attend. Returns ``(Tq, d_out)``.
    """
    scores = jnp.einsum("thk,shk->hts", q, k) / jnp.sqrt(jnp.asarray(mha.key_dim, dtype=q.dtype))
    weights = masked_softmax(scores, None if mask is None else jnp.broadcast_to(mask, scores.shape))
    context = jnp.einsum("hts,shv->thv", weights, v)
    return jnp.einsum("thv,hvo->to", context, mha.w_o) + mha.b_o


def _project(mha: MultiHeadAttention, x):
    """Queries, keys and values of ``x (T, d_model)``, each ``(T, heads, ·)``, as the layer computes them."""
    q = jnp.einsum("td,dhk->thk", x, mha.w_q) + mha.b_q
    k = jnp.einsum("sd,dhk->shk", x, mha.w_k) + mha.b_k
    v = jnp.einsum("sd,dhv->shv", x, mha.w_v) + mha.b_v
    return q, k, v


def init_cache(model: EncoderDecoder, length: int) -> tuple:
    """The preallocated decoding state of every decoder block, for ``length`` generated tokens.

    Attention: keys and values ``(length, heads, key_dim)`` and ``(length, heads, value_dim)``, zero
    until step ``t`` writes row ``t``. AFT-simple: the running maximum, numerator and denominator of its
    causal sum, three ``(d_model,)`` vectors whatever the length.
    """
    length = _checks.positive_int("length", length)
    cache = []
    for block in model.decoder.blocks:
        mixer = block.mixer
        if isinstance(mixer, SelfAttention):
            mha = mixer.attention
            cache.append((jnp.zeros((length, mha.num_heads, mha.key_dim)),
                          jnp.zeros((length, mha.num_heads, mha.value_dim))))
        elif isinstance(mixer, AFTSimple):
            d = mixer.query.weight.shape[1]
            cache.append((jnp.full((d,), jnp.finfo(jnp.float32).min), jnp.zeros((d,)), jnp.zeros((d,))))
        else:
            raise ValueError(f"cached decoding supports the mixers {CACHED_MIXERS}, got {type(mixer).__name__}")
    return tuple(cache)


def cache_bytes(model: EncoderDecoder, length: int) -> int:
    """Bytes of the self-attention (or AFT-simple) decoding state for ``length`` tokens (cross K, V excluded)."""
    shapes = jax.eval_shape(lambda: init_cache(model, length))
    return int(sum(np.prod(s.shape) * s.dtype.itemsize for s in jax.tree.leaves(shapes)))


def _mixer_step(mixer, x, state, t):
    """The mixer's output for the one new row ``x (1, d_model)`` at position ``t``, and the updated state."""
    if isinstance(mixer, SelfAttention):
        mha = mixer.attention
        k_cache, v_cache = state
        q, k, v = _project(mha, x)
        k_cache = jax.lax.dynamic_update_slice(k_cache, k, (t, 0, 0))  # write row t, in place under jit
        v_cache = jax.lax.dynamic_update_slice(v_cache, v, (t, 0, 0))
        visible = (jnp.arange(k_cache.shape[0]) <= t)[None]  # (1, length): the rows written so far
        return _attend(mha, q, k_cache, v_cache, visible), (k_cache, v_cache)
    # AFT-simple, causal: sigmoid(q_t) * sum_{t'<=t} exp(k_t') v_t' / sum_{t'<=t} exp(k_t'), kept as a
    # running maximum m and sums rescaled to it (the recurrence of aft._running_sums), per channel.
    m, num, den = state
    q, k, v = mixer.query(x)[0], mixer.key_proj(x)[0], mixer.value(x)[0]
    top = jnp.maximum(m, k)
    old, new = jnp.exp(m - top), jnp.exp(k - top)
    num, den = num * old + v * new, den * old + new
    return mixer.out((jax.nn.sigmoid(q) * num / den)[None]), (top, num, den)


def greedy_decode_cached(model: EncoderDecoder, source, length: int, start: int):
    """Greedy decoding with a key/value cache: each step computes only the new token's row.

    Same arguments and results as :func:`greedy_decode` (equal tokens, logits equal to float32
    rounding). The encoder runs once, the cross-attention keys and values of its output are projected
    once, and each decoder block keeps the keys and values of the generated tokens in preallocated
    arrays (:func:`init_cache`) that step ``t`` writes at row ``t``. Step ``t`` costs ``O(d^2)`` for the
    new row's projections plus ``O(length d)`` to attend over the cache; with AFT-simple, ``O(d^2)``.
    """
    length, start = _check_decode(model, source, length, start)
    init_cache(model, length)  # raises for mixers without a one-token step
    return _greedy_cached(model, jnp.asarray(source), length, start)


@eqx.filter_jit
def _greedy_cached(model, source, length, start):
    memory = model.encode(source)
    blocks = model.decoder.blocks
    cross_kv = [_project(b.cross, memory)[1:] for b in blocks]  # projected once, read at every step
    positions = sinusoidal_encoding(length, model.decoder.embedding.shape[1])

    def step(carry, t):
        token, cache = carry
        x = (model.decoder.embedding[token] + positions[t])[None]  # (1, d_model): the new row only
        new_cache = []
        for block, state, (k_mem, v_mem) in zip(blocks, cache, cross_kv):
            norms = iter(block.norms)
            out = {}

            def mix(h, block=block, state=state, out=out):
                y, out["state"] = _mixer_step(block.mixer, h, state, t)
                return y

            x = block._sublayer(next(norms), mix, x)
            new_cache.append(out["state"])
            cross = lambda h, block=block, k_mem=k_mem, v_mem=v_mem: _attend(
                block.cross, _project(block.cross, h)[0], k_mem, v_mem)
            x = block._sublayer(next(norms), cross, x)
            if block.feed_forward is not None:
                x = block._sublayer(next(norms), block.feed_forward, x)
        if model.decoder.final_norm is not None:
            x = jax.vmap(model.decoder.final_norm)(x)
        logits = model.head(x)[0]
        token = jnp.argmax(logits).astype(jnp.int32)
        return (token, tuple(new_cache)), (token, logits)

    init = (jnp.asarray(start, dtype=jnp.int32), init_cache(model, length))
    _, (tokens, logits) = jax.lax.scan(step, init, jnp.arange(length))
    return tokens, logits


# ---------------------------------------------------------------------------------------------
# The chapter's task: reverse a string of digits


DIGITS = 10
START = 10
"""The start token of the decoder; tokens 0-9 are the digits, so the vocabulary has 11 tokens."""


def reversal_data(num: int, length: int, rng: np.random.Generator, *, exclude=None):
    """``num`` random digit strings of ``length`` digits and their reversals.

    Returns ``(sources, targets_in, targets)``, int32 arrays ``(num, length)``: ``targets`` is ``sources``
    reversed, ``targets_in`` is ``targets`` shifted right behind :data:`START` (what the decoder reads
    under teacher forcing). Strings that occur in ``exclude`` (an array of sources) are redrawn, so a
    test set drawn with ``exclude=train_sources`` holds only strings never seen in training.
    """
    num = _checks.positive_int("num", num)
    length = _checks.positive_int("length", length)
    rng = _checks.numpy_rng("rng", rng)
    seen = set() if exclude is None else {row.tobytes() for row in np.asarray(exclude, dtype=np.int32)}
    rows = []
    while len(rows) < num:
        for row in rng.integers(0, DIGITS, (num - len(rows), length)).astype(np.int32):
            if row.tobytes() not in seen:
                seen.add(row.tobytes())  # distinct strings within the set as well
                rows.append(row)
    sources = np.stack(rows)
    targets = sources[:, ::-1].copy()
    targets_in = np.concatenate([np.full((num, 1), START, dtype=np.int32), targets[:, :-1]], axis=1)
    return sources, targets_in, targets


def exact_match(model: EncoderDecoder, sources, targets) -> float:
    """Fraction of ``sources (N, S)`` whose greedy decoding equals ``targets (N, T)`` in every token.

    Decodes with the cache when the mixer allows it (:data:`CACHED_MIXERS`), otherwise by recomputing.
    """
    _checks.ndim("sources", sources, 2, "(N, S)")
    _checks.ndim("targets", targets, 2, "(N, T)")
    if len(sources) != len(targets):
        raise ValueError(f"sources and targets must have the same N, got {len(sources)} and {len(targets)}")
    cached = isinstance(model.decoder.blocks[0].mixer, (SelfAttention, AFTSimple))
    decoded = _decode_batch(model, jnp.asarray(sources), np.shape(targets)[1], cached)
    return float(np.mean(np.all(np.asarray(decoded) == np.asarray(targets), axis=1)))


@eqx.filter_jit
def _decode_batch(model, sources, length, cached):
    decode = _greedy_cached if cached else _greedy
    return jax.vmap(lambda s: decode(model, s, length, START)[0])(sources)


__all__ = [
    "MIXERS", "CACHED_MIXERS", "FeedForward", "SelfAttention", "make_mixer", "Block", "Stack", "EncoderDecoder",
    "sequence_loss", "greedy_decode", "greedy_decode_cached", "init_cache", "cache_bytes", "DIGITS", "START",
    "reversal_data", "exact_match",
]
