"""The book's tests: its notebooks' structure (twins, parity, glossary, exercises), the authoring tools, the
set-up, the standalone notebooks and the PDF/EPUB. The fixtures: a copy of the book and its first twin notebooks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from book_copy import BOOK_FILES, ROOT, add_synthetic_chapter
from tools.book import twin_pairs


@pytest.fixture
def book(tmp_path: Path) -> Path:
    """A copy of the book's sources, with at least one pair of twin notebooks."""
    for name in BOOK_FILES:
        shutil.copy(ROOT / name, tmp_path / name)
    for folder in ("chapters", "site"):
        shutil.copytree(ROOT / folder, tmp_path / folder,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    if not any(twin_pairs(tmp_path)):
        add_synthetic_chapter(tmp_path)
    return tmp_path


@pytest.fixture
def pair(book: Path) -> tuple[Path, Path]:
    """The first (English, Japanese) notebook pair of the copy."""
    return next(twin_pairs(book))
