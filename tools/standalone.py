"""A chapter as a reader gets it: the notebook alone in a folder, the book's package installed from its wheel.

    python -m tools.standalone          # chapters 4-12 (English): the cells that read stored results
    python -m tools.standalone --all    # every notebook of both editions, end to end (the weekly run)

"Download the notebook" and Colab give a reader one .ipynb file and no clone of the repository. This tool
builds the wheel (``pip wheel --no-deps``), installs it with ``--no-deps`` into a fresh virtual environment
whose other packages (JAX, Equinox, ...) come from the running environment (a ``.pth`` line naming its
site-packages, after the new environment's own, so the wheel's attnbook is the one imported), copies each
notebook alone into an empty folder and runs it there with no ``PYTHONPATH``. A notebook that reads anything
outside the installed package fails here as it fails for a reader.

The default mode is cheap (tests/book/test_standalone.py runs it in every CI run): of chapters 4-12 it runs the set-up
cell (where ``RESULTS`` is defined and, in chapter 11, every stored table is read) and every later top-level
statement that reads stored results (``RESULTS``, ``read(...)``, ``META``, ``load(...)``, ``load_model(...)``, chapter
4's ``stored_runs()`` and ``stored_settings()``: the reading of tables, JSON files and checkpoints), each after the
earlier statements that define the names it needs, except the statements that train a model live. ``--all`` executes every notebook of both editions
with a Jupyter kernel of the new environment.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEASURED = ("04", "05", "06", "07", "08", "09", "10", "11", "12")

# Run inside the new environment, from the notebook's folder, with the notebook's name as its argument.
STORED_CELLS = r'''
import ast, json, re, sys, time
import matplotlib
matplotlib.use("Agg")
import attnbook
assert attnbook.__file__.startswith(sys.prefix), ("attnbook is not the installed wheel's", attnbook.__file__)
READS = re.compile(r"RESULTS|\bread\(|\bread_csv\(|\bread_json\(|\bMETA\b|\bload\(|\bload_model\(|\bstored_runs\(|\bstored_settings\(")
TRAINS = re.compile(r"experiment_train\(|\bfit\(|fit_seeds\(|fine_tune\(")
sources = [("".join(c["source"])) for c in json.load(open(sys.argv[1], encoding="utf-8"))["cells"]
           if c["cell_type"] == "code"]
sources = [re.sub(r"^(\s*)%.*$", r"\1pass", s, flags=re.M) for s in sources]  # IPython's magics: not run


def defines(node):
    names = set()
    for n in ast.walk(node):
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in n.names)
    return names


# Every top-level statement of every code cell, in the notebook's order: (cell, source, names it defines).
statements = []
for cell, source in enumerate(sources):
    for node in ast.parse(source).body:
        statements.append((cell, ast.get_source_segment(source, node, padded=True).lstrip(), defines(node)))
# The set-up cell: the one that names the results folder, or else the one that imports attnbook.experiments
# (``from attnbook import experiments`` or a chapter's home, ``from attnbook.experiments import ch11``).
setup = next(c for c, s, _ in statements
             if s.startswith("RESULTS =") or (s.startswith(("from attnbook import", "from attnbook.experiments import",
                                                            "import attnbook")) and "experiments" in s))
ns, done, began = {"__name__": "__main__"}, set(), time.time()


def run(k, depth=0):
    # Statement k, after the latest earlier statement that defines each name it lacks.
    while True:
        try:
            exec(compile(statements[k][1], f"cell {statements[k][0]}", "exec"), ns)
            done.add(k)
            return
        except NameError as error:
            earlier = [j for j in range(k) if j not in done and error.name in statements[j][2]]
            if not earlier or depth > 50:
                raise
            run(earlier[-1], depth + 1)


for k, (cell, source, _) in enumerate(statements):
    if k in done or cell < setup or TRAINS.search(source) or not (cell == setup or READS.search(source)):
        continue
    run(k)
print(json.dumps({"statements": len(done), "of": len(statements), "cells": sorted({statements[k][0] for k in done}),
                  "seconds": round(time.time() - began, 1)}))
'''

# Run inside the new environment: execute one notebook end to end with that environment's own kernel.
WHOLE_NOTEBOOK = r'''
import sys, nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, timeout=600, kernel_name="attnbook-standalone", resources={"metadata": {"path": "."}}).execute()
print("executed", sys.argv[1])
'''


class BuildError(RuntimeError):
    """The wheel could not be built here (no setuptools >= 77 and no index to fetch it from)."""


def build_wheel(out: Path) -> Path:
    """attnbook's wheel, built from this checkout into ``out``; without build isolation where the running
    environment has the setuptools pyproject.toml asks for (no index needed), else with it (pip fetches it)."""
    try:
        import setuptools

        isolated = int(setuptools.__version__.split(".")[0]) < 77
    except ImportError:
        isolated = True
    source = out / "source"  # a copy, so that the build's folders (build/, *.egg-info) stay out of the checkout
    for name in ("pyproject.toml", "README.md"):
        source.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "lib", source / "lib", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(source)]
    if not isolated:
        command.insert(5, "--no-build-isolation")
    done = subprocess.run(command, capture_output=True, text=True)
    wheels = sorted(out.glob("attnbook-*.whl"))
    if done.returncode or not wheels:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise BuildError("pip wheel failed: " + (lines[-1] if lines else f"exit status {done.returncode}"))
    return wheels[-1]


def make_environment(folder: Path, wheel: Path) -> Path:
    """A fresh virtual environment in ``folder`` with only the wheel installed in it (``--no-deps``); the other
    packages are found in the running environment's site-packages, named by a .pth line after its own."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--ignore-installed", "--no-compile", str(wheel)], check=True, env=environment(folder))
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "zz-attnbook-standalone.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    kernel = folder / "share" / "jupyter" / "kernels" / "attnbook-standalone"
    kernel.mkdir(parents=True)
    (kernel / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "attnbook (standalone)", "language": "python"}), encoding="utf-8")
    return python


def environment(venv: Path) -> dict[str, str]:
    """The reader's environment: no PYTHONPATH, this venv's kernels, JAX's cache kept if one is set."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "JUPYTER_PATH")}
    env.update(JUPYTER_PATH=str(venv / "share" / "jupyter"), MPLBACKEND="Agg", PYTHONNOUSERSITE="1")
    return env


def run_alone(python: Path, notebook: Path, work: Path, program: str) -> subprocess.CompletedProcess:
    """Copy ``notebook`` alone into an empty folder under ``work`` and run ``program`` (given on stdin) there."""
    folder = Path(tempfile.mkdtemp(prefix=notebook.stem + "-", dir=work))
    shutil.copy2(notebook, folder / notebook.name)
    return subprocess.run([str(python), "-", notebook.name], input=program, cwd=folder, capture_output=True,
                          text=True, env=environment(python.parent.parent))


def measured_notebooks(language: str = "en") -> list[Path]:
    return sorted(p for p in (ROOT / "chapters" / language).glob("*.ipynb") if p.name[:2] in MEASURED)


def all_notebooks() -> list[Path]:
    return sorted((ROOT / "chapters").glob("*/*.ipynb"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--all", action="store_true", help="every notebook of both editions, end to end")
    args = parser.parse_args(argv)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="attnbook-standalone-") as tmp:
        tmp = Path(tmp)
        began = time.time()
        wheel = build_wheel(tmp / "wheel")
        python = make_environment(tmp / "venv", wheel)
        print(f"{wheel.name}: {wheel.stat().st_size / 2**20:.2f} MiB; environment ready in "
              f"{time.time() - began:.0f} s", flush=True)
        for notebook in all_notebooks() if args.all else measured_notebooks():
            began = time.time()
            done = run_alone(python, notebook, tmp, WHOLE_NOTEBOOK if args.all else STORED_CELLS)
            status = "ok" if done.returncode == 0 else "FAILED"
            last = done.stdout.strip().splitlines()[-1:] if done.returncode == 0 else []
            print(f"{status} {notebook.relative_to(ROOT)} ({time.time() - began:.0f} s) {''.join(last)}", flush=True)
            if done.returncode:
                failed += 1
                print(done.stderr[-3000:], flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
