"""The glossary (glossary.csv, tools/glossary.py) and its check (tools/bookcheck.py, check_glossary)
on copies of the book (tests/book_copy.py, tests/conftest.py).
"""

from __future__ import annotations

import pytest

from book_copy import add_markdown, append_line, edit, mentions, name, new_problems, plain_code_cell
from tools import bookcheck, glossary


def test_glossary_pages_follow_the_table(book):
    table = book / glossary.TABLE
    problems = new_problems(bookcheck.check_glossary, book, lambda: append_line(
        table, "sparse attention,スパースアテンション,A new term.,新しい用語。,疎アテンション,"))
    assert mentions(problems, "chapters/en/glossary.qmd", "python -m tools.glossary")
    assert mentions(problems, "chapters/ja/glossary.qmd", "python -m tools.glossary")
    assert mentions(problems, "chapters/en/glossary.qmd", "'sparse attention'")
    assert glossary.main(["--root", str(book), "--check"]) == 1

    assert glossary.main(["--root", str(book)]) == 0

    assert glossary.main(["--root", str(book), "--check"]) == 0
    assert not mentions(bookcheck.check_glossary(book), "glossary.qmd")
    page = glossary.page_path(book, "ja").read_text(encoding="utf-8")
    assert "| sparse attention | スパースアテンション | 新しい用語。 | 疎アテンション |" in page


def test_english_page_lists_every_term(book):
    page = glossary.page_path(book, "en")
    text = page.read_text(encoding="utf-8")
    assert "| einsum |" in text
    problems = new_problems(bookcheck.check_glossary, book, lambda: page.write_text(
        "".join(line for line in text.splitlines(keepends=True) if not line.startswith("| einsum |")),
        encoding="utf-8"))
    assert mentions(problems, "chapters/en/glossary.qmd", "does not list the term 'einsum'")


def test_rejected_term_in_japanese_notebook(book, pair):
    _, ja = pair
    problems = new_problems(bookcheck.check_glossary, book, lambda: add_markdown(
        ja, "各行の注意重みの和は 1 です。"))
    assert mentions(problems, name(book, ja), "'注意重み'", "アテンション重み")


def test_rejected_term_in_caption(book, pair):
    _, ja = pair

    def caption(nb):
        cell = plain_code_cell(nb)
        cell["source"] = '#| fig-cap: "ソフトマックスの出力"\n' + "".join(cell["source"])

    problems = new_problems(bookcheck.check_glossary, book, lambda: edit(ja, caption))
    assert mentions(problems, name(book, ja), "'ソフトマックス'")


def test_rejected_term_in_japanese_page(book):
    preface = book / "chapters" / "ja" / "_preface.qmd"
    problems = new_problems(bookcheck.check_glossary, book, lambda: append_line(
        preface, "\nこの本ではセルフアテンションを扱います。"))
    assert mentions(problems, "chapters/ja/_preface.qmd", "line", "'セルフアテンション'", "自己アテンション")


def test_rejected_term_broken_across_lines(book, pair):
    _, ja = pair
    problems = new_problems(bookcheck.check_glossary, book, lambda: add_markdown(
        ja, "各行の注意\n重みの和は 1 です。"))
    assert mentions(problems, name(book, ja), "'注意重み'")


def test_where_rejected_terms_may_appear(book, pair):
    en, ja = pair
    text = ("アテンション（注意機構）は重み付き平均です。`ソフトマックス` はコードの中です。\n\n"
            "```python\n# 注意重み\n```")
    assert new_problems(bookcheck.check_glossary, book, lambda: add_markdown(ja, text)) == []
    assert new_problems(bookcheck.check_glossary, book, lambda: add_markdown(en, "注意重み")) == []
    problems = new_problems(bookcheck.check_glossary, book, lambda: add_markdown(ja, "注意機構とは何か。"))
    assert mentions(problems, name(book, ja), "'注意機構'")


@pytest.mark.parametrize("row, expected", [
    ("attention mask,アテンションマスク,,,マスク,", "part of the chosen term"),
    ("einsum,einsum,,,アインシュタイン,", "listed twice"),
    ("sparse attention,スパースアテンション,,,疎アテンション,注意機構", "contains no rejected form"),
    ("sparse attention,スパースアテンション", "expected 6 columns"),
])
def test_broken_glossary_table(book, row, expected):
    problems = new_problems(bookcheck.check_glossary, book, lambda: append_line(book / glossary.TABLE, row))
    assert mentions(problems, glossary.TABLE, expected)


def test_missing_glossary_table(book):
    problems = new_problems(bookcheck.check_glossary, book, (book / glossary.TABLE).unlink)
    assert mentions(problems, glossary.TABLE, "missing")
