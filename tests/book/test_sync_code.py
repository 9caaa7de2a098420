"""Copying code cells to a notebook's twin (tools/sync_code.py), on copies of the book
(tests/book_copy.py, tests/conftest.py).
"""

from __future__ import annotations

import nbformat
import pytest

from book_copy import read, synthetic_notebook
from tools import bookcheck, sync_code
from tools.book import lang_lines, shared_code, twin_path


def test_sync_round_trip_keeps_translated_options(book, pair):
    en, ja = pair
    nb_en, nb_ja = nbformat.read(en, 4), nbformat.read(ja, 4)
    k, cell = next((k, c) for k, c in enumerate(sync_code.code_cells(nb_en))
                   if shared_code(c))
    cell.source += "\nedited = 'in English'"
    twin = sync_code.code_cells(nb_ja)[k]
    twin.source = '#| fig-cap: "日本語の説明"\n' + twin.source
    nbformat.write(nb_en, en)
    nbformat.write(nb_ja, ja)
    assert bookcheck.check_code_parity(book)  # out of step before the sync

    report = sync_code.run(en)

    synced = sync_code.code_cells(nbformat.read(ja, 4))[k]
    assert f"code cells {k + 1}" in report
    assert "edited = 'in English'" in synced.source
    assert '#| fig-cap: "日本語の説明"' in synced.source
    assert not synced.outputs
    assert bookcheck.check_code_parity(book) == []
    assert 'LANG = "ja"' in "".join(c.source for c in sync_code.code_cells(nbformat.read(ja, 4)))


def test_sync_refuses_misaligned_cells(book, pair):
    en, ja = pair
    nb = nbformat.read(en, 4)
    nb.cells.append(nbformat.v4.new_code_cell("print('new in English')"))
    nbformat.write(nb, en)
    with pytest.raises(sync_code.SyncError, match="new in English"):
        sync_code.run(en)


def test_sync_new_creates_twin(book):
    en = book / "chapters" / "en" / "96-new.ipynb"
    nbformat.write(synthetic_notebook("en"), en)
    assert sync_code.main([str(en), "--new"]) == 0
    ja = twin_path(book, en)
    twin = nbformat.read(ja, 4)
    assert not any(c.outputs for c in sync_code.code_cells(twin))
    assert lang_lines(read(ja)) == [(1, "ja")]
    assert sync_code.main([str(en), "--new"]) == 1  # never overwrites a twin
