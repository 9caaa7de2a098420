"""Chapter 8: positions, measured. One small causal Transformer, six ways of telling it where tokens are.

The task is next-token prediction on a Markov chain of order ``k`` over ``V`` symbols (a random transition
table): the best possible loss at each position is the entropy of the true next-token distribution,
which :func:`markov_data` returns beside the tokens (the floor of every figure). The next token depends
on the last ``k`` tokens only, so a model must find them, wherever it is in the sequence: the task rewards
knowing relative positions, and the same rule holds at every length.

The model (:class:`PositionModel`) embeds tokens, runs ``depth`` pre-LN blocks of causal multi-head
self-attention and a feed-forward layer (chapter 7's), and reads out logits. ``encoding`` is one of
:data:`ENCODINGS`:

- ``"nope"``: no positional information at all; only the causal mask breaks the symmetry
  (Kazemnejad et al. 2023).
- ``"sinusoidal"``: chapter 1's encoding added to the embeddings (Vaswani et al. 2017).
- ``"learned"``: a learned vector per position added to the embeddings, trained for positions
  ``0 .. train_length - 1``; later positions reuse the last row (:class:`~attnbook.positional.LearnedPositions`).
- ``"rope"``: queries and keys of each head rotated by their position (Su et al. 2021).
- ``"alibi"``: ``slope_h * (j - i)`` added to the scores of head ``h`` (Press et al. 2022).
- ``"t5"``: a learned scalar per head and bucket of ``j - i`` added to the scores (Raffel et al. 2020).

:func:`train` trains one encoding for several seeds at once (``vmap`` over seeds, ``lax.scan`` over steps,
one jitted program); :func:`loss_per_position` evaluates a trained model at any length.

Chapter 9 evaluates the RoPE models with RoPE stretched (``scaling=``, a :mod:`attnbook.positional` scaling),
without retraining; ``scaling=None`` (the default) leaves every result of chapter 8 as it was.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float, Int

from . import _checks, masking, positional
from . import train as train_module
from .mha import MultiHeadSelfAttention
from .nn import Block, Dense, init, split as _keys

ENCODINGS = ("nope", "sinusoidal", "learned", "rope", "alibi", "t5")
"""The six position encodings of chapter 8, in the order of its tables."""


# ---------------------------------------------------------------------------------------------
# The task: a Markov chain of order k, with its per-position optimum


def markov_table(vocab_size: int, order: int, *, concentration: float = 0.2,
                 rng: np.random.Generator) -> Float[np.ndarray, "contexts vocab"]:
    """A random transition table: row ``c`` is the next-token distribution after context ``c``.

    Contexts are the last ``order`` tokens, read as a base-``vocab_size`` number (oldest digit first), so
    the table has ``vocab_size ** order`` rows. Rows are Dirichlet(``concentration``) draws: small
    concentrations make the next token nearly determined by its context.
    """
    vocab_size = _checks.positive_int("vocab_size", vocab_size)
    order = _checks.positive_int("order", order)
    concentration = _checks.positive_float("concentration", concentration)
    rng = _checks.numpy_rng("rng", rng)
    return rng.dirichlet(np.full(vocab_size, concentration), size=vocab_size ** order)


@_checks.shaped
def markov_data(table: Float[Array, "contexts vocab"], order: int, num: int, length: int, *, rng: np.random.Generator
                ) -> tuple[Int[np.ndarray, "num length"], Int[np.ndarray, "num length"], Float[np.ndarray, "num length"]]:
    """``num`` sequences from the chain: inputs, next-token targets and the optimal loss of each target.

    The first ``order`` tokens are uniform; every later token is drawn from ``table[context]``. Returns
    ``(inputs (num, length), targets (num, length), floor (num, length))`` with ``targets[:, t]`` the token
    after ``inputs[:, t]``. ``floor[n, t]`` is the entropy (in nats) of the distribution ``targets[n, t]``
    was drawn from: ``log V`` while the context is incomplete, the entropy of the table's row after.
    Its mean is the lowest expected cross-entropy any model can reach on these targets.
    """
    table = np.asarray(table, dtype=np.float64)
    order = _checks.positive_int("order", order)
    num = _checks.positive_int("num", num)
    length = _checks.positive_int("length", length)
    rng = _checks.numpy_rng("rng", rng)
    contexts, vocab = table.shape
    if contexts != vocab ** order:
        raise ValueError(f"table must have vocab ** order = {vocab ** order} rows for order={order}, "
                         f"got shape {table.shape}")
    seq = np.empty((num, length + 1), dtype=np.int64)
    floor = np.empty((num, length + 1))
    seq[:, :order] = rng.integers(0, vocab, size=(num, min(order, length + 1)))
    floor[:, :order] = np.log(vocab)
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -np.sum(np.where(table > 0, table * np.log(table), 0.0), axis=1)  # (contexts,)
    cumulative = np.cumsum(table, axis=1)
    for t in range(order, length + 1):
        context = np.zeros(num, dtype=np.int64)
        for back in range(order, 0, -1):
            context = context * vocab + seq[:, t - back]
        u = rng.random(num)[:, None]
        seq[:, t] = np.minimum(np.sum(cumulative[context] < u, axis=1), vocab - 1)
        floor[:, t] = entropy[context]
    return seq[:, :-1].astype(np.int32), seq[:, 1:].astype(np.int32), floor[:, 1:]


@_checks.shaped
def current_token_loss(table: Float[Array, "contexts vocab"], order: int, inputs: Int[np.ndarray, "num length"]
                       ) -> Float[np.ndarray, "num length"]:
    """The loss of the best predictor that sees only the current token, at every target of ``inputs``.

    At position ``t`` the predictor is the chain's own conditional ``q_t(next | inputs[t])``, computed
    exactly from ``table`` and the distribution of the process at ``t`` (the first ``order`` tokens uniform,
    as in :func:`markov_data`), with no sampling. Entry ``[n, t]`` is its expected cross-entropy (nats) on
    target ``t`` of sequence ``n`` given that sequence's true context, ``sum_c p(c | context) (-ln q_t(c |
    inputs[n, t]))``: the counterpart of :func:`markov_data`'s ``floor`` for a model that reads one token.
    Its mean over the targets at ``t`` estimates the conditional entropy ``H(x_{t+1} | x_t)``.
    """
    table = np.asarray(table, dtype=np.float64)
    order = _checks.positive_int("order", order)
    contexts, vocab = table.shape
    if contexts != vocab ** order:
        raise ValueError(f"table must have vocab ** order = {vocab ** order} rows for order={order}, "
                         f"got shape {table.shape}")
    inputs = _checks.integers_in_range("inputs", np.asarray(inputs), 0, vocab)
    inputs = np.asarray(inputs, dtype=np.int64)
    num, length = inputs.shape
    out = np.full((num, length), np.log(vocab))  # targets before the context is complete are uniform
    state = np.full(contexts, 1.0 / contexts)  # distribution of the last `order` tokens at t = order - 1
    last = np.arange(contexts) % vocab  # the current token of each context
    for t in range(order - 1, length):
        joint = np.zeros((vocab, vocab))  # (current token, next token)
        np.add.at(joint, last, state[:, None] * table)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_q = np.log(joint / joint.sum(axis=1, keepdims=True))
        context = np.zeros(num, dtype=np.int64)
        for back in range(order - 1, -1, -1):
            context = context * vocab + inputs[:, t - back]
        p = table[context]  # (num, vocab): the true next-token distribution of each target
        out[:, t] = -np.sum(np.where(p > 0, p * np.where(p > 0, log_q[inputs[:, t]], 0.0), 0.0), axis=1)
        # the next state: context (a_1 .. a_k) and next token c give context (a_2 .. a_k, c)
        following = (np.arange(contexts)[:, None] % vocab ** (order - 1)) * vocab + np.arange(vocab)
        state = np.bincount(following.ravel(), weights=(state[:, None] * table).ravel(), minlength=contexts)
    return out


# ---------------------------------------------------------------------------------------------
# The model


def _attention(d_model: int, heads: int, rope: bool, key: jax.Array) -> MultiHeadSelfAttention:
    """Causal multi-head self-attention whose projections start as chapter 8's published runs did: one
    fused ``Dense(d_model, 3 d_model)`` for queries, keys and values and one ``Dense`` for the output."""
    if d_model % heads or (rope and (d_model // heads) % 2):
        raise ValueError(f"d_model must split into heads of equal (for RoPE, even) size, "
                         f"got d_model={d_model}, heads={heads}")
    dk = d_model // heads
    k1, k2 = _keys(key, 2)
    qkv, out = Dense(d_model, 3 * d_model, key=k1), Dense(d_model, d_model, key=k2)
    w, b = qkv.weight.reshape(d_model, 3, heads, dk), qkv.bias.reshape(3, heads, dk)
    layer = MultiHeadSelfAttention(d_model, heads, causal=True, key=key)
    return eqx.tree_at(lambda m: (m.attention.w_q, m.attention.b_q, m.attention.w_k, m.attention.b_k,
                                  m.attention.w_v, m.attention.b_v, m.attention.w_o, m.attention.b_o), layer,
                       (w[:, 0], b[0], w[:, 1], b[1], w[:, 2], b[2], out.weight.reshape(heads, dk, d_model), out.bias))


class PositionModel(eqx.Module):
    """A small causal Transformer language model whose only difference between variants is ``encoding``.

    Args:
        encoding: one of :data:`ENCODINGS`.
        vocab_size, d_model, depth, heads: sizes (``depth`` pre-LN blocks, feed-forward width ``4 d_model``).
        train_length: the length it is trained at; the learned absolute table has this many rows.
        key: PRNG key for the initial weights.

    ``model(tokens (T,))`` returns next-token logits ``(T, vocab_size)`` for any ``T``.
    """

    embedding: jax.Array
    positions: positional.LearnedPositions | None
    relative: positional.RelativePositionBias | None
    blocks: tuple
    final_norm: eqx.nn.LayerNorm
    head: Dense
    encoding: str = eqx.field(static=True)

    def __init__(self, encoding: str, *, vocab_size: int, d_model: int = 32, depth: int = 2, heads: int = 4,
                 train_length: int = 32, key: jax.Array):
        if encoding not in ENCODINGS:
            raise ValueError(f"encoding must be one of {ENCODINGS}, got {encoding!r}")
        vocab_size = _checks.positive_int("vocab_size", vocab_size)
        d_model = _checks.positive_int("d_model", d_model)
        depth = _checks.positive_int("depth", depth)
        key = _checks.prng_key("key", key)
        keys = _keys(key, 2 * depth + 4)
        self.encoding = encoding
        self.embedding = init(keys[0], (vocab_size, d_model), "normal")
        self.positions = (positional.LearnedPositions(train_length, d_model, scale=1.0, key=keys[1])
                          if encoding == "learned" else None)
        self.relative = positional.RelativePositionBias(heads, key=keys[2]) if encoding == "t5" else None
        heads = _checks.positive_int("heads", heads)
        self.blocks = tuple(Block(_attention(d_model, heads, encoding == "rope", k_mix), d_model, key=k_ff)
                            for k_mix, k_ff in zip(keys[4:4 + depth], keys[4 + depth:]))
        self.final_norm = eqx.nn.LayerNorm(d_model)
        self.head = Dense(d_model, vocab_size, key=keys[3])

    @property
    def heads(self) -> int:
        return self.blocks[0].mixer.heads

    def bias(self, length: int) -> Float[Array, "heads T T"] | None:
        """The additive score bias at ``length`` (ALiBi or T5), ``None`` for the other encodings."""
        if self.encoding == "alibi":
            return positional.alibi_causal_bias(length, self.heads)
        if self.encoding == "t5":
            return self.relative(length)
        return None

    def _scores_bias(self, length: int, max_offset: int | None, sinks: int = 0, renumber: bool = False
                     ) -> Float[Array, "heads T T"] | None:
        """The additive score bias, with ``-inf`` on every key at offset ``i - j >= max_offset`` if given,
        except the first ``sinks`` keys (``j < sinks``), which stay visible (attention sinks, chapter 9).
        With ``renumber`` (ALiBi), the bias is ALiBi's at the offsets of :func:`cache_offsets`."""
        sinks = _checks.nonnegative_int("sinks", sinks)
        if renumber and self.encoding == "alibi":
            offset = cache_offsets(length, max_offset, sinks)  # i - j, or p_i - j for the first `sinks` keys
            slopes = positional.alibi_slopes(self.heads)[:, None, None]
            causal = np.tril(np.ones((length, length), dtype=bool))
            bias = jnp.asarray(np.where(causal[None], -slopes * offset[None] + 0.0, -np.inf), dtype=jnp.float32)
        else:
            bias = self.bias(length)
        if max_offset is None:
            return bias
        max_offset = _checks.positive_int("max_offset", max_offset)
        pos = np.arange(length)
        far = (pos[:, None] - pos[None, :]) >= max_offset  # [i, j]: key j at offset >= max_offset
        far = jnp.asarray(far & (pos[None, :] >= sinks))  # ... and not one of the first `sinks` keys
        bias = jnp.zeros((self.heads, length, length), jnp.float32) if bias is None else bias
        return jnp.where(far[None], -jnp.inf, bias)

    def _run(self, tokens, max_offset, with_weights, scaling=None, sinks=0, renumber=False):
        tokens = _checks.tokens("tokens", tokens, self.head.weight.shape[1])
        length, d_model = tokens.shape[0], self.embedding.shape[1]
        renumber = _checks.flag("renumber", renumber)
        if renumber and self.encoding not in ("rope", "alibi", "nope"):
            raise ValueError(f"renumber applies to relative encodings (rope, alibi, nope), but this model's "
                             f"encoding is {self.encoding!r}")
        x = self.embedding[tokens]
        if self.encoding == "sinusoidal":
            x = x + positional.sinusoidal_encoding(length, d_model) if length else x
        elif self.encoding == "learned":
            x = x + self.positions(length)
        bias = self._scores_bias(length, max_offset, sinks, renumber)
        hook = positional.rope_heads if self.encoding == "rope" else None
        if scaling is not None:  # chapter 9: RoPE stretched at evaluation time
            if self.encoding != "rope":
                raise ValueError(f"scaling applies to RoPE only, but this model's encoding is {self.encoding!r}")
            hook = positional.scaled_rope_heads(scaling)
        # RoPE with positions numbered inside the cache: only the scores on the first `sinks` keys change
        renumbered = renumber and self.encoding == "rope" and max_offset is not None and sinks > 0
        weights = []
        for block in self.blocks:
            block_bias = bias
            if renumbered:
                h = jax.vmap(block.norms[0])(x)
                block_bias = bias + _renumbered_sink_scores(block.mixer.attention, h, max_offset, sinks, scaling)
            if with_weights:  # the weights the block's mixer computes from its pre-LN input, (heads, T, T)
                h = jax.vmap(block.norms[0])(x)
                weights.append(block.mixer.attention(h, h, h, masking.causal_mask(length), block_bias,
                                                     process_heads=hook)[1])
            x = block(x, bias=block_bias, process_heads=hook)
        logits = self.head(jax.vmap(self.final_norm)(x))
        return (logits, jnp.stack(weights)) if with_weights else logits

    @_checks.shaped
    def __call__(self, tokens: Int[Array, " T"], max_offset: int | None = None, *, scaling=None, sinks: int = 0,
                 renumber: bool = False) -> Float[Array, "T vocab"]:
        """Next-token logits for integer ``tokens (T,)`` in ``0 .. vocab_size - 1`` (checked, also under jit).

        ``max_offset`` (optional) restricts every head's attention to the keys at offsets ``i - j < max_offset``
        (a diagnostic: the model was trained without it). ``scaling`` (optional, RoPE models only; chapter 9):
        a :class:`~attnbook.positional.PositionInterpolation`, :class:`~attnbook.positional.NTKAwareScaling` or
        :class:`~attnbook.positional.YaRNScaling` applied to every head's RoPE, without retraining; ``None``
        is the model as trained. ``sinks`` (chapter 9, with ``max_offset``): the first ``sinks`` keys stay
        visible to every query whatever their offset, as in the rolling cache with attention sinks of Xiao et
        al. (2023); positions stay those of the whole sequence, unless ``renumber``.

        ``renumber`` (chapter 9; RoPE, ALiBi or NoPE): positions numbered inside the cache, as Xiao et al. do
        (their Section 3.2). Query ``i`` reads the cache ``C_i = {j <= i : j < k or i - j < w}`` (``k = sinks``,
        ``w = max_offset``), and the cached tokens get the positions ``0, 1, ..., |C_i| - 1`` in order, whatever
        their places in the text. The offset of query ``i`` to key ``j`` is then

            delta_ij = i - j                              for the keys of the window (i - j < w),
            delta_ij = p_i - j,  p_i = min(i, k + w - 1)  for the first k keys,

        (:func:`cache_offsets`), never more than ``k + w - 1``. With RoPE, head's score of query ``i`` with key
        ``j`` is ``q_i^T R(delta_ij theta) k_j / sqrt(d)``, ``R(a)`` rotating pair ``m`` by ``a theta_m``; since
        the window's offsets do not change, only the scores on the first ``k`` keys do. With ALiBi the bias is
        ``-slope_h delta_ij``; NoPE has no positions to renumber. Without sinks, or without a window, it
        changes nothing. ``scaling`` and ``renumber`` combine (the rotations use the scaled frequencies).
        """
        return self._run(tokens, max_offset, False, scaling, sinks, renumber)

    @_checks.shaped
    def attention_weights(self, tokens: Int[Array, " T"], max_offset: int | None = None, *, scaling=None,
                          sinks: int = 0, renumber: bool = False
                          ) -> tuple[Float[Array, "T vocab"], Float[Array, "depth heads T T"]]:
        """The logits and every block's attention weights ``(depth, heads, T, T)`` (query ``i``, key ``j``)."""
        return self._run(tokens, max_offset, True, scaling, sinks, renumber)


def cache_offsets(length: int, max_offset: int | None, sinks: int) -> np.ndarray:
    """The offsets ``delta[i, j]`` of a rolling cache with positions numbered inside it, ``(length, length)``.

    Query ``i`` keeps the first ``sinks`` tokens and the last ``max_offset`` (``w``) tokens; numbering the kept
    tokens ``0, 1, ...`` gives query ``i`` the position ``p_i = min(i, sinks + w - 1)`` and leaves the window's
    offsets ``i - j`` as they were, while key ``j < sinks`` keeps position ``j``: ``delta[i, j] = p_i - j``
    there. Entries outside the cache (``j > i``, or neither in the window nor a sink) are ``i - j`` too; the
    mask hides them. ``max_offset=None`` (no window) gives ``i - j`` everywhere.
    """
    length = _checks.nonnegative_int("length", length)
    sinks = _checks.nonnegative_int("sinks", sinks)
    i, j = np.arange(length)[:, None], np.arange(length)[None, :]
    offset = np.broadcast_to(i - j, (length, length)).copy()
    if max_offset is not None and sinks:
        p = np.minimum(np.arange(length), sinks + _checks.positive_int("max_offset", max_offset) - 1)
        first = min(sinks, length)
        offset[:, :first] = p[:, None] - j[:, :first]
    return offset


def _renumbered_sink_scores(attention, h, max_offset, sinks, scaling):
    """What numbering positions inside the cache adds to the scaled scores of RoPE on the first ``sinks`` keys.

    ``q_i`` rotated to ``p_i`` (:func:`cache_offsets`) instead of ``i``, against key ``j < sinks`` rotated to
    ``j``: ``(R(p_i) q_i - R(i) q_i)^T R(j) k_j / sqrt(d)`` there, 0 on every other key, ``(heads, T, T)``.
    Added to the bias, it turns the block's score on sink ``j`` into ``q_i^T R(p_i - j) k_j / sqrt(d)``.
    """
    length = h.shape[0]
    q, k, _ = attention.project(h, h, h)  # (T, heads, d), not rotated yet
    rotate = jax.vmap(lambda x, pos: positional.rope(x, scaling=scaling, positions=pos), in_axes=(1, None),
                      out_axes=1)
    p = np.minimum(np.arange(length), sinks + max_offset - 1)
    first = min(sinks, length)
    delta_q = rotate(q, p) - rotate(q, np.arange(length))  # (T, heads, d): zero where p_i = i
    k_sinks = rotate(k, np.arange(length))[:first]  # (sinks, heads, d)
    change = jnp.einsum("ihd,jhd->hij", delta_q, k_sinks) / jnp.sqrt(jnp.asarray(q.shape[-1], q.dtype))
    return jnp.pad(change, ((0, 0), (0, 0), (0, length - first)))


# ---------------------------------------------------------------------------------------------
# Training and evaluation


@_checks.shaped
def loss_per_position(model: PositionModel, inputs: Int[Array, "N T"], targets: Int[Array, "N T"],
                      *, max_offset: int | None = None, scaling=None, sinks: int = 0, renumber: bool = False
                      ) -> Float[Array, " T"]:
    """Mean cross-entropy (nats) at each position over the ``N`` sequences: shape ``(T,)``.

    ``targets`` must lie in ``[0, vocab_size)``, also under ``jit``. ``max_offset``, ``scaling`` (a RoPE
    scaling of chapter 9, applied at evaluation only), ``sinks`` and ``renumber`` (a rolling cache with
    positions numbered inside it): see :class:`PositionModel`.
    """
    if not isinstance(model, PositionModel):
        raise TypeError(f"model must be a PositionModel, got {type(model).__name__}")
    targets = _checks.integers_in_range("targets", targets, 0, model.head.weight.shape[1])
    if max_offset is not None:
        max_offset = _checks.positive_int("max_offset", max_offset)
    sinks = _checks.nonnegative_int("sinks", sinks)
    renumber = _checks.flag("renumber", renumber)
    if scaling is not None:
        scaling = positional._check_scaling(scaling)
        if model.encoding != "rope":
            raise ValueError(f"scaling applies to RoPE only, but this model's encoding is {model.encoding!r}")
    return jnp.mean(_eval_loss(model, inputs, targets, max_offset, scaling, sinks, renumber), axis=0)


@_checks.jit
def _eval_loss(model, inputs, targets, max_offset=None, scaling=None, sinks=0, renumber=False):
    return train_module.cross_entropy(
        jax.vmap(lambda t: model(t, max_offset, scaling=scaling, sinks=sinks, renumber=renumber))(inputs), targets)


@_checks.shaped
def far_attention_fraction(model: PositionModel, inputs: Int[Array, "N T"], offset: int, *, start: int
                           ) -> Float[np.ndarray, "depth heads"]:
    """Attention mass on keys at offsets ``i - j >= offset``, mean over queries ``i >= start`` and sequences.

    One number per block and head, between 0 and 1: how much of its attention a head spends on far keys.
    For uniform attention over the ``i + 1`` visible keys it would be :func:`uniform_far_fraction`.
    """
    if not isinstance(model, PositionModel):
        raise TypeError(f"model must be a PositionModel, got {type(model).__name__}")
    offset = _checks.positive_int("offset", offset)
    start = _checks.nonnegative_int("start", start)
    inputs = jnp.asarray(inputs)
    if start >= inputs.shape[1]:
        raise ValueError(f"start must be below the length {inputs.shape[1]}, got {start}")
    return np.asarray(_far_fraction(model, inputs, offset, start))


@_checks.jit
def _far_fraction(model, inputs, offset, start):
    pos = jnp.arange(inputs.shape[1])
    far = (pos[:, None] - pos[None, :]) >= offset  # [i, j]
    weights = jax.vmap(lambda t: model.attention_weights(t)[1])(inputs)  # (N, depth, heads, T, T)
    mass = jnp.sum(jnp.where(far, weights, 0.0), axis=-1)[..., start:]  # (N, depth, heads, queries)
    return jnp.mean(mass, axis=(0, 3))


def uniform_far_fraction(length: int, offset: int, start: int) -> float:
    """:func:`far_attention_fraction` of uniform causal attention: mean of ``max(i + 1 - offset, 0) / (i + 1)``
    over the queries ``start <= i < length``."""
    i = np.arange(_checks.nonnegative_int("start", start), _checks.positive_int("length", length))
    return float(np.mean(np.maximum(i + 1 - _checks.positive_int("offset", offset), 0) / (i + 1)))


@_checks.shaped
def train(encoding: str, seeds, inputs: Int[Array, "seeds steps batch T"], targets: Int[Array, "seeds steps batch T"],
          *, vocab_size: int, learning_rate: float = 3e-3, **model_options) -> tuple[PositionModel, np.ndarray]:
    """Train one model per seed, all at once, with :func:`attnbook.train.fit_seeds` and Adam.

    ``seeds`` are integers (``jax.random.key(seed)`` initialises each model); ``inputs`` and ``targets``
    hold one minibatch per seed and step. Returns the trained models (every array with a leading seed axis;
    take one with :func:`select`) and the training losses ``(seeds, steps)``.
    """
    if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__iter__"):
        raise TypeError(f"seeds must be a sequence of integers, got {_checks.describe(seeds)}")
    seeds = [_checks.nonnegative_int(f"seeds[{i}]", s) for i, s in enumerate(seeds)]
    inputs, targets = jnp.asarray(inputs), jnp.asarray(targets)
    if inputs.ndim != 4 or inputs.shape != targets.shape or inputs.shape[0] != len(seeds):
        raise ValueError(f"inputs and targets must both have shape (seeds, steps, batch, T) with "
                         f"seeds={len(seeds)}, got {tuple(inputs.shape)} and {tuple(targets.shape)}")
    learning_rate = _checks.positive_float("learning_rate", learning_rate)
    models = [PositionModel(encoding, vocab_size=vocab_size, train_length=inputs.shape[-1],
                            key=jax.random.key(s), **model_options) for s in seeds]
    return train_module.fit_seeds(models, _LOSS, (inputs, targets), optimizer=optax.adam(learning_rate))


_LOSS = train_module.classification_loss(lambda model, tokens: model(tokens))
"""Mean next-token cross-entropy of a batch ``(inputs (N, T), targets (N, T))``."""

select = train_module.select


@_checks.shaped
def fine_tune(models: PositionModel, inputs: Int[Array, "seeds steps batch T"], targets: Int[Array, "seeds steps batch T"],
              *, checkpoints, scaling=None, learning_rate: float = 1e-3) -> list[PositionModel]:
    """Continue training stacked models (as :func:`train` returns them) with Adam, RoPE scaled by ``scaling``.

    Chapter 9's fine-tuning at a longer length: model ``r`` trains at step ``s`` on ``inputs[r, s]``, with a fresh
    Adam state and ``model(tokens, scaling=scaling)`` as the model (the scaling stays part of the model from
    then on). ``checkpoints`` are increasing step counts from 0 to at most ``steps``; the models after each
    are returned, in one list (step 0: the models as given). One run: the optimizer state carries over from one
    checkpoint to the next.
    """
    if not isinstance(models, PositionModel):
        raise TypeError(f"models must be stacked PositionModels, got {type(models).__name__}")
    inputs, targets = jnp.asarray(inputs), jnp.asarray(targets)
    if inputs.ndim != 4 or inputs.shape != targets.shape:
        raise ValueError(f"inputs and targets must both have shape (seeds, steps, batch, T), got "
                         f"{tuple(inputs.shape)} and {tuple(targets.shape)}")
    checkpoints = [_checks.nonnegative_int("checkpoints[i]", c) for c in checkpoints]
    if not checkpoints or any(b <= a for a, b in zip(checkpoints, checkpoints[1:])) or checkpoints[-1] > inputs.shape[1]:
        raise ValueError(f"checkpoints must increase from 0 up to steps={inputs.shape[1]}, got {checkpoints}")
    if scaling is not None:
        scaling = positional._check_scaling(scaling)
    learning_rate = _checks.positive_float("learning_rate", learning_rate)
    optimizer = optax.adam(learning_rate)
    loss_fn = train_module.classification_loss(lambda model, tokens: model(tokens, scaling=scaling))
    params, static = eqx.partition(models, eqx.is_inexact_array)
    state = jax.vmap(optimizer.init)(params)
    out, done = [], 0
    for c in checkpoints:
        if c > done:
            params, state = _fine_tune_steps(params, state, static, loss_fn, optimizer,
                                             (inputs[:, done:c], targets[:, done:c]))
            done = c
        out.append(eqx.combine(params, static))
    return out


@_checks.jit
def _fine_tune_steps(params, state, static, loss_fn, optimizer, batches):
    step, _ = train_module.training_step(static, loss_fn, optimizer)

    def one(params, state, batches):
        (params, state), _ = jax.lax.scan(step, (params, state), batches)
        return params, state

    return jax.vmap(one)(params, state, batches)
