"""tools/export_widget_data.py: the interactive figures' data files are what the tool writes now from lib/attnbook/experiments/results/.

A stored result that changes (a rerun benchmark, a retrained model) must be re-exported
(``python -m tools.export_widget_data``); this test names the stale files. Each file must also stay small,
since a page loads it whole.
"""

from __future__ import annotations

import pytest

from tools import export_widget_data as export


@pytest.mark.parametrize("chapter", sorted(export.CHAPTERS))
def test_stored_widget_data_is_what_the_tool_writes(chapter: str) -> None:
    assert export.path(chapter).exists(), f"{export.path(chapter)} is missing: run python -m tools.export_widget_data"
    stored = export.path(chapter).read_text(encoding="utf-8")
    assert stored == export.render(chapter), (f"{export.path(chapter).name} is stale: "
                                              "run python -m tools.export_widget_data")
    assert len(stored.encode()) < 25_000, f"{export.path(chapter).name}: {len(stored.encode())} bytes"


def test_a_changed_result_is_found(tmp_path, monkeypatch) -> None:
    """The check compares with the stored results: a file exported from other numbers is reported stale."""
    monkeypatch.setattr(export, "WIDGETS", tmp_path)
    (tmp_path / "ch10-data.js").write_text(export.render("ch10").replace("0.563", "0.564"), encoding="utf-8")
    assert export.main(["--check", "ch10"]) == 1
    (tmp_path / "ch10-data.js").write_text(export.render("ch10"), encoding="utf-8")
    assert export.main(["--check", "ch10"]) == 0


def test_chapter11_exports_every_head_of_every_run(tmp_path, monkeypatch) -> None:
    """Chapter 11's file holds, for every stored run and step, each head's two scores layer by layer (as the CSV
    stores them, 3 decimals) and the two copies' losses (2 decimals); a grid with a run missing, or a run that
    stopped early, is refused rather than exported with holes."""
    import csv
    import shutil

    data = export.chapter11()
    scores = export.read("induction_heads_scores.csv")
    training = export.read("induction_heads_training.csv")
    assert len(data["runs"]) == len(data["variants"]) * len(data["depths"]) * len(data["seeds"])
    for r in scores[::97]:  # a sample of rows of every run
        run = data["runs"][f"{r['variant']}-{r['depth']}-{r['seed']}"]
        at, head = data["steps"].index(int(r["step"])), int(r["layer"]) * data["heads"] + int(r["head"])
        assert run["induction"][at][head] == round(float(r["induction"]), 3)
        assert run["previous_token"][at][head] == round(float(r["previous_token"]), 3)
    for r in training[::7]:
        run, at = data["runs"][f"{r['variant']}-{r['depth']}-{r['seed']}"], data["steps"].index(int(r["step"]))
        assert [run["code_first"][at], run["code_second"][at]] == [round(float(r["code_repeat_loss_first"]), 2),
                                                                   round(float(r["code_repeat_loss_second"]), 2)]

    for name in ("induction_heads_scores.csv", "induction_heads.json"):
        shutil.copy(export.RESULTS / name, tmp_path / name)
    monkeypatch.setattr(export, "RESULTS", tmp_path)
    last = (training[-1]["variant"], training[-1]["depth"], training[-1]["seed"])
    mine = lambda r: (r["variant"], r["depth"], r["seed"]) == last  # noqa: E731
    for rows, message in (([{**r, "seed": "9"} if mine(r) else r for r in training], "runs missing"),  # a hole
                          ([r for r in training if not (mine(r) and int(r["step"]) == data["steps"][-1])], "steps")):
        with open(tmp_path / "induction_heads_training.csv", "w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(training[0]))
            writer.writeheader()
            writer.writerows(rows)
        with pytest.raises(AssertionError, match=message):
            export.chapter11()
