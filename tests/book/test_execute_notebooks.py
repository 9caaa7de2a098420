"""Executing notebooks in place (tools/execute_notebooks.py)."""

from __future__ import annotations

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from tools import execute_notebooks


def test_execute_in_place(tmp_path):
    folder = tmp_path / "chapter"
    folder.mkdir()
    path = folder / "demo.ipynb"
    cell = new_code_cell("import os\nprint(os.path.basename(os.getcwd()))",
                         metadata={"tags": ["nbval-ignore-output"]})
    nbformat.write(new_notebook(cells=[cell]), path)

    execute_notebooks.execute(path, timeout=60)  # starts a real kernel, the one slow test here

    done = nbformat.read(path, 4).cells[0]
    assert done.outputs[0]["text"] == "chapter\n"  # ran in the notebook's folder
    assert done.metadata == {"tags": ["nbval-ignore-output"]}  # tags kept, no timing metadata


def test_execute_stops_on_failing_cell(tmp_path, monkeypatch):
    class FailingClient:
        """Stands in for nbclient's client: the second cell raises, as a real kernel would report."""

        def __init__(self, nb, on_cell_start, **kwargs):
            self.nb, self.on_cell_start = nb, on_cell_start

        def execute(self):
            self.on_cell_start(cell=self.nb.cells[1], cell_index=1)
            raise execute_notebooks.CellExecutionError("Traceback ...", "ZeroDivisionError",
                                                       "division by zero")

    path = tmp_path / "demo.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell("x = 1"), new_code_cell("1 / 0")]), path)
    before = path.read_bytes()
    monkeypatch.setattr(execute_notebooks, "NotebookClient", FailingClient)
    with pytest.raises(execute_notebooks.ExecutionFailed, match="(?s)demo.ipynb: cell 2 failed"):
        execute_notebooks.execute(path)
    assert path.read_bytes() == before  # a failed notebook is left as it was
    assert execute_notebooks.main([str(path)]) == 1


def test_adjacent_pieces_of_one_stream_are_joined():
    from nbformat.v4 import new_output

    pieces = [new_output("stream", name="stdout", text="a\n"), new_output("stream", name="stdout", text="b\n"),
              new_output("stream", name="stderr", text="warn\n"), new_output("stream", name="stdout", text="c\n"),
              new_output("display_data", data={"text/plain": "fig"}), new_output("stream", name="stdout", text="d\n"),
              new_output("stream", name="stdout", text=["e\n", "f\n"])]
    joined = execute_notebooks.join_streams(pieces)
    assert [(o["output_type"], o.get("name"), o.get("text")) for o in joined] == [
        ("stream", "stdout", "a\nb\n"), ("stream", "stderr", "warn\n"), ("stream", "stdout", "c\n"),
        ("display_data", None, None), ("stream", "stdout", "d\ne\nf\n")]
