"""Chapter 6: measuring what a function costs, in time and in temporary memory.

Time: compile first, then run several times and take the median, waiting for the result with
``jax.block_until_ready`` (JAX dispatches asynchronously: without it a timer only measures how
long it took to *start* the computation).

Memory: XLA plans every buffer of a compiled program before running it, and
``compiled.memory_analysis().temp_size_in_bytes`` is the peak size of the buffers that are
neither inputs nor outputs. It is exact and deterministic, but it only sees XLA's own buffers.
Recent XLA releases for the CPU hand large fused computations (an entire attention, for example)
to the YNNPACK library, whose scratch memory the analysis cannot see: full attention at
``T = 16384`` then reports 0 temporary bytes while it allocates a 1 GiB score matrix. So
:func:`temporary_bytes` compiles with those library fusions switched off (``ALL_BUFFERS``), which
makes every buffer visible to the analysis; ``all_buffers=False`` gives the default program's
figure.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import jax

from . import _checks

ALL_BUFFERS = {"xla_cpu_experimental_ynn_fusion_type": ""}
"""XLA compile options that keep every buffer in XLA's own plan (CPU only): no YNNPACK fusions."""


def compiled(fn: Callable, *args, all_buffers: bool = False, static_argnames=()):
    """``jax.jit(fn)`` compiled for ``args`` (arrays or ``jax.ShapeDtypeStruct``), without running it.

    With ``all_buffers`` (CPU only) the program is compiled with :data:`ALL_BUFFERS`, so that its
    memory analysis counts every temporary buffer.
    """
    lowered = jax.jit(fn, static_argnames=static_argnames).lower(*args)
    if all_buffers and jax.default_backend() == "cpu":
        return lowered.compile(compiler_options=ALL_BUFFERS)
    return lowered.compile()


def temporary_bytes(fn: Callable, *args, all_buffers: bool = True) -> int:
    """Peak temporary memory of ``jax.jit(fn)`` for ``args``, from XLA's compiled memory analysis.

    Nothing is run, so shapes (``jax.ShapeDtypeStruct``) are enough and the figure is the same on
    every run. Inputs and outputs are not counted.
    """
    return int(compiled(fn, *args, all_buffers=all_buffers).memory_analysis().temp_size_in_bytes)


def median_seconds(fn: Callable, *args, repeats: int = 5, warmup: int = 1) -> float:
    """Median wall time of ``fn(*args)`` over ``repeats`` runs, after ``warmup`` runs.

    ``fn`` should be compiled already (a ``jax.jit`` function or the result of :func:`compiled`);
    the warm-up runs absorb any compilation and first-call costs.
    """
    repeats = _checks.positive_int("repeats", repeats)
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)
