"""The Colab install cell (tools/colab_cell.py): run as IPython would, and checked on copies of the
book (tests/book_copy.py, tests/conftest.py)."""

from __future__ import annotations

import nbformat
import yaml

from book_copy import ROOT, mentions, name
from tools import colab_cell


class FakeShell:
    """Stands in for IPython's get_ipython(): records the line magics a cell runs."""

    def __init__(self):
        self.magics: list[tuple[str, str]] = []

    def run_line_magic(self, name: str, line: str) -> None:
        self.magics.append((name, line))


def run_colab_cell(monkeypatch, attnbook_installed: bool) -> list[tuple[str, str]]:
    """Run the cell as IPython would (magics transformed), with or without attnbook importable."""
    import importlib.util

    from IPython.core.inputtransformer2 import TransformerManager

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: (
        real_find_spec(name, *args) if attnbook_installed or name != "attnbook" else None))
    shell = FakeShell()
    code = TransformerManager().transform_cell(colab_cell.cell_source(ROOT))
    exec(compile(code, "<colab cell>", "exec"), {"get_ipython": lambda: shell})
    return shell.magics


def test_colab_cell_is_inert_where_attnbook_is_installed(monkeypatch):
    assert run_colab_cell(monkeypatch, attnbook_installed=True) == []


def test_colab_cell_installs_attnbook_from_the_repository_in_quarto_yml(monkeypatch):
    config = yaml.safe_load((ROOT / "_quarto.yml").read_text(encoding="utf-8"))["book"]
    url = config["repo-url"].removesuffix("/").removesuffix(".git")
    assert run_colab_cell(monkeypatch, attnbook_installed=False) == [
        ("pip", f'install --quiet "attnbook @ git+{url}@{config["repo-branch"]}"')]


def test_colab_cell_follows_the_repository(book, pair):
    en, _ = pair
    colab_cell.apply(en, book)
    config = book / "_quarto.yml"
    config.write_text(config.read_text(encoding="utf-8").replace(
        "repo-url: https://github.com/attnbook/attnbook", "repo-url: https://github.com/fork/attnbook"),
        encoding="utf-8")
    problems = colab_cell.check_colab_cell(book)
    assert mentions(problems, name(book, en), "python -m tools.colab_cell")
    assert colab_cell.apply(en, book) and "github.com/fork/attnbook@" in en.read_text(encoding="utf-8")
    assert not colab_cell.apply(en, book)  # already current


def test_colab_cell_must_come_first(book, pair):
    en, _ = pair
    nb = nbformat.read(en, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code"]
    nb.cells.remove(cells[0])
    nb.cells.append(cells[0])  # moved to the end
    nbformat.write(nb, en)
    assert mentions(colab_cell.check_colab_cell(book), name(book, en))


def test_colab_cell_says_in_one_line_that_the_repository_cannot_be_reached(monkeypatch, capsys):
    class FailingPip(FakeShell):
        def run_line_magic(self, name: str, line: str) -> None:
            super().run_line_magic(name, line)
            print("ERROR: git clone failed\nTraceback (most recent call last): ...")  # what pip would print

    import importlib.util

    from IPython.core.inputtransformer2 import TransformerManager

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "attnbook" else real_find_spec(name, *a))
    shell = FailingPip()
    exec(compile(TransformerManager().transform_cell(colab_cell.cell_source(ROOT)), "<colab cell>", "exec"),
         {"get_ipython": lambda: shell})
    out = capsys.readouterr().out.splitlines()
    assert len(shell.magics) == 1 and len(out) == 1
    assert out[0].startswith("attnbook could not be installed from https://github.com/") and "Traceback" not in out[0]
