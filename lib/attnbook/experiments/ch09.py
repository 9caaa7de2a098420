"""Chapter 9's experiment: chapter 8's models read longer than trained, shared by the chapter, its two commands
(bench/rope_scaling.py and bench/long_context.py, thin wrappers of this module's ``main``) and the tests.

The components are :mod:`attnbook.positional` (the RoPE scalings) and :mod:`attnbook.extrapolation` (the model, its
evaluation with windows, kept tokens and renumbered positions, and ``fine_tune``); the task, the models and their
pretraining are chapter 8's (:mod:`attnbook.experiments.ch08`). This module fixes chapter 9's own sizes once
(:data:`SETTINGS`) and holds its runs:

- :func:`run_rope_scaling`: the RoPE models read at 2L, 4L and 8L with RoPE stretched (PI, NTK-aware, YaRN), no
  fine-tuning; writes ``rope_scaling*.csv`` and ``rope_scaling.json``;
- :func:`run_long_context`: fine-tuning at 4L, sliding windows and attention sinks (parts 1-3), writes
  ``long_context_*.csv`` and ``long_context.json``; :func:`run_followup`: parts 4 (positions renumbered inside the
  cache) and 5 (a second fine-tuning learning rate).

    python -m attnbook.experiments.ch09 --write rope_scaling
    python -m attnbook.experiments.ch09 --write long_context [--parts renumbered finetune_lr]

The stored results are read through :mod:`attnbook.experiments` (``read_csv``, ``read_json``).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import pathlib
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import extrapolation as ex
from .. import positional
from ..train import cross_entropy
from . import ch08
from .store import RunInfo, read_csv, source_folder, write_csv


@dataclasses.dataclass(frozen=True)
class Settings:
    """The sizes of chapter 9's runs (beside chapter 8's, :data:`attnbook.experiments.ch08.SETTINGS`); the stored
    JSON files record them (:func:`rope_scaling_settings`, :func:`long_context_settings`)."""

    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    eval_multiples: tuple[int, ...] = (2, 4, 8)  # no fine-tuning: read at m L with RoPE stretched by s = m
    multiple: int = 4  # fine-tuning at 4L, with every method at s = 4
    finetune_steps: tuple[int, ...] = (0, 10, 30, 100, 300)  # the checkpoints evaluated
    finetune_batch: int = 8  # sequences of 4L per step: as many tokens as a pretraining step (32 x 32)
    finetune_learning_rate: float = 1e-3
    finetune_second_learning_rate: float = 3e-4  # part 5: the same fine-tuning at a lower rate
    finetune_data_seed: int = 2000  # seed s reads default_rng(2000 + s)
    scratch_data_seed: int = 3000  # RoPE trained at 4L from its initialisation: default_rng(3000 + s)
    windows: tuple[int, ...] = (1, 2, 3, 4, 8, 16, 32, 64, 128, 256)  # sliding windows at 8L
    cache_windows: tuple[int, ...] = (2, 4, 8, 16)  # the rolling cache of the last w keys
    cache_sinks: tuple[int, ...] = (0, 1, 4)  # ... with the first k tokens kept

    @property
    def scratch_steps(self) -> tuple[int, ...]:
        """The checkpoints of training at 4L from scratch: 100, then chapter 8's pretraining steps plus each
        fine-tuning checkpoint (equal compute, counted in tokens)."""
        pretraining = ch08.SETTINGS.steps
        return (100, pretraining) + tuple(pretraining + n for n in self.finetune_steps[1:])

    @property
    def bos_token(self) -> int:
        """The beginning-of-sequence token of the ``rope_bos`` models (:func:`attnbook.experiments.ch08.with_bos`)."""
        return ch08.SETTINGS.vocab_size

    def to_dict(self) -> dict:
        """The settings as a dict (tuples as lists, as JSON stores them)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


SETTINGS = Settings()


# ---------------------------------------------------------------------------------------------
# RoPE stretched, no fine-tuning (bench/rope_scaling.py)


@dataclasses.dataclass(frozen=True)
class YaRNWithoutTemperature(positional.YaRNScaling):
    """YaRN's per-frequency interpolation with the attention temperature left out (magnitude 1)."""

    @property
    def magnitude(self) -> float:
        return 1.0


def scalings(m: int) -> dict:
    """The methods read at ``m L``, each at scale ``s = m`` (``None``: plain RoPE)."""
    L = ch08.SETTINGS.train_length
    return {"rope": None, "pi": positional.PositionInterpolation(m), "ntk": positional.NTKAwareScaling(m),
            "yarn": positional.YaRNScaling(m, L), "yarn_no_temperature": YaRNWithoutTemperature(m, L)}


def angle_ranges() -> dict:
    """Per method, length and pair: the largest angle read at m L over the largest angle trained at L.

    Above 1 for a pair that turns less than once over L, the model meets rotations it never saw (chapter 8's
    explanation of RoPE's failure); a pair that turns many times over L has seen every angle already.
    """
    L, d = ch08.SETTINGS.train_length, ch08.SETTINGS.d_model // ch08.SETTINGS.heads
    plain = positional.frequencies(d)
    out = {"turns_over_L_per_pair": (L * plain / (2 * np.pi)).round(4).tolist()}
    for m in SETTINGS.eval_multiples:
        for name, scaling in scalings(m).items():
            omega = plain if scaling is None else scaling.frequencies(d)
            out[f"{name}_{m * L}"] = ((m * L - 1) * omega / ((L - 1) * plain)).round(3).tolist()
    return out


def chapter8_stored() -> dict:
    """(encoding, seed, eval_length) -> loss_beyond_L from chapter 8's stored run (positions_extrapolation.csv)."""
    return {(r["encoding"], r["seed"], int(r["eval_length"])): float(r["loss_beyond_L"])
            for r in read_csv("positions_extrapolation.csv") if r["loss_beyond_L"]}


def rope_scaling_settings() -> dict:
    """The settings ``rope_scaling.json`` records."""
    s = ch08.SETTINGS
    return dict(s.to_dict(), seeds=list(SETTINGS.seeds), eval_multiples=list(SETTINGS.eval_multiples),
                head_features=s.d_model // s.heads, rope_base=10000.0)


def run_rope_scaling(out: pathlib.Path | None = None, command: str = "python bench/rope_scaling.py") -> None:
    """Chapter 8's RoPE and ALiBi models (``ch08.train``, seeds ``SETTINGS.seeds``) read at ``m L`` for every
    ``m`` of ``SETTINGS.eval_multiples`` with each of :func:`scalings`; writes into ``out`` (default: this source
    tree's results folder) rope_scaling.csv, _summary.csv, _comparisons.csv, _per_position.csv and .json."""
    out = source_folder() if out is None else pathlib.Path(out)
    info = RunInfo(command)
    seeds, multiples = list(SETTINGS.seeds), list(SETTINGS.eval_multiples)
    L = ch08.SETTINGS.train_length
    x8, y8, floor8 = ch08.eval_data(max(multiples))
    current8 = ex.current_token_loss(ch08.table(), ch08.SETTINGS.order, x8)
    rows, per_position, timings = [], [], {}
    curves = {}  # (method, seed, m) -> per-position loss

    def record(method, seed, m, curve, final_train_loss=""):
        floor = floor8[:, :m * L].mean(axis=0)
        curves[(method, seed, m)] = curve
        per_position.extend(dict(method=method, seed=seed, eval_length=m * L, position=t, loss=round(float(v), 5))
                            for t, v in enumerate(curve))
        rows.append(dict(method=method, seed=seed, eval_length=m * L, scale=m if method not in ("rope", "alibi",
                         "optimum", "current_token") else "", loss_all=round(float(curve.mean()), 5),
                         loss_beyond_L=round(float(curve[L:].mean()), 5),
                         excess_all=round(float(curve.mean() - floor.mean()), 5),
                         excess_beyond_L=round(float(curve[L:].mean() - floor[L:].mean()), 5),
                         final_train_loss=final_train_loss))

    for m in multiples:
        record("optimum", "", m, floor8[:, :m * L].mean(axis=0))
        record("current_token", "", m, current8[:, :m * L].mean(axis=0))
    for encoding in ("rope", "alibi"):
        began = time.time()
        models, losses = ch08.train(encoding, seeds)
        timings[f"train_{encoding}"] = round(time.time() - began, 1)
        began = time.time()
        for i, seed in enumerate(seeds):
            model = ex.select(models, i)
            final = round(float(losses[i, -20:].mean()), 5)
            for m in multiples:
                x, y = x8[:, :m * L], y8[:, :m * L]
                methods = scalings(m) if encoding == "rope" else {"alibi": None}
                for method, scaling in methods.items():
                    curve = np.asarray(ex.loss_per_position(model, x, y, scaling=scaling))
                    record(method, seed, m, curve, final)
        timings[f"evaluate_{encoding}"] = round(time.time() - began, 1)
        info.sample()
        print(encoding, timings, flush=True)

    # the summary: excess loss beyond L over the seeds, and every comparison per seed
    excess = {(r["method"], r["seed"], r["eval_length"]): r["excess_beyond_L"] for r in rows}
    methods = ["rope", "pi", "ntk", "yarn", "yarn_no_temperature", "alibi"]
    summary, comparisons = [], []
    for m in multiples:
        T = m * L
        current = excess[("current_token", "", T)]
        per_seed = {method: np.array([excess[(method, s, T)] for s in seeds]) for method in methods}
        for method in methods:
            v = per_seed[method]
            summary.append(dict(method=method, eval_length=T, seeds=len(seeds),
                                excess_beyond_L_mean=round(float(v.mean()), 5),
                                excess_beyond_L_min=round(float(v.min()), 5),
                                excess_beyond_L_max=round(float(v.max()), 5),
                                current_token_excess_beyond_L=current))
            for other in methods + ["current_token"]:
                if other == method:
                    continue
                w = per_seed[other] if other != "current_token" else np.full(len(seeds), current)
                below = int(np.sum(v < w))
                comparisons.append(dict(method=method, below=other, eval_length=T, seeds=len(seeds),
                                        seeds_below=below, every_seed=below == len(seeds),
                                        mean_difference=round(float(np.mean(v - w)), 5)))
    stored = chapter8_stored()
    loss_beyond = {(r["method"], r["seed"], r["eval_length"]): r["loss_beyond_L"] for r in rows}
    reproduced = {enc: max(abs(loss_beyond[(enc, s, m * L)] - stored[(enc, str(s), m * L)])
                           for s in seeds for m in multiples) for enc in ("rope", "alibi")}
    write_csv(out / "rope_scaling.csv", rows)
    write_csv(out / "rope_scaling_summary.csv", summary)
    write_csv(out / "rope_scaling_comparisons.csv", comparisons)
    write_csv(out / "rope_scaling_per_position.csv", per_position)
    meta = info.metadata(
        samples_name="after_each_encoding",
        settings=rope_scaling_settings(),
        scalings={m: {k: repr(v) for k, v in scalings(m).items()} for m in multiples},
        yarn_ramp={m: dict(correction_range=positional.YaRNScaling(m, L).correction_range(8),
                           frequencies=positional.YaRNScaling(m, L).frequencies(8).tolist(),
                           magnitude=positional.YaRNScaling(m, L).magnitude) for m in multiples},
        max_angle_over_trained_max_angle=angle_ranges(),
        eval_sequences="every length is a prefix of the same 8L sequences (ch08.eval_data)",
        excess="loss minus the optimum (mean entropy of the true next-token distribution) of the same targets",
        comparisons="rope_scaling_comparisons.csv: seeds_below = on how many seeds the method's excess beyond L is "
                    "below the other's (paired by seed index: same training data and initial key; current_token has "
                    "no seed), every_seed = all of them; mean_difference = mean over seeds of method minus other",
        chapter8_reproduced_max_abs_diff_loss_beyond_L=reproduced,
        seconds=timings,
    )
    (out / "rope_scaling.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print("chapter 8 reproduced (max |diff| of loss beyond L):", reproduced)
    below = {(c["method"], c["below"], c["eval_length"]): c["seeds_below"] for c in comparisons}
    for r in summary:
        T, method = r["eval_length"], r["method"]
        print(T, f"{method:20s}", r["excess_beyond_L_mean"], r["excess_beyond_L_min"], r["excess_beyond_L_max"],
              "| seeds below rope/pi/alibi/current:", *(below.get((method, o, T), "-") for o in
                                                      ("rope", "pi", "alibi", "current_token")),
              "| current:", r["current_token_excess_beyond_L"])


# ---------------------------------------------------------------------------------------------
# Fine-tuning at 4L, sliding windows, attention sinks (bench/long_context.py)


def methods() -> dict:
    """The four fine-tuned methods at scale ``SETTINGS.multiple`` (``None``: plain RoPE)."""
    m, L = SETTINGS.multiple, ch08.SETTINGS.train_length
    return {"rope": None, "pi": positional.PositionInterpolation(m), "ntk": positional.NTKAwareScaling(m),
            "yarn": positional.YaRNScaling(m, L)}


@eqx.filter_jit
def evaluate(models, x, y, max_offset=None, scaling=None, sinks=0, renumber=False):
    """Per-position mean loss of every stacked model: (seeds, T)."""
    def one(model):
        logits = jax.vmap(lambda t: model(t, max_offset, scaling=scaling, sinks=sinks, renumber=renumber))(x)
        return jnp.mean(cross_entropy(logits, y), axis=0)
    return eqx.filter_vmap(one)(models)


@eqx.filter_jit
def key_mass(models, x, first):
    """Attention weight on keys 0 .. first - 1, per model, block, head and query: (seeds, depth, heads, T)."""
    def one(model):
        def seq(t):
            return jnp.sum(model.attention_weights(t)[1][..., :first], axis=-1)  # (depth, heads, T)
        return jnp.mean(jax.lax.map(seq, x), axis=0)
    return eqx.filter_vmap(one)(models)


def long_data(seed: int, steps: int, length: int, seed_base: int) -> tuple[np.ndarray, np.ndarray]:
    """Seed ``seed``'s ``steps`` minibatches of ``SETTINGS.finetune_batch`` chain sequences of ``length`` tokens,
    ``(steps, batch, length)`` inputs and targets, from ``default_rng(seed_base + seed)``."""
    x, y, _ = ex.markov_data(ch08.table(), ch08.SETTINGS.order, steps * SETTINGS.finetune_batch, length,
                             rng=np.random.default_rng(seed_base + seed))
    return x.reshape(steps, -1, length), y.reshape(steps, -1, length)


def stacked_data(steps: int, length: int, seed_base: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`long_data` of every seed, stacked: ``(seeds, steps, batch, length)``."""
    batches = [long_data(seed, steps, length, seed_base) for seed in SETTINGS.seeds]
    return np.stack([b[0] for b in batches]), np.stack([b[1] for b in batches])


def pretrain(encodings) -> dict:
    """Chapter 8's models (seeds ``SETTINGS.seeds``) for each of ``encodings`` ("rope", "alibi", "rope_bos": RoPE
    with a BOS token, :func:`attnbook.experiments.ch08.train_with_bos`), stacked."""
    seeds = list(SETTINGS.seeds)
    trained = {e: ch08.train(e, seeds)[0] for e in encodings if e != "rope_bos"}
    if "rope_bos" in encodings:
        trained["rope_bos"] = ch08.train_with_bos("rope", seeds)[0]
    return trained


def fine_tune_rows(trained, x4, y4, learning_rate, excess) -> list[dict]:
    """Part 1's fine-tuning of the four methods at ``learning_rate``: one row per method, seed and checkpoint."""
    s = SETTINGS
    L = ch08.SETTINGS.train_length
    T4 = s.multiple * L
    steps = list(s.finetune_steps)
    rows = []
    ft_x, ft_y = stacked_data(max(steps), T4, s.finetune_data_seed)
    for method, scaling in methods().items():
        for step, models in zip(steps, ex.fine_tune(trained, ft_x, ft_y, checkpoints=steps,
                                                    scaling=scaling, learning_rate=learning_rate)):
            curves = np.asarray(evaluate(models, x4, y4, None, scaling))
            rows += [dict(method=method, seed=seed, steps_at_4L=step,
                          tokens_seen=(ch08.SETTINGS.steps + step) * s.finetune_batch * T4,
                          excess_first_L=excess(c, 0, L), excess_beyond_L=excess(c, L, T4),
                          loss_beyond_L=round(float(c[L:].mean()), 5)) for seed, c in zip(s.seeds, curves)]
        print(method, learning_rate, [r["excess_beyond_L"] for r in rows[-5 * len(s.seeds)::len(s.seeds)]],
              flush=True)
    return rows


def long_context_settings() -> dict:
    """The settings ``long_context.json`` records (parts 1-3)."""
    s = SETTINGS
    return dict(ch08.SETTINGS.to_dict(), seeds=list(s.seeds), multiple=s.multiple,
                finetune_steps=list(s.finetune_steps), finetune_batch=s.finetune_batch,
                finetune_learning_rate=s.finetune_learning_rate, finetune_data_seed=f"{s.finetune_data_seed} + seed",
                scratch_steps=list(s.scratch_steps), scratch_learning_rate=ch08.SETTINGS.learning_rate,
                scratch_data_seed=f"{s.scratch_data_seed} + seed", windows=list(s.windows),
                cache_windows=list(s.cache_windows), cache_sinks=list(s.cache_sinks), bos_token=s.bos_token)


def followup_settings() -> dict:
    """The settings the follow-up parts' JSON files record (``long_context_renumbered.json``,
    ``long_context_finetune_lr.json``)."""
    s = SETTINGS
    return dict(ch08.SETTINGS.to_dict(), seeds=list(s.seeds), multiple=s.multiple,
                cache_windows=list(s.cache_windows), cache_sinks=list(s.cache_sinks), bos_token=s.bos_token,
                finetune_steps=list(s.finetune_steps), finetune_batch=s.finetune_batch,
                finetune_learning_rate=s.finetune_second_learning_rate,
                finetune_data_seed=f"{s.finetune_data_seed} + seed")


def _excess(floor):
    """``excess(curve, lo, hi)``: the mean of ``curve[lo:hi]`` minus that of the optimum ``floor``, 5 decimals."""
    return lambda curve, lo, hi: round(float(np.mean(curve[lo:hi]) - np.mean(floor[lo:hi])), 5)


def run_followup(parts, out: pathlib.Path | None = None, command: str | None = None) -> None:
    """Parts 4 (``"renumbered"``) and 5 (``"finetune_lr"``), on their own: they pretrain the same models again, seed
    for seed. Writes long_context_rolling_cache_renumbered.csv, long_context_finetune_lr.csv and
    long_context_followup.json (one part alone: long_context_<part>.json)."""
    out = source_folder() if out is None else pathlib.Path(out)
    s, seeds = SETTINGS, list(SETTINGS.seeds)
    info = RunInfo(command or "python bench/long_context.py --parts " + " ".join(parts))
    L = ch08.SETTINGS.train_length
    T4, T8 = s.multiple * L, 8 * L
    x8, y8, floor8 = ch08.eval_data(8)
    excess = _excess(floor8.mean(axis=0))
    timings, checks = {}, {}

    began = time.time()
    trained = pretrain(("rope", "alibi", "rope_bos") if "renumbered" in parts else ("rope",))
    timings["pretrain"] = round(time.time() - began, 1)
    info.sample()
    print("pretrained", timings, flush=True)

    if "renumbered" in parts:
        began = time.time()
        stored = {(r["encoding"], r["seed"], r["window"], r["sinks"]): float(r["excess_beyond_L"])
                  for r in read_csv("long_context_rolling_cache.csv", out)}
        xb, yb = ch08.with_bos(x8, y8)
        rows, differences = [], []
        for encoding in ("rope", "alibi", "rope_bos"):
            x, y = (xb, yb) if encoding == "rope_bos" else (x8, y8)
            shift = 1 if encoding == "rope_bos" else 0
            for w in list(s.cache_windows) + ["full"]:
                for k in (s.cache_sinks if w != "full" else [0]):
                    renumber = k > 0
                    curves = np.asarray(evaluate(trained[encoding], x, y, None if w == "full" else w, None,
                                                 k + shift if k else 0, renumber))[:, shift:]
                    new = [dict(encoding=encoding, seed=seed, window=w, sinks=k, renumbered=renumber,
                                excess_first_L=excess(c, 0, L), excess_beyond_L=excess(c, L, T8))
                           for seed, c in zip(seeds, curves)]
                    if renumber:
                        rows += new
                    else:  # the models are the stored ones: part 3's rows again
                        differences += [abs(r["excess_beyond_L"] - stored[(encoding, str(r["seed"]), str(w), "0")])
                                        for r in new]
            print(encoding, "renumbered", [r["excess_beyond_L"] for r in rows[-len(seeds)::]], flush=True)
            info.sample()
        write_csv(out / "long_context_rolling_cache_renumbered.csv", rows)
        checks["rolling_cache_k0_and_full_max_abs_diff_from_stored"] = round(max(differences), 5)
        timings["renumbered"] = round(time.time() - began, 1)

    if "finetune_lr" in parts:
        began = time.time()
        rate = s.finetune_second_learning_rate
        rows = fine_tune_rows(trained["rope"], x8[:, :T4], y8[:, :T4], rate, excess)
        write_csv(out / "long_context_finetune_lr.csv", [dict(r, learning_rate=rate) for r in rows])
        timings["finetune_lr"] = round(time.time() - began, 1)
        info.sample()

    meta = info.metadata(
        parts=list(parts),
        settings=followup_settings(),
        renumbered="positions numbered inside the cache (Xiao et al. 2023, Section 3.2): query i reads the first "
                   "k tokens and the last w; the kept tokens get positions 0, 1, ..., so the offset to key j is "
                   "i - j in the window and min(i, k + w - 1) - j for the first k (rope_bos: the BOS token and "
                   "the first k - 1 chain tokens)",
        checks=checks,
        seconds=timings,
    )
    name = "followup" if set(parts) == {"renumbered", "finetune_lr"} else parts[0]
    (out / f"long_context_{name}.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print("done", meta["total_seconds"], "s", flush=True)


def run_long_context(out: pathlib.Path | None = None, command: str = "python bench/long_context.py") -> None:
    """Parts 1-3: fine-tuning at 4L (and training at 4L from scratch), sliding windows at 8L, attention sinks
    (the weight on the first keys, and a rolling cache with and without them). Writes long_context_finetune.csv,
    _window.csv, _sink_mass.csv, _sink_heads.csv, _rolling_cache.csv and long_context.json into ``out``."""
    out = source_folder() if out is None else pathlib.Path(out)
    info = RunInfo(command)
    s8, s, seeds = ch08.SETTINGS, SETTINGS, list(SETTINGS.seeds)
    L = s8.train_length
    T4 = s.multiple * L
    x8, y8, floor8 = ch08.eval_data(8)
    floor = floor8.mean(axis=0)
    current = ex.current_token_loss(ch08.table(), s8.order, x8).mean(axis=0)
    excess = _excess(floor)
    timings = {}

    began = time.time()
    trained = pretrain(("rope", "alibi", "rope_bos"))
    timings["pretrain"] = round(time.time() - began, 1)
    info.sample()
    print("pretrained", timings, flush=True)

    # 1. fine-tuning at 4L, and training at 4L from scratch
    began = time.time()
    x4, y4 = x8[:, :T4], y8[:, :T4]
    ft_rows = fine_tune_rows(trained["rope"], x4, y4, s.finetune_learning_rate, excess)
    info.sample()
    scratch_steps = list(s.scratch_steps)
    sc_x, sc_y = stacked_data(max(scratch_steps), T4, s.scratch_data_seed)
    fresh = [ex.PositionModel("rope", vocab_size=s8.vocab_size, train_length=T4, d_model=s8.d_model,
                              depth=s8.depth, heads=s8.heads, key=jax.random.key(seed)) for seed in seeds]
    fresh = jax.tree.map(lambda *a: jnp.stack(a) if eqx.is_array(a[0]) else a[0], *fresh)
    for step, models in zip(scratch_steps, ex.fine_tune(fresh, sc_x, sc_y, checkpoints=scratch_steps,
                                                        learning_rate=s8.learning_rate)):
        curves = np.asarray(evaluate(models, x4, y4))
        ft_rows += [dict(method="scratch", seed=seed, steps_at_4L=step, tokens_seen=step * s.finetune_batch * T4,
                         excess_first_L=excess(c, 0, L), excess_beyond_L=excess(c, L, T4),
                         loss_beyond_L=round(float(c[L:].mean()), 5)) for seed, c in zip(seeds, curves)]
    print("scratch", [r["excess_beyond_L"] for r in ft_rows[-len(scratch_steps) * len(seeds)::len(seeds)]],
          flush=True)
    ft_rows += [dict(method=name, seed="", steps_at_4L="", tokens_seen="", excess_first_L=excess(c, 0, L),
                     excess_beyond_L=excess(c, L, T4), loss_beyond_L=round(float(c[L:T4].mean()), 5))
                for name, c in (("optimum", floor), ("current_token", current))]
    write_csv(out / "long_context_finetune.csv", ft_rows)
    timings["finetune"] = round(time.time() - began, 1)
    info.sample()

    # 2. sliding windows at 8L
    began = time.time()
    T8 = 8 * L
    window_rows = [dict(encoding=name, seed="", window="", keys_per_query="", excess_first_L=excess(c, 0, L),
                        excess_beyond_L=excess(c, L, T8)) for name, c in (("optimum", floor), ("current_token", current))]
    for encoding in ("rope", "alibi"):
        for w in s.windows:
            curves = np.asarray(evaluate(trained[encoding], x8, y8, w))
            keys = float(np.mean(np.minimum(np.arange(T8) + 1, w)))
            window_rows += [dict(encoding=encoding, seed=seed, window=w, keys_per_query=round(keys, 3),
                                 excess_first_L=excess(c, 0, L), excess_beyond_L=excess(c, L, T8))
                            for seed, c in zip(seeds, curves)]
        print(encoding, "windows",
              [r["excess_beyond_L"] for r in window_rows[-len(s.windows) * len(seeds)::len(seeds)]], flush=True)
    write_csv(out / "long_context_window.csv", window_rows)
    timings["window"] = round(time.time() - began, 1)
    info.sample()

    # 3. attention sinks: mass on the first keys, and a rolling cache with and without them
    began = time.time()
    xb, yb = ch08.with_bos(x8, y8)
    mass_rows, head_rows, cache_rows = [], [], []
    for encoding in ("rope", "alibi", "rope_bos"):
        x, y = (xb, yb) if encoding == "rope_bos" else (x8, y8)
        shift = 1 if encoding == "rope_bos" else 0  # rope_bos: sequence position 0 holds the BOS token
        for first in (1, 4):
            mass = np.asarray(key_mass(trained[encoding], x, first))  # (seeds, depth, heads, T)
            for si, seed in enumerate(seeds):
                for block in range(mass.shape[1]):
                    if first == 1:
                        mass_rows += [dict(encoding=encoding, seed=seed, block=block, position=i,
                                           mass_on_key_0=round(float(v), 5))
                                      for i, v in enumerate(mass[si, block].mean(axis=0))]
                    head_rows += [dict(encoding=encoding, seed=seed, block=block, head=h, first_keys=first,
                                       mean_mass_queries_from_L=round(float(mass[si, block, h, L:].mean()), 5),
                                       uniform_mass_queries_from_L=round(float(np.mean(
                                           np.minimum(first, np.arange(L, x.shape[1]) + 1)
                                           / (np.arange(L, x.shape[1]) + 1))), 5))
                                  for h in range(mass.shape[2])]
        for w in s.cache_windows:
            for k in s.cache_sinks:
                curves = np.asarray(evaluate(trained[encoding], x, y, w, None, k + shift if k else 0))[:, shift:]
                cache_rows += [dict(encoding=encoding, seed=seed, window=w, sinks=k, excess_first_L=excess(c, 0, L),
                                    excess_beyond_L=excess(c, L, T8)) for seed, c in zip(seeds, curves)]
        curves = np.asarray(evaluate(trained[encoding], x, y))[:, shift:]
        cache_rows += [dict(encoding=encoding, seed=seed, window="full", sinks=0, excess_first_L=excess(c, 0, L),
                            excess_beyond_L=excess(c, L, T8)) for seed, c in zip(seeds, curves)]
        print(encoding, "sinks", [r["mean_mass_queries_from_L"] for r in head_rows[-8:]], flush=True)
        info.sample()
    write_csv(out / "long_context_sink_mass.csv", mass_rows)
    write_csv(out / "long_context_sink_heads.csv", head_rows)
    write_csv(out / "long_context_rolling_cache.csv", cache_rows)
    timings["sinks"] = round(time.time() - began, 1)

    meta = info.metadata(
        settings=long_context_settings(),
        methods={k: repr(v) for k, v in methods().items()},
        equal_compute="scratch after 300 + n steps of 8 x 128 tokens has read as many tokens as pretraining "
                      "(300 steps of 32 x 32) plus n fine-tuning steps",
        excess="loss minus the optimum (mean entropy of the true next-token distribution) of the same targets; "
               "first_L: positions 0 .. L-1, beyond_L: positions L .. T-1",
        rolling_cache="a query at i sees keys j with i - j < window, and the first `sinks` tokens of the chain "
                      "(rope_bos: the BOS token and the first sinks - 1 chain tokens); positions stay those of "
                      "the whole sequence (Xiao et al. re-number positions inside the cache)",
        seconds=timings,
    )
    (out / "long_context.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print("done", meta["total_seconds"], "s", flush=True)


RUNS = ("rope_scaling", "long_context")


def main(argv=None, command: str | None = None) -> None:
    """``python -m attnbook.experiments.ch09 --write rope_scaling|long_context [--parts ...] [--out DIR]``."""
    parser = argparse.ArgumentParser(description="Chapter 9's runs: RoPE scaling without fine-tuning "
                                                 "(rope_scaling), fine-tuning, windows and sinks (long_context)")
    parser.add_argument("--write", choices=RUNS, required=True, help="the run to make and store")
    parser.add_argument("--parts", nargs="+", choices=["renumbered", "finetune_lr"],
                        help="long_context: run only these follow-up parts (default: parts 1 to 3)")
    parser.add_argument("--out", type=pathlib.Path, default=None,
                        help="the folder to write (default: this source tree's results folder)")
    args = parser.parse_args(argv)
    if args.parts and args.write != "long_context":
        parser.error("--parts is for --write long_context")
    if args.write == "rope_scaling":
        return run_rope_scaling(args.out, command or "python bench/rope_scaling.py")
    if args.parts:
        return run_followup(args.parts, args.out, command)
    return run_long_context(args.out, command or "python bench/long_context.py")


# ---------------------------------------------------------------------------------------------
# Reading the stored results (attnbook/experiments/results/, written by bench/rope_scaling.py and bench/long_context.py)

@functools.cache
def _rows(name: str) -> tuple[dict, ...]:
    return tuple(read_csv(name))


def _column(name: str, column: str, **where) -> np.ndarray:
    chosen = [float(r[column]) for r in _rows(name) if all(r[k] == str(v) for k, v in where.items())]
    if not chosen:
        raise KeyError(f"no row of {name} has {where}")
    return np.array(chosen)


def no_finetune(method: str, length: int) -> np.ndarray:
    """Excess over the optimum beyond L at ``length`` of a method read without fine-tuning (bench/rope_scaling.py),
    one value per seed, seed 0 first."""
    return _column("rope_scaling.csv", "excess_beyond_L", method=method, eval_length=length)


def optimum_beyond_L(length: int) -> float:
    """The optimum's loss beyond L at ``length`` (nats per token), from rope_scaling.csv."""
    return float(_column("rope_scaling.csv", "loss_beyond_L", method="optimum", eval_length=length)[0])


def seeds_below(a: str, b: str, length: int) -> int:
    """On how many seeds (of 5, paired by seed) ``a``'s excess beyond L at ``length`` is below ``b``'s
    (rope_scaling_comparisons.csv)."""
    return int(_column("rope_scaling_comparisons.csv", "seeds_below", method=a, below=b, eval_length=length)[0])


def finetune(method: str, steps: int, column: str = "excess_beyond_L", *, learning_rate: float | None = None
             ) -> np.ndarray:
    """Fine-tuning at 4L (bench/long_context.py): ``column`` after ``steps`` steps, one value per seed, by default the
    excess over the optimum beyond L. ``learning_rate``: None or ``SETTINGS.finetune_learning_rate`` for the first
    run, ``SETTINGS.finetune_second_learning_rate`` for the second (long_context_finetune_lr.csv)."""
    if learning_rate in (None, SETTINGS.finetune_learning_rate):
        name = "long_context_finetune.csv"
    elif learning_rate == SETTINGS.finetune_second_learning_rate:
        name = "long_context_finetune_lr.csv"
    else:
        raise ValueError(f"the stored runs used learning rates {SETTINGS.finetune_learning_rate} and "
                         f"{SETTINGS.finetune_second_learning_rate}, got {learning_rate}")
    return _column(name, column, method=method, steps_at_4L=steps)


def scratch(steps: int) -> np.ndarray:
    """RoPE trained at 4L from scratch, after as many tokens as pretraining plus ``steps`` fine-tuning steps: its
    excess beyond L at 4L, one value per seed."""
    return finetune("scratch", ch08.SETTINGS.steps + steps)


def finetune_baseline(method: str = "current_token") -> float:
    """A baseline's excess beyond L at 4L in long_context_finetune.csv (``"current_token"``)."""
    return float(_column("long_context_finetune.csv", "excess_beyond_L", method=method)[0])


def first_below(method: str, level: float, *, learning_rate: float | None = None) -> int | None:
    """The first fine-tuning checkpoint at which every seed's excess beyond L at 4L is below ``level``, or None."""
    return next((n for n in SETTINGS.finetune_steps
                 if finetune(method, n, learning_rate=learning_rate).max() < level), None)


def ranking(steps: int, seed: int, *, learning_rate: float | None = None) -> list[str]:
    """The four fine-tuned methods (:func:`methods`) from the lowest to the highest excess beyond L at 4L after
    ``steps`` fine-tuning steps, for one seed (index into ``SETTINGS.seeds``)."""
    return sorted(methods(), key=lambda m: finetune(m, steps, learning_rate=learning_rate)[seed])


def seeds_in_order(order, steps: int, *, learning_rate: float | None = None) -> int:
    """On how many seeds (of 5) the four methods rank exactly as ``order`` (lowest excess first) after ``steps``
    fine-tuning steps."""
    return sum(ranking(steps, i, learning_rate=learning_rate) == list(order) for i in range(len(SETTINGS.seeds)))


def load_range(meta: dict) -> tuple[float, float]:
    """The lowest and the highest 1-minute load average a stored run's metadata records (before, after, and the
    minimum and maximum of its parts)."""
    load = meta["load_average_1min"]
    parts = load["after_each_part"]
    return min(load["before"], load["after"], parts["min"]), max(load["before"], load["after"], parts["max"])


def window(encoding: str, w: int, column: str = "excess_beyond_L") -> np.ndarray:
    """A model read at 8L with a sliding window of ``w`` keys (``w = 8L``: full attention), long_context_window.csv:
    ``column`` of each seed, by default the excess over the optimum beyond L."""
    return _column("long_context_window.csv", column, encoding=encoding, window=w)


def window_baseline(encoding: str = "current_token") -> float:
    """A baseline's excess beyond L at 8L in long_context_window.csv (``"current_token"``)."""
    return float(_column("long_context_window.csv", "excess_beyond_L", encoding=encoding)[0])


def keys_per_query(w: int) -> float:
    """The keys each query reads at 8L with a window of ``w`` keys, mean over the queries."""
    return float(_column("long_context_window.csv", "keys_per_query", window=w)[0])


def rolling_cache(encoding: str, w, k: int, renumbered: bool = False) -> np.ndarray:
    """A model read at 8L with a rolling cache of the last ``w`` keys plus the first ``k`` tokens: its excess over
    the optimum beyond L, one value per seed (``w = "full"``, ``k = 0``: the whole sequence).

    Positions are those of the whole sequence (long_context_rolling_cache.csv), or with ``renumbered`` numbered
    inside the cache, as StreamingLLM does (long_context_rolling_cache_renumbered.csv); for ``k = 0`` the two are
    the same, since only offsets enter a score, and the first table is read."""
    if renumbered and k:
        return _column("long_context_rolling_cache_renumbered.csv", "excess_beyond_L", encoding=encoding, window=w,
                       sinks=k)
    return _column("long_context_rolling_cache.csv", "excess_beyond_L", encoding=encoding, window=w, sinks=k)


def cache_change(encoding: str, w, k: int, renumbered: bool = False) -> float:
    """What keeping the first ``k`` tokens changes in a rolling cache of the last ``w`` keys: the mean over seeds
    (paired by seed) of :func:`rolling_cache` with them minus without them (``k = 0``)."""
    return float(np.mean(rolling_cache(encoding, w, k, renumbered) - rolling_cache(encoding, w, 0)))


def sink_curve(encoding: str, block: int) -> np.ndarray:
    """Attention weight on key 0 per query position at 8L, mean over heads and seeds (long_context_sink_mass.csv)."""
    rows = [r for r in _rows("long_context_sink_mass.csv") if r["encoding"] == encoding and r["block"] == str(block)]
    if not rows:
        raise KeyError(f"long_context_sink_mass.csv has no rows for {encoding!r}, block {block}")
    out = np.zeros(1 + max(int(r["position"]) for r in rows))
    for r in rows:
        out[int(r["position"])] += float(r["mass_on_key_0"])
    return out / len({r["seed"] for r in rows})


def head_mass(encoding: str, first: int = 1) -> np.ndarray:
    """Mean weight of the queries i >= L on the first ``first`` keys at 8L, per seed, block and head:
    ``(seeds, blocks, heads)`` (long_context_sink_heads.csv)."""
    rows = [r for r in _rows("long_context_sink_heads.csv")
            if r["encoding"] == encoding and r["first_keys"] == str(first)]
    if not rows:
        raise KeyError(f"long_context_sink_heads.csv has no rows for {encoding!r}, first_keys {first}")
    v = np.array([float(r["mean_mass_queries_from_L"]) for r in rows])
    return v.reshape(len({r["seed"] for r in rows}), -1, len({r["head"] for r in rows}))


def uniform_mass(encoding: str, first: int = 1) -> float:
    """The same weight under uniform attention over the visible keys (long_context_sink_heads.csv)."""
    return float(_column("long_context_sink_heads.csv", "uniform_mass_queries_from_L", encoding=encoding,
                         first_keys=first)[0])


def inside_ratio(encoding: str, first: int = 8) -> float:
    """Inside L: the largest, over seeds and blocks, of the mean over queries ``first <= i < L`` of the weight on key
    0 over uniform attention's 1/(i + 1) (long_context_sink_mass.csv)."""
    per: dict = {}
    for r in _rows("long_context_sink_mass.csv"):
        i = int(r["position"])
        if r["encoding"] == encoding and first <= i < ch08.SETTINGS.train_length:
            per.setdefault((r["seed"], r["block"]), []).append(float(r["mass_on_key_0"]) * (i + 1))
    if not per:
        raise KeyError(f"long_context_sink_mass.csv has no rows for {encoding!r}")
    return max(float(np.mean(v)) for v in per.values())


__all__ = ["Settings", "SETTINGS", "YaRNWithoutTemperature", "scalings", "angle_ranges", "chapter8_stored",
           "rope_scaling_settings", "run_rope_scaling", "methods", "evaluate", "key_mass", "long_data",
           "stacked_data", "pretrain", "fine_tune_rows", "long_context_settings", "followup_settings", "run_followup",
           "run_long_context", "main", "sink_curve", "head_mass", "uniform_mass", "inside_ratio", "window", "window_baseline", "keys_per_query", "no_finetune", "finetune", "scratch", "finetune_baseline", "first_below", "ranking", "seeds_in_order",
           "rolling_cache", "cache_change", "load_range", "optimum_beyond_L", "seeds_below"]


if __name__ == "__main__":
    main()
