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

import inspect
import statistics
import time
from collections.abc import Callable

import jax
import numpy as np

from . import _checks

ALL_BUFFERS = {"xla_cpu_experimental_ynn_fusion_type": ""}
"""XLA compile options that keep every buffer in XLA's own plan (CPU only): no YNNPACK fusions."""


def _static_names(static_argnames) -> frozenset[str]:
    names = (static_argnames,) if isinstance(static_argnames, str) else static_argnames
    try:
        names = frozenset(names)
    except TypeError:
        names = None
    if names is None or not all(isinstance(n, str) for n in names):
        raise TypeError(f"static_argnames must be a name or a sequence of names, got {static_argnames!r:.60}")
    return names


def _check_inputs(fn: Callable, args: tuple, static: frozenset[str]) -> None:
    """Every traced argument must be arrays or ``jax.ShapeDtypeStruct`` (static ones may be anything).

    A shape such as ``(1024, 64)`` passed where a ``ShapeDtypeStruct`` was meant would otherwise be
    traced as two integer scalars, and the measured program would be a different one.
    """
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # no signature (some builtins): check every argument
        parameters = []
    for i, arg in enumerate(args):
        parameter = parameters[i] if i < len(parameters) else None
        if parameter is not None and parameter.kind != parameter.VAR_POSITIONAL and parameter.name in static:
            continue
        for leaf in jax.tree.leaves(arg):
            if not isinstance(leaf, (jax.Array, np.ndarray, np.generic, jax.ShapeDtypeStruct)):
                raise TypeError(
                    f"args[{i}] must be arrays or jax.ShapeDtypeStruct (e.g. jax.ShapeDtypeStruct((1024, 64), "
                    f"jnp.float32)); Python values go through static_argnames; got {type(leaf).__name__} {leaf!r:.60}"
                )


def compiled(fn: Callable, *args, all_buffers: bool = False, static_argnames=()):
    """``jax.jit(fn)`` compiled for ``args`` (arrays or ``jax.ShapeDtypeStruct``), without running it.

    With ``all_buffers`` (CPU only) the program is compiled with :data:`ALL_BUFFERS`, so that its
    memory analysis counts every temporary buffer. Arguments named in ``static_argnames`` may be
    Python values; every other argument must be arrays or ``jax.ShapeDtypeStruct`` (``TypeError``).
    """
    fn = _checks.function("fn", fn)
    all_buffers = _checks.flag("all_buffers", all_buffers)
    static = _static_names(static_argnames)
    _check_inputs(fn, args, static)
    static_argnames = tuple(static)
    lowered = jax.jit(fn, static_argnames=static_argnames).lower(*args)
    if all_buffers and jax.default_backend() == "cpu":
        return lowered.compile(compiler_options=ALL_BUFFERS)
    return lowered.compile()


def temporary_bytes(fn: Callable, *args, all_buffers: bool = True) -> int:
    """Peak temporary memory of ``jax.jit(fn)`` for ``args``, from XLA's compiled memory analysis.

    Nothing is run, so shapes (``jax.ShapeDtypeStruct``) are enough and the figure is the same on
    every run. Inputs and outputs are not counted. Arguments as for :func:`compiled`.
    """
    return int(compiled(fn, *args, all_buffers=all_buffers).memory_analysis().temp_size_in_bytes)


def median_seconds(fn: Callable, *args, repeats: int = 5, warmup: int = 1) -> float:
    """Median wall time of ``fn(*args)`` over ``repeats`` runs, after ``warmup`` runs.

    ``fn`` should be compiled already (a ``jax.jit`` function or the result of :func:`compiled`);
    the warm-up runs absorb any compilation and first-call costs.
    """
    fn = _checks.function("fn", fn)
    repeats = _checks.positive_int("repeats", repeats)
    warmup = _checks.nonnegative_int("warmup", warmup)
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)
