"""The book's files: which notebooks and pages there are, in which language, and how to read them.

Every authoring tool reads the book through this module: the languages and the chapters folder,
the notebooks and documents of each language, a file's twin in the other language, the cells of a
notebook (their source, tags and the code twins share), and the Quarto settings the tools need
(profiles, chapter lists, the repository). The checks of the book's structure are in
tools/bookcheck.py.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import yaml

LANGS = ("en", "ja")
CHAPTERS = "chapters"
DOC_SUFFIXES = (".ipynb", ".qmd", ".md")

LANG_LINE = re.compile(r"""^LANG\s*=\s*["'](?P<lang>[A-Za-z_-]+)["']\s*(#.*)?$""")
OPTION_LINE = re.compile(r"^\s*#\|")


# ---------------------------------------------------------------------------------------------
# Files of the book


def rel(root: Path, path: Path) -> str:
    """`path` relative to the repository root, with forward slashes, for messages."""
    return path.relative_to(root).as_posix()


def language_files(root: Path, lang: str) -> list[Path]:
    """Every notebook and page of one language, partials (``_*.qmd``) included."""
    folder = root / CHAPTERS / lang
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*")
                  if p.suffix in DOC_SUFFIXES and p.is_file() and ".ipynb_checkpoints" not in p.parts)


def notebooks(root: Path) -> list[Path]:
    return [p for lang in LANGS for p in language_files(root, lang) if p.suffix == ".ipynb"]


def documents(root: Path) -> list[Path]:
    """Every source Quarto reads: pages at the root (index.qmd) and everything under chapters/."""
    top = sorted(p for p in root.glob("*.qmd") if p.is_file())
    return top + [p for lang in LANGS for p in language_files(root, lang)]


def language_of(root: Path, path: Path) -> str | None:
    parts = path.relative_to(root).parts
    return parts[1] if len(parts) > 2 and parts[0] == CHAPTERS and parts[1] in LANGS else None


def other_language(lang: str) -> str:
    return LANGS[1 - LANGS.index(lang)]


def twin_path(root: Path, path: Path) -> Path:
    """The same file in the other language: chapters/en/x.ipynb <-> chapters/ja/x.ipynb."""
    lang = language_of(root, path)
    if lang is None:
        raise ValueError(f"{path} is not under {CHAPTERS}/<{'|'.join(LANGS)}>/")
    parts = list(path.relative_to(root).parts)
    parts[1] = other_language(lang)
    return root.joinpath(*parts)


def twin_pairs(root: Path) -> Iterator[tuple[Path, Path]]:
    """(English notebook, Japanese notebook) for every notebook that has its twin."""
    for path in language_files(root, LANGS[0]):
        twin = twin_path(root, path)
        if path.suffix == ".ipynb" and twin.exists():
            yield path, twin


# ---------------------------------------------------------------------------------------------
# Notebooks and their cells


def read_notebook(path: Path) -> dict:
    with path.open(encoding="utf-8") as f:
        return json.load(f)


def source_lines(cell: dict) -> list[str]:
    """A cell's source as lines without their line endings (the source may be a str or a list)."""
    source = cell.get("source", "")
    return ("".join(source) if isinstance(source, list) else source).splitlines()


def code_cells(nb: dict) -> list[tuple[int, dict]]:
    """(notebook cell index, cell) of every code cell."""
    return [(i, c) for i, c in enumerate(nb.get("cells", [])) if c.get("cell_type") == "code"]


def tags(cell: dict) -> list[str]:
    return sorted(cell.get("metadata", {}).get("tags", []))


def lang_lines(nb: dict) -> list[tuple[int, str]]:
    """(notebook cell index, declared language) of every ``LANG = "..."`` line."""
    return [(i, m.group("lang")) for i, c in code_cells(nb)
            for m in map(LANG_LINE.match, source_lines(c)) if m]


def shared_code(cell: dict) -> list[tuple[int, str]]:
    """(line number, line) of the code that twins share: no ``#|`` options, no LANG line."""
    return [(n, line) for n, line in enumerate(source_lines(cell))
            if not OPTION_LINE.match(line) and not LANG_LINE.match(line)]


def shared_texts(cells: Iterable[dict]) -> list[str]:
    """The shared code of each cell as one string, for aligning two lists of cells."""
    return ["\n".join(line for _, line in shared_code(cell)) for cell in cells]


def describe_cell_difference(a: list[str], b: list[str]) -> str:
    """Which code cells were inserted, deleted or replaced going from `a` to `b` (1-based)."""
    parts = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        first = a[i1] if i1 < i2 else b[j1]
        snippet = (first.strip().splitlines() or [""])[0][:50]
        parts.append(f"{op} code cells {i1 + 1}-{i2} -> {j1 + 1}-{j2} ({snippet!r})")
    return "; ".join(parts)


# ---------------------------------------------------------------------------------------------
# Quarto settings: the profiles, their chapter lists, the repository


def load_yaml(path: Path) -> dict:
    with path.open(encoding="utf-8") as f:
        return yaml.safe_load(f) or {}


def profile_path(root: Path, lang: str) -> Path:
    return root / f"_quarto-{lang}.yml"


def repository(root: Path) -> tuple[str, str]:
    """(owner/name, branch) of book.repo-url and book.repo-branch in _quarto.yml."""
    book = load_yaml(root / "_quarto.yml").get("book") or {}
    url = str(book.get("repo-url", ""))
    m = re.match(r"^https?://github\.com/([^/]+/[^/]+?)(?:\.git)?/?$", url)
    if not m:
        raise ValueError(f"_quarto.yml: book.repo-url must be a GitHub repository, got {url!r}")
    return m.group(1), str(book.get("repo-branch") or "main")


def chapter_files(book: dict) -> list[str]:
    """The files a book config lists: chapters, parts given as files, references, appendices."""
    def walk(items: Iterable) -> Iterator[str]:
        for item in items or []:
            if isinstance(item, str):
                yield item
            elif isinstance(item, dict):
                for key in ("href", "file"):
                    if isinstance(item.get(key), str):
                        yield item[key]
                part = item.get("part")
                if isinstance(part, str) and part.endswith(DOC_SUFFIXES):
                    yield part
                yield from walk(item.get("chapters"))

    references = book.get("references")
    return [*walk(book.get("chapters")), *walk([references] if references else []),
            *walk(book.get("appendices"))]
