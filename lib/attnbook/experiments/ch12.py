"""Chapter 12's experiment: linear attention and its descendants against softmax attention on multi-query
associative recall (MQAR, Arora et al. 2023, "Zoology"), and what each costs to decode; shared by the chapter, its
command and the tests.

The components are :mod:`attnbook.linear_attention` (:class:`~attnbook.linear_attention.LinearAttention`, one layer
for every state-update rule), chapter 5's :class:`attnbook.lm.NextTokenModel` (embeddings, learned positions, pre-LN
blocks), chapter 10's recall task (:func:`attnbook.experiments.ch10.associative_recall`) and cache arithmetic
(:func:`attnbook.kv.cache_bytes_per_token`), chapter 8-10's training loop (:func:`attnbook.train.fit_seeds`: the five
seeds of one configuration in one compiled program) and chapter 6's timer (:func:`attnbook.cost.time_call`).

    python -m attnbook.experiments.ch12 --write            # every run, into attnbook/experiments/results/
    python -m attnbook.experiments.ch12 --steps 50 --out /tmp/x   # a quick trial elsewhere

**The models.** Every model is chapter 5's next-token model with ``depth`` blocks of ``d_model`` features; the
blocks' token mixer is softmax attention (``"attention"``, :class:`attnbook.mha.MultiHeadSelfAttention`) or a
:class:`~attnbook.linear_attention.LinearAttention` layer with one of the rules ``"linear"`` (Katharopoulos et al.
2020), ``"retention"`` (RetNet's fixed decays), ``"ssd"`` (Mamba-2's input-dependent scalar decay), ``"delta"``
(DeltaNet) or ``"gated-delta"`` (Gated DeltaNet), each with the short causal convolution of Mamba-2 and DeltaNet
(``conv = 4``). The projections ``W_q, W_k, W_v, W_o`` have ``d_model x d_model`` numbers whatever the number of
heads, so at one ``d_model`` every model has nearly the same parameters (the stored table counts them) while the
state of a linear layer, ``heads x (d_model / heads)^2`` numbers, shrinks as the heads grow: the heads set the state
size at equal parameters.

**Seeds.** Seed ``s`` draws the initial weights from ``jax.random.key(s)`` (the linear layers from
``fold_in(key(s), 1000 + block)``), its training data from ``default_rng(1000 + s)``; the held-out sequences come
from ``default_rng(1)`` for every seed and model.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import pathlib
import sys
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from .. import _checks, train
from ..linear_attention import LinearAttention
from ..lm import NextTokenModel
from ..nn import count_parameters
from .ch10 import associative_recall
from .ch11 import locked
from .store import RESULTS, RunInfo, read_csv, read_json, source_folder, write_csv

MODELS = ("attention", "attention-conv", "linear", "retention", "ssd", "delta", "gated-delta")
"""The token mixers compared, softmax attention first (without and with the short convolution)."""


class ShortConvAttention(eqx.Module):
    """Softmax attention after a short causal depthwise convolution of its input, ``out[t] = sum_j w[j] x[t - j]``
    over ``conv`` tokens: the linear layers' convolution given to attention too, as Zoology's current MQAR configs
    do (a BaseConv mixer before every sequence mixer, attention included: ``add_attention`` in
    ``zoology/experiments/models_repo.py``, called with the ``conv_mixer`` of
    ``mqar_example_configs/original_mqar_configs.py``; their README's note 2 gives the recipe to the other
    architectures "for fair comparison")."""

    w_conv: jax.Array  # (conv, d_model)
    attention: eqx.Module

    def __init__(self, attention, d_model: int, conv: int, *, key):
        from ..nn import init

        self.attention = attention
        self.w_conv = init(key, (_checks.positive_int("conv", conv), d_model), "fan-in", fan_in=conv)

    def __call__(self, x, **options):
        size, length = self.w_conv.shape[0], x.shape[0]
        rows = jnp.concatenate([jnp.zeros((size - 1, x.shape[1]), x.dtype), x], axis=0)
        mixed = sum(self.w_conv[j] * rows[size - 1 - j:size - 1 - j + length] for j in range(size))
        return self.attention(mixed, **options)


@dataclasses.dataclass(frozen=True)
class Settings:
    """The sizes of chapter 12's recall runs; the stored JSON file records them."""

    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    models: tuple[str, ...] = MODELS
    keys: int = 32  # key tokens 0..31
    values: int = 32  # value tokens 32..63: chance is 1/32
    d_model: int = 32
    depth: int = 2
    conv: int = 4
    form: str = "parallel"  # the three forms agree (tests/lib/test_linear_attention.py); at 64 tokens or fewer
                            # the T x T product is the quickest to train on a CPU
    chunk: int = 16
    pairs: tuple[int, ...] = (4, 8, 16)  # at heads_for_pairs heads: sequences of 16, 32, 64 tokens; only 8 and 16
                                         # were stored (linear_recall.csv), 4 pairs never ran
    heads_for_pairs: int = 2
    heads: tuple[int, ...] = (1, 2, 8)  # at pairs_for_heads pairs: states of 1024, 512, 128 numbers a layer; only 2
                                        # and 8 were stored, 1 head never ran
    pairs_for_heads: int = 8
    steps: int = 1200
    batch_size: int = 32
    learning_rate: float = 3e-3
    eval_sequences: int = 256
    eval_seed: int = 1

    def to_dict(self) -> dict:
        """The settings as a dict (tuples as lists, as JSON stores them)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    def runs(self) -> list[tuple[int, int]]:
        """The ``(pairs, heads)`` configurations in the order they run: :attr:`pairs_for_heads` pairs at
        :attr:`heads_for_pairs` heads, the other pair counts (most first), then the other head counts."""
        grid = [(self.pairs_for_heads, self.heads_for_pairs)]
        grid += [(p, self.heads_for_pairs) for p in sorted(self.pairs, reverse=True) if (p, self.heads_for_pairs) not in grid]
        return grid + [(self.pairs_for_heads, h) for h in sorted(self.heads, reverse=True)
                       if (self.pairs_for_heads, h) not in grid]


SETTINGS = Settings()


def recall_model(model: str, *, pairs: int, heads: int, seed: int, settings: Settings = SETTINGS) -> NextTokenModel:
    """One untrained model of the comparison (see the module's docstring): chapter 5's
    :class:`~attnbook.lm.NextTokenModel` with softmax attention for ``jax.random.key(seed)``, its mixers replaced by
    :class:`~attnbook.linear_attention.LinearAttention` layers of rule ``model`` unless ``model == "attention"``."""
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    pairs, heads = _checks.positive_int("pairs", pairs), _checks.positive_int("heads", heads)
    seed = _checks.nonnegative_int("seed", seed)
    s = settings
    if s.d_model % heads:
        raise ValueError(f"heads must divide d_model={s.d_model}, got {heads}")
    vocab = s.keys + s.values
    base = NextTokenModel("attention", vocab_size=vocab, num_classes=vocab, max_len=4 * pairs, d_model=s.d_model,
                          depth=s.depth, heads=heads, key=jax.random.key(seed))
    if model == "attention":
        return base
    if model == "attention-conv":
        mixers = tuple(ShortConvAttention(b.mixer, s.d_model, s.conv, key=jax.random.fold_in(jax.random.key(seed), 1000 + i))
                       for i, b in enumerate(base.blocks))
        return eqx.tree_at(lambda m: tuple(b.mixer for b in m.blocks), base, mixers)
    mixers = tuple(LinearAttention(s.d_model, heads, s.d_model // heads, rule=model, conv=s.conv, form=s.form,
                                   chunk=s.chunk, key=jax.random.fold_in(jax.random.key(seed), 1000 + b)) for b in range(s.depth))
    return eqx.tree_at(lambda m: tuple(b.mixer for b in m.blocks), base, mixers)


def state_numbers(model: str, heads: int, context: int, settings: Settings = SETTINGS) -> int:
    """Numbers one layer keeps to decode the next token after ``context`` tokens: attention's key and value of every
    token (``2 d_model`` a token), a linear layer's state and convolution window
    (:meth:`~attnbook.linear_attention.LinearAttention.state_bytes` / 4), the same at every ``context``."""
    s = settings
    if model in ("attention", "attention-conv"):
        window = (s.conv - 1) * s.d_model if model == "attention-conv" else 0
        return 2 * s.d_model * _checks.nonnegative_int("context", context) + window
    layer = LinearAttention(s.d_model, heads, s.d_model // heads, rule=model, conv=s.conv, key=jax.random.key(0))
    return layer.state_bytes(4) // 4


def recall_data(seed: int, pairs: int, settings: Settings = SETTINGS) -> tuple[np.ndarray, ...]:
    """Seed ``seed``'s training minibatches ``(steps, batch, 4 pairs)``: inputs, targets and the mask of the recalled
    values, from ``default_rng(1000 + seed)``."""
    s = settings
    arrays = associative_recall(s.steps * s.batch_size, rng=np.random.default_rng(1000 + seed), keys=s.keys,
                                values=s.values, pairs=pairs)
    return tuple(a.reshape(s.steps, s.batch_size, -1) for a in arrays)


def _masked_loss(model, xs, ys, mask):
    """Mean cross-entropy over the recalled values (``mask`` 1)."""
    ce = train.cross_entropy(jax.vmap(model)(xs), ys)
    return (ce * mask).sum() / mask.sum()


def recall_train(model: str, pairs: int, heads: int, seeds, settings: Settings = SETTINGS):
    """The models of ``seeds`` trained with Adam on their own :func:`recall_data` (the loss on the recalled values
    only), all in one compiled program. Returns the stacked models and the training losses ``(seeds, steps)``."""
    seeds = list(seeds)
    data = [recall_data(s, pairs, settings) for s in seeds]
    models = [recall_model(model, pairs=pairs, heads=heads, seed=s, settings=settings) for s in seeds]
    return train.fit_seeds(models, _masked_loss, tuple(np.stack([d[i] for d in data]) for i in range(3)),
                           optimizer=optax.adam(settings.learning_rate))


def recall_eval(model, pairs: int, settings: Settings = SETTINGS) -> tuple[float, float]:
    """Held-out loss (nats) and accuracy of one model on the recalled values of ``eval_sequences`` sequences from
    ``default_rng(eval_seed)``."""
    s = settings
    x, y, m = associative_recall(s.eval_sequences, rng=np.random.default_rng(s.eval_seed), keys=s.keys,
                                 values=s.values, pairs=pairs)
    logits = np.asarray(jax.jit(jax.vmap(model))(x), np.float64)
    logits = logits - logits.max(-1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    ce = -np.take_along_axis(logp, y[..., None], -1)[..., 0]
    acc = logits.argmax(-1) == y
    return float((ce * m).sum() / m.sum()), float((acc * m).sum() / m.sum())


RECALL_CSV = "linear_recall.csv"
RECALL_JSON = "linear_recall.json"


def _merge(path: pathlib.Path, rows: list[dict], keys: tuple[str, ...]) -> None:
    """Write ``rows`` into the CSV file ``path``, replacing the stored rows with the same ``keys`` fields."""
    old = read_csv(path.name, path.parent) if path.exists() else []
    new_keys = {tuple(str(r[k]) for k in keys) for r in rows}
    kept = [r for r in old if tuple(r[k] for k in keys) not in new_keys]
    write_csv(path, kept + [{k: str(v) for k, v in r.items()} for r in rows])


def recall_rows(model: str, pairs: int, heads: int, settings: Settings = SETTINGS) -> tuple[list[dict], dict]:
    """Train and evaluate one configuration for every seed: the stored rows (one per seed) and its seconds."""
    wall, cpu = time.time(), time.process_time()
    models, losses = recall_train(model, pairs, heads, settings.seeds, settings)
    rows = []
    for i, seed in enumerate(settings.seeds):
        one = train.select(models, i)
        loss, accuracy = recall_eval(one, pairs, settings)
        rows.append(dict(model=model, pairs=pairs, heads=heads, seed=seed, parameters=count_parameters(one),
                         state_numbers=state_numbers(model, heads, 4 * pairs, settings),
                         loss=round(loss, 4), accuracy=round(accuracy, 4),
                         train_loss_last_100=round(float(np.mean(losses[i, -100:])), 4)))
    return rows, dict(wall=round(time.time() - wall, 1), cpu=round(time.process_time() - cpu, 1))



# ---------------------------------------------------------------------------------------------
# Cost: what a layer keeps to decode the next token, and the time of one decoding step


@dataclasses.dataclass(frozen=True)
class Decoding:
    """The sizes of chapter 12's decoding-cost run (:data:`DECODING`)."""

    d_model: int = 256
    heads: int = 4
    key_dim: int = 64
    conv: int = 4
    models: tuple[str, ...] = ("attention", "linear", "ssd", "gated-delta")
    contexts: tuple[int, ...] = (256, 1024, 4096, 16384)
    steps: int = 32  # one-token steps decoded after the cache holds context - steps tokens
    repeats: int = 9  # runs timed; the fastest is kept

    def to_dict(self) -> dict:
        """The settings as the stored JSON file records them (tuples as lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


DECODING = Decoding()
"""One layer of ``d_model`` 256 and 4 heads of 64 features: softmax attention with its KV cache (chapter 10's
:class:`~attnbook.mha.MultiHeadSelfAttention` step) against three linear layers' recurrent step, decoding the last
32 positions of contexts of 256 to 16384 tokens."""


def decoding_layer(model: str, decoding: Decoding = DECODING):
    """The layer whose decoding step :func:`decode_seconds` times (weights of ``jax.random.key(0)``)."""
    from ..mha import MultiHeadSelfAttention

    d = decoding
    if model == "attention":
        return MultiHeadSelfAttention(d.d_model, d.heads, key=jax.random.key(0))
    return LinearAttention(d.d_model, d.heads, d.key_dim, rule=model, conv=d.conv, key=jax.random.key(0))


def decoding_bytes(model: str, context: int, decoding: Decoding = DECODING) -> int:
    """Bytes (float32) one layer keeps to decode token ``context + 1``: attention's KV cache,
    ``context x`` :func:`attnbook.kv.cache_bytes_per_token`; a linear layer's state and convolution window,
    :meth:`~attnbook.linear_attention.LinearAttention.state_bytes`, whatever the context."""
    from ..kv import cache_bytes_per_token

    context = _checks.nonnegative_int("context", context)
    layer = decoding_layer(model, decoding)
    return context * cache_bytes_per_token(layer) if model == "attention" else layer.state_bytes(4)


@eqx.filter_jit
def _decode(layer, xs, state, first):
    """``len(xs)`` one-token steps from position ``first`` in one ``lax.scan``, through the layer's own ``step``
    (the decoding protocol of chapter 7's decoder)."""
    def body(state, inputs):
        x, t = inputs
        out, state = layer.step(x[None], state, t)
        return state, out[0]
    return jax.lax.scan(body, state, (xs, first + jnp.arange(xs.shape[0])))[1]


def decode_seconds(model: str, context: int, decoding: Decoding = DECODING) -> float:
    """Seconds per token of decoding the last ``steps`` positions of ``context`` tokens (the cache or state already
    filled with random numbers): the fastest of ``repeats`` runs, each timed by chapter 6's
    :func:`attnbook.cost.median_seconds` (the other jobs of a shared machine only add time)."""
    from ..cost import median_seconds

    d = decoding
    layer = decoding_layer(model, d)
    rng = np.random.default_rng(0)
    state = jax.tree.map(lambda a: jnp.asarray(rng.normal(size=a.shape), jnp.float32), layer.init_cache(context))
    xs = jnp.asarray(rng.normal(size=(d.steps, d.d_model)), jnp.float32)
    first = jnp.asarray(context - d.steps)
    run = lambda: _decode(layer, xs, state, first)
    jax.block_until_ready(run())  # compile
    return min(median_seconds(run, repeats=1, warmup=0) for _ in range(d.repeats)) / d.steps


COST_CSV = "linear_decoding.csv"
COST_JSON = "linear_decoding.json"


def cost_main(out: pathlib.Path, command: str, decoding: Decoding = DECODING) -> None:
    """Time every model's decoding step at every context and store the table (with the bytes) and its metadata."""
    info = RunInfo(command)
    rows = []
    for context in decoding.contexts:
        for model in decoding.models:
            seconds = decode_seconds(model, context, decoding)
            rows.append(dict(model=model, context=context, bytes=decoding_bytes(model, context, decoding),
                             us_per_token=round(1e6 * seconds, 2), load_average=info.sample()))
            print(rows[-1], flush=True)
    write_csv(out / COST_CSV, rows)
    meta = info.metadata(samples_name="after_each_timing", settings=decoding.to_dict(),
                         note="timings on a shared machine (see the load): compare models within a context")
    (out / COST_JSON).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print("wrote", out / COST_CSV)


# ---------------------------------------------------------------------------------------------
# Reading the stored results (attnbook/experiments/results/linear_recall.csv and linear_decoding.csv)


@functools.cache
def _stored_rows(name: str) -> tuple[dict, ...]:
    return tuple(read_csv(name))


def stored(name: str, column: str, **where) -> np.ndarray:
    """The values of ``column`` in the stored CSV file ``name`` as floats, in the file's order, from the rows whose
    fields equal ``where`` (compared as text). A selection that matches no row is a ``KeyError``."""
    rows = _stored_rows(name)
    if rows and column not in rows[0]:
        raise KeyError(f"{name} has no column {column!r}; its columns are {sorted(rows[0])}")
    chosen = [r for r in rows if all(r[k] == str(v) for k, v in where.items())]
    if not chosen:
        raise KeyError(f"no row of {name} has {where}")
    return np.array([float(r[column]) for r in chosen])


def recall(model: str, pairs: int, heads: int, column: str = "accuracy") -> np.ndarray:
    """Held-out recall accuracy (or another column: ``"loss"``, ``"parameters"``, ``"state_numbers"``) of ``model``
    with ``pairs`` key-value pairs and ``heads`` heads, one value per seed in seed order."""
    rows = [r for r in _stored_rows(RECALL_CSV) if (r["model"], r["pairs"], r["heads"]) == (model, str(pairs), str(heads))]
    if not rows:
        raise KeyError(f"no stored recall run of {model!r} with pairs={pairs}, heads={heads}")
    rows = sorted(rows, key=lambda r: int(r["seed"]))
    return np.array([float(r[column]) for r in rows])


def recall_seeds(model: str, pairs: int, heads: int) -> list[int]:
    """The seeds stored for one recall configuration, in order."""
    return sorted(int(r["seed"]) for r in _stored_rows(RECALL_CSV)
                  if (r["model"], r["pairs"], r["heads"]) == (model, str(pairs), str(heads)))


def recall_run_summary() -> dict:
    """Where the stored recall runs ran (every ``linear_recall*.json``, one per command): ``cpu``, ``cores``, the first
    ``date``, the lowest and the highest 1-minute load they record (``low``, ``high``), their CPU minutes in all
    (``cpu_minutes``) and their number (``commands``)."""
    from .ch10 import run_summary

    names = sorted(p.name for p in RESULTS.iterdir() if p.name.startswith("linear_recall") and p.name.endswith(".json"))
    metas = [read_json(n) for n in names]
    parts = [run_summary(m) for m in metas]
    cpu = sum(v["cpu"] for m in metas for v in m["seconds"].values())
    return dict(cpu=parts[0]["cpu"], cores=parts[0]["cores"], date=min(p["date"] for p in parts),
                low=min(p["low"] for p in parts), high=max(p["high"] for p in parts),
                cpu_minutes=round(cpu / 60, 1), commands=len(metas))


def queries(pairs: int, settings: Settings = SETTINGS) -> int:
    """The held-out recalled values one accuracy is measured on: ``eval_sequences x pairs`` (2048 at 8 pairs)."""
    return settings.eval_sequences * _checks.positive_int("pairs", pairs)


def compare(a, b, queries: int) -> dict:
    """Accuracies ``a - b`` paired by seed (two arrays, one value per seed): their ``mean``; ``seed_se``, the standard
    error of that mean from the seed-to-seed spread (sample standard deviation / sqrt(seeds)); ``evaluation_se``, the
    binomial standard error of one seed's difference from the ``queries`` held-out values alone,
    ``sqrt((p_a (1 - p_a) + p_b (1 - p_b)) / queries)`` at the mean accuracies; ``positive``, the seeds where
    ``a > b``; ``sign_p``, the one-sided sign test ``P(X >= positive)`` for ``X ~ Binomial(seeds, 1/2)``."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size < 2:
        raise ValueError(f"a and b must be 1-D arrays of the same length >= 2, got shapes {a.shape} and {b.shape}")
    queries = _checks.positive_int("queries", queries)
    d, n = a - b, a.size
    pa, pb = a.mean(), b.mean()
    positive = int((d > 0).sum())
    sign_p = sum(math.comb(n, k) for k in range(positive, n + 1)) / 2 ** n
    return dict(mean=float(d.mean()), seed_se=float(d.std(ddof=1) / np.sqrt(n)),
                evaluation_se=float(np.sqrt((pa * (1 - pa) + pb * (1 - pb)) / queries)), positive=positive,
                sign_p=float(sign_p))


def fisher_p(successes_a: int, n_a: int, successes_b: int, n_b: int) -> float:
    """Fisher's exact test, two-sided, of two success counts (``successes_a`` of ``n_a`` against ``successes_b`` of
    ``n_b``): the hypergeometric probability of every table with the same margins that is no more likely than the
    observed one."""
    n_a, n_b = _checks.positive_int("n_a", n_a), _checks.positive_int("n_b", n_b)
    sa, sb = _checks.nonnegative_int("successes_a", successes_a), _checks.nonnegative_int("successes_b", successes_b)
    if sa > n_a or sb > n_b:
        raise ValueError(f"successes must not exceed their counts, got {sa} of {n_a} and {sb} of {n_b}")
    total = sa + sb

    def prob(x):
        return math.comb(n_a, x) * math.comb(n_b, total - x) / math.comb(n_a + n_b, total)

    observed = prob(sa)
    return float(sum(prob(x) for x in range(max(0, total - n_b), min(total, n_a) + 1)
                     if prob(x) <= observed * (1 + 1e-9)))


def chance(settings: Settings = SETTINGS) -> float:
    """The accuracy of a guess uniform over the values, ``1 / values``."""
    return 1.0 / settings.values


def decoding(model: str, context: int, column: str = "us_per_token") -> float:
    """The stored decode time per token (microseconds) of ``model`` after ``context`` tokens, or ``column="bytes"``."""
    return float(stored(COST_CSV, column, model=model, context=context)[0])

def main(argv=None, program: str = "python -m attnbook.experiments.ch12") -> None:
    """Run chapter 12's recall comparison (every model, every configuration of :meth:`Settings.runs`, five seeds),
    writing the table after each configuration; ``--write`` stores it in the package's results folder."""
    parser = argparse.ArgumentParser(description="Chapter 12: linear attention, decay, the delta rule and SSD "
                                                 "against softmax attention on associative recall")
    parser.add_argument("--write", action="store_true", help="store into attnbook/experiments/results/")
    parser.add_argument("--out", type=pathlib.Path, default=None, help="another folder (default: a trial in /tmp)")
    parser.add_argument("--steps", type=int, default=SETTINGS.steps)
    parser.add_argument("--models", nargs="+", default=list(SETTINGS.models), choices=MODELS)
    parser.add_argument("--part", choices=("recall", "cost"), default="recall")
    parser.add_argument("--runs", nargs="+", default=None, metavar="PAIRSxHEADS",
                        help="only these configurations, e.g. 8x2 16x2 (default: every one of Settings.runs)")
    args = parser.parse_args(argv)
    out = source_folder() if args.write else (args.out or pathlib.Path("/tmp/attnbook-ch12"))
    out.mkdir(parents=True, exist_ok=True)
    if args.part == "cost":
        return cost_main(out, "nice -n 5 " + " ".join([program] + (list(argv) if argv is not None else sys.argv[1:])))
    settings = dataclasses.replace(SETTINGS, steps=args.steps, models=tuple(args.models))
    command = "nice -n 5 " + " ".join([program] + (list(argv) if argv is not None else sys.argv[1:]))
    info = RunInfo(command)
    seconds = {}
    runs = settings.runs() if args.runs is None else [tuple(int(n) for n in r.split("x")) for r in args.runs]
    name = RECALL_JSON if args.runs is None else RECALL_JSON.replace(".json", f"_{'_'.join(args.runs)}.json")
    for pairs, heads in runs:
        for model in settings.models:
            rows, seconds[f"{model}_p{pairs}_h{heads}"] = recall_rows(model, pairs, heads, settings)
            info.sample()
            with locked(out):  # several commands may fill one table
                _merge(out / RECALL_CSV, rows, ("model", "pairs", "heads", "seed"))
            meta = info.metadata(samples_name="after_each_run", settings=settings.to_dict(), seconds=seconds)
            (out / name).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
            print(model, pairs, heads, seconds[f"{model}_p{pairs}_h{heads}"], [r["accuracy"] for r in rows], flush=True)
    print("wrote", out / RECALL_CSV)


if __name__ == "__main__":
    main()
