"""Copies of the book for the tests of the authoring tools: building them, breaking them, reading them.

The fixtures `book` (a copy of the book's sources in tmp_path) and `pair` (its first twin notebooks)
are in tests/conftest.py; the copies start from the real chapters, so the tests grow with the book,
and a synthetic chapter stands in while the book has none.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import yaml
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from tools.book import LANGS, rel, shared_code, tags
from tools.bookcheck import UNCOMPARED_TAGS

ROOT = Path(__file__).resolve().parent.parent
BOOK_FILES = ("_quarto.yml", "_quarto-en.yml", "_quarto-ja.yml", "index.qmd", "pyproject.toml",
              "environment.yml", "references.bib", "glossary.csv", "prh.yml")


def synthetic_notebook(lang: str) -> nbformat.NotebookNode:
    """A small chapter with a label, references, a LANG line, tags and stored outputs."""
    caption = {"en": "A line", "ja": "直線"}[lang]
    text = {"en": "# Demo {#sec-demo}\n\n@fig-line shows a line; see @sec-demo.",
            "ja": "# デモ {#sec-demo}\n\n@fig-line は直線です。[-@sec-demo] も参照。"}[lang]
    cells = [
        new_markdown_cell(text),
        new_code_cell(f'LANG = "{lang}"\nimport numpy as np',
                      outputs=[], execution_count=1),
        new_code_cell(f'#| label: fig-line\n#| fig-cap: "{caption}"\nprint(np.arange(3))',
                      outputs=[new_output("stream", name="stdout", text="[0 1 2]\n")],
                      execution_count=2),
        new_code_cell("print('timing')", metadata={"tags": ["nbval-ignore-output"]},
                      outputs=[new_output("stream", name="stdout", text=f"timing {lang}\n")],
                      execution_count=3),
    ]
    return new_notebook(cells=cells, metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3", "language": "python"}})


def add_synthetic_chapter(root: Path, name: str = "99-synthetic.ipynb") -> None:
    for lang in LANGS:
        nbformat.write(synthetic_notebook(lang), root / "chapters" / lang / name)
        profile = root / f"_quarto-{lang}.yml"
        config = yaml.safe_load(profile.read_text(encoding="utf-8"))
        config["book"]["chapters"].append(f"chapters/{lang}/{name}")
        profile.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")



def read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def write(path: Path, nb: dict) -> None:
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def edit(path: Path, change) -> None:
    nb = read(path)
    change(nb)
    write(path, nb)


def add_markdown(path: Path, text: str) -> None:
    edit(path, lambda nb: nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": text}))


def plain_code_cell(nb: dict) -> dict:
    """The first code cell whose outputs nbval compares and whose code has more than the LANG line."""
    return next(c for c in nb["cells"] if c["cell_type"] == "code"
                and not UNCOMPARED_TAGS & set(tags(c))
                and shared_code(c))



def new_problems(check, root: Path, breakage) -> list[str]:
    """The problems `check` reports after `breakage()` that it did not report before."""
    before = set(check(root))
    breakage()
    return [p for p in check(root) if p not in before]


def mentions(problems: list[str], *names: str) -> bool:
    return any(all(name in p for name in names) for p in problems)


def name(root: Path, path: Path) -> str:
    return rel(root, path)



def append_line(path: Path, line: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + line + "\n", encoding="utf-8")
