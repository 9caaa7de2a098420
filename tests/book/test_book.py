"""The book's files as the tools read them (tools/book.py).

Most of it runs under every other test of the tools: the fixtures of tests/conftest.py find the
twin notebooks of a copy of the book with it, and every check of tests/book/test_bookcheck.py reads the
book through it.
"""

from __future__ import annotations

from tools.book import chapter_files


def test_nested_parts_and_appendices():
    book = {"chapters": ["index.qmd", {"part": "Basics", "chapters": ["a.ipynb", {"href": "b.qmd"}]},
                         {"part": "p.qmd", "chapters": ["c.ipynb"]}],
            "appendices": ["errata.qmd"], "references": "refs.qmd"}
    assert chapter_files(book) == ["index.qmd", "a.ipynb", "b.qmd", "p.qmd", "c.ipynb",
                                   "refs.qmd", "errata.qmd"]
