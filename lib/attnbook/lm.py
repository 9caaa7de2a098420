"""Chapter 5's experiment: a small next-token model whose token mixer is attention or one of the AFT layers.

:func:`make_mixer` builds any token mixer of the book by name (:data:`MIXERS`: multi-head self-attention of
chapter 4 and the four AFT layers of chapter 5); chapter 7's Transformer uses it too. :class:`NextTokenModel`
stacks pre-LN blocks (:class:`attnbook.nn.Block`, GELU) of one mixer, or of a :class:`MixerChoice` that switches
between several in one compiled program.
"""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from . import _checks
from .aft import VARIANTS, AFTConv, AFTFull, AFTLocal, AFTSimple
from .mha import MultiHeadSelfAttention
from .nn import Block, Dense, count_parameters, init, max_rows as _rows, split as _keys

MIXERS = ("attention",) + VARIANTS
"""The token mixers by name: multi-head self-attention and the four AFT variants."""


def make_mixer(kind: str, d_model: int, *, max_len: int = 64, causal: bool = True, heads: int = 4, window: int = 9,
               bias_dim: int = 16, attention_init: str = "glorot", key: jax.Array) -> eqx.Module:
    """A token mixer ``(T, d_model) -> (T, d_model)`` by name, one of :data:`MIXERS`: the one factory of the book.

    ``heads`` serves attention and AFT-conv, ``window`` AFT-local and AFT-conv (odd, so that a non-causal
    window is centred), ``max_len`` and ``bias_dim`` the position biases of AFT-full and AFT-local;
    ``attention_init`` is :class:`attnbook.mha.MultiHeadSelfAttention`'s ``init``.
    """
    if not isinstance(kind, str):
        raise TypeError(f"kind must be a string, one of {MIXERS}, got {_checks.describe(kind)}")
    if kind == "attention":
        return MultiHeadSelfAttention(d_model, heads, causal=causal, init=attention_init, key=key)
    if kind == "aft-full":
        return AFTFull(d_model, max_len, bias_dim=bias_dim, causal=causal, key=key)
    if kind == "aft-local":
        return AFTLocal(d_model, max_len, window, bias_dim=bias_dim, causal=causal, key=key)
    if kind == "aft-simple":
        return AFTSimple(d_model, causal=causal, key=key)
    if kind == "aft-conv":
        return AFTConv(d_model, heads, window, causal=causal, key=key)
    raise ValueError(f"kind must be one of {MIXERS}, got {kind!r}")


class MixerChoice(eqx.Module):
    """Several token-mixing layers and an integer array that picks the one applied (``jax.lax.switch``).

    The choice is an array, not a static field, so a model that differs only in its choice runs in
    the *same* compiled program: :func:`attnbook.train.fit` compiles once for every kind. The layers
    that are not chosen get zero gradients, so training leaves them as they were.
    """

    kinds: tuple = eqx.field(static=True)
    mixers: tuple
    choice: jax.Array

    def __init__(self, kinds: Sequence[str], d_model: int, max_len: int, *, key: jax.Array, **options):
        if isinstance(kinds, str) or not isinstance(kinds, Sequence):
            raise TypeError("kinds must be a sequence of names such as ('attention', 'aft-full'), "
                            f"got {_checks.describe(kinds)}")
        if not kinds:
            raise ValueError("kinds must name at least one mixer, got an empty sequence")
        self.kinds = tuple(kinds)
        self.mixers = tuple(make_mixer(kind, d_model, max_len=max_len, attention_init="fan-in", key=k, **options)
                            for kind, k in zip(self.kinds, _keys(_checks.prng_key("key", key), len(self.kinds))))
        self.choice = jnp.asarray(0, dtype=jnp.int32)

    @_checks.shaped
    def __call__(self, x: Float[Array, "T d_model"]) -> Float[Array, "T d_model"]:
        return jax.lax.switch(self.choice, [lambda x, m=m: m(x) for m in self.mixers], x)


class NextTokenModel(eqx.Module):
    """Token and learned position embeddings, ``depth`` pre-norm blocks, a final norm and a linear head.

    ``model(tokens)`` maps integer tokens ``(T,)`` to next-token logits ``(T, num_classes)``; with a
    causal mixer, row ``t`` depends on tokens ``0..t`` only. ``kind`` names the mixer (``"attention"``
    or one of :data:`VARIANTS`); a tuple of names builds a :class:`MixerChoice` in every block, and
    ``model.using(kind)`` picks one of them (``model.only(kind)`` keeps it alone).
    """

    embed: jax.Array
    position: jax.Array
    blocks: tuple
    norm: eqx.nn.LayerNorm
    head: Dense

    def __init__(self, kind: str | Sequence[str], *, vocab_size: int, num_classes: int, max_len: int,
                 d_model: int = 32, depth: int = 1, key: jax.Array, **mixer_options):
        vocab_size = _checks.positive_int("vocab_size", vocab_size)
        num_classes = _checks.positive_int("num_classes", num_classes)
        max_len = _checks.positive_int("max_len", max_len)
        d_model = _checks.positive_int("d_model", d_model)
        depth = _checks.positive_int("depth", depth)
        keys = _keys(_checks.prng_key("key", key), 3 + 2 * depth)

        def mixer(k):
            if isinstance(kind, str):
                return make_mixer(kind, d_model, max_len=max_len, attention_init="fan-in", key=k, **mixer_options)
            return MixerChoice(kind, d_model, max_len, key=k, **mixer_options)

        self.embed = init(keys[0], (vocab_size, d_model), "normal")  # row i: token i
        self.position = init(keys[1], (max_len, d_model), "normal", scale=0.02)
        self.blocks = tuple(Block(mixer(keys[3 + 2 * i]), d_model, activation="gelu", key=keys[4 + 2 * i])
                            for i in range(depth))
        self.norm = eqx.nn.LayerNorm(d_model)
        self.head = Dense(d_model, num_classes, key=keys[2])

    def using(self, kind: str) -> "NextTokenModel":
        """The same model with every :class:`MixerChoice` set to ``kind``."""
        choices = [b.mixer for b in self.blocks if isinstance(b.mixer, MixerChoice)]
        if not choices:
            raise ValueError("using() needs a model built with a tuple of kinds")
        if kind not in choices[0].kinds:
            raise ValueError(f"kind must be one of {choices[0].kinds}, got {kind!r}")
        index = jnp.asarray(choices[0].kinds.index(kind), dtype=jnp.int32)
        return eqx.tree_at(lambda m: [b.mixer.choice for b in m.blocks], self, [index] * len(self.blocks))

    def only(self, kind: str) -> "NextTokenModel":
        """The same model with every :class:`MixerChoice` replaced by its layer ``kind``: the same weights, one mixer.

        It computes what ``using(kind)`` computes, and trains alike (the layers ``using`` does not choose get zero
        gradients, which Adam turns into zero updates), but its compiled program holds one mixer instead of all.
        """
        choices = [b.mixer for b in self.blocks if isinstance(b.mixer, MixerChoice)]
        if not choices:
            raise ValueError("only() needs a model built with a tuple of kinds")
        if kind not in choices[0].kinds:
            raise ValueError(f"kind must be one of {choices[0].kinds}, got {kind!r}")
        index = choices[0].kinds.index(kind)
        return eqx.tree_at(lambda m: [b.mixer for b in m.blocks], self, [b.mixer.mixers[index] for b in self.blocks])

    def parameters(self) -> int:
        """Trainable numbers that the model uses: only the chosen layer of a :class:`MixerChoice` counts."""
        total = count_parameters(self)
        for block in self.blocks:
            if isinstance(block.mixer, MixerChoice):
                chosen = int(block.mixer.choice)
                total -= sum(count_parameters(m) for i, m in enumerate(block.mixer.mixers) if i != chosen)
        return total

    @_checks.shaped
    def __call__(self, tokens: Int[Array, "T"]) -> Float[Array, "T num_classes"]:
        """Next-token logits ``(T, num_classes)`` for integer tokens ``(T,)`` in ``[0, vocab_size)``, ``T <= max_len``.

        Token ids are checked, also under ``jit``/``vmap`` (``-1`` is an error, not the last token).
        """
        _rows("tokens", tokens, self.position.shape[0])
        tokens = _checks.integers_in_range("tokens", tokens, 0, self.embed.shape[0])
        x = self.embed[tokens] + self.position[: tokens.shape[0]]
        for block in self.blocks:
            x = block(x)
        return self.head(jax.vmap(self.norm)(x))


def next_token_data(sequences, start: int):
    """``(inputs, targets)`` for next-token prediction: a ``start`` token in front of each row of ``sequences``
    ``(N, T)``, its last token dropped, so that position ``t`` sees ``start`` and tokens ``0..t-1`` and predicts
    token ``t``."""
    sequences = np.asarray(sequences)
    if sequences.ndim != 2:
        raise ValueError(f"sequences must have shape (N, T), got {sequences.shape}")
    inputs = np.concatenate([np.full((len(sequences), 1), start, dtype=sequences.dtype), sequences[:, :-1]], axis=1)
    return inputs, sequences


def mixer_input(model: NextTokenModel, tokens, block: int = 0) -> Float[Array, "T d_model"]:
    """What the mixing layer of ``model.blocks[block]`` receives for ``tokens``: the layer-normed residual stream.

    One compiled program (run op by op, its embedding, additions and layer norm would be compiled one by one).
    """
    return _mixer_input(model, jnp.asarray(tokens), _checks.nonnegative_int("block", block))


@eqx.filter_jit
def _mixer_input(model, tokens, block):
    x = model.embed[tokens] + model.position[: tokens.shape[0]]
    for earlier in model.blocks[:block]:
        x = earlier(x)
    return jax.vmap(model.blocks[block].norms[0])(x)


__all__ = ["MIXERS", "make_mixer", "MixerChoice", "NextTokenModel", "next_token_data", "mixer_input"]
