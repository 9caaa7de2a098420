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

Hardware terms: :func:`attention_flops` counts the arithmetic of one head's attention from its shapes,
:func:`attention_bytes` the traffic between main memory and the processor in a stated model, and their
ratio is the arithmetic intensity (FLOPs per byte) that decides whether a computation waits for the
arithmetic units or for memory.
"""

from __future__ import annotations

import inspect
import math
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


def _pairs(tq: int, tk: int, causal: bool) -> int:
    """Query-key pairs scored: all ``tq * tk``, or (causal, aligned at the top left) those with ``j <= i``."""
    if not causal:
        return tq * tk
    full_rows = min(tq, tk)  # row i sees i + 1 keys while i < tk, all tk keys after
    return full_rows * (full_rows + 1) // 2 + (tq - full_rows) * tk


def attention_flops(tq: int, tk: int, d: int, dv: int | None = None, *, backward: bool = False,
                    causal: bool = False) -> int:
    """Floating-point operations of one head's attention, counted from the shapes.

    The convention of the FlashAttention papers' benchmarks and of "model FLOPs": the matrix products only, two
    FLOPs (a multiply and an add) per multiply-add. The forward pass is ``Q K^T`` and ``P V``:
    ``2 tq tk (d + dv)``, ``4 T^2 d`` for self-attention with ``dv = d``. The backward pass has four products
    of the same sizes (``dV = P^T dO``, ``dP = dO V^T``, ``dQ = dS K``, ``dK = dS^T Q``), twice the forward's, so
    ``backward=True`` (forward and backward together) gives three times the forward's, ``12 T^2 d``. Work that
    an implementation repeats (the scores recomputed by a checkpointed or FlashAttention backward pass) is not
    counted: the count is that of the function, so that FLOP/s compare implementations fairly. The softmax's
    exponentials, maxima and sums (a few per score, against ``2 (d + dv)`` per score in the products) are not
    counted either. ``causal=True`` counts only the pairs ``j <= i``, the work of an implementation that skips
    the rest (FlashAttention's causal block skipping comes close to it).
    """
    tq, tk, d = (_checks.positive_int(name, x) for name, x in (("tq", tq), ("tk", tk), ("d", d)))
    dv = d if dv is None else _checks.positive_int("dv", dv)
    backward, causal = _checks.flag("backward", backward), _checks.flag("causal", causal)
    forward = 2 * _pairs(tq, tk, causal) * (d + dv)
    return 3 * forward if backward else forward


def attention_bytes(tq: int, tk: int, d: int, dv: int | None = None, *, query_block: int | None = None,
                    itemsize: int = 4) -> int:
    """Bytes one forward pass of one head moves between main memory and the processor, in a model.

    The model: ``Q``, ``K`` and ``V`` are read and the output written once each; then

    - ``query_block=None``, attention that builds its scores (the library's full attention, ``jax.nn``'s XLA
      path): the ``tq x tk`` matrix is written once and read back once, ``2 tq tk`` numbers. This is the least
      such a program moves once the matrix is larger than the caches (XLA's programs read it more than once);
      while it fits in a cache it does not reach main memory at all, and the model overstates the traffic.
    - ``query_block=B`` (chunked attention, FlashAttention): no score leaves the cache; each block of ``B``
      queries reads all of ``K`` and ``V`` once, ``ceil(tq / B) tk (d + dv)`` numbers.

    ``itemsize`` is the bytes per number (4 for float32). FLOPs over these bytes give the arithmetic intensity:
    about ``d / 2`` FLOPs per byte for full attention at long lengths in float32, whatever ``T`` is, and about
    ``B / 2`` for the blocked algorithms, which is why they are the ones that can keep a fast processor busy.
    """
    tq, tk, d = (_checks.positive_int(name, x) for name, x in (("tq", tq), ("tk", tk), ("d", d)))
    dv = d if dv is None else _checks.positive_int("dv", dv)
    itemsize = _checks.positive_int("itemsize", itemsize)
    inputs_outputs = tq * d + tk * d + tk * dv + tq * dv
    if query_block is None:
        return itemsize * (inputs_outputs + 2 * tq * tk)
    query_block = _checks.positive_int("query_block", query_block)
    re_read = (math.ceil(tq / query_block) - 1) * tk * (d + dv)  # K and V again for every further block
    return itemsize * (inputs_outputs + re_read)
