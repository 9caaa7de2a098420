"""tools/robustness.py: perturbed re-execution finds fragile outputs, and the book's training chapters have none.

The tool is tested on a notebook made for it (one output that any last-bit change alters, one that
none does). The chapters themselves need no second run here: nbval's own run of every notebook is
nudged (conftest.py: English one ulp up, Japanese one ulp down), so a fragile output fails the README's
test command before it fails on a reader's machine; the weekly workflow runs every notebook under every
perturbation.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

from attnbook import train
from tools import robustness

ROOT = Path(__file__).resolve().parents[2]
TRAINING_CHAPTERS = robustness.TRAINING_CHAPTERS

TRAIN = """
import jax, jax.numpy as jnp, numpy as np, optax, equinox as eqx
from attnbook import train
model = eqx.nn.Linear(3, 2, key=jax.random.key(0))
xs = np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32)
ys = (xs[:, 0] > 0).astype(np.int32)
loss = train.classification_loss(lambda m, x: m(x))
model, history = train.fit(model, loss, (xs, ys), optimizer=optax.adam(1e-1), steps=50, batch_size=16,
                           key=jax.random.key(1))
"""


def demo_notebook(path: Path) -> None:
    """Three cells: training (no output), a fragile print (every bit), a robust print (a claim with a margin)."""
    cells = [new_code_cell(TRAIN),
             new_code_cell("print(float(jnp.sum(model.weight)).hex())"),
             new_code_cell("print('final loss below 0.6:', float(history.train_loss[-1]) < 0.6)")]
    nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                            "language": "python"}})
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    nbformat.write(nb, path)


def test_nudge_moves_every_float_leaf_by_one_ulp(monkeypatch):
    import jax.numpy as jnp
    import numpy as np

    params = {"w": jnp.asarray([1.0, -2.0, 0.0], jnp.float32), "n": jnp.asarray([3], jnp.int32)}
    monkeypatch.delenv(train.NUDGE_VARIABLE, raising=False)
    assert train.nudged(params) is params
    for direction, sign in (("up", 1), ("down", -1)):
        monkeypatch.setenv(train.NUDGE_VARIABLE, direction)
        moved = train.nudged(params)
        expected = np.nextafter(np.asarray(params["w"]), sign * np.inf)
        np.testing.assert_array_equal(np.asarray(moved["w"]), expected)
        assert np.all(np.asarray(moved["w"]) != np.asarray(params["w"]))
        np.testing.assert_array_equal(np.asarray(moved["n"]), [3])  # integers are no parameters
    monkeypatch.setenv(train.NUDGE_VARIABLE, "sideways")
    with pytest.raises(ValueError, match="ATTNBOOK_NUDGE"):
        train.nudged(params)


def test_environment_of_each_perturbation(tmp_path, monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/dev/null")
    monkeypatch.setenv(train.NUDGE_VARIABLE, "up")  # the caller's nudge never leaks into other runs
    env = robustness.environment(robustness.PERTURBATIONS["none"], tmp_path)
    assert env[train.NUDGE_VARIABLE] == "" and env["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path)
    env = robustness.environment(robustness.PERTURBATIONS["isa-sse42"], tmp_path)
    assert env["XLA_FLAGS"] == "--xla_dump_to=/dev/null --xla_cpu_max_isa=SSE4_2"
    env = robustness.environment(robustness.PERTURBATIONS["no-cache"], tmp_path)
    assert "JAX_COMPILATION_CACHE_DIR" not in env and env["JAX_ENABLE_COMPILATION_CACHE"] == "false"
    assert robustness.command(robustness.PERTURBATIONS["one-core"], [tmp_path / "a.ipynb"],
                              tmp_path / "r.xml")[:3] == ["taskset", "-c", "0"]


def test_finds_the_fragile_cell_and_only_it(tmp_path):
    notebook = tmp_path / "demo.ipynb"
    demo_notebook(notebook)
    found, cells, _ = robustness.run(robustness.PERTURBATIONS["none"], [notebook], tmp_path)
    assert cells == 3 and found == []
    found, cells, _ = robustness.run(robustness.PERTURBATIONS["nudge-up"], [notebook], tmp_path)
    assert [(f.cell, f.kind) for f in found] == [("Cell 1", "output")], found
    assert "0x" in found[0].detail  # the changed line is shown


def test_a_raising_cell_is_an_error_not_an_output(tmp_path):
    notebook = tmp_path / "demo.ipynb"
    demo_notebook(notebook)
    nb = nbformat.read(notebook, as_version=4)
    nb.cells[2].source = "raise ValueError('boom')"
    nbformat.write(nb, notebook)
    found, _, _ = robustness.run(robustness.PERTURBATIONS["none"], [notebook], tmp_path)
    assert [(f.cell, f.kind) for f in found] == [("Cell 2", "error")] and "boom" in found[0].detail


def test_nbval_runs_each_edition_nudged(tmp_path):
    """The repository's conftest.py starts each chapter notebook's kernel with a nudge: English up, Japanese
    down, so the README's test command checks every stored output against a run whose training trajectories
    differ in their last bits (the chapters that train: TRAINING_CHAPTERS), and the Japanese kernel on one core
    (nudge-down+one-core at once). A caller's own choice is kept, and then nothing is pinned."""
    import subprocess
    import sys
    import tempfile

    cache = ROOT / ".cache"  # ignored by git: other tests compare the work tree's status
    cache.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:  # under the repository, so its conftest.py applies
        paths = []
        cores = len(__import__("os").sched_getaffinity(0))
        for lang, nudge, used in (("en", "up", cores), ("ja", "down", 1)):
            path = Path(tmp) / "chapters" / lang / "probe.ipynb"
            path.parent.mkdir(parents=True)
            cell = new_code_cell("import os; print(os.environ.get('ATTNBOOK_NUDGE'), len(os.sched_getaffinity(0)))",
                                 execution_count=1)
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"{nudge} {used}\n")]
            nbformat.write(new_notebook(cells=[cell], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}}), path)
            paths.append(str(path))
        run = lambda env: subprocess.run(  # noqa: E731
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval", "--nbval-current-env",
             "-o", "addopts=", *paths], cwd=ROOT, env=env, capture_output=True, text=True)
        env = {k: v for k, v in __import__("os").environ.items() if k != train.NUDGE_VARIABLE}
        done = run(env)
        assert done.returncode == 0, done.stdout[-3000:]
        done = run({**env, train.NUDGE_VARIABLE: ""})  # tools.robustness's 'none': no nudge, both fail
        assert done.returncode == 1 and "2 failed" in done.stdout, done.stdout[-3000:]


def test_combined_perturbations_add_up(tmp_path, monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    both = robustness.PERTURBATIONS["nudge-up+one-core"]
    env = robustness.environment(both, tmp_path)
    assert env[train.NUDGE_VARIABLE] == "up"
    assert robustness.command(both, [tmp_path / "a.ipynb"], tmp_path / "r.xml")[:3] == ["taskset", "-c", "0"]
    env = robustness.environment(robustness.perturbation("nudge-down+isa-avx2+no-cache"), tmp_path)
    assert env[train.NUDGE_VARIABLE] == "down" and env["XLA_FLAGS"] == "--xla_cpu_max_isa=AVX2"
    assert "JAX_COMPILATION_CACHE_DIR" not in env
    assert robustness.perturbation("nudge-up+isa-sse42").tolerated_errors  # SSE4.2's float16 limitation
    for name in ("nudge-up+nudge-down", "nudge-up+sideways", "none+one-core", "sideways"):
        with pytest.raises(ValueError, match="robustness"):
            robustness.perturbation(name)
    # Every nudge runs by default with one core and with each narrower instruction set.
    assert {"nudge-up+one-core", "nudge-down+one-core", "nudge-up+isa-avx2", "nudge-down+isa-sse42"} <= set(
        robustness.DEFAULT)


def test_weekly_workflow_runs_every_default_perturbation():
    import yaml

    workflow = yaml.safe_load((ROOT / ".github/workflows/robustness.yml").read_text(encoding="utf-8"))
    matrix = workflow["jobs"]["robustness"]["strategy"]["matrix"]["perturbation"]
    assert matrix == [name for name in robustness.DEFAULT if name != "none"]
