"""attnbook.experiments: the stored results of chapters 6-11 are package data, read with importlib.resources, and
everything a chapter reads is among what the wheel ships (pyproject.toml's package-data)."""

from __future__ import annotations

import csv
import fnmatch
import json
import re
import tomllib
from pathlib import Path

import equinox as eqx
import jax

from attnbook import experiments, induction

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "lib" / "attnbook"


def shipped() -> list[str]:
    """The package-data globs of pyproject.toml, relative to lib/attnbook/."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-data"]["attnbook"]


def is_shipped(path: Path) -> bool:
    name = path.relative_to(PACKAGE).as_posix()
    return any(fnmatch.fnmatch(name, pattern) for pattern in shipped())


def names_read(notebook: Path) -> set[str]:
    """The stored files a notebook's code names: RESULTS / "x", read("x"), read_csv("x"), read_json("x"), and chapter
    11's checkpoints."""
    code = "\n".join("".join(c["source"]) for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"]
                     if c["cell_type"] == "code")
    names = set(re.findall(r'RESULTS / "([^"]+)"', code)) | set(re.findall(r'\bread\("([^"]+\.csv)"\)', code))
    names |= set(re.findall(r'\bread_(?:csv|json)\("([^"]+)"\)', code))  # experiments.read_csv / read_json
    if 'RESULTS / "induction_heads" / f"{variant}_L{depth}_s{seed}_step{step:05d}.eqx"' in code:
        names |= {f"induction_heads/{v}_L2_s{s}_step01500.eqx" for v in ("plain", "curriculum") for s in range(3)}
    return names - {"induction_heads"}


def test_results_are_the_package_folder_read_with_importlib_resources():
    assert Path(str(experiments.RESULTS)) == experiments.source_folder() == PACKAGE / "experiments" / "results"


def test_every_file_a_chapter_reads_is_shipped_in_the_wheel():
    notebooks = sorted((ROOT / "chapters").glob("*/*.ipynb"))
    read = {n: names_read(n) for n in notebooks}
    assert all(read[n] for n in notebooks if n.name[:2] in ("06", "07", "08", "09", "10", "11"))
    for notebook, names in read.items():
        for name in names:
            path = experiments.source_folder() / name
            assert path.is_file(), (notebook.name, name)
            assert is_shipped(path), (notebook.name, name, "not in pyproject.toml's package-data")
        code = notebook.read_text(encoding="utf-8")
        assert "bench/results" not in "".join(
            "".join(c["source"]) for c in json.loads(code)["cells"] if c["cell_type"] == "code"), notebook.name


def test_only_the_checkpoints_chapter_11_loads_are_shipped():
    checkpoints = sorted((experiments.source_folder() / "induction_heads").glob("*.eqx"))
    assert len(checkpoints) == 24
    assert sorted(p.name for p in checkpoints if is_shipped(p)) == sorted(
        f"{v}_L2_s{s}_step01500.eqx" for v in ("curriculum", "plain") for s in range(3))


def test_reading_through_the_package_gives_the_stored_values():
    for path in sorted(experiments.source_folder().glob("*.csv")):
        with open(path, encoding="utf-8", newline="") as f:
            assert experiments.read_csv(path.name) == list(csv.DictReader(f)), path.name
    for path in sorted(experiments.source_folder().glob("*.json")):
        assert experiments.read_json(path.name) == json.loads(path.read_text(encoding="utf-8")), path.name
    rows = experiments.read_csv("attention_cost.csv")
    assert len(rows) == 154 and {"method", "mode", "T", "temp_bytes"} <= set(rows[0])


def test_a_shipped_checkpoint_loads_into_chapter_11s_model():
    s = next(iter(experiments.read_json("induction_heads.json")["runs"].values()))["settings"]
    skeleton = induction.AttentionOnlyLM(d_model=s["d_model"], depth=2, heads=s["heads"], encoding=s["encoding"],
                                         key=jax.random.key(0))
    model = eqx.tree_deserialise_leaves(experiments.RESULTS / "induction_heads" / "curriculum_L2_s0_step01500.eqx",
                                        skeleton)
    assert not eqx.tree_equal(model, skeleton)


def test_run_info_records_what_every_stored_json_file_records():
    info = experiments.RunInfo("python bench/x.py")
    info.sample()
    meta = info.metadata(settings={"a": 1})
    assert list(meta)[:5] == ["date", "machine", "versions", "load_average_1min", "note"]
    assert meta["command"] == "python bench/x.py" and meta["settings"] == {"a": 1} and "total_seconds" in meta
    assert {"cpu_model", "cores", "jax", "backend"} <= set(meta["machine"])
