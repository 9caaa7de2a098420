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
                    causal: bool = False, recomputed_scores: bool = False, recomputed_forward: bool = False) -> int:
    """Floating-point operations of one head's attention, counted from the shapes.

    The matrix products only, two FLOPs (a multiply and an add) per multiply-add ("model FLOPs"). The forward pass is
    ``Q K^T`` and ``P V``: ``2 tq tk (d + dv)``, ``4 T^2 d`` for self-attention with ``dv = d``. The backward pass has
    four products of the same sizes (``dV = P^T dO``, ``dP = dO V^T``, ``dQ = dS K``, ``dK = dS^T Q``), twice the
    forward's, so ``backward=True`` (forward and backward together) gives three times the forward's, ``12 T^2 d``:
    the count of the function, the same for every implementation, so that FLOP/s compare implementations fairly.

    ``recomputed_scores=True`` (with ``backward``) adds the product ``Q K^T`` that FlashAttention's backward pass
    computes again, ``2 tq tk d``: ``14 T^2 d``, 3.5 times the forward's. That is the convention of the FlashAttention
    authors' benchmarks (``flops`` in ``benchmarks/benchmark_flash_attention.py`` of Dao-AILab/flash-attention:
    backward 2.5 times the forward, forward and backward 3.5 times), so a time predicted from a rate they publish
    divides this count, not the ``12 T^2 d``. The softmax's exponentials, maxima and sums (a few per score, against
    ``2 (d + dv)`` per score in the products) are never counted, although on a GPU the exponentials run on slower units
    than the products. ``causal=True`` counts only the pairs ``j <= i``, the work of an implementation that skips the
    rest (FlashAttention's causal block skipping comes close to it; its benchmarks halve the count).

    ``recomputed_forward=True`` (with ``backward``) adds a whole second forward pass, ``4 T^2 d``: the work of
    :func:`attnbook.attention.chunked_attention`'s backward pass, whose outer ``jax.checkpoint`` re-runs each query
    chunk's scan over the keys (scores and ``P V``) to rebuild its carries, and whose inner ``jax.checkpoint``
    recomputes each tile's scores again for its gradient. Its count is therefore ``recomputed_forward=True`` with
    ``recomputed_scores=True``: ``18 T^2 d``, a backward pass of ``14 T^2 d``, 3.5 times the forward, against
    FlashAttention's ``10 T^2 d`` (2.5 times) and full attention's ``8 T^2 d`` (2 times). A test counts the matrix
    products in the jaxprs of both backward passes against these counts.
    """
    tq, tk, d = (_checks.positive_int(name, x) for name, x in (("tq", tq), ("tk", tk), ("d", d)))
    dv = d if dv is None else _checks.positive_int("dv", dv)
    backward, causal = _checks.flag("backward", backward), _checks.flag("causal", causal)
    recomputed_scores = _checks.flag("recomputed_scores", recomputed_scores)
    recomputed_forward = _checks.flag("recomputed_forward", recomputed_forward)
    for name, value in (("recomputed_scores", recomputed_scores), ("recomputed_forward", recomputed_forward)):
        if value and not backward:
            raise ValueError(f"{name}=True counts a backward pass's recomputation: it needs backward=True")
    pairs = _pairs(tq, tk, causal)
    forward = 2 * pairs * (d + dv)
    if not backward:
        return forward
    return 3 * forward + (2 * pairs * d if recomputed_scores else 0) + (forward if recomputed_forward else 0)


def attention_bytes(tq: int, tk: int, d: int, dv: int | None = None, *, query_block: int | None = None,
                    itemsize: int = 4, score_trips: int = 2) -> int:
    """Bytes one forward pass of one head moves between main memory and the processor, in a model.

    The model: ``Q``, ``K`` and ``V`` are read and the output written once each; then

    - ``query_block=None``, attention that builds its scores (the library's full attention, ``jax.nn``'s XLA
      path): the ``tq x tk`` matrix is written once and read back once, ``2 tq tk`` numbers. This is the least
      such a program moves once the matrix is larger than the caches (XLA's programs read it more than once);
      while it fits in a cache it does not reach main memory at all, and the model overstates the traffic.
      ``score_trips`` is how many times a ``tq x tk`` matrix crosses: 2 by default; 4 for standard attention as the
      FlashAttention paper writes it (its Algorithm 0: ``S`` written and read back, ``P`` written and read back).
    - ``query_block=B`` (chunked attention, FlashAttention): no score leaves the cache; each block of ``B``
      queries reads all of ``K`` and ``V`` once, ``ceil(tq / B) tk (d + dv)`` numbers.

    ``itemsize`` is the bytes per number (4 for float32, 2 for bfloat16). FLOPs over these bytes give the arithmetic
    intensity: about ``4 d / (score_trips * itemsize)`` FLOPs per byte for full attention at long lengths, whatever
    ``T`` is (``d / 2`` in float32 with 2 trips, and in bfloat16 with 4), and about ``2 B / itemsize`` for the blocked
    algorithms. With ``B`` as large as the on-chip memory allows, ``B`` about ``M / d`` for ``M`` numbers of it, the
    blocked traffic is about ``T^2 d^2 / M``, the order of the FlashAttention paper's Theorem 2.
    """
    tq, tk, d = (_checks.positive_int(name, x) for name, x in (("tq", tq), ("tk", tk), ("d", d)))
    dv = d if dv is None else _checks.positive_int("dv", dv)
    itemsize = _checks.positive_int("itemsize", itemsize)
    score_trips = _checks.positive_int("score_trips", score_trips)
    inputs_outputs = tq * d + tk * d + tk * dv + tq * dv
    if query_block is None:
        return itemsize * (inputs_outputs + score_trips * tq * tk)
    query_block = _checks.positive_int("query_block", query_block)
    re_read = (math.ceil(tq / query_block) - 1) * tk * (d + dv)  # K and V again for every further block
    return itemsize * (inputs_outputs + re_read)
