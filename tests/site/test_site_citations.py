"""Citations in each edition's typography: 「（Haviv et al. 2022）」 in the Japanese edition, with no space
before 「（」 or after 「）」; "(Haviv et al. 2022)" in the English one (issue 24).

The Japanese profile cites with site/book-ja.csl (full-width parentheses) and runs site/ja-citations.lua
(which drops the spaces around a citation's parentheses and writes a narrative citation's authors
as text before its year: 「Ainslie et al.（2023）は」); the English profile keeps site/book.csl. The
built pages of both editions are checked by tools/sitecheck.py's check_citations, which
tests/site/test_site.py runs on the site it builds; here the check is run on pages made for it, and the style
and the filter through Pandoc, as Quarto runs them (the filters first, then citeproc).
"""

from __future__ import annotations

import os
import subprocess

import pytest

from book_copy import ROOT
from test_site_assets import pandoc_command
from tools import sitecheck

CSL, CSL_JA = ROOT / "site" / "book.csl", ROOT / "site" / "book-ja.csl"
LAYOUT, LAYOUT_JA = '<layout prefix="(" suffix=")" delimiter="; ">', '<layout prefix="（" suffix="）" delimiter="; ">'


def test_the_japanese_style_differs_only_in_its_parentheses():
    english, japanese = CSL.read_text(encoding="utf-8"), CSL_JA.read_text(encoding="utf-8")
    assert english.count(LAYOUT) == 1 and japanese.count(LAYOUT_JA) == 1
    start = japanese.index("    <!-- The Japanese edition's one change")  # the note that says why
    end = japanese.index("-->\n", start) + len("-->\n")
    assert (japanese[:start] + japanese[end:]).replace(LAYOUT_JA, LAYOUT) == english


def test_each_profile_cites_with_its_style():
    from tools.book import load_yaml, profile_path

    shared = load_yaml(ROOT / "_quarto.yml")
    ja, en = load_yaml(profile_path(ROOT, "ja")), load_yaml(profile_path(ROOT, "en"))
    assert shared["csl"] == "site/book.csl" and "csl" not in en
    assert ja["csl"] == "site/book-ja.csl" and "site/ja-citations.lua" in ja["filters"]
    assert "site/ja-citations.lua" not in shared["filters"] + en.get("filters", [])


SOURCE = """位置を学ぶことが報告されています [@haviv2022]。
AFT [@zhai2021] は速いです。Su ら [-@su2021] の RoPE です。
MLA [@deepseek2024v2, 2.1 節] です。二つの方法
[@bloc97ntk; @roziere2023codellama] があります。
@ainslie2023gqa は、モデルを変換します。
結果は @fig-x と同じです。
"""


def render(*args: str) -> str:
    pandoc = pandoc_command()
    assert pandoc, "pandoc is missing under CI"
    return subprocess.run([*pandoc, "-f", "markdown", "-t", "plain", "--wrap=none", "-M", "lang=ja",
                           "--bibliography", str(ROOT / "references.bib"), *args],
                          input=SOURCE, text=True, capture_output=True, check=True).stdout  # stderr: fig-x not found


@pytest.mark.skipif(pandoc_command() is None and os.environ.get("CI") != "true",
                    reason="pandoc is not installed (bash tools/setup.sh installs Quarto, which has it)")
def test_japanese_citations_in_full_width_parentheses_without_spaces():
    text = render("--lua-filter", str(ROOT / "site" / "east-asian-line-breaks.lua"),
                  "--lua-filter", str(ROOT / "site" / "ja-citations.lua"), "--citeproc", "--csl", str(CSL_JA))
    for expected in ("報告されています（Haviv et al. 2022）。", "AFT（Zhai et al. 2021）は速いです。",
                     "Su ら（2021）の RoPE", "MLA（DeepSeek-AI 2024, 2.1 節）です。",
                     "方法（bloc97 2023; Rozière et al. 2023）があります。",
                     "Ainslie et al.（2023）は、モデルを変換します。"):
        assert expected in text, (expected, text)
    # A cross-reference (a citation to Pandoc until Quarto resolves it) keeps its spaces: 「図 1.1 と」.
    assert "（fig-x?） と同じです。" in text, text
    # The English edition: its style, no filter, half-width parentheses and their spaces as written.
    text = render("--citeproc", "--csl", str(CSL))
    assert "報告されています (Haviv et al. 2022)。" in text and "AFT (Zhai et al. 2021) は" in text
    assert "Ainslie et al. (2023) は" in text


def page(folder, lang: str, body: str) -> None:
    path = folder / lang / "chapters" / lang / "x.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'<html><body><main id="quarto-document-content"><p>{body}</p></main></body></html>',
                    encoding="utf-8")


def cite(text: str) -> str:
    return f'<span class="citation" data-cites="k">{text}</span>'


@pytest.mark.parametrize("lang, body, found", [
    ("ja", "報告されています" + cite("（<a>Haviv et al. 2022</a>）") + "。", None),
    ("ja", "Su ら" + cite("（<a>2021</a>）") + "の", None),
    ("ja", "Ainslie et al." + cite("（<a>2023</a>）") + "は", None),
    ("ja", cite("Ainslie et al. （<a>2023</a>）") + "は", "space before"),
    ("ja", "報告されています" + cite("(<a>Haviv et al. 2022</a>)") + "。", "half-width"),
    ("ja", "報告されています " + cite("（<a>Haviv et al. 2022</a>）") + "。", "space before"),
    ("ja", "AFT" + cite("（<a>Zhai et al. 2021</a>）") + " は", "space after"),
    ("en", "as reported " + cite("(<a>Haviv et al. 2022</a>)") + ".", None),
    ("en", "as reported" + cite("（<a>Haviv et al. 2022</a>）") + ".", "full-width"),
])
def test_the_site_check_finds_citations_set_wrongly(tmp_path, lang: str, body: str, found: str | None):
    page(tmp_path, lang, body)
    problems = sitecheck.check_citations(ROOT, tmp_path)
    if found is None:
        assert problems == []
    else:
        assert len(problems) == 1 and found in problems[0], problems
