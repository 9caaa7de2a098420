"""tools/export_widget_data.py: the interactive figures' data files are what the tool writes now from bench/results/.

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
