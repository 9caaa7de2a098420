"""attnbook.experiments: the stored results of chapters 6-11 are package data, read with importlib.resources, and
everything a chapter reads is among what the wheel ships (pyproject.toml's package-data)."""

from __future__ import annotations

import ast
import csv
import dataclasses
import fnmatch
import json
import re
import tomllib
from pathlib import Path

import equinox as eqx
import jax

from attnbook import experiments
from attnbook.experiments import ch08, ch09, ch10, ch11

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
    if "ch07.stored_ablations(" in code:
        names.add("transformer_ablations.csv")
    if "ch11.load_model(" in code:  # chapter 11 loads the final 2-layer checkpoints of both variants
        names |= {f"induction_heads/{v}_L2_s{s}_step01500.eqx" for v in ("plain", "curriculum") for s in range(3)}
    return names - {"induction_heads"}


def test_results_are_the_package_folder_read_with_importlib_resources():
    assert Path(str(experiments.RESULTS)) == experiments.source_folder() == PACKAGE / "experiments" / "results"


def test_every_file_a_chapter_reads_is_shipped_in_the_wheel():
    notebooks = sorted((ROOT / "chapters").glob("*/*.ipynb"))
    read = {n: names_read(n) for n in notebooks}
    assert all(read[n] for n in notebooks if n.name[:2] in ("05", "06", "07", "08", "09", "10", "11"))
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
    skeleton = ch11.make_model(2, seed=0)
    model = ch11.load_model("curriculum", 2, seed=0, step=ch11.SETTINGS.steps)
    assert ch11.checkpoint("curriculum", 2, 0, 1500, experiments.RESULTS / "induction_heads").is_file()
    assert not eqx.tree_equal(model, skeleton)
    assert jax.tree.structure(model) == jax.tree.structure(skeleton)


def test_the_stored_runs_record_the_settings_chapters_read():
    """Chapters 9-11 take their settings from the experiments' homes (chNN.SETTINGS); the stored JSON files must
    record the same, or the chapter would describe a run other than the one it reads."""
    runs = experiments.read_json("induction_heads.json")["runs"]
    assert len(runs) == 2
    for name, run in runs.items():
        stored = {k: v for k, v in run["settings"].items() if k not in ("variant", "seeds")}
        assert stored == ch11.SETTINGS.to_dict(), name
        assert run["settings"]["variant"] in ch11.VARIANTS
    assert experiments.read_json("rope_scaling.json")["settings"] == ch09.rope_scaling_settings()
    assert experiments.read_json("long_context.json")["settings"] == ch09.long_context_settings()
    for name in ("long_context_renumbered.json", "long_context_finetune_lr.json"):
        assert experiments.read_json(name)["settings"] == ch09.followup_settings(), name
    quality = experiments.read_json("kv_heads_quality.json")["settings"]
    c = ch10.SETTINGS
    assert (quality["seeds"], quality["kv_heads"], quality["uptrain_to"], quality["uptrain_steps"]) == (
        list(c.seeds), list(c.kv_heads), list(c.uptrain_to), c.uptrain_steps)
    assert quality["uptrain_data"] == f"default_rng({c.uptrain_data_seed} + seed)"
    latent = experiments.read_json("latent_quality.json")["settings"]
    assert (latent["seeds"], latent["ranks"], latent["rope_dim"]) == (list(c.seeds), list(c.ranks), c.rope_dim)
    grid = experiments.read_json("kv_heads_uptraining_grid.json")["settings"]
    assert (grid["seeds"], grid["uptrain_to"], grid["eval_every"]) == (list(c.seeds), list(c.uptrain_to), c.grid_every)
    recall = experiments.read_json("kv_heads_recall.json")["settings"]
    assert (recall["seeds"], recall["kv_heads"], recall["curve_block"]) == (
        list(c.seeds), list(c.recall_kv_heads), c.recall_curve_block)
    assert {k: recall[k] for k in ch10.RECALL.to_dict()} == ch10.RECALL.to_dict()
    assert experiments.read_json("kv_decoding.json")["settings"] == ch10.DECODING.to_dict()
    equal = experiments.read_json("kv_heads_equal_parameters.json")["settings"]
    assert (equal["seeds"], equal["kv_heads"]) == (list(c.seeds), list(c.uptrain_to))


def test_the_settings_test_fails_on_a_changed_setting():
    """The comparison above can fail: a setting changed by one is told apart from the stored one."""
    stored = {k: v for k, v in next(iter(experiments.read_json("induction_heads.json")["runs"].values()))[
        "settings"].items() if k not in ("variant", "seeds")}
    changed = dataclasses.replace(ch11.SETTINGS, repeated_period=ch11.SETTINGS.repeated_period + 1)
    assert changed.to_dict() != stored
    original = ch09.SETTINGS
    try:
        ch09.SETTINGS = dataclasses.replace(original, finetune_batch=original.finetune_batch + 1)
        assert ch09.long_context_settings() != experiments.read_json("long_context.json")["settings"]
    finally:
        ch09.SETTINGS = original


def test_run_info_records_what_every_stored_json_file_records():
    info = experiments.RunInfo("python bench/x.py")
    info.sample()
    meta = info.metadata(settings={"a": 1})
    assert list(meta)[:5] == ["date", "machine", "versions", "load_average_1min", "note"]
    assert meta["command"] == "python bench/x.py" and meta["settings"] == {"a": 1} and "total_seconds" in meta
    assert {"cpu_model", "cores", "jax", "backend"} <= set(meta["machine"])


def imported_modules(source: str) -> set[str]:
    """The top-level names of the modules a script imports (absolute imports only)."""
    tree = ast.parse(source)
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return names | {n.module.split(".")[0] for n in ast.walk(tree)
                    if isinstance(n, ast.ImportFrom) and n.module and n.level == 0}


def test_no_bench_script_imports_another():
    """A bench script is a command of its experiment's home (attnbook.experiments.chNN): what two runs share lives
    there, not in one script that the other imports."""
    scripts = {p.stem for p in (ROOT / "bench").glob("*.py")}
    assert {"kv_heads_quality", "rope_scaling", "induction_heads"} <= scripts
    for path in sorted((ROOT / "bench").glob("*.py")):
        found = imported_modules(path.read_text(encoding="utf-8")) & scripts
        assert not found, (path.name, found)
    # what bench/latent_quality.py imported before chapter 10's home held it: the check sees it
    assert imported_modules("from kv_heads_quality import OUT, SEEDS, held_out\n") & scripts == {"kv_heads_quality"}


def test_with_bos_prepends_the_token_and_keeps_every_other_target():
    x, y = ch08.training_data(0)  # (steps, batch, L)
    bx, by = ch08.with_bos(x, y)
    assert bx.shape == by.shape == x.shape[:-1] + (x.shape[-1] + 1,)
    assert (bx[..., 0] == ch08.SETTINGS.vocab_size).all() and (bx[..., 1:] == x).all()
    assert (by[..., 0] == x[..., 0]).all() and (by[..., 1:] == y).all()  # after BOS: the first token
    assert ch09.SETTINGS.bos_token == ch08.SETTINGS.vocab_size == int(bx.max())
