"""A downloaded notebook runs: the wheel built from this checkout, installed into a fresh virtual environment,
runs each chapter from a folder that holds only the notebook (tools/standalone.py).

Every run: chapters 4-12 (English), their set-up cell and every statement that reads stored results.
``ATTNBOOK_STANDALONE=all`` (the weekly workflow): every notebook of both editions, end to end.
"""

from __future__ import annotations

import os

import pytest

from tools import standalone

WHOLE = os.environ.get("ATTNBOOK_STANDALONE") == "all"
NOTEBOOKS = standalone.all_notebooks() if WHOLE else standalone.measured_notebooks()


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The fresh environment's Python, with only the wheel installed in it, and a folder to work in."""
    work = tmp_path_factory.mktemp("standalone")
    try:
        wheel = standalone.build_wheel(work / "wheel")
    except standalone.BuildError as error:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"no wheel here ({error})")
    return standalone.make_environment(work / "venv", wheel), work


def test_the_wheel_holds_the_stored_results(installed):
    python, work = installed
    wheel = next((work / "wheel").glob("attnbook-*.whl"))
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    results = [n for n in names if n.startswith("attnbook/experiments/results/")]
    assert {n.rsplit("/", 1)[1] for n in results} >= {"attention_cost.csv", "induction_heads.json", "mha_runs.csv",
                                                      "curriculum_L2_s0_step01500.eqx"}
    assert not [n for n in results if n.endswith("_step00400.eqx")]  # checkpoints no chapter loads stay out
    assert wheel.stat().st_size < 4 * 2**20


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_notebook_runs_alone(installed, notebook):
    python, work = installed
    done = standalone.run_alone(python, notebook, work, standalone.WHOLE_NOTEBOOK if WHOLE else standalone.STORED_CELLS)
    assert done.returncode == 0, done.stderr[-4000:]
