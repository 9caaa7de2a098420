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
from jaxtyping import Array, Float, Int

from . import _checks, train
from . import nn
from .lm import make_mixer
from .nn import Dense, init, split as _keys
from .mha import MultiHeadAttention
from .positional import sinusoidal_encoding

CACHED_MIXERS = ("attention", "aft-simple")
"""Mixers that :func:`greedy_decode_cached` can run one token at a time."""


# ---------------------------------------------------------------------------------------------
# Sub-layers


def make_block(d_model: int, *, mixer: str = "attention", causal: bool = False, cross: bool = False,
               pre_norm: bool = True, residual: bool = True, feed_forward: bool = True, heads: int = 4,
               ff_ratio: int = 4, window: int = 9, max_len: int = 64, key: jax.Array) -> nn.Block:
    """One encoder or decoder block (an :class:`attnbook.nn.Block`) built from names: mixer, cross-attention,
    feed-forward.

    Args:
        d_model: features per token.
        mixer: the token mixer, one of :data:`attnbook.lm.MIXERS` (:func:`attnbook.lm.make_mixer`).
        causal: mask the mixer so that row ``t`` sees rows ``<= t`` (decoder self-attention).
        cross: add cross-attention to an encoder's output after the mixer (decoder).
        pre_norm: LayerNorm before each sub-layer (pre-LN) if True, after its residual sum (post-LN) if False.
        residual: add each sub-layer's input to its output; False removes every residual connection.
        feed_forward: include the feed-forward layer (width ``ff_ratio * d_model``, ReLU).
        heads: heads of attention, cross-attention and AFT-conv.
    """
    d_model = _checks.positive_int("d_model", d_model)
    heads = _checks.positive_int("heads", heads)
    k_mix, k_cross, k_ff = _keys(_checks.prng_key("key", key), 3)
    mixer = make_mixer(mixer, d_model, causal=causal, heads=heads, window=window, max_len=max_len, key=k_mix)
    cross = MultiHeadAttention(d_model, heads, d_model // heads, key=k_cross) if cross else None
    return nn.Block(mixer, d_model, cross=cross, feed_forward=feed_forward, ff_ratio=ff_ratio, activation="relu",
                    pre_norm=pre_norm, residual=residual, key=k_ff)


# ---------------------------------------------------------------------------------------------
# Encoder, decoder, and the two together


def _embed(table, tokens):
    """Token embedding plus the sinusoidal encoding of positions ``0 .. T-1`` (chapter 1)."""
    return table[tokens] + sinusoidal_encoding(tokens.shape[0], table.shape[1])


class Stack(eqx.Module):
    """An embedding, ``depth`` blocks and, with pre-LN, a final LayerNorm: the encoder or the decoder body.

    ``cross`` (default: ``decoder``) gives the blocks cross-attention; ``decoder=True, cross=False`` is a
    decoder-only body (chapter 11's language models), and with ``feed_forward=False`` an attention-only one.
    """

    embedding: jax.Array
    blocks: tuple
    final_norm: eqx.nn.LayerNorm | None

    def __init__(self, vocab_size: int, d_model: int, depth: int, *, decoder: bool, key: jax.Array,
                 cross: bool | None = None, **block):
        vocab_size = _checks.positive_int("vocab_size", vocab_size)
        depth = _checks.positive_int("depth", depth)
        cross = decoder if cross is None else _checks.flag("cross", cross)
        keys = _keys(key, depth + 1)
        self.embedding = init(keys[0], (vocab_size, d_model), "normal")
        self.blocks = tuple(make_block(d_model, causal=decoder, cross=cross, key=k, **block) for k in keys[1:])
        # Pre-LN leaves the residual stream un-normalised after the last block; post-LN ends with a LayerNorm.
        self.final_norm = eqx.nn.LayerNorm(d_model) if block.get("pre_norm", True) else None

    @_checks.shaped
    def apply(self, x: Float[Array, "T d_model"], memory: Float[Array, "S d_model"] | None = None
              ) -> Float[Array, "T d_model"]:
        """The blocks on embedded tokens ``x (T, d_model)``: used for Jacobians with respect to the inputs."""
        for block in self.blocks:
            x = block(x, memory)
        return x if self.final_norm is None else jax.vmap(self.final_norm)(x)

    @_checks.shaped
    def __call__(self, tokens: Int[Array, " T"], memory: Float[Array, "S d_model"] | None = None
                 ) -> Float[Array, "T d_model"]:
        """Integer ``tokens (T,)`` in ``[0, vocab_size)`` (checked, also under jit) through the stack."""
        tokens = _checks.tokens("tokens", tokens, self.embedding.shape[0])
        return self.apply(_embed(self.embedding, tokens), memory)


class EncoderDecoder(eqx.Module):
    """The encoder-decoder Transformer of the original paper, small and with every choice a switch.

    ``model(source (S,), target_in (T,))`` returns next-token logits ``(T, vocab_size)``: row ``t``
    predicts target token ``t`` from the whole source and from ``target_in[0..t]`` (the target shifted
    right behind a start token). Keyword options go to every block (:func:`make_block`: ``mixer``, ``pre_norm``,
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

    @_checks.shaped
    def encode(self, source: Int[Array, " S"]) -> Float[Array, "S d_model"]:
        """``source (S,)`` integer tokens to the encoder's output ``(S, d_model)``."""
        source = _checks.tokens("source", source, self.vocab_size)
        return self.encoder(source)

    @_checks.shaped
    def decode(self, target_in: Int[Array, " T"], memory: Float[Array, "S d_model"]) -> Float[Array, "T vocab"]:
        """Logits ``(T, vocab_size)`` for decoder inputs ``target_in (T,)`` and encoder output ``memory (S, d_model)``."""
        target_in = _checks.tokens("target_in", target_in, self.vocab_size)
        _checks.ndim("memory", memory, 2, "(S, d_model)")
        d_model = self.head.weight.shape[0]
        if memory.shape[1] != d_model:
            raise ValueError(f"memory must have shape (S, d_model={d_model}), got {tuple(memory.shape)}")
        return self.head(self.decoder(target_in, memory))

    @_checks.shaped
    def __call__(self, source: Int[Array, " S"], target_in: Int[Array, " T"]) -> Float[Array, "T vocab"]:
        """Next-token logits ``(T, vocab_size)`` for ``source (S,)`` and ``target_in (T,)``."""
        return self.decode(target_in, self.encode(source))

    @_checks.shaped
    def cross_weights(self, source: Int[Array, " S"], target_in: Int[Array, " T"]) -> Float[Array, "depth heads T S"]:
        """Cross-attention weights of every decoder block, ``(depth, heads, T, S)``."""
        memory = self.encode(source)
        target_in = _checks.tokens("target_in", target_in, self.vocab_size)
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


@_checks.shaped
def sequence_loss(model: EncoderDecoder, sources: Int[Array, "N S"], targets_in: Int[Array, "N T"],
                  targets: Int[Array, "N T"]) -> Float[Array, ""]:
    """Mean cross-entropy over every target token of a batch: ``sources (N, S)``, ``targets_in, targets (N, T)``."""
    if not isinstance(model, EncoderDecoder):
        raise TypeError(f"model must be an EncoderDecoder, got {type(model).__name__}")
    return train.cross_entropy(jax.vmap(model)(sources, targets_in), targets).mean()


# ---------------------------------------------------------------------------------------------
# Greedy decoding


def _check_decode(model, source, length, start):
    if not isinstance(model, EncoderDecoder):
        raise TypeError(f"model must be an EncoderDecoder, got {type(model).__name__}")
    _checks.tokens("source", source, model.vocab_size)
    length = _checks.positive_int("length", length)
    start = _checks.nonnegative_int("start", start)
    if start >= model.vocab_size:
        raise ValueError(f"start must be a token id below vocab_size={model.vocab_size}, got {start}")
    return length, start


@_checks.shaped
def greedy_decode(model: EncoderDecoder, source: Int[Array, " S"], length: int, start: int
                  ) -> tuple[Int[Array, " length"], Float[Array, "length vocab"]]:
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


@_checks.jit
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


def can_step(mixer) -> bool:
    """Whether ``mixer`` decodes one token at a time: it offers the book's decoding protocol, ``init_cache(length)``
    and ``step(x, cache, t)`` (multi-head self-attention, AFT-simple, latent attention), and is causal."""
    return callable(getattr(mixer, "step", None)) and callable(getattr(mixer, "init_cache", None)) and bool(
        getattr(mixer, "causal", False))


def init_cache(model: EncoderDecoder, length: int) -> tuple:
    """The preallocated decoding state of every decoder block, for ``length`` generated tokens: each mixer's
    ``init_cache(length)``.

    Attention: keys and values ``(length, heads, key_dim)`` and ``(length, heads, value_dim)``, zero
    until step ``t`` writes row ``t`` (``kv_heads`` instead of ``heads`` for a layer that shares its keys and
    values, chapter 10). AFT-simple: the running maximum, numerator and denominator of its
    causal sum, three ``(d_model,)`` vectors whatever the length.
    """
    if not isinstance(model, EncoderDecoder):
        raise TypeError(f"model must be an EncoderDecoder, got {type(model).__name__}")
    length = _checks.positive_int("length", length)
    cache = []
    for block in model.decoder.blocks:
        if not can_step(block.mixer):
            raise ValueError(f"cached decoding supports the mixers {CACHED_MIXERS}, got {type(block.mixer).__name__}")
        cache.append(block.mixer.init_cache(length))
    return tuple(cache)


def cache_bytes(model: EncoderDecoder, length: int, source_length: int) -> int:
    """Bytes of the state that cached greedy decoding (:func:`greedy_decode_cached`) keeps from step to step.

    Two parts, summed over the decoder blocks, in the model's float32:

    - the self-attention cache of ``length`` generated tokens, keys and values ``(length, heads, key_dim)``
      (``2 x blocks x length x d_model`` numbers); with AFT-simple instead, its running maximum, numerator and
      denominator, ``3 x blocks x d_model`` numbers whatever the length (:func:`init_cache`);
    - the cross-attention keys and values of the ``source_length`` encoder outputs, projected once and read at
      every step (``2 x blocks x source_length x d_model`` numbers), kept by both kinds of decoder.

    Not counted: the weights, the generated tokens, and the encoder's output itself, which is not needed once its
    keys and values are projected.
    """
    if not isinstance(model, EncoderDecoder):
        raise TypeError(f"model must be an EncoderDecoder, got {type(model).__name__}")
    length = _checks.positive_int("length", length)
    source_length = _checks.positive_int("source_length", source_length)
    d_model = model.decoder.embedding.shape[1]

    def state():
        memory = jnp.zeros((source_length, d_model))
        cross = [block.cross.project(memory, memory, memory)[1:] for block in model.decoder.blocks]
        return init_cache(model, length), cross

    shapes = jax.eval_shape(state)
    return int(sum(np.prod(s.shape) * s.dtype.itemsize for s in jax.tree.leaves(shapes)))


@_checks.shaped
def greedy_decode_cached(model: EncoderDecoder, source: Int[Array, " S"], length: int, start: int
                         ) -> tuple[Int[Array, " length"], Float[Array, "length vocab"]]:
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


@_checks.jit
def _greedy_cached(model, source, length, start):
    memory = model.encode(source)
    blocks = model.decoder.blocks
    cross_kv = [b.cross.project(memory, memory, memory)[1:] for b in blocks]  # projected once, read at every step
    positions = sinusoidal_encoding(length, model.decoder.embedding.shape[1])

    def step(carry, t):
        token, cache = carry
        x = (model.decoder.embedding[token] + positions[t])[None]  # (1, d_model): the new row only
        new_cache = []
        for block, state, (k_mem, v_mem) in zip(blocks, cache, cross_kv):
            norms = iter(block.norms)
            out = {}

            def mix(h, block=block, state=state, out=out):
                y, out["state"] = block.mixer.step(h, state, t)
                return y

            x = block._sublayer(next(norms), mix, x)
            new_cache.append(out["state"])
            cross = lambda h, block=block, k_mem=k_mem, v_mem=v_mem: block.cross.attend(
                block.cross.project(h, h, h)[0], k_mem, v_mem)[0]
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


@_checks.shaped
def greedy_decode_batch(model: EncoderDecoder, sources: Int[Array, "N S"], length: int, *, cached: bool = True
                        ) -> tuple[Int[Array, "N length"], Float[Array, "N length vocab"]]:
    """:func:`greedy_decode_cached` (``cached=False``: :func:`greedy_decode`) on every row of ``sources (N, S)``,
    from :data:`START`, in one compiled program: returns ``(tokens (N, length), logits (N, length, vocab_size))``.
    """
    if not isinstance(model, EncoderDecoder):
        raise TypeError(f"model must be an EncoderDecoder, got {type(model).__name__}")
    sources = _checks.integers_in_range("sources", sources, 0, model.vocab_size)
    length = _checks.positive_int("length", length)
    if _checks.flag("cached", cached):
        init_cache(model, length)  # raises for mixers without a one-token step
    return _decode_batch(model, jnp.asarray(sources), length, cached)


@_checks.shaped
def exact_match(model: EncoderDecoder, sources: Int[Array, "N S"], targets: Int[Array, "N T"]) -> float:
    """Fraction of ``sources (N, S)`` whose greedy decoding equals ``targets (N, T)`` in every token.

    Decodes with the cache when the mixer allows it (:data:`CACHED_MIXERS`), otherwise by recomputing.
    """
    if not isinstance(model, EncoderDecoder):
        raise TypeError(f"model must be an EncoderDecoder, got {type(model).__name__}")
    cached = all(can_step(block.mixer) for block in model.decoder.blocks)
    decoded, _ = greedy_decode_batch(model, sources, np.shape(targets)[1], cached=cached)
    return float(np.mean(np.all(np.asarray(decoded) == np.asarray(targets), axis=1)))


@_checks.jit
def _decode_batch(model, sources, length, cached):
    decode = _greedy_cached if cached else _greedy
    return jax.vmap(lambda s: decode(model, s, length, START))(sources)


__all__ = [
    "CACHED_MIXERS", "make_block", "Stack", "EncoderDecoder",
    "sequence_loss", "greedy_decode", "greedy_decode_cached", "can_step", "init_cache", "cache_bytes", "DIGITS", "START",
    "reversal_data", "greedy_decode_batch", "exact_match",
]
