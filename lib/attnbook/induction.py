"""Chapter 11: attention-only language models on real text, and the measurements that find induction heads.

**The model** (:class:`AttentionOnlyLM`) is chapter 7's decoder body without cross-attention and without the
feed-forward layer (``transformer.Stack(decoder=True, cross=False, feed_forward=False)``): an embedding plus the
sinusoidal position encoding, ``depth`` blocks of causal multi-head self-attention (the library's one attention
core, :class:`attnbook.mha.MultiHeadAttention`), a final LayerNorm and a linear read-out. This is the
attention-only Transformer of Elhage et al. (2021), with one difference that is a choice: it keeps **pre-LN**
LayerNorms, ``x = x + Attn(LN(x))``. Elhage et al. set LayerNorm aside in their analysis (treated as folded into
the weights around it); trained without it, a small model at the learning rates used here is less stable, and the
book's blocks are pre-LN throughout. Where weights are read directly (:func:`qk_ov`) each layer's LayerNorm gain
is folded into the matrices that read the residual stream, as TransformerLens does with ``fold_ln``; its
centring and its per-token scale, which a product of weight matrices cannot express, are left out.

**Notation.** Rows are tokens. For layer ``l`` and head ``h``, with ``A^{l,h}`` the ``(T, T)`` attention weights
(row ``i``: query position ``i``; column ``j``: key position ``j``; causal, so ``A[i, j] = 0`` for ``j > i``):

- previous-token score: ``P^{l,h} = mean_{i=1..T-1} A^{l,h}[i, i-1]`` (:func:`previous_token_score`);
- induction score on a sequence of ``P`` random tokens repeated twice (``x[i] = x[i-P]`` for ``i >= P``), the
  weight from the second occurrence of a token to the token after its first occurrence:
  ``I^{l,h} = mean_{i=P..2P-1} A^{l,h}[i, i-P+1]`` (:func:`induction_score`; Olsson et al. 2022);
- loss per position ``L(t) = mean over sequences of -log p(x[t+1] | x[..t])`` (:func:`loss_per_position`), and the
  in-context loss ``L(late) - L(early)`` (:func:`in_context_loss`; Olsson et al. use token 500 minus token 50 of
  an 8192-token context, this book position 120 minus position 12 of 128 characters: the same ratio of 10);
- head ablation: head ``(l, h)``'s output ``z^{l,h}_i = sum_j A[i, j] v_j`` is replaced by zero or by its mean
  over reference sequences and positions, before the output projection (:func:`forward`);
- composition (Elhage et al. 2021): with ``W_QK = W_Q W_K^T`` and ``W_OV = W_V W_O`` the ``(d_model, d_model)``
  matrices of a head (row-vector convention: scores ``x_i W_QK x_j^T``, output ``x W_OV``), the K-composition of an
  earlier head ``a`` into a later head ``b`` is ``||W_OV^a (W_QK^b)^T||_F / (||W_OV^a||_F ||W_QK^b||_F)``
  (:func:`composition_scores`), TransformerLens's ``composition_scores(OV, QK.T)``; in Elhage et al.'s column-vector
  convention, ``||W_QK^T W_OV||_F / (||W_QK||_F ||W_OV||_F)``.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from . import _checks, corpus, masking, positional, train, transformer
from .mha import MultiHeadSelfAttention
from .nn import Dense, split as _keys

ENCODINGS = ("rope", "sinusoidal")
"""Position encodings of :class:`AttentionOnlyLM`: RoPE in every head (the default), or chapter 1's sinusoids added
to the embedding."""
MODES = ("zero", "mean")
"""The two head ablations: the head's output set to zero, or to its mean over reference sequences."""
EARLY, LATE = 12, 120
"""Positions of the in-context loss ``L(LATE) - L(EARLY)`` for a 128-character context (Olsson et al.: 50 and 500)."""


class AttentionOnlyLM(eqx.Module):
    """A causal language model of attention-only pre-LN blocks, built from chapter 7's ``transformer.Stack``.

    ``model(tokens (T,))`` returns next-token logits ``(T, vocab_size)``: row ``t`` predicts token ``t + 1`` from
    tokens ``0..t``. Any length works (RoPE and sinusoidal positions need no table); chapter 11 trains on 128
    characters.

    Args:
        vocab_size: number of token ids (default :data:`attnbook.corpus.VOCAB_SIZE`, the corpus's 98 characters).
        d_model: features per token (a multiple of ``heads``).
        depth: number of attention layers (1 or 2 in chapter 11).
        heads: heads per layer, each of size ``d_model // heads``.
        encoding: ``"rope"`` (default: every head's queries and keys rotated by their position, chapter 8's RoPE, so
            that a score depends on the offset between query and key) or ``"sinusoidal"`` (chapter 1's encoding added
            to the embedding, as chapter 7's Transformer does).
        key: PRNG key of the initial weights.
    """

    body: transformer.Stack
    head: Dense
    encoding: str = eqx.field(static=True)

    def __init__(self, vocab_size: int = corpus.VOCAB_SIZE, *, d_model: int = 64, depth: int = 2, heads: int = 4,
                 encoding: str = "rope", key: jax.Array):
        if encoding not in ENCODINGS:
            raise ValueError(f"encoding must be one of {ENCODINGS}, got {encoding!r}")
        if encoding == "rope" and (d_model % heads or (d_model // heads) % 2):
            raise ValueError(f"RoPE needs heads of an even size, got d_model={d_model}, heads={heads}")
        self.encoding = encoding
        k_body, k_head = _keys(_checks.prng_key("key", key), 2)
        self.body = transformer.Stack(vocab_size, d_model, depth, decoder=True, cross=False, feed_forward=False,
                                      heads=heads, pre_norm=True, key=k_body)
        self.head = Dense(d_model, vocab_size, key=k_head)

    @property
    def vocab_size(self) -> int:
        return self.body.embedding.shape[0]

    @property
    def depth(self) -> int:
        return len(self.body.blocks)

    @property
    def heads(self) -> int:
        return self.body.blocks[0].mixer.heads

    @property
    def head_dim(self) -> int:
        return self.body.blocks[0].mixer.attention.value_dim

    @_checks.shaped
    def __call__(self, tokens: Int[Array, " T"]) -> Float[Array, "T vocab"]:
        """Next-token logits ``(T, vocab_size)`` for integer ``tokens (T,)`` in ``[0, vocab_size)``."""
        tokens = _checks.tokens("tokens", tokens, self.vocab_size)
        return _run(self, tokens, None, None)[0]


def _check_model(model) -> AttentionOnlyLM:
    if not isinstance(model, AttentionOnlyLM):
        raise TypeError(f"model must be an AttentionOnlyLM, got {_checks.describe(model)}")
    return model


def _run(model, tokens, ablated, replacement):
    """Logits ``(T, V)``, attention weights ``(depth, heads, T, T)`` and head outputs ``z (depth, T, heads, d_head)``
    of one sequence; heads where ``ablated (depth, heads)`` is True output ``replacement (depth, heads, d_head)``."""
    body = model.body
    if model.encoding == "sinusoidal":
        x = transformer._embed(body.embedding, tokens)
        rotate = None
    else:  # RoPE: the embedding alone; queries and keys rotated in every head
        x = body.embedding[tokens]
        rotate = positional.rope_heads
    mask = masking.causal_mask(tokens.shape[0])
    weights, outputs = [], []
    for layer, block in enumerate(body.blocks):
        seen = {}

        def hook(q, k, v, layer=layer, seen=seen):
            if rotate is not None:
                q, k, v = rotate(q, k, v)
            seen["v"] = v
            if ablated is not None:
                # Every key's value set to c makes the head's output sum_j A[i, j] c = c (each row of A sums to 1:
                # a causal query always sees itself), so the head outputs exactly c at every position.
                v = jnp.where(ablated[layer][None, :, None], replacement[layer][None], v)
            return q, k, v

        def mix(h, block=block, seen=seen, hook=hook):
            out, seen["weights"] = block.mixer.attention(h, h, h, mask, process_heads=hook)
            return out

        x = block._sublayer(block.norms[0], mix, x)
        z = jnp.einsum("hts,shv->thv", seen["weights"], seen["v"])  # the head outputs before ablation
        if ablated is not None:
            z = jnp.where(ablated[layer][None, :, None], replacement[layer][None], z)
        weights.append(seen["weights"])
        outputs.append(z)
    x = jax.vmap(body.final_norm)(x)
    return model.head(x), jnp.stack(weights), jnp.stack(outputs)


@_checks.jit
def _run_batch(model, inputs, ablated, replacement):
    return jax.vmap(lambda t: _run(model, t, ablated, replacement))(inputs)


def _check_ablation(model, ablated, replacement):
    if ablated is None:
        if replacement is not None:
            raise ValueError("replacement needs ablated (which heads to replace)")
        return None, None
    shape = (model.depth, model.heads)
    ablated = np.asarray(ablated)
    if ablated.dtype != np.bool_ or ablated.shape != shape:
        raise ValueError(f"ablated must be a boolean array of shape (depth, heads) = {shape}, "
                         f"got dtype {ablated.dtype}, shape {ablated.shape}")
    full = shape + (model.head_dim,)
    replacement = np.zeros(full, np.float32) if replacement is None else np.asarray(replacement, np.float32)
    if replacement.shape != full:
        raise ValueError(f"replacement must have shape (depth, heads, head_dim) = {full}, got {replacement.shape}")
    return jnp.asarray(ablated), jnp.asarray(replacement)


def forward(model: AttentionOnlyLM, inputs, ablated=None, replacement=None):
    """The model on a batch, with its attention weights and head outputs, some heads optionally ablated.

    Args:
        model: an :class:`AttentionOnlyLM`.
        inputs: token ids ``(N, T)``.
        ablated: ``None`` or a boolean ``(depth, heads)`` array, True for each head to ablate.
        replacement: what each ablated head outputs, ``(depth, heads, head_dim)`` (default zeros: zero ablation;
            :func:`mean_head_outputs` for mean ablation). Only the rows of ablated heads are read.

    Returns ``(logits (N, T, V), weights (N, depth, heads, T, T), z (N, depth, T, heads, head_dim))``: ``z`` is each
    head's output ``z_i = sum_j A[i, j] v_j`` before the output projection (the replacement where ablated).
    """
    model = _check_model(model)
    inputs = _tokens(model, inputs)
    ablated, replacement = _check_ablation(model, ablated, replacement)
    return _run_batch(model, inputs, ablated, replacement)


def _tokens(model, inputs):
    inputs = np.asarray(inputs) if not isinstance(inputs, jax.Array) else inputs
    _checks.ndim("inputs", inputs, 2, "(N, T)")
    if not jnp.issubdtype(inputs.dtype, jnp.integer):
        raise TypeError(f"inputs must be integer token ids, got dtype {inputs.dtype}")
    return jnp.asarray(_checks.integers_in_range("inputs", inputs, 0, model.vocab_size), dtype=jnp.int32)


def attention_weights(model: AttentionOnlyLM, inputs) -> Float[Array, "N depth heads T T"]:
    """Every head's attention weights on a batch ``inputs (N, T)``: ``(N, depth, heads, T, T)``."""
    return forward(model, inputs)[1]


def mean_head_outputs(model: AttentionOnlyLM, inputs) -> Float[Array, "depth heads head_dim"]:
    """Each head's output ``z`` averaged over the sequences ``inputs (N, T)`` and their positions: the replacement of
    mean ablation, ``(depth, heads, head_dim)``."""
    return forward(model, inputs)[2].mean(axis=(0, 2))


# ---------------------------------------------------------------------------------------------
# Scores of attention patterns


def _weights(name, weights, min_length=2):
    weights = jnp.asarray(weights)
    if weights.ndim < 2 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(f"{name} must have shape (..., T, T) (queries by keys), got {tuple(weights.shape)}")
    if weights.shape[-1] < min_length:
        raise ValueError(f"{name} must have T >= {min_length} positions, got {tuple(weights.shape)}")
    return weights


def previous_token_score(weights) -> jax.Array:
    """Mean attention to the previous position, ``mean_{i=1..T-1} A[i, i-1]``, of weights ``(..., T, T)``: ``(...)``.

    1 for a head that always attends to the previous token; ``mean_i 1/(i+1)`` for uniform causal attention.
    """
    weights = _weights("weights", weights)
    t = weights.shape[-1]
    return jnp.diagonal(weights, offset=-1, axis1=-2, axis2=-1).sum(-1) / (t - 1)


def induction_score(weights, period: int) -> jax.Array:
    """Mean attention from the second occurrence of a token to the token after its first occurrence.

    ``weights (..., T, T)`` on sequences whose tokens repeat with ``period`` ``P`` (``x[i] = x[i-P]``, ``T >= 2P``):
    ``mean_{i=P..2P-1} A[i, i-P+1]``, a ``(...)`` array. 1 for a head that attends exactly there (Olsson et al. 2022).
    """
    period = _checks.positive_int("period", period)
    weights = _weights("weights", weights, 2 * period)
    i = jnp.arange(period, 2 * period)
    return weights[..., i, i - period + 1].mean(-1)


def _token_range(vocab_size, low) -> tuple[int, int]:
    vocab_size = _checks.positive_int("vocab_size", vocab_size)
    low = _checks.nonnegative_int("low", low)
    if low >= vocab_size:
        raise ValueError(f"low must be below vocab_size = {vocab_size}, got {low}")
    return vocab_size, low


def repeated_random_tokens(key: jax.Array, num: int, period: int, vocab_size: int = corpus.VOCAB_SIZE,
                           low: int = 0) -> Int[Array, "num two_period"]:
    """``num`` sequences of ``period`` uniform random tokens in ``[low, vocab_size)`` repeated twice, int32
    ``(num, 2 * period)``. Chapter 11 draws from ``low = PRINTABLE`` (3): the printable characters, leaving out the
    id of other bytes, the tab and the newline, which a model of Python source has rarely or never seen inside a
    line."""
    key = _checks.prng_key("key", key)
    num = _checks.positive_int("num", num)
    period = _checks.positive_int("period", period)
    vocab_size, low = _token_range(vocab_size, low)
    first = jax.random.randint(key, (num, period), low, vocab_size, dtype=jnp.int32)
    return jnp.concatenate([first, first], axis=1)


PRINTABLE = 3
"""The first printable character's id (``' '``) in :mod:`attnbook.corpus`: ids 3-97 are ``' '`` to ``'~'``."""


def periodic_random_tokens(key: jax.Array, num: int, length: int, shortest: int, longest: int,
                           vocab_size: int = corpus.VOCAB_SIZE, low: int = 0) -> Int[Array, "num length"]:
    """``num`` sequences of ``length`` tokens, each periodic with its own period ``P`` drawn uniformly from
    ``[shortest, longest]``: ``x[t] = x[t mod P]``, the first ``P`` tokens uniform in ``[low, vocab_size)``; int32
    ``(num, length)``. Chapter 11's curriculum: since ``P`` varies from row to row, no fixed offset predicts the
    next token, only the token after the previous occurrence of the current one (induction)."""
    key = _checks.prng_key("key", key)
    num = _checks.positive_int("num", num)
    length = _checks.positive_int("length", length)
    shortest = _checks.positive_int("shortest", shortest)
    longest = _checks.positive_int("longest", longest)
    if shortest > longest:
        raise ValueError(f"shortest must be at most longest = {longest}, got {shortest}")
    vocab_size, low = _token_range(vocab_size, low)
    tokens_key, period_key = jax.random.split(key)
    first = jax.random.randint(tokens_key, (num, length), low, vocab_size, dtype=jnp.int32)
    period = jax.random.randint(period_key, (num, 1), shortest, longest + 1)
    return jnp.take_along_axis(first, jnp.arange(length)[None, :] % period, axis=1)


# ---------------------------------------------------------------------------------------------
# Losses


def loss_per_position(model: AttentionOnlyLM, inputs, targets, ablated=None, replacement=None) -> jax.Array:
    """Cross-entropy (nats) at each position, averaged over the sequences: ``(T,)``.

    ``L(t) = mean_n -log softmax(logits[n, t])[targets[n, t]]`` for ``inputs, targets (N, T)``; ``ablated`` and
    ``replacement`` as in :func:`forward`.
    """
    logits = forward(model, inputs, ablated, replacement)[0]
    targets = np.asarray(targets) if not isinstance(targets, jax.Array) else targets
    if tuple(targets.shape) != tuple(logits.shape[:2]):
        raise ValueError(f"targets must have the shape of inputs, (N, T) = {tuple(logits.shape[:2])}, "
                         f"got {tuple(targets.shape)}")
    return train.cross_entropy(logits, jnp.asarray(targets)).mean(axis=0)


def in_context_loss(per_position, early: int = EARLY, late: int = LATE, width: int = 1) -> jax.Array:
    """``L(late) - L(early)`` of losses per position ``(..., T)``: negative when later tokens, with more context
    before them, are predicted better (Olsson et al. 2022; their positions 50 and 500, here 12 and 120 by default).

    With ``width = w > 1``, each side is the mean over ``w`` positions, ``mean L(late..late+w-1) - mean
    L(early..early+w-1)``: one position's loss averaged over a few hundred windows varies by about 0.1 nats from
    one set of windows to another, a band of positions much less.
    """
    per_position = jnp.asarray(per_position)
    early = _checks.nonnegative_int("early", early)
    late = _checks.nonnegative_int("late", late)
    width = _checks.positive_int("width", width)
    if not (early + width <= late and late + width <= per_position.shape[-1]):
        raise ValueError(f"need early + width <= late and late + width <= T = {per_position.shape[-1]}, "
                         f"got early={early}, late={late}, width={width}")
    band = lambda start: per_position[..., start:start + width].mean(-1)
    return band(late) - band(early)


def ablation_losses(model: AttentionOnlyLM, inputs, targets, mode: str = "zero", reference=None) -> np.ndarray:
    """Mean loss with each head ablated in turn, ``(depth, heads)``.

    ``mode`` ``"zero"``: the head outputs zero; ``"mean"``: its mean output over ``reference`` sequences
    ``(M, T')`` (default ``inputs``), :func:`mean_head_outputs`.
    """
    model = _check_model(model)
    replacement = _replacement(model, inputs, mode, reference)
    out = np.zeros((model.depth, model.heads))
    for layer in range(model.depth):
        for head in range(model.heads):
            ablated = np.zeros((model.depth, model.heads), bool)
            ablated[layer, head] = True
            out[layer, head] = float(loss_per_position(model, inputs, targets, ablated, replacement).mean())
    return out


def ablation_induction_scores(model: AttentionOnlyLM, repeated, period: int, mode: str = "zero", reference=None
                              ) -> np.ndarray:
    """Every head's induction score with each head ablated in turn: ``(depth, heads, depth, heads)``, entry
    ``[l, h, l2, h2]`` the score of head ``(l2, h2)`` when head ``(l, h)`` is ablated (``mode``, ``reference`` as
    in :func:`ablation_losses`; ``reference`` defaults to ``repeated``)."""
    model = _check_model(model)
    replacement = _replacement(model, repeated, mode, reference)
    out = np.zeros((model.depth, model.heads, model.depth, model.heads))
    for layer in range(model.depth):
        for head in range(model.heads):
            ablated = np.zeros((model.depth, model.heads), bool)
            ablated[layer, head] = True
            weights = forward(model, repeated, ablated, replacement)[1]
            out[layer, head] = np.asarray(induction_score(weights, period).mean(axis=0))
    return out


def _replacement(model, inputs, mode, reference):
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if mode == "zero":
        return np.zeros((model.depth, model.heads, model.head_dim), np.float32)
    return np.asarray(mean_head_outputs(model, inputs if reference is None else reference))


# ---------------------------------------------------------------------------------------------
# Composition, read from the weights


def qk_ov(model: AttentionOnlyLM) -> tuple[np.ndarray, np.ndarray]:
    """Each head's ``W_QK = W_Q W_K^T`` and ``W_OV = W_V W_O``, both ``(depth, heads, d_model, d_model)``.

    Row-vector convention: head ``(l, h)`` scores ``x_i W_QK x_j^T / sqrt(head_dim)`` and writes ``x W_OV`` (plus
    biases) for inputs ``x`` read from the residual stream. The layer's LayerNorm gain ``g`` scales what it reads,
    so it is folded into the reading side: ``W_Q -> diag(g) W_Q``, ``W_K -> diag(g) W_K``, ``W_V -> diag(g) W_V``.
    """
    model = _check_model(model)
    qk, ov = [], []
    for block in model.body.blocks:
        mha = block.mixer.attention
        g = np.asarray(block.norms[0].weight)[:, None, None]
        w_q, w_k, w_v, w_o = (np.asarray(w, np.float64) for w in (mha.w_q, mha.w_k, mha.w_v, mha.w_o))
        w_q, w_k, w_v = g * w_q, g * w_k, g * w_v
        qk.append(np.einsum("dhk,ehk->hde", w_q, w_k))
        ov.append(np.einsum("dhv,hve->hde", w_v, w_o))
    return np.stack(qk), np.stack(ov)


def composition_score(left, right) -> np.ndarray:
    """``||left @ right||_F / (||left||_F ||right||_F)`` of ``(..., d, d)`` matrices: in ``[0, 1]``, 0 when what
    ``left`` writes is invisible to ``right`` (TransformerLens's ``composition_scores``)."""
    left, right = np.asarray(left, np.float64), np.asarray(right, np.float64)
    if left.ndim < 2 or left.shape[-1] != right.shape[-2]:
        raise ValueError(f"left (..., a, b) and right (..., b, c) must chain, got {left.shape} and {right.shape}")
    norm = lambda m: np.sqrt((m ** 2).sum(axis=(-2, -1)))
    return norm(left @ right) / (norm(left) * norm(right))


def composition_scores(model: AttentionOnlyLM, mode: str = "K") -> np.ndarray:
    """Q-, K- or V-composition of every earlier head into every later one, ``(depth, heads, depth, heads)``.

    Entry ``[l, h, l2, h2]`` (zero unless ``l < l2``): the score of head ``(l, h)``'s ``W_OV`` with head
    ``(l2, h2)``'s ``W_QK`` (``mode="Q"``), ``W_QK^T`` (``"K"``: the keys read the earlier head's output) or
    ``W_OV`` (``"V"``), as TransformerLens's ``all_composition_scores``.
    """
    if mode not in ("Q", "K", "V"):
        raise ValueError(f"mode must be 'Q', 'K' or 'V', got {mode!r}")
    qk, ov = qk_ov(model)
    right = {"Q": qk, "K": np.swapaxes(qk, -1, -2), "V": ov}[mode]
    scores = composition_score(ov[:, :, None, None], right[None, None])
    later = np.arange(qk.shape[0])[:, None, None, None] < np.arange(qk.shape[0])[None, None, :, None]
    return np.where(later, scores, 0.0)


__all__ = ["MODES", "EARLY", "LATE", "PRINTABLE", "AttentionOnlyLM", "forward", "attention_weights", "mean_head_outputs",
           "previous_token_score", "induction_score", "repeated_random_tokens", "periodic_random_tokens", "loss_per_position",
           "in_context_loss", "ablation_losses", "ablation_induction_scores", "qk_ov", "composition_score",
           "composition_scores"]
