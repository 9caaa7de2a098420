"""Re-execute the book's notebooks in place, for authors.

    python -m tools.execute_notebooks                   # every notebook, both languages
    python -m tools.execute_notebooks chapters/ja/01-positional-encoding.ipynb

Each notebook runs top to bottom in a fresh ``python3`` kernel whose working directory is the
notebook's folder (as nbval runs it in CI) and is saved with its new outputs; cell metadata and
tags are kept. Adjacent pieces of one stream (stdout or stderr) are joined into one output, as a
reader's Jupyter shows them: a kernel under load flushes a cell's printing in several pieces, and the
site would draw each piece in a box of its own. The seconds each notebook took are reported against the book's budget. A failing
cell stops the run with the notebook, the cell and the error, and that notebook is left as it was.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

from tools import jax_cache
from tools.book import notebooks

ROOT = Path(__file__).resolve().parent.parent
BUDGET_SECONDS = 30.0  # per notebook, from the book's design


class ExecutionFailed(Exception):
    """A cell failed; the message names the notebook and the cell."""


def execute(path: Path, timeout: int = 300, kernel: str = "python3") -> float:
    """Execute the notebook at `path` in place; return the seconds it took."""
    nb = nbformat.read(path, as_version=4)
    current = {"index": None}

    def on_cell_start(cell, cell_index):
        current["index"] = cell_index

    # record_timing=False: per-cell timestamps in the metadata would make every run a diff.
    client = NotebookClient(nb, timeout=timeout, kernel_name=kernel, record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}},
                            on_cell_start=on_cell_start)
    start = time.perf_counter()
    try:
        client.execute()
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as error:
        index = current["index"]
        where = f"cell {index + 1}" if index is not None else "start-up"
        raise ExecutionFailed(f"{path}: {where} failed\n{error}") from error
    seconds = time.perf_counter() - start
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = join_streams(cell.outputs)
    nbformat.write(nb, path)
    return seconds


def join_streams(outputs: list) -> list:
    """``outputs`` with each run of adjacent stream outputs of the same name joined into one.

    What nbconvert's CoalesceStreamsPreprocessor does (it also applies "\\r" and "\\b" as a terminal would; no
    stored output has either), but nbconvert is not in the lock (the test extra) and would bring twelve packages.
    nbclient's own ``coalesce_streams`` is not the same: it merges every stdout piece of a cell into the first,
    so a cell that prints, shows a table, and prints again (26 cells of the book) would print both before the
    table."""
    joined = []
    for output in outputs:
        last = joined[-1] if joined else None
        if (output.get("output_type") == "stream" and last is not None and last.get("output_type") == "stream"
                and last.get("name") == output.get("name")):
            last["text"] = "".join(last["text"]) + "".join(output["text"])
        else:
            joined.append(output)
    return joined


def main(argv: list[str] | None = None) -> int:
    jax_cache.enable()  # kernels inherit it: twins and re-runs load compiled programs
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="notebooks to run (default: every notebook under chapters/)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds allowed per cell")
    parser.add_argument("--kernel", default="python3", help="Jupyter kernel name")
    args = parser.parse_args(argv)
    paths = args.notebooks or notebooks(ROOT)
    total = 0.0
    for path in paths:
        try:
            seconds = execute(path, timeout=args.timeout, kernel=args.kernel)
        except ExecutionFailed as error:
            print(f"\nexecute_notebooks: {error}", file=sys.stderr)
            return 1
        total += seconds
        note = f"  over the {BUDGET_SECONDS:.0f} s budget" if seconds > BUDGET_SECONDS else ""
        shown = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
        print(f"{seconds:7.1f} s  {shown}{note}", flush=True)
    print(f"{total:7.1f} s  total, {len(paths)} notebook(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
