"""Chapter 6's experiment: what attention costs on this machine, wall time and temporary memory against length.

For T = 128, 256, ... (powers of two up to ``SETTINGS.max_length``) and for seven token-mixing functions of one
sequence (``SETTINGS.d`` = 64 features, float32, no mask):

    attention    attnbook.attention.scaled_dot_product_attention (the output; weights unused)
    jax.nn       jax.nn.dot_product_attention, one batch and one head: (1, T, 1, d)
    chunked      attnbook.attention.chunked_attention, query and key chunks of 1024
    aft-full     attnbook.aft.aft_full with a (T, T) position bias
    aft-local    attnbook.aft.aft_local, window 32 (|t - t'| < 32), same (T, T) bias
    aft-simple   attnbook.aft.aft_simple
    aft-conv     attnbook.aft.aft_conv, 8 heads of 8 channels, kernel of 63 offsets

each in two modes: the forward pass, and forward + backward (the gradient of sum(out**2) with respect to q, k and
v; biases and kernels are held fixed). Measured:

* time: compiled, one warm-up run, then the median of 7 runs (5 when a run takes over 0.2 s, 3 over a second),
  each ended by jax.block_until_ready;
* temporary memory: XLA's compiled memory analysis (temp_size_in_bytes), compiled with every buffer visible to the
  analysis (attnbook.cost.ALL_BUFFERS) and, for the timed programs, also as compiled by default (on the CPU, XLA
  hands large fused computations to YNNPACK, whose scratch memory the analysis does not see);
* a cross-check of the analysis against the operating system: the growth of the peak resident memory of a fresh
  process during one forward call at T = 16384;
* the library's attention against jax.nn.dot_product_attention at T = 1024 and 4096 with the runs of the two
  interleaved, so that both see the same load on a shared machine;
* chunked attention at T = 8192 with several chunk sizes: what memory buys in time.

The memory analysis needs no run, so it is recorded for every T up to the largest. A run is skipped, and recorded
as skipped, when its predicted time exceeds ``max_run_seconds`` (from the previous length and the method's growth)
or its memory (temporary + inputs + outputs) exceeds ``max_memory_gib``, or when the whole benchmark has used up
``budget_minutes``.

    python -m attnbook.experiments.ch06 --write          # about 10 minutes; writes the stored results
    python -m attnbook.experiments.ch06 --quick          # T up to 2048, written to a temporary folder
    python -m attnbook.experiments.ch06 --memory-only REASON   # memory analysed again, stored times kept

Writes ``attention_cost.csv`` (one row per method, mode and T), ``attention_cost_chunks.csv`` (chunk sizes of
chunked attention at one T) and ``attention_cost.json`` (the machine, :data:`SETTINGS`, the cross-checks) into
:func:`attnbook.experiments.source_folder`, then prints tables. Chapter 6 reads them with :func:`read_rows` and
:func:`attnbook.experiments.read_json`.

A second, smaller benchmark compares FlashAttention (:func:`attnbook.attention.flash_attention`) with chunked, full and
jax.nn attention, forward and forward+backward, causal and not, at T = 1024, 2048 and 4096 (:data:`FLASH`). It runs in
a fresh process pinned to one core (``taskset -c 1``) with XLA single-threaded, interleaves the four methods in every
round and keeps the best CPU time of the rounds, so that on a shared machine the load affects them alike:

    python -m attnbook.experiments.ch06 --flash --write   # about 8 minutes under load; attention_cost_flash.csv/.json
    python -m attnbook.experiments.ch06 --flash           # the same, written to a temporary folder

Chapter 6 reads it with :func:`read_flash` and :func:`flash_table`; :func:`tile_flops` counts its FLOPs over the tiles
FlashAttention computes.

A third, a few seconds long, counts the minor page faults per call of full attention's forward pass at T = 4096 and
8192 (:func:`page_faults`): how much of its memory each call takes fresh from the operating system.

    python -m attnbook.experiments.ch06 --faults --write  # attention_cost_faults.json; read with read_page_faults

``--memory-only`` re-analyses the memory of every stored row (both programs) and re-runs the cross-check with the
current library, keeping the stored times, and records when and why in the JSON (``memory_reanalysed``): the
analysis is exact and needs no quiet machine, the times do. Use it when a library change moves memory and not time
(see the JSON's note for the one such change).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

from .. import aft, cost
from ..attention import chunked_attention, flash_attention, flash_tiles, scaled_dot_product_attention
from .store import RESULTS, RunInfo, machine, source_folder, write_csv

MODES = ("forward", "forward+backward")


@dataclasses.dataclass(frozen=True)
class Settings:
    """The sizes and limits of chapter 6's benchmark (:meth:`to_dict`: what its JSON file records as settings)."""

    d: int = 64  # features per token (one head)
    chunk: int = 1024  # query and key chunk of chunked attention
    aft_local_window: int = 32  # AFT-local: |t - t'| < 32, a band of 63 offsets
    aft_conv_heads: int = 8  # AFT-conv: 8 heads of 8 channels ...
    aft_conv_kernel: int = 63  # ... and a centred kernel of 63 offsets
    max_length: int = 131072  # T = 128, 256, ..., max_length
    max_run_seconds: float = 4.0  # skip runs predicted to take longer
    max_memory_gib: float = 4.0  # skip runs that need more memory (temporary + inputs + outputs)
    budget_minutes: float = 8.0  # stop timing after this long
    chunk_sweep_length: int = 8192  # the T of the chunk-size sweep ...
    chunk_sweep: tuple[tuple[int, int], ...] = ((256, 256), (512, 512), (1024, 1024), (1024, 4096))  # ... its sizes
    paired_lengths: tuple[int, ...] = (1024, 4096)  # attnbook against jax.nn, interleaved
    paired_rounds: int = 15
    rss_length: int | None = 16384  # the operating system's cross-check (None: not run)

    @property
    def lengths(self) -> list[int]:
        """The sequence lengths of the series: powers of two from 128 to ``max_length``."""
        return [2**i for i in range(7, int(math.log2(self.max_length)) + 1)]

    def quick(self) -> Settings:
        """A trial run: T up to 2048, the sweep at 1024, one paired length, no cross-check."""
        return dataclasses.replace(self, max_length=2048, chunk_sweep_length=1024, paired_lengths=(1024,),
                                   rss_length=None)

    def to_dict(self) -> dict:
        """The settings as ``attention_cost.json`` records them (the sweep, the paired lengths and the cross-check's
        length are recorded by their own rows: ``attention_cost_chunks.csv``, ``paired_attention_vs_jax_nn`` and
        ``rss_check``)."""
        return {"d": self.d, "dtype": "float32", "chunk": self.chunk, "aft_local_window": self.aft_local_window,
                "aft_conv_heads": self.aft_conv_heads, "aft_conv_kernel": self.aft_conv_kernel,
                "lengths": self.lengths, "max_run_seconds": self.max_run_seconds,
                "max_memory_gib": self.max_memory_gib, "budget_minutes": self.budget_minutes,
                "all_buffers_options": cost.ALL_BUFFERS, "gradient": "of sum(out**2) with respect to q, k and v",
                "timing": "compiled, one warm-up run, median of 7 runs (5 if a run takes over 0.2 s, 3 over 1 s)"}


SETTINGS = Settings()


# ---------------------------------------------------------------------------------------------
# Reading the stored results


def read_rows(path) -> list[dict]:
    """The rows of a CSV file the benchmark wrote (``RESULTS / "attention_cost.csv"``, ``..._chunks.csv``): numbers
    as floats, empty fields (a length not run) as None; ``method``, ``mode`` and ``status`` stay strings."""
    with path.open("r", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        for key, value in row.items():
            if key not in ("method", "mode", "status"):
                row[key] = None if value == "" else float(value)
    return rows


FIT_FROM = 2048  # power laws are fitted from T = 2048 on (on the 3 largest lengths where fewer reach it)


def series(rows, method: str, mode: str, field: str):
    """Lengths and values of one method and mode (rows of :func:`read_rows`), at the lengths that have a value: two
    NumPy arrays, in the order of the rows."""
    chosen = [r for r in rows if r["method"] == method and r["mode"] == mode and r[field] is not None]
    return np.array([r["T"] for r in chosen]), np.array([r[field] for r in chosen])


def value_at(rows, method: str, mode: str, t: int, field: str = "temp_bytes"):
    """One stored value (``field`` of ``method`` and ``mode`` at length ``t``), or None where it has none."""
    return dict(zip(*series(rows, method, mode, field))).get(t)


def power_fit(ts, values, fit_from: int = FIT_FROM):
    """The straight line through log2(value) against log2(T) on the large-T part: (slope, intercept, the lengths
    used). The part is T >= ``fit_from``, or the three largest lengths where fewer than three reach it."""
    ts, values = np.asarray(ts, dtype=float), np.asarray(values, dtype=float)
    keep = ts >= fit_from
    if keep.sum() < 3:
        keep = np.arange(len(ts)) >= len(ts) - 3
    slope, intercept = np.polyfit(np.log2(ts[keep]), np.log2(values[keep]), 1)
    return float(slope), float(intercept), ts[keep]


def time_at(rows, method: str, mode: str, t: int, exponent: float | None = None):
    """(seconds, measured?) at length ``t``: the stored time, or else the value of the fitted power law there; with
    ``exponent``, the time at the longest measured length scaled by ``(t / that length) ** exponent`` instead (2 for
    attention, whose FLOPs grow as T²: the time at the FLOP rate reached at the longest measured length)."""
    ts, seconds = series(rows, method, mode, "seconds")
    if t in ts:
        return float(seconds[list(ts).index(t)]), True
    if exponent is not None:
        last = int(np.argmax(ts))
        return float(seconds[last] * (t / ts[last]) ** exponent), False
    slope, intercept, _ = power_fit(ts, seconds)
    return float(2 ** (intercept + slope * np.log2(t))), False


def better_from(rows, method: str, mode: str, field: str, baseline: str = "attention"):
    """(the smallest T from which ``method`` has a smaller ``field`` than ``baseline`` at every longer length where
    both have a value, or None; the longest length compared)."""
    mine, theirs = (dict(zip(*series(rows, m, mode, field))) for m in (method, baseline))
    common = sorted(set(mine) & set(theirs))
    start = None
    for t in reversed(common):
        if mine[t] >= theirs[t]:
            break
        start = t
    return start, common[-1]


def same_function(f, g, q, k, v, atol: float = 1e-5) -> tuple[bool, bool]:
    """Do ``f`` and ``g`` compute the same attention of ``q``, ``k``, ``v``: (outputs equal to ``atol``, gradients of
    sum(tanh(out)) with respect to q, k and v equal to ``atol``)?"""
    loss = lambda h: (lambda q, k, v: jnp.sum(jnp.tanh(h(q, k, v))))  # noqa: E731
    same_out = bool(jnp.allclose(f(q, k, v), g(q, k, v), atol=atol))
    grads = jax.grad(loss(f), argnums=(0, 1, 2))(q, k, v)
    reference = jax.grad(loss(g), argnums=(0, 1, 2))(q, k, v)
    return same_out, all(bool(jnp.allclose(a, b, atol=atol)) for a, b in zip(grads, reference))


def readable_seconds(seconds: float, units=("h", "min", "s")) -> str:
    """A time in hours, minutes or seconds to one decimal, or in whole milliseconds below a second; ``units``: the
    three unit names as the page writes them."""
    for unit, scale in zip(units, (3600, 60, 1)):
        if seconds >= scale:
            return f"{seconds / scale:.1f} {unit}"
    return f"{seconds * 1e3:.0f} ms"


def plot_log_log(rows, field: str, scale: float, ylabel: str, names: dict, mode_names: dict, xlabel: str,
                 measured_only: bool):
    """Chapter 6's log-log figure of ``field`` against T: attention's implementations in the top row, the AFT
    variants (with full attention again, for reference) in the bottom row, one column per mode; filled markers for
    lengths that were run, open ones (unless ``measured_only``) for lengths only planned, and faint fitted lines.
    ``names`` and ``mode_names``: the legend's and the titles' words. Returns (figure, {(method, mode): slope},
    {(method, mode): lengths fitted})."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    methods = list(method_table())
    groups = [["attention", "jax.nn", "chunked"], ["attention", "aft-full", "aft-local", "aft-simple", "aft-conv"]]
    fig, axes = plt.subplots(2, 2, figsize=(5.0, 7.4), sharex=True, sharey=True, layout="constrained")
    slopes, fits = {}, {}
    handles = [Line2D([], [], color=STYLE[m][0], marker=STYLE[m][1], ms=5, lw=1, label=names[m]) for m in methods]
    for row, group in zip(axes, groups):
        for ax, mode in zip(row, MODES):
            for method in group:
                ts, values = series(rows, method, mode, field)
                slope, intercept, fitted = power_fit(ts, values)
                slopes[method, mode], fits[method, mode] = slope, fitted
                colour, marker = STYLE[method]
                ax.loglog(ts, values * scale, color=colour, lw=1)
                run = np.isin(ts, series(rows, method, mode, "seconds")[0])
                ax.loglog(ts[run], values[run] * scale, ls="", marker=marker, color=colour, ms=5)
                if not measured_only:
                    ax.loglog(ts[~run], values[~run] * scale, ls="", marker=marker, mfc="white", color=colour, ms=5)
                ax.loglog(fitted, 2 ** (intercept + slope * np.log2(fitted)) * scale, color=colour, lw=4, alpha=0.25)
            length_axis(ax, sorted({int(r["T"]) for r in rows}), xlabel, every=3)  # 128, 1k, 8k, 64k
        row[0].set_ylabel(ylabel)
    for ax, mode in zip(axes[0], MODES):
        ax.set_title(mode_names[mode])
        ax.set_xlabel("")
    fig.legend(handles=handles, loc="outside lower center", ncol=2)
    return fig, slopes, fits


def length_axis(ax, lengths, xlabel: str, every: int = 2) -> None:
    """Powers of two on a log T axis, written as 128, 512, 2k, ... (every ``every``-th power from 128 on)."""
    ax.set_xscale("log", base=2)
    ticks = [t for t in lengths if (np.log2(t) - 7) % every == 0]
    ax.set_xticks(ticks, [str(t) if t < 1024 else f"{t // 1024}k" for t in ticks])
    ax.set_xlabel(xlabel)
    ax.grid(True, which="major", alpha=0.3)


STYLE = {"attention": ("C0", "o"), "jax.nn": ("C1", "s"), "chunked": ("C2", "D"), "aft-full": ("C3", "^"),
         "aft-local": ("C4", "v"), "aft-simple": ("C5", "<"), "aft-conv": ("C6", ">")}  # colour and marker


# ---------------------------------------------------------------------------------------------
# The functions and their inputs


def method_table(s: Settings = SETTINGS) -> dict:
    """name -> (function, input shapes for length T, nominal growth exponent of the time)."""
    d = s.d
    qkv = lambda t: [(t, d), (t, d), (t, d)]  # noqa: E731
    return {
        "attention": (lambda q, k, v: scaled_dot_product_attention(q, k, v)[0], qkv, 2),
        "jax.nn": (lambda q, k, v: jax.nn.dot_product_attention(q[None, :, None], k[None, :, None],
                                                                v[None, :, None])[0, :, 0], qkv, 2),
        "chunked": (lambda q, k, v: chunked_attention(q, k, v, query_chunk=s.chunk, key_chunk=s.chunk), qkv, 2),
        "aft-full": (lambda q, k, v, w: aft.aft_full(q, k, v, w), lambda t: qkv(t) + [(t, t)], 2),
        "aft-local": (lambda q, k, v, w: aft.aft_local(q, k, v, w, s.aft_local_window), lambda t: qkv(t) + [(t, t)], 1),
        "aft-simple": (lambda q, k, v: aft.aft_simple(q, k, v), qkv, 1),
        "aft-conv": (lambda q, k, v, kernel: aft.aft_conv(q, k, v, kernel),
                     lambda t: [(t, d), (t, s.aft_conv_heads), (t, d), (s.aft_conv_heads, s.aft_conv_kernel)], 1),
    }


def in_mode(f, mode: str):
    """The forward function, or the gradient of sum(out**2) with respect to its first three inputs."""
    if mode == "forward":
        return f
    return jax.grad(lambda *a: jnp.sum(f(*a) ** 2), argnums=(0, 1, 2))


def make_inputs(shapes, seed: int = 0):
    """float32 inputs: N(0, 1) queries, keys and values, N(0, 0.1^2) biases and kernels."""
    rng = np.random.default_rng(seed)
    arrays = []
    for i, shape in enumerate(shapes):
        scale = 1.0 if i < 3 else 0.1
        arrays.append(jnp.asarray(scale * rng.standard_normal(shape, dtype=np.float32)))
    return arrays


# ---------------------------------------------------------------------------------------------
# Measuring one combination


def analyse(f, specs) -> dict:
    """XLA's memory analysis of ``f`` compiled with every buffer visible (nothing is run)."""
    visible = cost.compiled(f, *specs, all_buffers=True).memory_analysis()
    return {"temp_bytes": int(visible.temp_size_in_bytes), "temp_bytes_default": "",
            "argument_bytes": int(visible.argument_size_in_bytes), "output_bytes": int(visible.output_size_in_bytes)}


def time_it(f, arrays) -> dict:
    """Compile ``f`` as JAX does by default, run it, and take the median time; also that program's analysis."""
    start = time.perf_counter()
    program = cost.compiled(f, *arrays)
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    jax.block_until_ready(program(*arrays))  # warm-up
    first = time.perf_counter() - start
    repeats = 7 if first < 0.2 else 5 if first < 1.0 else 3
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(program(*arrays))
        times.append(time.perf_counter() - start)
    return {"seconds": float(np.median(times)), "seconds_min": float(np.min(times)), "runs": repeats,
            "compile_seconds": compile_seconds,
            "temp_bytes_default": int(program.memory_analysis().temp_size_in_bytes)}


def run_series(s: Settings, started: float) -> list[dict]:
    """Every method, mode and length: the memory analysis, and the time where the limits allow a run."""
    rows = []
    previous_slope = {}  # (method, mode) -> growth exponent of the time between the last two lengths
    for name, (f, shapes, exponent) in method_table(s).items():
        for mode in MODES:
            g = in_mode(f, mode)
            previous = None  # (T, seconds) of the last timed length
            stop = None  # once a length is skipped for time or memory, the longer ones are too
            for t in s.lengths:
                specs = [jax.ShapeDtypeStruct(shape, jnp.float32) for shape in shapes(t)]
                row = {"method": name, "mode": mode, "T": t, "d": s.d, **analyse(g, specs)}
                total_gib = (row["temp_bytes"] + row["argument_bytes"] + row["output_bytes"]) / 2**30
                if previous is not None:
                    t0, s0 = previous
                    predicted = s0 * (t / t0) ** max(exponent, previous_slope.get((name, mode), exponent))
                else:
                    predicted = 0.0
                if stop is None and total_gib > s.max_memory_gib:
                    stop = "skipped: memory"
                if stop is None and predicted > s.max_run_seconds:
                    stop = "skipped: time"
                if stop is None and time.perf_counter() - started > 60 * s.budget_minutes:
                    stop = "skipped: budget"
                if stop is not None:
                    row.update(status=stop, seconds="", seconds_min="", runs=0, compile_seconds="", load_average="")
                else:
                    row.update(status="measured", **time_it(g, make_inputs(shapes(t))),
                               load_average=round(os.getloadavg()[0], 2))  # other jobs on the machine
                    if previous is not None:  # the growth seen so far, to predict the next length
                        previous_slope[(name, mode)] = math.log(row["seconds"] / previous[1]) / math.log(t / previous[0])
                    previous = (t, row["seconds"])
                rows.append(row)
                measured = row["status"] == "measured"
                shown = f"{row['seconds'] * 1e3:10.2f} ms" if measured else f"{row['status']:>13}"
                default = f"  (default {row['temp_bytes_default'] / 2**20:8.1f})" if measured else ""
                print(f"{name:>10} {mode:>16} T={t:>6} {shown}  temp {row['temp_bytes'] / 2**20:10.1f} MiB{default}"
                      f"  [{time.perf_counter() - started:5.0f} s]", flush=True)
    return rows


def run_chunk_sweep(s: Settings) -> list[dict]:
    """Chunked attention at one length for several chunk sizes: what memory buys in time."""
    rows, length = [], s.chunk_sweep_length
    for query_chunk, key_chunk in s.chunk_sweep:
        f = lambda q, k, v: chunked_attention(q, k, v, query_chunk=query_chunk, key_chunk=key_chunk)  # noqa: E731
        for mode in MODES:
            g = in_mode(f, mode)
            specs = [jax.ShapeDtypeStruct((length, s.d), jnp.float32)] * 3
            row = {"query_chunk": query_chunk, "key_chunk": key_chunk, "mode": mode, "T": length, "d": s.d,
                   **analyse(g, specs), **time_it(g, make_inputs([(length, s.d)] * 3))}
            rows.append(row)
            print(f"chunks {query_chunk:>5} x {key_chunk:<5} {mode:>16} T={length}: {row['seconds'] * 1e3:9.1f} ms"
                  f"  temp {row['temp_bytes'] / 2**20:8.1f} MiB", flush=True)
    return rows


def paired_comparison(s: Settings) -> list[dict]:
    """attnbook's attention against jax.nn.dot_product_attention, runs interleaved (A B, then B A, ...).

    On a shared machine the load changes from minute to minute; alternating the two functions exposes both to the
    same conditions, so their ratio is steadier than the ratio of two separate series.
    """
    table = method_table(s)
    results = []
    for t in s.paired_lengths:
        for mode in MODES:
            arrays = make_inputs(table["attention"][1](t))
            programs = {name: cost.compiled(in_mode(table[name][0], mode), *arrays) for name in ("attention", "jax.nn")}
            for program in programs.values():
                jax.block_until_ready(program(*arrays))  # warm-up
            times = {name: [] for name in programs}
            for i in range(s.paired_rounds):
                for name in (("attention", "jax.nn") if i % 2 == 0 else ("jax.nn", "attention")):
                    start = time.perf_counter()
                    jax.block_until_ready(programs[name](*arrays))
                    times[name].append(time.perf_counter() - start)
            medians = {name: float(np.median(v)) for name, v in times.items()}
            results.append({"T": t, "mode": mode, "rounds": s.paired_rounds, "attention_seconds": medians["attention"],
                            "jax_nn_seconds": medians["jax.nn"], "ratio": medians["attention"] / medians["jax.nn"],
                            "load_average": round(os.getloadavg()[0], 2)})
            print(f"paired, T={t:>5} {mode:>16}: attnbook {medians['attention'] * 1e3:8.2f} ms, jax.nn "
                  f"{medians['jax.nn'] * 1e3:8.2f} ms, ratio {results[-1]['ratio']:.2f}", flush=True)
    return results


# ---------------------------------------------------------------------------------------------
# FlashAttention against chunked and full attention, on one core


@dataclasses.dataclass(frozen=True)
class FlashSettings:
    """The sizes of chapter 6's FlashAttention benchmark (``attention_cost_flash.csv`` and ``.json``).

    Four implementations of one head (``d`` features, float32): the library's full attention, jax.nn's, chunked
    attention and FlashAttention (blocks of ``block`` queries and keys for both), forward and forward+backward,
    causal and not, at each of ``lengths``. The run is pinned to one core (``taskset -c core``) with XLA
    single-threaded (``xla_flags``), so that another job on a shared machine takes turns with it rather than
    splitting its work; each program is run ``rounds`` times, the four methods interleaved (the order rotated every
    round) so that a change of load falls on all four alike, and the best of the rounds is kept, in wall time and in
    CPU time of the process (which a waiting process does not accumulate).
    """

    d: int = 64
    block: int = 1024  # query and key blocks of chunked attention and FlashAttention (SETTINGS.chunk)
    lengths: tuple[int, ...] = (1024, 2048, 4096)
    rounds: int = 9
    core: int = 1
    xla_flags: str = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"

    def to_dict(self) -> dict:
        return {"d": self.d, "dtype": "float32", "block": self.block, "lengths": list(self.lengths),
                "rounds": self.rounds, "core": self.core, "xla_flags": self.xla_flags,
                "methods": list(FLASH_METHODS), "gradient": "of sum(out**2) with respect to q, k and v",
                "timing": "compiled as by default, one warm-up run each, then `rounds` rounds of the four methods "
                          "in rotated order; best (minimum) wall and CPU time of the rounds, and the median wall time"}


FLASH = FlashSettings()
FLASH_METHODS = ("attention", "jax.nn", "chunked", "flash")


def flash_methods(causal: bool, s: FlashSettings = FLASH) -> dict:
    """name -> f(q, k, v) of the benchmark, causal (query ``i`` sees keys ``j <= i``) or not."""
    b = s.block

    def full(q, k, v):
        mask = jnp.tril(jnp.ones((q.shape[0], k.shape[0]), bool)) if causal else None
        return scaled_dot_product_attention(q, k, v, mask)[0]

    return {
        "attention": full,
        "jax.nn": lambda q, k, v: jax.nn.dot_product_attention(q[None, :, None], k[None, :, None], v[None, :, None],
                                                               is_causal=causal)[0, :, 0],
        "chunked": lambda q, k, v: chunked_attention(q, k, v, query_chunk=b, key_chunk=b, causal=causal),
        "flash": lambda q, k, v: flash_attention(q, k, v, query_block=b, key_block=b, causal=causal),
    }


def tile_flops(t: int, d: int, block: int, causal: bool, backward: bool) -> int:
    """FLOPs of one head's self-attention at length ``t`` counted over the tiles FlashAttention computes
    (:func:`attnbook.attention.flash_tiles` with blocks of ``block``): each tile of ``bq`` queries and ``bk`` keys
    costs ``2 bq bk (d + d)`` in the forward pass's two products and twice that in the backward pass's four. Without
    ``causal`` this is :func:`attnbook.cost.attention_flops`; with it, the tiles on and below the diagonal only, the
    work that causal block skipping leaves."""
    forward_tiles, backward_tiles = flash_tiles(t, t, block, block, causal=causal)
    b = min(block, t)
    sizes = np.minimum(b, t - b * np.arange(forward_tiles.shape[0]))  # the last block may be shorter
    pairs = lambda tiles: int((sizes[:, None] * sizes[None, :] * tiles).sum())  # noqa: E731
    per_pair = 2 * 2 * d  # Q K^T and P V: two products of d per pair, two FLOPs per multiply-add
    return per_pair * pairs(forward_tiles) + (2 * per_pair * pairs(backward_tiles) if backward else 0)


H100 = {
    "matmul_flops": 989e12,  # dense FP16/BF16 matrix products of an H100 SXM5 (Shah et al. 2024, section 3.2)
    "hbm_bytes_per_s": 3.35e12,  # its HBM3 bandwidth (NVIDIA's H100 data sheet, SXM5)
    "special_per_s": 3.9e12,  # exponentials and other special functions (Shah et al. 2024, section 3.2)
    # FlashAttention-3's FP16 forward rate at head dim 128 and 16k tokens, without a mask (Shah et al. 2024,
    # arXiv 2407.08608; read off the authors' chart assets/flash3_fp16_fwd.png in Dao-AILab/flash-attention, its
    # head-dim-128 panels: 648 without a mask, 616 with the causal one). The abstract's "up to 740 TFLOP/s" is the
    # head-dim-256 figure, not this book's d = 64 or 128.
    "fa3_forward_flops": 648e12,
}
FA3_CAUSAL_FORWARD_FLOPS = 616e12  # the same chart's causal panel, over half the pairs' FLOPs
"""The accelerator figures of chapter 6, each from the source named beside it (the chapter's table of sources)."""


def gpu_side(matmul_flops: float, hbm_bytes_per_s: float, special_per_s: float, fa3_forward_flops: float, *,
             head_dims=(64, 128), block: int = 128, itemsize: int = 2, length: int = 131072,
             lengths=(4096, 131072), d_model: int = 2048) -> dict:
    """Chapter 6's GPU-side view, computed from the accelerator's sourced figures (:data:`H100`) and the counts of
    :func:`attnbook.cost.attention_flops` and :func:`attnbook.cost.attention_bytes`, in ``itemsize`` bytes per number
    (2: bfloat16). Returns a dict:

    - ``balance``: FLOPs per byte at which the matrix units and the HBM take the same time, peak / bandwidth;
    - ``unfused[d]``, ``tiled[d]``: ``(intensity, ceiling)`` of one head's forward pass at ``length``: standard attention
      (``S`` and ``P`` each written to HBM and read back, 4 trips), and the tiled algorithm that reads ``K`` and ``V``
      once per block of ``block`` queries; the ceiling is min(peak, bandwidth x intensity) in FLOP/s;
    - ``fa3_needs``: the intensity FlashAttention-3's measured forward rate needs at that bandwidth at the least;
    - ``exp_share[d]``: time of the forward pass's exponentials (one per score) over that of its products (``4 d``
      FLOPs per score);
    - ``attention_over_dense[T]``: a layer's attention FLOPs over its other products (the ``Q``, ``K``, ``V`` and
      output projections, ``4 d_model^2`` multiply-adds per token, and an MLP of width ``4 d_model``, ``8 d_model^2``),
      no mask: ``T / (6 d_model)``;
    - ``decode[d]``: intensity of one new token's attention over ``length`` cached keys and values per head (about 1);
    - ``lse_bytes``, ``activation_bytes``: at ``length``, the log-sum-exp that FlashAttention keeps per head (float32),
      and the ``Q``, ``K``, ``V`` and output of one layer of width ``d_model`` (attention's activations only);
    - ``mlp_activation_bytes``: the same layer's MLP hidden activations, width ``4 d_model`` kept before and after
      its nonlinearity for the backward pass (``8 d_model`` numbers per token, twice attention's ``4 d_model``);
      layer norms and the residual stream are not counted.
    """
    block, itemsize, length, d_model = (_positive(n, x) for n, x in (("block", block), ("itemsize", itemsize),
                                                                     ("length", length), ("d_model", d_model)))
    ceiling = lambda intensity: min(matmul_flops, hbm_bytes_per_s * intensity)  # noqa: E731
    unfused, tiled, exp_share, decode = {}, {}, {}, {}
    for d in head_dims:
        flops = cost.attention_flops(length, length, d)
        i_unfused = flops / cost.attention_bytes(length, length, d, itemsize=itemsize, score_trips=4)
        i_tiled = flops / cost.attention_bytes(length, length, d, query_block=block, itemsize=itemsize)
        unfused[d], tiled[d] = (i_unfused, ceiling(i_unfused)), (i_tiled, ceiling(i_tiled))
        exp_share[d] = (1 / special_per_s) / (2 * 2 * d / matmul_flops)  # per score: one exp against 4 d FLOPs
        decode[d] = cost.attention_flops(1, length, d) / cost.attention_bytes(1, length, d, query_block=1,
                                                                              itemsize=itemsize)
    dense_per_token = 2 * (4 + 8) * d_model**2  # projections and MLP, two FLOPs per multiply-add
    attention_over_dense = {t: cost.attention_flops(t, t, d_model) / (t * dense_per_token) for t in lengths}
    return {"balance": matmul_flops / hbm_bytes_per_s, "unfused": unfused, "tiled": tiled,
            "fa3_needs": fa3_forward_flops / hbm_bytes_per_s, "exp_share": exp_share,
            "attention_over_dense": attention_over_dense, "decode": decode, "lse_bytes": 4 * length,
            "activation_bytes": 4 * length * d_model * itemsize,
            "mlp_activation_bytes": 2 * 4 * length * d_model * itemsize}


def _positive(name: str, x) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or x < 1:
        raise ValueError(f"{name} must be a positive integer, got {x!r}")
    return x


def flash_worker(out: pathlib.Path, s: FlashSettings = FLASH) -> None:
    """(Runs in a child process, pinned to one core with XLA single-threaded: :func:`run_flash`.) Time the four
    methods and write ``out`` (CSV) and its ``.json``."""
    info = RunInfo("taskset -c {core} python -m attnbook.experiments.ch06 --flash".format(core=s.core))
    rows = []
    for t in s.lengths:
        arrays = make_inputs([(t, s.d)] * 3)
        for causal in (False, True):
            for mode in MODES:
                programs = {name: cost.compiled(in_mode(f, mode), *arrays)
                            for name, f in flash_methods(causal, s).items()}
                for program in programs.values():
                    jax.block_until_ready(program(*arrays))  # warm-up
                wall = {name: [] for name in programs}
                cpu = {name: [] for name in programs}
                names = list(programs)
                for i in range(s.rounds):
                    for name in names[i % len(names):] + names[:i % len(names)]:  # rotated: each leads in turn
                        start, start_cpu = time.perf_counter(), time.process_time()
                        jax.block_until_ready(programs[name](*arrays))
                        cpu[name].append(time.process_time() - start_cpu)
                        wall[name].append(time.perf_counter() - start)
                load = info.sample()
                flops = tile_flops(t, s.d, s.block, causal, mode == "forward+backward")
                for name in names:
                    rows.append({"method": name, "mode": mode, "causal": causal, "T": t, "d": s.d, "block": s.block,
                                 "tile_flops": flops, "seconds_min": min(wall[name]),
                                 "seconds_median": float(np.median(wall[name])), "cpu_seconds_min": min(cpu[name]),
                                 "rounds": s.rounds, "load_average": load})
                    r = rows[-1]
                    print(f"T={t:>5} {'causal' if causal else 'full':>6} {mode:>16} {name:>9}: best "
                          f"{r['seconds_min'] * 1e3:8.1f} ms wall, {r['cpu_seconds_min'] * 1e3:8.1f} ms CPU, "
                          f"{flops / r['cpu_seconds_min'] / 1e9:5.1f} GFLOP/s (load {load})", flush=True)
    write_csv(out, rows)
    meta = info.metadata(settings=s.to_dict(), cores_allowed=sorted(os.sched_getaffinity(0)),
                         seconds=round(time.time() - info.start, 1))
    out.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")


def run_flash(out: pathlib.Path, s: FlashSettings = FLASH) -> None:
    """:func:`flash_worker` in a fresh process, pinned to core ``s.core`` with ``XLA_FLAGS = s.xla_flags`` (set
    before JAX starts: a running process cannot change either)."""
    module = __spec__.name if __spec__ is not None else "attnbook.experiments.ch06"
    env = dict(os.environ, XLA_FLAGS=s.xla_flags)
    subprocess.run(["taskset", "-c", str(s.core), sys.executable, "-m", module, "--flash-worker", str(out)],
                   check=True, env=env)


def read_flash(folder=RESULTS) -> tuple[list[dict], dict]:
    """The stored FlashAttention benchmark: (rows of ``attention_cost_flash.csv`` with numbers as floats and
    ``causal`` as a bool, the JSON's metadata)."""
    with (folder / "attention_cost_flash.csv").open("r", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        for key, value in row.items():
            if key == "causal":
                row[key] = {"True": True, "False": False}[value]
            elif key not in ("method", "mode"):
                row[key] = float(value)
    meta = json.loads((folder / "attention_cost_flash.json").read_text(encoding="utf-8"))
    return rows, meta


FAULT_LENGTHS = (4096, 8192)


def page_faults(lengths=FAULT_LENGTHS, d: int = 64, repeats: int = 5) -> list[dict]:
    """Minor page faults per call of full attention's forward pass (compiled by default, as the stored series timed
    it), after two warm-up calls: ``resource.getrusage().ru_minflt`` before and after ``repeats`` calls, divided by
    them, with the kernel (system) time per call. A page the process touches for the first time faults once (4 KiB),
    so the faults times 4 KiB say how much memory each call takes fresh from the operating system."""
    import resource

    full = jax.jit(lambda q, k, v: scaled_dot_product_attention(q, k, v)[0])
    rows = []
    for t in lengths:
        q, k, v = make_inputs([(t, d)] * 3)
        for _ in range(2):
            jax.block_until_ready(full(q, k, v))
        before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        for _ in range(repeats):
            jax.block_until_ready(full(q, k, v))
        wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
        rows.append({"T": t, "d": d, "repeats": repeats, "matrix_bytes": 4 * t * t,
                     "minor_faults_per_call": (after.ru_minflt - before.ru_minflt) / repeats,
                     "page_bytes": resource.getpagesize(),
                     "system_seconds_per_call": (after.ru_stime - before.ru_stime) / repeats,
                     "wall_seconds_per_call": wall / repeats})
    return rows


def write_page_faults(out: pathlib.Path) -> None:
    """``python -m attnbook.experiments.ch06 --faults --write``: :func:`page_faults` into ``out`` (JSON), with the
    machine and its load (the fault counts do not depend on the load; the times do)."""
    info = RunInfo("python -m attnbook.experiments.ch06 --faults --write")
    rows = page_faults()
    info.sample()
    out.write_text(json.dumps({**info.metadata(settings={"lengths": list(FAULT_LENGTHS), "d": 64, "repeats": 5}),
                               "rows": rows}, indent=1) + "\n", encoding="utf-8")
    for r in rows:
        print(f"T = {r['T']}: {r['minor_faults_per_call']:.0f} minor faults per call "
              f"({r['minor_faults_per_call'] * r['page_bytes'] / 2**20:.1f} MiB; T x T matrix "
              f"{r['matrix_bytes'] / 2**20:.0f} MiB), system time {1e3 * r['system_seconds_per_call']:.0f} ms per call")


def read_page_faults(folder=RESULTS) -> dict:
    """The stored page-fault measurement (``attention_cost_faults.json``): its metadata and ``rows``."""
    return json.loads((folder / "attention_cost_faults.json").read_text(encoding="utf-8"))


def flash_table(rows, mode: str, time_field: str = "cpu_seconds_min") -> list[tuple]:
    """One row per (T, causal) of one mode: (T, causal, GFLOPs counted over the tiles, then per method of
    :data:`FLASH_METHODS` its GFLOP/s, then each method's time over FlashAttention's), from :func:`read_flash`'s
    rows; ``time_field``: which stored time (best CPU time by default)."""
    cell = {(int(r["T"]), r["causal"], r["method"]): r for r in rows if r["mode"] == mode}
    table = []
    for t, causal in dict.fromkeys((int(r["T"]), r["causal"]) for r in rows if r["mode"] == mode):
        flops = cell[t, causal, "flash"]["tile_flops"]
        seconds = {m: cell[t, causal, m][time_field] for m in FLASH_METHODS}
        table.append((t, causal, flops / 1e9, *(flops / seconds[m] / 1e9 for m in FLASH_METHODS),
                      *(seconds[m] / seconds["flash"] for m in FLASH_METHODS if m != "flash")))
    return table


# ---------------------------------------------------------------------------------------------
# Cross-check: the operating system's view of one forward call, in a fresh process


def status_kib(field: str) -> int:
    """A memory figure of this process from /proc/self/status (VmRSS: now, VmHWM: the peak), in KiB."""
    with open("/proc/self/status", encoding="utf-8") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def rss_worker(name: str, length: int, all_buffers: bool) -> None:
    """(Runs in a child process.) Print the growth of peak resident memory during one call.

    The peak is VmHWM of /proc/self/status, reset to the current size just before the call by writing 5 to
    /proc/self/clear_refs (getrusage's ru_maxrss would not do: a child process starts with its parent's peak).
    """
    f, shapes, _ = method_table()[name]
    arrays = make_inputs(shapes(length))
    program = cost.compiled(f, *arrays, all_buffers=all_buffers)
    analysed = program.memory_analysis().temp_size_in_bytes
    with open("/proc/self/clear_refs", "w", encoding="utf-8") as handle:
        handle.write("5")
    before = status_kib("VmRSS")
    jax.block_until_ready(program(*arrays))
    peak = status_kib("VmHWM")
    print(json.dumps({"method": name, "T": length, "all_buffers": all_buffers,
                      "peak_rss_growth_bytes": (peak - before) * 1024, "analysed_temp_bytes": int(analysed)}))


def rss_check(length: int) -> list[dict]:
    """:func:`rss_worker` in a fresh process for full attention (both programs), jax.nn and chunked attention."""
    results = []
    for name, all_buffers in [("attention", False), ("attention", True), ("jax.nn", False), ("chunked", False)]:
        # this module by its own name, also when it runs as ``python -m`` (then ``__name__`` is "__main__")
        module = __spec__.name if __spec__ is not None else "attnbook.experiments.ch06"
        command = [sys.executable, "-m", module, "--rss-worker", name, str(length)]
        if all_buffers:
            command.append("--all-buffers")
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        results.append(json.loads(out.strip().splitlines()[-1]))
        r = results[-1]
        print(f"{name:>10} ({'all buffers' if all_buffers else 'default'}) T={length}: peak RSS +"
              f"{r['peak_rss_growth_bytes'] / 2**20:.0f} MiB, analysis {r['analysed_temp_bytes'] / 2**20:.0f} MiB",
              flush=True)
    return results


# ---------------------------------------------------------------------------------------------
# Writing the stored results


def reanalyse_memory(out: pathlib.Path, reason: str, s: Settings = SETTINGS) -> None:
    """``--memory-only``: the stored rows' memory analysed again with the current library; times kept."""
    table = method_table(s)
    with out.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        f_, shapes, _ = table[row["method"]]
        g = in_mode(f_, row["mode"])
        specs = [jax.ShapeDtypeStruct(shape, jnp.float32) for shape in shapes(int(row["T"]))]
        row.update(analyse(g, specs))
        if row["status"] == "measured":  # the default program's figure, as time_it records it (compiled, not run)
            row["temp_bytes_default"] = int(cost.compiled(g, *specs).memory_analysis().temp_size_in_bytes)
        print(f"{row['method']:>10} {row['mode']:>16} T={row['T']:>6}  temp {row['temp_bytes'] / 2**20:10.1f} MiB",
              flush=True)
    write_csv(out, rows)
    chunks_path = out.with_name(out.stem + "_chunks.csv")
    with chunks_path.open(newline="", encoding="utf-8") as f:
        sweep = list(csv.DictReader(f))
    for row in sweep:
        qc, kc = int(row["query_chunk"]), int(row["key_chunk"])
        f_ = lambda q, k, v: chunked_attention(q, k, v, query_chunk=qc, key_chunk=kc)  # noqa: E731
        g = in_mode(f_, row["mode"])
        specs = [jax.ShapeDtypeStruct((int(row["T"]), s.d), jnp.float32)] * 3
        row.update(analyse(g, specs))
        row["temp_bytes_default"] = int(cost.compiled(g, *specs).memory_analysis().temp_size_in_bytes)
    write_csv(chunks_path, sweep)
    meta_path = out.with_suffix(".json")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["rss_check"] = rss_check(s.rss_length)
    meta["memory_reanalysed"] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(), "reason": reason,
        "fields": "temp_bytes, temp_bytes_default, argument_bytes, output_bytes, rss_check; times are from 'date'"}
    meta_path.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print(f"memory re-analysed in {out}, {chunks_path.name} and {meta_path.name}; times kept", flush=True)


def print_table(rows: list[dict], mode: str, field: str, scale: float, unit: str) -> None:
    methods = list(dict.fromkeys(r["method"] for r in rows))
    lengths = sorted({r["T"] for r in rows})
    cell = {(r["method"], r["T"]): r for r in rows if r["mode"] == mode}
    print(f"\n{mode}: {field} ({unit}); '-' = not run")
    print(f"{'T':>7} " + " ".join(f"{m:>11}" for m in methods))
    for t in lengths:
        values = []
        for m in methods:
            r = cell.get((m, t))
            v = None if r is None or r[field] == "" else r[field] * scale
            values.append(f"{'-':>11}" if v is None else f"{v:11.3g}")
        print(f"{t:>7} " + " ".join(values))


def run(s: Settings, out: pathlib.Path) -> dict:
    """The whole benchmark with settings ``s``: writes ``out`` (``attention_cost.csv``), its ``_chunks.csv`` and its
    ``.json`` beside it, prints the tables, and returns the JSON's metadata."""
    started = time.perf_counter()
    load_before = os.getloadavg()
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    print(f"T = {s.lengths[0]} .. {s.lengths[-1]}; load average {load_before[0]:.2f}", flush=True)

    rows = run_series(s, started)
    sweep = run_chunk_sweep(s)
    paired = paired_comparison(s)
    rss = [] if s.rss_length is None else rss_check(s.rss_length)
    seconds = time.perf_counter() - started
    load_after = os.getloadavg()

    write_csv(out, rows)
    write_csv(out.with_name(out.stem + "_chunks.csv"), sweep)
    meta = {
        "machine": machine(),
        "date": date,
        "duration_seconds": round(seconds, 1),
        "load_average_1min": {"before": round(load_before[0], 2), "after": round(load_after[0], 2)},
        "settings": s.to_dict(),
        "paired_attention_vs_jax_nn": paired,
        "rss_check": rss,
    }
    out.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")

    for mode in MODES:
        print_table(rows, mode, "seconds", 1e3, "ms")
        print_table(rows, mode, "temp_bytes", 2**-20, "MiB of temporary memory, analysis")
    print(f"\nwrote {out}, {out.with_name(out.stem + '_chunks.csv').name} and {out.with_suffix('.json').name}; "
          f"{seconds / 60:.1f} minutes, load average {load_before[0]:.2f} before and {load_after[0]:.2f} after")
    return meta


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnbook.experiments.ch06", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true",
                        help="run the benchmark and write the stored results (lib/attnbook/experiments/results/)")
    parser.add_argument("--quick", action="store_true", help="T up to 2048 and no cross-check (a trial run)")
    parser.add_argument("--max-length", type=int, default=SETTINGS.max_length)
    parser.add_argument("--max-run-seconds", type=float, default=SETTINGS.max_run_seconds,
                        help="skip runs predicted to take longer")
    parser.add_argument("--max-memory-gib", type=float, default=SETTINGS.max_memory_gib,
                        help="skip runs that need more memory")
    parser.add_argument("--budget-minutes", type=float, default=SETTINGS.budget_minutes,
                        help="stop timing after this long")
    parser.add_argument("--out", type=pathlib.Path, default=None,
                        help="CSV to write instead (default with --write: the stored attention_cost.csv; "
                             "with --quick: a temporary folder)")
    parser.add_argument("--memory-only", metavar="REASON",
                        help="re-analyse the stored rows' memory with the current library, keep their times")
    parser.add_argument("--flash", action="store_true",
                        help="the FlashAttention benchmark only, on one core (with --write: the stored "
                             "attention_cost_flash.csv; else a temporary folder)")
    parser.add_argument("--faults", action="store_true",
                        help="minor page faults per call of full attention at T = 4096 and 8192 (with --write: the "
                             "stored attention_cost_faults.json; else printed only)")
    parser.add_argument("--flash-worker", metavar="CSV", help=argparse.SUPPRESS)
    parser.add_argument("--rss-worker", nargs=2, metavar=("METHOD", "T"), help=argparse.SUPPRESS)
    parser.add_argument("--all-buffers", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rss_worker:
        rss_worker(args.rss_worker[0], int(args.rss_worker[1]), args.all_buffers)
        return 0
    if args.flash_worker:
        flash_worker(pathlib.Path(args.flash_worker))
        return 0
    if args.faults:
        write_page_faults(args.out or (source_folder() / "attention_cost_faults.json" if args.write else
                                       pathlib.Path(tempfile.gettempdir()) / "attention_cost_faults.json"))
        return 0
    if args.flash:
        flash_out = args.out or (source_folder() / "attention_cost_flash.csv" if args.write else
                                 pathlib.Path(tempfile.gettempdir()) / "attention_cost_flash" / "attention_cost_flash.csv")
        flash_out.parent.mkdir(parents=True, exist_ok=True)
        run_flash(flash_out)
        return 0
    stored = source_folder() / "attention_cost.csv"
    if args.memory_only:
        reanalyse_memory(args.out or stored, args.memory_only)
        return 0
    if not (args.write or args.quick or args.out):
        parser.error("say --write to overwrite the stored results, or --quick or --out PATH for a trial run")
    s = dataclasses.replace(SETTINGS, max_length=args.max_length, max_run_seconds=args.max_run_seconds,
                            max_memory_gib=args.max_memory_gib, budget_minutes=args.budget_minutes)
    if args.quick:
        s = s.quick()
    out = args.out
    if out is None:  # a trial run must not overwrite the results chapter 6 reads
        out = pathlib.Path(tempfile.gettempdir()) / "attention_cost_quick" / "attention_cost.csv" if args.quick else stored
    run(s, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
