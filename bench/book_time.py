"""How long the book takes to run: every notebook, both languages, cold and warm.

    python bench/book_time.py                 # every notebook, cold then warm
    python bench/book_time.py chapters/en/04-multi-head-attention.ipynb chapters/ja/04-multi-head-attention.ipynb
    python bench/book_time.py --warm-only     # only the second pass (uses a cache filled by a first pass)
    python bench/book_time.py --cells 3 ...   # also each notebook's 3 slowest cells

Each notebook runs top to bottom in a fresh kernel, as nbval and ``tools.execute_notebooks`` run it, and
nothing is written back. **Cold**: JAX's persistent compilation cache starts empty (a temporary folder),
as on a fresh clone, and fills up as the notebooks run in order, so a Japanese twin run after its English
twin already finds the programs they share, exactly as in CI. **Warm**: the same notebooks again with the
cache the cold pass left, as for an author re-running the book. The budget (BOOK.md, README): ≤ 25 s per notebook
cold, ≤ 240 s for the whole book. The kernel's CPU seconds (user + system) and the load average are
printed next to each wall time, since the machine's other work inflates the wall time.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.book import notebooks  # noqa: E402

NOTEBOOK_BUDGET, BOOK_BUDGET = 25.0, 240.0


def _children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children: the kernels, compiler threads included."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(path: Path, timeout: int = 300) -> tuple[float, float, list[tuple[float, int, str]]]:
    """Wall seconds to execute the notebook at ``path`` in a fresh kernel (outputs discarded), the kernel's
    CPU seconds, and (seconds, cell number from 1, first line) of each code cell, slowest first."""
    nb = nbformat.read(path, as_version=4)
    starts: dict[int, float] = {}
    cells: list[tuple[float, int, str]] = []

    def on_start(cell, cell_index):
        starts[cell_index] = time.perf_counter()

    def on_executed(cell, cell_index, execute_reply):
        first = next((line for line in cell.source.splitlines() if not line.startswith("#|")), "")
        cells.append((time.perf_counter() - starts[cell_index], cell_index + 1, first[:60]))

    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}},
                            on_cell_start=on_start, on_cell_executed=on_executed)
    start, cpu = time.perf_counter(), _children_cpu()
    client.execute()  # starts the kernel, runs every cell, shuts the kernel down and waits for it
    return time.perf_counter() - start, _children_cpu() - cpu, sorted(cells, reverse=True)


def one_pass(label: str, paths: list[Path], slowest: int = 0) -> dict[Path, tuple[float, float]]:
    """Run every notebook once; print a line per notebook (and its slowest cells) and the total."""
    times = {}
    for path in paths:
        seconds, cpu, cells = run(path)
        times[path] = seconds, cpu
        flag = "  over budget" if seconds > NOTEBOOK_BUDGET else ""
        print(f"{label:5s} {seconds:6.1f} s  cpu {cpu:6.1f} s  load {os.getloadavg()[0]:4.1f}  {path.relative_to(ROOT)}{flag}",
              flush=True)
        for cell_seconds, number, first in cells[:slowest]:
            print(f"        {cell_seconds:5.1f} s  cell {number:3d}  {first}", flush=True)
    total = sum(wall for wall, _ in times.values())
    print(f"{label:5s} {total:6.1f} s  total of {len(paths)} notebooks (budget {BOOK_BUDGET:.0f} s)\n", flush=True)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook of the book")
    parser.add_argument("--warm-only", action="store_true",
                        help="skip the cold pass; use the cache of JAX_COMPILATION_CACHE_DIR (default .cache/jax)")
    parser.add_argument("--cells", type=int, default=0, metavar="N", help="also print each notebook's N slowest cells")
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.notebooks] or notebooks(ROOT)
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
    if args.warm_only:
        os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(ROOT / ".cache" / "jax"))
        one_pass("warm", paths, args.cells)
        return 0
    with tempfile.TemporaryDirectory(prefix="jax-cache-") as cache:
        os.environ["JAX_COMPILATION_CACHE_DIR"] = cache  # kernels inherit it
        cold = one_pass("cold", paths, args.cells)
        warm = one_pass("warm", paths, args.cells)
    print("notebook (wall s, kernel cpu s)                       cold s  (cpu)  warm s  (cpu)")
    for path in paths:
        print(f"{str(path.relative_to(ROOT)):52s} {cold[path][0]:7.1f} {cold[path][1]:6.1f} {warm[path][0]:7.1f} {warm[path][1]:6.1f}")
    total = [sum(t[i] for t in times.values()) for times in (cold, warm) for i in (0, 1)]
    print(f"{'total':52s} {total[0]:7.1f} {total[1]:6.1f} {total[2]:7.1f} {total[3]:6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
