"""Chapter 10: smaller KV caches. What a decoder keeps per token, and turning a trained layer into a grouped one.

Grouped-query attention (GQA, Ainslie et al. 2023) and multi-query attention (MQA, Shazeer 2019) are not a new
layer: they are chapter 4's :class:`~attnbook.mha.MultiHeadAttention` with fewer key/value heads than query
heads (its ``kv_heads`` option), so every chapter's machinery (masks, biases, RoPE hooks, chapter 7's cached
decoding) works with them unchanged. Multi-head latent attention (MLA, DeepSeek-V2 2024) changes what is cached
and lives in :mod:`attnbook.latent`. This module holds what the chapter measures about all of them:

- :func:`cache_bytes_per_token`: the bytes one layer keeps per generated token (``2 G d_h`` numbers for MHA,
  GQA and MQA; ``r + d_h^R`` for MLA);
- :func:`pool_kv_heads`: Ainslie et al.'s conversion of a trained multi-head layer (or every one in a model)
  into ``G`` key/value heads, by mean-pooling the key and value projections of each group ("uptraining" then
  fine-tunes the converted model briefly).

Chapter 10's experiment (chapter 8's task and model with ``kv_heads`` key/value heads per layer or with latent
attention, and the associative-recall task) is :mod:`attnbook.experiments.ch10`.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from . import _checks
from .latent import MultiHeadLatentAttention
from .mha import MultiHeadAttention, MultiHeadSelfAttention

POOLING = ("mean", "first")
"""How :func:`pool_kv_heads` merges a group's key/value heads: their mean (Ainslie et al.'s choice) or the
first head of the group (one of the alternatives their ablation compares)."""


def cache_bytes_per_token(layer, *, itemsize: int = 4) -> int:
    """Bytes of KV cache that one attention layer keeps per token, in numbers of ``itemsize`` bytes (float32: 4).

    - :class:`~attnbook.mha.MultiHeadAttention` (or a :class:`~attnbook.mha.MultiHeadSelfAttention`) with ``G``
      key/value heads: its keys and values, ``G * (key_dim + value_dim)`` numbers; ``G = heads`` is MHA
      (``2 * heads * d_h``), ``G = 1`` MQA. A cache of ``T`` tokens is ``T`` times this (chapter 7's
      :func:`attnbook.transformer.init_cache` allocates exactly these arrays).
    - :class:`~attnbook.latent.MultiHeadLatentAttention`: its latent and its RoPE key, ``rank + rope_dim``
      numbers, whatever the number of heads (DeepSeek-V2's ``(d_c + d_h^R) l`` per token for ``l`` layers).
    """
    itemsize = _checks.positive_int("itemsize", itemsize)
    if isinstance(layer, MultiHeadSelfAttention):
        layer = layer.attention
    if isinstance(layer, MultiHeadAttention):
        return int(layer.kv_heads * (layer.key_dim + layer.value_dim) * itemsize)
    if isinstance(layer, MultiHeadLatentAttention):
        return int((layer.rank + layer.rope_dim) * itemsize)
    raise TypeError(f"layer must be a MultiHeadAttention, MultiHeadSelfAttention or MultiHeadLatentAttention, "
                    f"got {type(layer).__name__}")


def _pool_layer(layer: MultiHeadAttention, kv_heads: int, method: str) -> MultiHeadAttention:
    groups = _checks.kv_heads(layer.kv_heads, kv_heads, "the layer's kv_heads")
    if groups == layer.kv_heads:
        return layer
    size = layer.kv_heads // groups  # old key/value heads merged into each new one

    def merge(a, axis):  # split the head axis into (groups, size) and reduce over size
        a = a.reshape(a.shape[:axis] + (groups, size) + a.shape[axis + 1:])
        return jnp.mean(a, axis=axis + 1) if method == "mean" else jnp.take(a, 0, axis=axis + 1)

    return eqx.tree_at(lambda m: (m.w_k, m.b_k, m.w_v, m.b_v), layer,
                       (merge(layer.w_k, 1), merge(layer.b_k, 0), merge(layer.w_v, 1), merge(layer.b_v, 0)))


def pool_kv_heads(model, kv_heads: int, *, method: str = "mean"):
    """Every multi-head attention layer of ``model`` with its key/value heads merged into ``kv_heads`` groups.

    Ainslie et al. (2023), section 2.1: the key and value projection matrices of each group's heads are
    mean-pooled into one; the converted model is then trained a little more ("uptraining"; the abstract's
    recipe uses 5% of the original pre-training compute).

    Args:
        model: a :class:`~attnbook.mha.MultiHeadAttention`, a :class:`~attnbook.mha.MultiHeadSelfAttention`, or
            any Equinox module holding them (every one inside is converted, e.g. a chapter-8
            :class:`~attnbook.extrapolation.PositionModel` or a chapter-7 encoder-decoder).
        kv_heads: key/value heads ``G`` after the conversion, a divisor of each layer's current ``kv_heads``.
        method: ``"mean"`` (new head ``g`` is the mean of old heads ``g s .. g s + s - 1``, with
            ``s = old kv_heads / G``; biases likewise) or ``"first"`` (old head ``g s`` alone).

    Returns the converted model; queries and the output projection are untouched, so query head ``h`` reads
    the new head ``h // (heads / G)``: the group its old head belonged to. ``kv_heads`` equal to the layer's
    is the identity. Under ``jit`` the weights may be traced, but ``kv_heads`` and ``method`` must be static.
    """
    kv_heads = _checks.positive_int("kv_heads", kv_heads)
    if method not in POOLING:
        raise ValueError(f"method must be one of {POOLING}, got {method!r}")
    is_mha = lambda x: isinstance(x, MultiHeadAttention)
    if not isinstance(model, eqx.Module):
        raise TypeError(f"model must be an Equinox module holding MultiHeadAttention layers, got "
                        f"{_checks.describe(model)}")
    if not any(is_mha(x) for x in jax.tree.leaves(model, is_leaf=is_mha)):
        raise ValueError(f"model holds no MultiHeadAttention layer to convert ({type(model).__name__})")
    return jax.tree.map(lambda x: _pool_layer(x, kv_heads, method) if is_mha(x) else x, model, is_leaf=is_mha)


__all__ = ["POOLING", "cache_bytes_per_token", "pool_kv_heads"]
