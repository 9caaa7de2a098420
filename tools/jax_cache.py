"""JAX's persistent compilation cache for the tests and the re-execution tool.

The English and Japanese twin of a chapter run the same code and compile the same XLA programs; with
an on-disk cache the second twin (and every later run on the same machine) loads them instead of
compiling again. Compiled programs are the same either way, so no output changes. The cache lives in
.cache/jax in the checkout (git ignores .cache/). Readers can opt in the same way in their shell
before starting Jupyter: ``export JAX_COMPILATION_CACHE_DIR=$PWD/.cache/jax``.

JAX reads these variables when it is imported, and notebook kernels inherit the environment of the
process that starts them, so setting them in pytest's process (conftest.py) covers nbval's kernels.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = ROOT / ".cache" / "jax"


def enable() -> None:
    """Point JAX at the shared cache, unless the caller chose another; cache every program."""
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(CACHE_DIR))
    # By default JAX caches only programs that took over a second to compile; the book's are many
    # and small, so cache them all.
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
