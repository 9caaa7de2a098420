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
  fine-tunes the converted model briefly);
- :func:`gqa_position_model`, :func:`mla_position_model` and :func:`experiment_train`: chapter 8's Markov task
  and model with ``kv_heads`` key/value heads per layer, or with latent attention, for the chapter's runs
  (``bench/kv_heads_quality.py``).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import _checks
from . import extrapolation as ex
from . import train as train_module
from .latent import MultiHeadLatentAttention
from .mha import MultiHeadAttention, MultiHeadSelfAttention, _check_kv_heads

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
    groups = _check_kv_heads(layer.kv_heads, kv_heads, "the layer's kv_heads")
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


# ---------------------------------------------------------------------------------------------
# Chapter 10's experiment: chapter 8's task and model, with fewer key/value heads


def gqa_position_model(kv_heads: int, *, seed: int, encoding: str = "rope", **sizes) -> ex.PositionModel:
    """Chapter 8's model (:class:`~attnbook.extrapolation.PositionModel`, its ``SETTINGS`` sizes unless given)
    with ``kv_heads`` key/value heads in every block.

    The initial weights are chapter 8's for ``jax.random.key(seed)``; with ``kv_heads < heads`` each group keeps
    the initial key and value projections of its first head (:func:`pool_kv_heads` with ``method="first"``),
    so every ``kv_heads`` starts from the same queries, outputs, embeddings and feed-forward layers, and its
    key/value weights from the same distribution. ``kv_heads = heads`` is chapter 8's model exactly.
    """
    s = ex.SETTINGS
    seed = _checks.nonnegative_int("seed", seed)
    options = dict(vocab_size=s["vocab_size"], d_model=s["d_model"], depth=s["depth"], heads=s["heads"],
                   train_length=s["train_length"], **sizes)
    model = ex.PositionModel(encoding, key=jax.random.key(seed), **options)
    kv_heads = _check_kv_heads(model.heads, kv_heads, "heads")
    return pool_kv_heads(model, kv_heads, method="first")


def mla_position_model(rank: int, *, rope_dim: int = 4, seed: int, **sizes) -> ex.PositionModel:
    """Chapter 8's model with multi-head latent attention (:class:`~attnbook.latent.MultiHeadLatentAttention`,
    latent of size ``rank``, decoupled RoPE of size ``rope_dim``, heads of ``d_model / heads`` features) as the
    mixer of every block.

    It is chapter 8's ``"nope"`` :class:`~attnbook.extrapolation.PositionModel` for ``jax.random.key(seed)``
    (whose embeddings, feed-forward layers and read-out are those of its RoPE model) with each block's attention
    replaced: the model adds no positions of its own, and the latent layer rotates its decoupled query and key
    parts. The latent layers start Glorot-uniform from ``fold_in(key(seed), 1000 + block)``.
    """
    s = ex.SETTINGS
    seed = _checks.nonnegative_int("seed", seed)
    rank = _checks.positive_int("rank", rank)
    options = dict(vocab_size=s["vocab_size"], d_model=s["d_model"], depth=s["depth"], heads=s["heads"],
                   train_length=s["train_length"], **sizes)
    model = ex.PositionModel("nope", key=jax.random.key(seed), **options)
    d_model, heads = options["d_model"], options["heads"]
    mixers = tuple(MultiHeadLatentAttention(d_model, heads, d_model // heads, rank, rope_dim,
                                            key=jax.random.fold_in(jax.random.key(seed), 1000 + b))
                   for b in range(len(model.blocks)))
    return eqx.tree_at(lambda m: tuple(block.mixer for block in m.blocks), model, mixers)


_LOSS = train_module.classification_loss(lambda model, tokens: model(tokens))
"""Mean next-token cross-entropy of a batch ``(inputs (N, T), targets (N, T))``."""


def fit(models, inputs, targets, *, learning_rate: float | None = None):
    """Train stacked-able ``models`` (one per run) on ``inputs, targets (runs, steps, batch, T)`` with Adam:
    :func:`attnbook.train.fit_seeds` with chapter 8's learning rate unless given. Returns ``(models, losses)``."""
    learning_rate = ex.SETTINGS["learning_rate"] if learning_rate is None else learning_rate
    learning_rate = _checks.positive_float("learning_rate", learning_rate)
    return train_module.fit_seeds(list(models), _LOSS, (np.asarray(inputs), np.asarray(targets)),
                                  optimizer=optax.adam(learning_rate))


def experiment_train(kv_heads: int, seeds, *, encoding: str = "rope", rank: int | None = None,
                     rope_dim: int = 4) -> tuple[ex.PositionModel, np.ndarray]:
    """Chapter 8's training run (its settings, each seed's own data) for :func:`gqa_position_model` models, or,
    with ``rank`` given, :func:`mla_position_model` models (then ``kv_heads`` must be ``None``).

    Returns the trained models stacked (take one with :func:`attnbook.extrapolation.select`) and the training
    losses ``(seeds, steps)``. ``kv_heads = heads`` with ``encoding="rope"`` repeats chapter 8's RoPE runs.
    """
    if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__iter__"):
        raise TypeError(f"seeds must be a sequence of integers, got {_checks.describe(seeds)}")
    seeds = [_checks.nonnegative_int(f"seeds[{i}]", s) for i, s in enumerate(seeds)]
    if (rank is None) == (kv_heads is None):
        raise ValueError(f"give exactly one of kv_heads (grouped-query) and rank (latent attention), "
                         f"got kv_heads={kv_heads!r}, rank={rank!r}")
    data = [ex.experiment_training_data(seed) for seed in seeds]
    if rank is None:
        models = [gqa_position_model(kv_heads, seed=seed, encoding=encoding) for seed in seeds]
    else:
        models = [mla_position_model(rank, rope_dim=rope_dim, seed=seed) for seed in seeds]
    return fit(models, np.stack([d[0] for d in data]), np.stack([d[1] for d in data]))


__all__ = ["POOLING", "cache_bytes_per_token", "pool_kv_heads", "gqa_position_model", "mla_position_model", "fit",
           "experiment_train"]
