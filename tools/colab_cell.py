"""The first code cell of every chapter: on Colab, install attnbook from the book's repository.

    python -m tools.colab_cell           # write (or update) the cell in every notebook
    python -m tools.colab_cell --check   # exit 1 if a notebook lacks the current cell

A reader who opens a chapter in Colab (each page links there, site/notebook-links.lua) has JAX but
not the book's library. The cell installs it with pip from the repository named once in
_quarto.yml (book.repo-url and book.repo-branch), so the address is written nowhere by hand: this
tool derives the cell from those settings and checks that every notebook has the current one (one
of the checks tools/bookcheck.py runs). Where attnbook is installed already, as after the README's
set-up, the cell does nothing (tests/book/test_colab_cell.py runs it both ways). pip's output is captured: when the
repository cannot be reached, the reader sees one line that names it, not pip's error. ``#| include: false``
keeps it off the website.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

from tools.book import code_cells, notebooks, read_notebook, rel, repository, source_lines

ROOT = Path(__file__).resolve().parent.parent
MARKER = "# On Colab, or wherever the book's library is missing, install it from the book's repository."


def requirement(root: Path) -> str:
    """pip's requirement for attnbook from the book's repository: 'attnbook @ git+https://...@branch'."""
    repo, branch = repository(root)
    return f"attnbook @ git+https://github.com/{repo}@{branch}"


def cell_source(root: Path) -> str:
    repo, branch = repository(root)
    return "\n".join([
        "#| include: false",
        MARKER,
        "# Where attnbook is installed already (as after the README's set-up), this cell does nothing.",
        "import importlib",
        "import importlib.util",
        "",
        'if importlib.util.find_spec("attnbook") is None:',
        "    from IPython.utils.capture import capture_output",
        "",
        "    with capture_output():  # pip's own lines; a failure is told below in one line",
        f'        %pip install --quiet "{requirement(root)}"',
        "    importlib.invalidate_caches()",
        '    if importlib.util.find_spec("attnbook") is None:',
        f'        print("attnbook could not be installed from https://github.com/{repo} (branch {branch}): '
        'check the network, or install it yourself with pip (see the README)")',
    ])


def is_colab_cell(cell: dict) -> bool:
    return cell.get("cell_type") == "code" and MARKER in source_lines(cell)


def apply(path: Path, root: Path = ROOT) -> bool:
    """Put the current cell before the notebook's first code cell; True if the file changed."""
    nb = nbformat.read(path, as_version=4)
    source = cell_source(root)
    existing = [c for c in nb.cells if is_colab_cell(c)]
    if len(existing) == 1 and existing[0].source == source:
        return False
    nb.cells = [c for c in nb.cells if not is_colab_cell(c)]
    first = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), len(nb.cells))
    nb.cells.insert(first, nbformat.v4.new_code_cell(source))
    nbformat.write(nb, path)
    return True


def check_colab_cell(root: Path) -> list[str]:
    """Every notebook's first code cell is the current install cell (derived from _quarto.yml)."""
    problems = []
    try:
        source = cell_source(root)
    except ValueError as error:
        return [str(error)]
    for path in notebooks(root):
        cells = code_cells(read_notebook(path))
        first = "\n".join(source_lines(cells[0][1])) if cells else ""
        if first != source:
            problems.append(f"{rel(root, path)}: the first code cell is not the Colab install cell "
                            "for book.repo-url in _quarto.yml; run python -m tools.colab_cell")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only report notebooks that need the cell")
    args = parser.parse_args(argv)
    if args.check:
        problems = check_colab_cell(ROOT)
        print("\n".join(problems) or "every notebook has the current Colab cell")
        return 1 if problems else 0
    for path in notebooks(ROOT):
        if apply(path):
            print(f"updated {rel(ROOT, path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
