"""Chapter 10's experiment: chapter 8's task and model with fewer key/value heads or with latent attention, and
multi-query associative recall; shared by the chapter, the bench scripts (bench/kv_heads_*.py, latent_quality.py)
and the tests.

The components are :mod:`attnbook.kv` (:func:`~attnbook.kv.pool_kv_heads`, :func:`~attnbook.kv.cache_bytes_per_token`),
:mod:`attnbook.mha` (``kv_heads=``) and :mod:`attnbook.latent`; the task and model are chapter 8's
(:mod:`attnbook.experiments.ch08`).
"""

from __future__ import annotations

import dataclasses
import functools

import equinox as eqx
import jax
import numpy as np
import optax

from .. import _checks
from .. import extrapolation as ex
from .. import train as train_module
from ..kv import pool_kv_heads
from ..latent import MultiHeadLatentAttention
from ..nn import FeedForward
from . import ch08
from .store import read_csv

# ---------------------------------------------------------------------------------------------
# Chapter 10's experiment: chapter 8's task and model, with fewer key/value heads


@dataclasses.dataclass(frozen=True)
class Settings:
    """The sizes of chapter 10's runs (beside chapter 8's, :data:`attnbook.experiments.ch08.SETTINGS`, and the recall
    task's, :data:`RECALL`); the stored JSON files record them."""

    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    kv_heads: tuple[int, ...] = (4, 2, 1)  # MHA (chapter 8's RoPE runs repeated), GQA, MQA, at equal width
    uptrain_to: tuple[int, ...] = (2, 1)  # the MHA models mean-pooled to these kv_heads, then trained more
    uptrain_steps: int = 60  # bench/kv_heads_quality.py: 20% of the 300 pre-training steps; the paper's 5% is 15
    uptrain_data_seed: int = 3000  # uptraining reads default_rng(3000 + seed)
    grid_every: int = 5  # bench/kv_heads_uptraining.py: steps between held-out evaluations, up to 300
    ranks: tuple[int, ...] = (12, 28, 60)  # latent attention: the cache of MQA, of GQA with 2 heads, of MHA
    rope_dim: int = 4  # latent attention's decoupled RoPE part, d_h / 2
    recall_kv_heads: tuple[int, ...] = (8, 4, 2, 1)  # bench/kv_heads_recall.py, 8 query heads
    recall_curve_block: int = 20  # steps per point of the stored recall training curves

    def to_dict(self) -> dict:
        """The settings as a dict (tuples as lists, as JSON stores them)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


SETTINGS = Settings()


def batches(seed: int, steps: int, rng_seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``steps`` minibatches of chapter 8's data from ``default_rng(rng_seed)``: inputs, targets ``(steps, batch, L)``
    and each batch's optimal loss (the mean entropy of the true next-token distributions), as
    :func:`attnbook.experiments.ch08.training_data` draws them (``rng_seed = 1000 + seed`` gives its data)."""
    s = ch08.SETTINGS
    x, y, floor = ex.markov_data(ch08.table(), s.order, steps * s.batch_size, s.train_length,
                                 rng=np.random.default_rng(rng_seed))
    shape = (steps, s.batch_size, s.train_length)
    return x.reshape(shape), y.reshape(shape), floor.reshape(shape).mean(axis=(1, 2))


def held_out(model, x, y, floor_mean: float) -> tuple[float, float]:
    """One model's mean loss on held-out inputs and targets, and its excess over the optimum ``floor_mean``, both
    rounded to 5 decimals as the stored tables hold them."""
    loss = float(np.mean(np.asarray(ex.loss_per_position(model, x, y))))
    return round(loss, 5), round(loss - floor_mean, 5)


def gqa_position_model(kv_heads: int, *, seed: int, encoding: str = "rope", **sizes) -> ex.PositionModel:
    """Chapter 8's model (:class:`~attnbook.extrapolation.PositionModel`, its ``SETTINGS`` sizes unless given)
    with ``kv_heads`` key/value heads in every block.

    The initial weights are chapter 8's for ``jax.random.key(seed)``; with ``kv_heads < heads`` each group keeps
    the initial key and value projections of its first head (:func:`pool_kv_heads` with ``method="first"``),
    so every ``kv_heads`` starts from the same queries, outputs, embeddings and feed-forward layers, and its
    key/value weights from the same distribution. ``kv_heads = heads`` is chapter 8's model exactly.
    """
    s = ch08.SETTINGS.to_dict()
    seed = _checks.nonnegative_int("seed", seed)
    options = {**dict(vocab_size=s["vocab_size"], d_model=s["d_model"], depth=s["depth"], heads=s["heads"],
                      train_length=s["train_length"]), **sizes}
    model = ex.PositionModel(encoding, key=jax.random.key(seed), **options)
    kv_heads = _checks.kv_heads(model.heads, kv_heads, "heads")
    return pool_kv_heads(model, kv_heads, method="first")


def equal_parameter_width(kv_heads: int, **sizes) -> int:
    """The feed-forward width that gives :func:`gqa_position_model` ``(kv_heads)`` as many parameters as chapter 8's
    multi-head model (``kv_heads = heads``), to the nearest hidden unit.

    Grouped-query attention drops ``(d_model + 1) (heads - G) (key_dim + value_dim)`` numbers of key/value
    projections per layer; a hidden unit of the feed-forward layer costs ``2 d_model + 1``. As in Llama 2
    (Touvron et al. 2023, section A.2.1), the freed parameters go back to the feed-forward layers: the width is
    ``4 d_model`` plus the nearest whole number of units. ``kv_heads = heads`` gives ``4 d_model``.
    """
    s = dict(ch08.SETTINGS.to_dict(), **sizes)
    d_model, heads = s["d_model"], s["heads"]
    kv_heads = _checks.kv_heads(heads, kv_heads, "heads")
    head_dim = d_model // heads
    freed = (d_model + 1) * (heads - kv_heads) * 2 * head_dim
    return 4 * d_model + int(round(freed / (2 * d_model + 1)))


def equal_parameter_model(kv_heads: int, *, seed: int, **sizes) -> ex.PositionModel:
    """:func:`gqa_position_model` with its parameters given back: every block's feed-forward layer widened to
    :func:`equal_parameter_width` hidden units, so the model has as many parameters as the multi-head one (to
    within one hidden unit per block, ``2 d_model + 1`` numbers).

    The wider feed-forward layers start Glorot-uniform from ``fold_in(key(seed), 2000 + block)`` (the other
    weights are :func:`gqa_position_model`'s); ``kv_heads = heads`` returns chapter 8's model unchanged.
    """
    model = gqa_position_model(kv_heads, seed=seed, **sizes)
    width = equal_parameter_width(kv_heads, **sizes)
    d_model = model.embedding.shape[1]
    if width == 4 * d_model:
        return model
    wide = tuple(FeedForward(d_model, width, key=jax.random.fold_in(jax.random.key(seed), 2000 + b))
                 for b in range(len(model.blocks)))
    return eqx.tree_at(lambda m: tuple(block.feed_forward for block in m.blocks), model, wide)


def mla_position_model(rank: int, *, rope_dim: int = 4, seed: int, **sizes) -> ex.PositionModel:
    """Chapter 8's model with multi-head latent attention (:class:`~attnbook.latent.MultiHeadLatentAttention`,
    latent of size ``rank``, decoupled RoPE of size ``rope_dim``, heads of ``d_model / heads`` features) as the
    mixer of every block.

    It is chapter 8's ``"nope"`` :class:`~attnbook.extrapolation.PositionModel` for ``jax.random.key(seed)``
    (whose embeddings, feed-forward layers and read-out are those of its RoPE model) with each block's attention
    replaced: the model adds no positions of its own, and the latent layer rotates its decoupled query and key
    parts. The latent layers start Glorot-uniform from ``fold_in(key(seed), 1000 + block)``.
    """
    s = ch08.SETTINGS.to_dict()
    seed = _checks.nonnegative_int("seed", seed)
    rank = _checks.positive_int("rank", rank)
    options = {**dict(vocab_size=s["vocab_size"], d_model=s["d_model"], depth=s["depth"], heads=s["heads"],
                      train_length=s["train_length"]), **sizes}
    model = ex.PositionModel("nope", key=jax.random.key(seed), **options)
    d_model, heads = options["d_model"], options["heads"]
    mixers = tuple(MultiHeadLatentAttention(d_model, heads, d_model // heads, rank, rope_dim,
                                            key=jax.random.fold_in(jax.random.key(seed), 1000 + b))
                   for b in range(len(model.blocks)))
    return eqx.tree_at(lambda m: tuple(block.mixer for block in m.blocks), model, mixers)


LOSS = train_module.classification_loss(lambda model, tokens: model(tokens))
"""Mean next-token cross-entropy of a batch ``(inputs (N, T), targets (N, T))``."""


def fit(models, inputs, targets, *, learning_rate: float | None = None):
    """Train stacked-able ``models`` (one per run) on ``inputs, targets (runs, steps, batch, T)`` with Adam:
    :func:`attnbook.train.fit_seeds` with chapter 8's learning rate unless given. Returns ``(models, losses)``."""
    learning_rate = ch08.SETTINGS.learning_rate if learning_rate is None else learning_rate
    learning_rate = _checks.positive_float("learning_rate", learning_rate)
    return train_module.fit_seeds(list(models), LOSS, (np.asarray(inputs), np.asarray(targets)),
                                  optimizer=optax.adam(learning_rate))


def experiment_models(kv_heads: int | None, seeds, *, encoding: str = "rope", rank: int | None = None,
                      rope_dim: int = 4, equal_parameters: bool = False) -> list[ex.PositionModel]:
    """The untrained models of :func:`experiment_train`, one per seed: :func:`gqa_position_model`, or with
    ``equal_parameters`` :func:`equal_parameter_model`, or with ``rank`` given :func:`mla_position_model`."""
    if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__iter__"):
        raise TypeError(f"seeds must be a sequence of integers, got {_checks.describe(seeds)}")
    seeds = [_checks.nonnegative_int(f"seeds[{i}]", s) for i, s in enumerate(seeds)]
    if (rank is None) == (kv_heads is None):
        raise ValueError(f"give exactly one of kv_heads (grouped-query) and rank (latent attention), "
                         f"got kv_heads={kv_heads!r}, rank={rank!r}")
    if rank is not None:
        return [mla_position_model(rank, rope_dim=rope_dim, seed=seed) for seed in seeds]
    if equal_parameters:
        if encoding != "rope":
            raise ValueError(f"equal_parameters is for the RoPE models, got encoding={encoding!r}")
        return [equal_parameter_model(kv_heads, seed=seed) for seed in seeds]
    return [gqa_position_model(kv_heads, seed=seed, encoding=encoding) for seed in seeds]


def experiment_train(kv_heads: int, seeds, *, encoding: str = "rope", rank: int | None = None,
                     rope_dim: int = 4, equal_parameters: bool = False) -> tuple[ex.PositionModel, np.ndarray]:
    """Chapter 8's training run (its settings, each seed's own data) for :func:`gqa_position_model` models, or,
    with ``rank`` given, :func:`mla_position_model` models (then ``kv_heads`` must be ``None``).

    With ``equal_parameters`` the grouped models get their freed parameters back in wider feed-forward layers
    (:func:`equal_parameter_model`). Returns the trained models stacked (take one with
    :func:`attnbook.extrapolation.select`) and the training losses ``(seeds, steps)``. ``kv_heads = heads`` with
    ``encoding="rope"`` repeats chapter 8's RoPE runs.
    """
    models = experiment_models(kv_heads, seeds, encoding=encoding, rank=rank, rope_dim=rope_dim,
                               equal_parameters=equal_parameters)
    data = [ch08.training_data(seed) for seed in seeds]
    return fit(models, np.stack([d[0] for d in data]), np.stack([d[1] for d in data]))




# ---------------------------------------------------------------------------------------------
# Decoding time: one attention layer of a scaled-down real model (bench/kv_decoding.py)


@dataclasses.dataclass(frozen=True)
class Decoding:
    """The sizes of chapter 10's decoding-time run (see :data:`DECODING`)."""

    d_model: int = 512
    heads: int = 8
    key_dim: int = 64
    mla_rank: int = 256  # DeepSeek-V2's proportions: 4 d_h
    mla_rope_dim: int = 32  # d_h / 2
    steps: int = 32  # one-token steps decoded after the cache holds context - steps tokens
    repeats: int = 7  # runs timed; the fastest is kept
    contexts: tuple[int, ...] = (512, 2048, 8192)

    def to_dict(self) -> dict:
        """The settings as the stored JSON file records them (tuples as lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


DECODING = Decoding()
"""The sizes of ``bench/kv_decoding.py``: one causal self-attention layer with d_model 512 and 8 query heads of 64
features (MHA, GQA with 4 and 2 key/value heads, MQA) or latent attention of rank 256 with a decoupled RoPE part of
32, decoding the last 32 positions of contexts of 512, 2048 and 8192 tokens."""


# ---------------------------------------------------------------------------------------------
# A task on which the cache can matter: multi-query associative recall (Arora et al. 2023, "Zoology")

@dataclasses.dataclass(frozen=True)
class Recall:
    """The sizes of chapter 10's recall runs (see :data:`RECALL`)."""

    keys: int = 16
    values: int = 16
    pairs: int = 4
    d_model: int = 32
    heads: int = 8
    depth: int = 2
    encoding: str = "learned"
    steps: int = 2000
    batch_size: int = 32
    learning_rate: float = 3e-3
    eval_sequences: int = 256
    eval_seed: int = 1

    def to_dict(self) -> dict:
        """The settings as the stored JSON files record them."""
        return dataclasses.asdict(self)


RECALL = Recall()
"""The sizes of chapter 10's recall runs (``bench/kv_heads_recall.py``): 8 query heads of 4 features, learned
absolute positions, 2000 Adam steps.

The pilot (2026-11-26, one seed each, 600 steps, 8 key/value heads) chose the encoding: with RoPE on heads of 4
features the model stalled near ln 4 nats on the recalled values (it had learned which 4 values the sequence holds,
not which key each belongs to; accuracy 0.35-0.46, also at learning rates 0.001 and 0.01 with a warm-up, with 8
keys and values, with 4 heads of 8 features, and at d_model 64), while learned absolute positions reached 0.83 at
600 steps and 0.99 at 1000 (seed 1). A head of 4 features has only two RoPE frequencies, 1 and 0.01 radians per
token, and at 1 radian offsets 1 and 7 look alike (cos 6 = 0.96), so the previous-token head that the recall
circuit needs is hard to form; a learned position table has no such aliasing."""


def associative_recall(num: int, *, rng: np.random.Generator, keys: int = 16, values: int = 16, pairs: int = 4
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Multi-query associative recall (MQAR, Arora et al. 2023): ``num`` sequences of ``4 pairs`` tokens.

    Each sequence lists ``pairs`` key-value pairs ``k_1 v_1 ... k_n v_n`` (distinct keys drawn from tokens
    ``0 .. keys - 1``, values from ``keys .. keys + values - 1``, uniformly and independently), then asks for every
    key again in a random order, each followed by its value: ``k_{p(1)} v_{p(1)} ...``. The model must predict
    each asked key's value, which is determined by the first half: the optimal loss on those positions is 0.

    Returns ``inputs (num, 4 pairs)``, next-token ``targets`` (the last target is 0, never scored) and a float
    ``mask`` that is 1 at the positions of the asked keys (where the target is a recalled value), 0 elsewhere.
    """
    num = _checks.nonnegative_int("num", num)
    keys, values, pairs = (_checks.positive_int(n, v) for n, v in (("keys", keys), ("values", values),
                                                                    ("pairs", pairs)))
    if pairs > keys:
        raise ValueError(f"pairs must be at most keys (the keys of a sequence are distinct), got pairs={pairs}, "
                         f"keys={keys}")
    length = 4 * pairs
    k = np.argsort(rng.random((num, keys)), axis=1)[:, :pairs]
    v = keys + rng.integers(0, values, (num, pairs))
    order = np.argsort(rng.random((num, pairs)), axis=1)
    seq = np.zeros((num, length + 1), np.int64)
    seq[:, 0:2 * pairs:2], seq[:, 1:2 * pairs:2] = k, v
    seq[:, 2 * pairs:length:2] = np.take_along_axis(k, order, 1)
    seq[:, 2 * pairs + 1:length + 1:2] = np.take_along_axis(v, order, 1)
    mask = np.zeros((num, length), np.float32)
    mask[:, 2 * pairs::2] = 1.0
    return seq[:, :length], seq[:, 1:], mask


def _masked_loss(model, xs, ys, mask):
    """Mean cross-entropy over the positions where ``mask`` is 1 (the recalled values)."""
    ce = train_module.cross_entropy(jax.vmap(model)(xs), ys)
    return (ce * mask).sum() / mask.sum()


def recall_models(kv_heads: int, seeds) -> list[ex.PositionModel]:
    """Chapter 8's model with :data:`RECALL`'s sizes and encoding (8 heads of 4 features, learned absolute
    positions) and ``kv_heads`` key/value heads, one per seed: :func:`gqa_position_model`'s construction (each
    group keeps its first head's initial weights)."""
    r = RECALL
    vocab = r.keys + r.values
    return [gqa_position_model(kv_heads, seed=_checks.nonnegative_int("seed", s), encoding=r.encoding,
                               vocab_size=vocab, d_model=r.d_model, depth=r.depth, heads=r.heads,
                               train_length=4 * r.pairs)
            for s in seeds]


def recall_data(seed: int, steps: int | None = None) -> tuple[np.ndarray, ...]:
    """Seed ``seed``'s training minibatches ``(steps, batch, 4 pairs)``: inputs, targets, mask, from
    ``default_rng(1000 + seed)``."""
    r = RECALL
    steps = r.steps if steps is None else _checks.positive_int("steps", steps)
    arrays = associative_recall(steps * r.batch_size, rng=np.random.default_rng(1000 + seed), keys=r.keys,
                                values=r.values, pairs=r.pairs)
    return tuple(a.reshape(steps, r.batch_size, -1) for a in arrays)


def recall_train(kv_heads: int, seeds, steps: int | None = None) -> tuple[ex.PositionModel, np.ndarray]:
    """:func:`recall_models` trained with Adam on each seed's :func:`recall_data`, the loss on the recalled values
    only. Returns the stacked models and the training losses ``(seeds, steps)``."""
    seeds = list(seeds)
    data = [recall_data(s, steps) for s in seeds]
    return train_module.fit_seeds(recall_models(kv_heads, seeds), _masked_loss,
                                  tuple(np.stack([d[i] for d in data]) for i in range(3)),
                                  optimizer=optax.adam(RECALL.learning_rate))


def recall_eval(model) -> tuple[float, float]:
    """Held-out loss (nats) and accuracy of one model on the recalled values of :data:`RECALL`'s evaluation
    sequences (``default_rng(eval_seed)``)."""
    r = RECALL
    x, y, m = associative_recall(r.eval_sequences, rng=np.random.default_rng(r.eval_seed), keys=r.keys,
                                 values=r.values, pairs=r.pairs)
    logits = np.asarray(jax.jit(jax.vmap(model))(x))
    logits = logits - logits.max(-1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    ce = -np.take_along_axis(logp, y[..., None], -1)[..., 0]
    acc = logits.argmax(-1) == y
    return float((ce * m).sum() / m.sum()), float((acc * m).sum() / m.sum())


# ---------------------------------------------------------------------------------------------
# Reading the stored results (attnbook/experiments/results/, written by bench/kv_*.py and bench/latent_quality.py)


@functools.cache
def _stored_rows(name: str) -> tuple[dict, ...]:
    return tuple(read_csv(name))


def stored(name: str, column: str, **where) -> np.ndarray:
    """The values of ``column`` in the stored CSV file ``name``, as floats, in the file's order (seed 0 first), from
    the rows whose fields equal ``where`` (compared as text: ``kv_heads=2`` matches the field ``"2"``).

    ``stored("kv_heads_quality.csv", "excess", method="from_scratch", kv_heads=2, steps=300)`` is the held-out excess
    of GQA with 2 key/value heads, one value per seed. A selection that matches no row is a ``KeyError``.
    """
    rows = _stored_rows(name)
    if rows and column not in rows[0]:
        raise KeyError(f"{name} has no column {column!r}; its columns are {sorted(rows[0])}")
    chosen = [r[column] for r in rows if all(r[k] == str(v) for k, v in where.items())]
    if not chosen:
        raise KeyError(f"no row of {name} has {where}")
    return np.array([float(v) for v in chosen])


def quality(kv_heads: int, column: str = "excess", *, method: str = "from_scratch", steps: int = 300) -> np.ndarray:
    """Chapter 8's task with ``kv_heads`` key/value heads (bench/kv_heads_quality.py): ``column`` of each seed, by
    default the held-out excess over the optimum (nats per token) after ``steps`` steps."""
    return stored("kv_heads_quality.csv", column, method=method, kv_heads=kv_heads, steps=steps)


def baseline(method: str, column: str = "excess") -> float:
    """A baseline's row of kv_heads_quality.csv (``"optimum"``: its ``loss`` is the optimum; ``"current_token"``)."""
    return float(stored("kv_heads_quality.csv", column, method=method)[0])


def latent(rank: int, column: str = "excess") -> np.ndarray:
    """Multi-head latent attention of rank ``rank`` on chapter 8's task (bench/latent_quality.py), one value per
    seed."""
    return stored("latent_quality.csv", column, rank=rank)


def equal_parameters(kv_heads: int, column: str = "excess") -> np.ndarray:
    """GQA with its freed parameters in wider feed-forward layers (bench/kv_heads_equal_parameters.py), one value
    per seed."""
    return stored("kv_heads_equal_parameters.csv", column, kv_heads=kv_heads)


def uptraining(method: str, kv_heads: int, step: int) -> np.ndarray:
    """Held-out excess over the optimum after ``step`` steps (bench/kv_heads_uptraining.py), one value per seed;
    ``method`` is ``"uptrained"`` (step 0: mean-pooled, not yet trained) or ``"from_scratch"``."""
    return stored("kv_heads_uptraining_grid.csv", "excess", method=method, kv_heads=kv_heads, step=step)


def recall(kv_heads: int, column: str = "accuracy") -> np.ndarray:
    """The recall task's held-out accuracy (or ``column="loss"``) on the recalled values with ``kv_heads``
    key/value heads (bench/kv_heads_recall.py), one value per seed."""
    return stored("kv_heads_recall.csv", column, method="trained", kv_heads=kv_heads)


def recall_baseline(method: str, column: str = "loss") -> float:
    """A baseline of the recall task: ``"no_context"``, ``"uniform_over_values"`` or ``"bag_of_values"``."""
    return float(stored("kv_heads_recall.csv", column, method=method)[0])


def recall_curve(kv_heads: int) -> np.ndarray:
    """The recall runs' training loss on the recalled values (new data every batch, so held out), mean per block of
    :attr:`Settings.recall_curve_block` steps: ``(seeds, blocks)``."""
    return np.stack([stored("kv_heads_recall_curves.csv", "loss", kv_heads=kv_heads, seed=s) for s in SETTINGS.seeds])


def decoding(method: str, column: str = "ms_per_token", *, context: int | None = None) -> float:
    """bench/kv_decoding.py: the decode time per token (ms) of ``method`` at ``context`` tokens, or another column
    (``"cache_bytes_per_token"``, the same at every context)."""
    where = {} if context is None else {"context": context}
    return float(stored("kv_decoding.csv", column, method=method, **where)[0])


DECODE_ROOFLINE_METHODS = ("mha", "gqa-4", "gqa-2", "mqa", "mla")  # mqa-repeated copies its cache: not modelled


def decode_layer(method: str, s: Decoding = DECODING):
    """The layer ``bench/kv_decoding.py`` times for ``method`` (of :data:`DECODE_ROOFLINE_METHODS`), built as there
    (key 0): MHA, GQA and MQA with 8, 4, 2 and 1 key/value heads, MLA of rank ``s.mla_rank``."""
    import jax

    from ..latent import MultiHeadLatentAttention
    from ..mha import MultiHeadSelfAttention

    key = jax.random.key(0)
    if method == "mla":
        return MultiHeadLatentAttention(s.d_model, s.heads, s.key_dim, s.mla_rank, s.mla_rope_dim, key=key)
    kv_heads = {"mha": s.heads, "gqa-4": 4, "gqa-2": 2, "mqa": 1}
    if method not in kv_heads:
        raise ValueError(f"method must be one of {DECODE_ROOFLINE_METHODS}, got {method!r}")
    return MultiHeadSelfAttention(s.d_model, s.heads, kv_heads=kv_heads[method], key=key)


def decode_cost(method: str, context: int, s: Decoding = DECODING) -> dict:
    """One decoding step of ``bench/kv_decoding.py``'s layer in hardware terms, a model counted from the shapes:

    - ``cache_bytes``: the cache's ``context`` rows in float32, ``context * kv.cache_bytes_per_token(layer)``; the step
      attends over every row of the cache array (masked beyond the current token), so it reads them all;
    - ``weight_bytes``: the layer's parameters in float32, read once per token;
    - ``flops``, two per multiply-add: 2 per parameter for the new token's projections, and attention over the cache:
      per query head and cached row, the score and the weighted sum, ``2 (d_h + d_h)`` for MHA, GQA and MQA (grouping
      shares the keys, not the arithmetic) and ``2 ((rank + rope_dim) + rank)`` for MLA in the absorbed form, where
      every head scores the whole cached row and sums its latent;
    - ``intensity``: ``flops`` over all the bytes, FLOPs per byte.
    """
    from .. import kv
    from ..nn import count_parameters

    layer = decode_layer(method, s)
    cache_bytes = context * kv.cache_bytes_per_token(layer)
    parameters = count_parameters(layer)
    per_row = 2 * ((s.mla_rank + s.mla_rope_dim) + s.mla_rank) if method == "mla" else 2 * 2 * s.key_dim
    flops = 2 * parameters + s.heads * context * per_row
    return dict(cache_bytes=cache_bytes, weight_bytes=4 * parameters, flops=flops,
                intensity=flops / (cache_bytes + 4 * parameters))


def run_summary(meta: dict) -> dict:
    """What a stored run's metadata says of where it ran: ``cpu``, ``cores``, ``date`` (YYYY-MM-DD), and ``low`` and
    ``high``, the lowest and the highest 1-minute load average it records (before, after, and its samples' minimum
    and maximum)."""
    load = meta["load_average_1min"]
    samples = [v for v in load.values() if isinstance(v, dict)]
    values = [load["before"], load["after"]] + [s["min"] for s in samples] + [s["max"] for s in samples]
    return dict(cpu=meta["machine"]["cpu_model"], cores=meta["machine"]["cores"], date=meta["date"][:10],
                low=min(values), high=max(values))


__all__ = ["Settings", "SETTINGS", "batches", "held_out", "gqa_position_model", "equal_parameter_width", "equal_parameter_model", "mla_position_model", "LOSS", "fit",
           "experiment_models", "experiment_train", "DECODING", "RECALL", "associative_recall", "recall_models", "recall_data",
           "recall_train", "recall_eval", "stored", "quality", "baseline", "latent",
           "equal_parameters", "uptraining", "recall", "recall_baseline", "recall_curve", "decoding", "run_summary",
           "DECODE_ROOFLINE_METHODS", "decode_layer", "decode_cost"]
