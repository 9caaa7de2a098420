"""Stored results: where they live (package data), how they are read, and how a run writes them.

``RESULTS`` is ``importlib.resources.files("attnbook.experiments") / "results"``: in a source checkout and in an
installed wheel alike a folder on disk (the package is never imported from a zip), so ``RESULTS / name`` can be
opened, read with ``.read_text()`` or handed to ``equinox.tree_deserialise_leaves``.

What ships in the wheel is listed in pyproject.toml's ``package-data``: every CSV and JSON file, and of chapter
11's checkpoints only the final ones of the 2-layer runs, which its notebook loads; the other checkpoints stay in
the repository.

A bench run writes into :func:`source_folder` (the folder of this source tree, not an installed copy) and stores
beside its numbers what :class:`RunInfo` records: date, machine, versions, load average, time.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import importlib.metadata
import importlib.resources
import json
import os
import pathlib
import platform
import time

RESULTS = importlib.resources.files("attnbook.experiments") / "results"

PACKAGES = ("jax", "jaxlib", "equinox", "optax", "numpy")
NOTE = "the machine was shared with other processes; timings are inflated by the load, losses are not"


def read_csv(name: str, folder=RESULTS) -> list[dict[str, str]]:
    """The rows of a stored CSV file, as strings (``csv.DictReader``); ``folder``: another results folder."""
    with (folder / name).open("r", encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def read_json(name: str, folder=RESULTS) -> dict:
    """A stored JSON file (a run's metadata and settings); ``folder``: another results folder."""
    return json.loads((folder / name).read_text(encoding="utf-8"))


def source_folder() -> pathlib.Path:
    """The results folder of this source tree, where a bench run writes (``lib/attnbook/experiments/results``)."""
    return pathlib.Path(__file__).resolve().parent / "results"


def command_line(program: str, description: str, commands: dict[str, tuple[str, str]], argv=None, *,
                 options=None, needs_out=lambda args: True):
    """The command line every stored experiment shares: ``program COMMAND --write`` (overwrite the stored file in
    :func:`source_folder`) or ``program COMMAND --out PATH`` (write elsewhere). ``commands`` maps each command to
    its help and the name of the file it stores; ``options(parsers)`` adds a command's own options (``parsers``:
    command -> its ``argparse`` parser); ``needs_out(args)`` is False where a command may run without a file.
    Returns the parsed arguments, the file to write (``None`` where none is needed) and the parser (for errors)."""
    parser = argparse.ArgumentParser(prog=program, description=description)
    subparsers = parser.add_subparsers(dest="run", required=True)
    parsers = {}
    for name, (help_text, stored) in commands.items():
        parsers[name] = subparsers.add_parser(name, help=help_text)
        parsers[name].add_argument("--write", action="store_true",
                                   help=f"write the stored {stored} (lib/attnbook/experiments/results/)")
        parsers[name].add_argument("--out", type=pathlib.Path, help=f"the file to write instead of {stored}")
    if options:
        options(parsers)
    args = parser.parse_args(argv)
    stored = commands[args.run][1]
    out = args.out or (source_folder() / stored if args.write else None)
    if out is None and needs_out(args):
        parser.error(f"say --write to overwrite the stored {stored}, or --out PATH")
    return args, out, parser


def write_csv(path: pathlib.Path, rows: list[dict]) -> None:
    """Rows (dicts with the same keys) as a CSV file, the folder made if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def machine() -> dict:
    """CPU model, memory, cores, platform, Python, JAX and its backend, XLA_FLAGS: what every run records."""
    import jax

    info = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and "cpu_model" not in info:
                    info["cpu_model"] = value.strip()
    except OSError:
        info["cpu_model"] = platform.processor() or "unknown"
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            total_kib = next(int(line.split()[1]) for line in f if line.startswith("MemTotal"))
        info["memory_gib"] = round(total_kib / 2**20, 1)
    except (OSError, StopIteration):
        pass
    info["cores"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    info.update(platform=platform.platform(), python=platform.python_version(), jax=jax.__version__,
                jaxlib=jax.lib.__version__ if hasattr(jax.lib, "__version__") else "", backend=jax.default_backend(),
                xla_flags=os.environ.get("XLA_FLAGS", ""))
    return info


class RunInfo:
    """The start time and the load average of one bench run, and the metadata that describes it.

        info = RunInfo("python bench/long_context.py")   # at the start: the time and the load before
        ...; info.sample()                               # after each part: the load now
        meta = info.metadata(settings=..., seconds=...)  # date, machine, versions, load (before, after, min/max)
    """

    def __init__(self, command: str | None = None):
        self.command = command
        self.start = time.time()
        self.load_before = round(os.getloadavg()[0], 2)
        self.loads: list[float] = []

    def sample(self) -> float:
        """Record the 1-minute load average now (after one part of the run) and return it."""
        self.loads.append(round(os.getloadavg()[0], 2))
        return self.loads[-1]

    def metadata(self, *, samples_name: str = "after_each_part", **extra) -> dict:
        """``date``, ``machine``, ``versions``, ``load_average_1min``, ``note``, ``command`` (if given), then
        ``extra``, then ``total_seconds``: the keys of the stored JSON files of chapters 8-11."""
        load = dict(before=self.load_before, after=round(os.getloadavg()[0], 2))
        if self.loads:
            load[samples_name] = dict(min=min(self.loads), max=max(self.loads))
        meta = dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                    machine=machine(), versions={p: importlib.metadata.version(p) for p in PACKAGES},
                    load_average_1min=load, note=NOTE)
        if self.command:
            meta["command"] = self.command
        meta.update(extra)
        meta["total_seconds"] = round(time.time() - self.start, 1)
        return meta
