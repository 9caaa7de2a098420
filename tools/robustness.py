"""Find every stored output that would change on another machine.

XLA compiles for the host CPU, so another processor (Intel or AMD, with or without AVX-512, ARM),
another thread count or another XLA build gives other last bits, and a training run amplifies them
into other printed numbers. This tool reproduces such machines on one: it re-executes notebooks with
nbval under deliberate perturbations and lists every cell whose compared output changed.

    python -m tools.robustness                                   # every perturbation, every notebook
    python -m tools.robustness -p nudge-up chapters/en/07-transformer.ipynb
    python -m tools.robustness -p nudge-up+one-core --training   # a combination, the chapters that train
    python -m tools.robustness --list                            # the perturbations, and what each does
    python -m tools.robustness --json report.json                # also write the findings as JSON

Each perturbation runs nbval on the notebooks in a fresh process, with its own empty compilation cache
(so a Japanese twin loads what its English twin compiled, as in CI), except ``no-cache``, which turns the
cache off. The run without any perturbation (``none``) comes first, so that a cell which already fails
here is not blamed on a perturbation. A cell counts as *fragile* when its output differs from the stored
one under some perturbation; a cell that *raises* is reported apart (SSE4.2 code cannot convert to
float16 in XLA at all: that is an XLA limitation, not a fragile output). The exit status is 1 when any
cell is fragile or raises where it should not.

How to write outputs that survive (the README's guide for authors says it too): print rounded values
whose precision is coarser than the spread this tool shows, booleans of claims with a margin, and ranks;
``nbval-ignore-output`` is for timings and machine names only.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NUDGE = "ATTNBOOK_NUDGE"  # read by attnbook.train.nudged


@dataclasses.dataclass(frozen=True)
class Perturbation:
    """One way to make this machine compute like another."""

    name: str
    what: str
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    xla_flags: tuple[str, ...] = ()
    prefix: tuple[str, ...] = ()  # a command put before the interpreter (taskset)
    cache: bool = True
    # Errors that are a known limitation of the perturbed platform, not of the book (message fragments).
    tolerated_errors: tuple[str, ...] = ()


PERTURBATIONS = {p.name: p for p in [
    Perturbation("none", "no perturbation: the reference run (a cell failing here fails everywhere)"),
    Perturbation("nudge-up", "every trained model starts one ulp above its initial parameters "
                 f"(${NUDGE}=up, read by attnbook.train.nudged): the last-bit change another CPU makes",
                 env={NUDGE: "up"}),
    Perturbation("nudge-down", f"as nudge-up, one ulp below (${NUDGE}=down)", env={NUDGE: "down"}),
    Perturbation("isa-avx2", "XLA generates code for AVX2 at most (--xla_cpu_max_isa=AVX2): a machine "
                 "without AVX-512", xla_flags=("--xla_cpu_max_isa=AVX2",)),
    Perturbation("isa-sse42", "XLA generates code for SSE4.2 at most (--xla_cpu_max_isa=SSE4_2): other "
                 "vector widths, so other summation orders; XLA cannot convert to float16 there",
                 xla_flags=("--xla_cpu_max_isa=SSE4_2",),
                 tolerated_errors=("Failed to materialize symbols",)),
    Perturbation("one-core", "the kernel pinned to one core (taskset -c 0): XLA and Eigen split work "
                 "for one thread instead of two", prefix=("taskset", "-c", "0")),
    Perturbation("no-cache", "JAX's compilation cache off: every program compiled in the kernel itself",
                 env={"JAX_ENABLE_COMPILATION_CACHE": "false"}, cache=False),
    Perturbation("xla-O0", "XLA's backend optimisations off (--xla_backend_optimization_level=0): "
                 "other fusion and vectorisation, so other rounding, as another XLA version gives",
                 xla_flags=("--xla_backend_optimization_level=0",)),
]}


def combine(*names: str) -> Perturbation:
    """The perturbations ``names`` at once, named ``a+b``: a reader's machine combines them (another CPU, so
    other last bits, *and* one core, or a narrower instruction set). Their variables, flags and command prefixes
    add up; the cache is off if any of them turns it off."""
    parts = [PERTURBATIONS[name] for name in names]
    env: dict[str, str] = {}
    for part in parts:
        clash = {k for k in part.env if k in env and env[k] != part.env[k]}
        if clash:
            raise ValueError(f"robustness: {'+'.join(names)} sets {sorted(clash)} twice, to different values")
        env.update(part.env)
    return Perturbation("+".join(names), "; and ".join(part.what for part in parts), env=env,
                        xla_flags=tuple(f for part in parts for f in part.xla_flags),
                        prefix=tuple(a for part in parts for a in part.prefix),
                        cache=all(part.cache for part in parts),
                        tolerated_errors=tuple(e for part in parts for e in part.tolerated_errors))


# The combinations run by default: each nudge (the last-bit change of another CPU) with one core and with each
# narrower instruction set. A fragile output may survive each perturbation alone and fail under two (chapter 7's
# training did, under nudge-up on one core).
COMBINATIONS = tuple(f"{nudge}+{other}" for nudge in ("nudge-up", "nudge-down")
                     for other in ("one-core", "isa-avx2", "isa-sse42"))
SINGLES = tuple(PERTURBATIONS)
PERTURBATIONS.update({name: combine(*name.split("+")) for name in COMBINATIONS})
DEFAULT = tuple(PERTURBATIONS)
# The chapters whose cells train models (train.fit, or training over seeds): the ones a last-bit change can
# move furthest, since training amplifies it.
TRAINING_CHAPTERS = ("02-scaled-dot-product-attention", "03-masking", "04-multi-head-attention",
                     "05-attention-free-transformer", "07-transformer", "08-positions-measured",
                     "09-longer-contexts", "10-smaller-caches", "11-induction-heads")


def perturbation(name: str) -> Perturbation:
    """A perturbation by name: one of PERTURBATIONS, or any ``a+b+...`` of the single ones."""
    if name in PERTURBATIONS:
        return PERTURBATIONS[name]
    parts = name.split("+")
    unknown = [part for part in parts if part not in SINGLES or part == "none"]
    if len(parts) < 2 or unknown:
        raise ValueError(f"robustness: unknown perturbation {name!r} (single ones: {', '.join(SINGLES)}; "
                         "combine them with '+', e.g. nudge-up+one-core)")
    return combine(*parts)


@dataclasses.dataclass
class Finding:
    """A cell whose run differed from the stored notebook."""

    notebook: str
    cell: str
    kind: str  # "output" (fragile), "error" (raised), "tolerated" (raised, a known platform limitation)
    detail: str

    def line(self) -> str:
        return f"{self.notebook}::{self.cell}  [{self.kind}]  {self.detail}"


def environment(p: Perturbation, cache_dir: Path) -> dict[str, str]:
    """The environment of the nbval run under ``p``: the caller's, with ``p``'s variables and flags."""
    env = {k: v for k, v in os.environ.items() if k != NUDGE}
    env[NUDGE] = ""  # set, so that the repository's conftest.py does not choose a nudge (empty: none)
    env.update(p.env)
    if p.xla_flags:
        env["XLA_FLAGS"] = " ".join([env.get("XLA_FLAGS", ""), *p.xla_flags]).strip()
    if p.cache:
        env["JAX_COMPILATION_CACHE_DIR"] = str(cache_dir)
    else:
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
    env["PYTHONHASHSEED"] = env.get("PYTHONHASHSEED", "0")
    return env


def command(p: Perturbation, notebooks: list[Path], junit: Path) -> list[str]:
    """The nbval command line (nbval's options only: the repository's addopts would add the tests)."""
    return [*p.prefix, sys.executable, "-m", "pytest", *map(str, notebooks), "-p", "no:cacheprovider", "-q",
            "--no-header", "-o", "addopts=", "--nbval", "--nbval-current-env", "--nbval-cell-timeout=300",
            f"--junitxml={junit}"]


ANSI = re.compile(r"(?:\x1b|#x1B)\[[0-9;]*m")  # colours of nbval's report (junit writes ESC as #x1B)


def _detail(element: ET.Element) -> tuple[str, str]:
    """(kind, first telling line) of a junit failure or error element from nbval."""
    text = ANSI.sub("", (element.get("message") or "") + "\n" + (element.text or ""))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if "cell execution caused an exception" in text.lower() or element.tag == "error":
        errors = [line for line in lines if "Error" in line or "Exception" in line]
        return "error", (errors[-1] if errors else lines[0] if lines else "")[:300]
    changed = [line for line in lines if line.startswith(("-", "+")) and not line.startswith(("---", "+++"))]
    return "output", (" | ".join(changed[:4]) if changed else lines[0] if lines else "")[:300]


def findings(junit: Path, p: Perturbation, notebooks: list[Path]) -> tuple[list[Finding], int]:
    """The cells that failed in nbval's junit report, and the number of cells run."""
    # junit names a notebook by its path with dots for slashes (and no leading dots for ../).
    names = {str(n).replace("/", ".").lstrip("."): str(n) for n in notebooks}
    tree = ET.parse(junit)
    found, count = [], 0
    for case in tree.iter("testcase"):
        count += 1
        for element in list(case):
            if element.tag not in ("failure", "error"):
                continue
            kind, detail = _detail(element)
            text = (element.get("message") or "") + (element.text or "")
            if kind == "error" and any(t in text for t in p.tolerated_errors):
                kind = "tolerated"
            classname = case.get("classname") or ""
            notebook = next((path for name, path in names.items() if classname.endswith(name)), classname)
            found.append(Finding(notebook, case.get("name", "?"), kind, detail))
    return found, count


def run(p: Perturbation, notebooks: list[Path], workdir: Path, cache_dir: Path | None = None
        ) -> tuple[list[Finding], int, float]:
    """Run nbval under ``p``; returns the findings, the cells run and the seconds taken.

    ``cache_dir``: the compilation cache to use; by default a new empty one in ``workdir``. A nudge
    changes values, not programs, so a run under it may share the tests' cache (tools/jax_cache.py).
    """
    if cache_dir is None:
        cache_dir = workdir / f"cache-{p.name}"
        shutil.rmtree(cache_dir, ignore_errors=True)
    junit = workdir / f"{p.name}.xml"
    start = time.perf_counter()
    result = subprocess.run(command(p, notebooks, junit), cwd=ROOT, env=environment(p, cache_dir),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seconds = time.perf_counter() - start
    if not junit.exists():
        raise RuntimeError(f"robustness: nbval under {p.name} wrote no report:\n{result.stdout[-3000:]}")
    found, count = findings(junit, p, notebooks)
    return found, count, seconds


def _shown(path: Path) -> Path:
    path = path.resolve()
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks (default: every notebook of the book)")
    parser.add_argument("-p", "--perturb", action="append",
                        help="a perturbation to run, or several joined by '+' (repeatable; default: every single "
                             "one and the combinations of COMBINATIONS, 'none' first)")
    parser.add_argument("--training", action="store_true",
                        help="only the notebooks of the chapters that train (TRAINING_CHAPTERS), both editions")
    parser.add_argument("--list", action="store_true", help="list the perturbations and exit")
    parser.add_argument("--json", type=Path, help="also write the findings to this file")
    args = parser.parse_args(argv)
    if args.list:
        for p in PERTURBATIONS.values():
            print(f"{p.name:21s} {p.what}")
        return 0
    from tools.book import notebooks as book_notebooks

    paths = [_shown(p) for p in (args.notebooks or book_notebooks(ROOT))]
    if args.training:
        paths = [p for p in paths if p.stem in TRAINING_CHAPTERS]
    try:
        chosen = [perturbation(name) for name in (args.perturb or DEFAULT)]
    except ValueError as error:
        parser.error(str(error))
    report: dict[str, dict] = {}
    failed = False
    with tempfile.TemporaryDirectory(prefix="robustness-") as tmp:
        for p in chosen:
            name = p.name
            found, count, seconds = run(p, paths, Path(tmp))
            fragile = [f for f in found if f.kind != "tolerated"]
            failed |= bool(fragile)
            report[name] = {"cells": count, "seconds": round(seconds, 1),
                            "findings": [dataclasses.asdict(f) for f in found]}
            counts = {kind: sum(f.kind == kind for f in found) for kind in ("output", "error", "tolerated")}
            print(f"{name:21s} {count:5d} cells, {seconds:6.1f} s: {counts['output']} changed output(s), "
                  f"{counts['error']} error(s), {counts['tolerated']} tolerated error(s)", flush=True)
            for f in found:
                print("    " + f.line(), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"notebooks": [str(p) for p in paths], "runs": report}, indent=1,
                                        ensure_ascii=False) + "\n", encoding="utf-8")
    fragile_cells = sorted({(f["notebook"], f["cell"]) for r in report.values() for f in r["findings"]
                            if f["kind"] != "tolerated"})
    print(f"{len(fragile_cells)} cell(s) changed or raised under at least one perturbation")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
