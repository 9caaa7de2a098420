"""Site assets that run outside Python (site/east-asian-line-breaks.lua, site/lang-switch.html),
when their runtimes are installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from book_copy import ROOT


def pandoc_command() -> list[str] | None:
    """Pandoc on PATH, or the one Quarto bundles (`quarto pandoc`), as the site build uses."""
    if shutil.which("pandoc"):
        return ["pandoc"]
    quarto = shutil.which("quarto") or ROOT / ".venv" / "bin" / "quarto"
    return [str(quarto), "pandoc"] if Path(quarto).exists() else None


@pytest.mark.skipif(pandoc_command() is None and os.environ.get("CI") != "true",
                    reason="pandoc is not installed (bash tools/setup.sh installs Quarto, which has it)")
def test_east_asian_line_break_filter():
    text = "日本語の文です。\n次の文です\nEnglish\n続き。\n\n- 項目の\n  続き\n"
    pandoc = pandoc_command()
    assert pandoc, "pandoc is missing under CI"
    run = lambda *args: subprocess.run([*pandoc, "-t", "html", *args], input=text, text=True,
                                       capture_output=True, check=True).stdout
    filtered = run("--lua-filter", str(ROOT / "site" / "east-asian-line-breaks.lua"))
    assert "文です。次の文です English 続き。" in filtered.replace("\n", " ")
    assert filtered == run("-f", "markdown+east_asian_line_breaks")
    # Unlike Pandoc's extension: no space after full-width punctuation before a Latin word (ch. 1 §1.8).
    text = "結果です。\nPress らは測りました。\n2 次の連鎖を使います\nPress らと同じです。\n"
    filtered = run("--lua-filter", str(ROOT / "site" / "east-asian-line-breaks.lua"))
    assert "結果です。Press らは測りました。2 次の連鎖を使います Press らと同じです。" in filtered.replace("\n", " ")


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_language_switch_targets():
    html = (ROOT / "site" / "lang-switch.html").read_text(encoding="utf-8")
    script = html.split("<script>")[1].split("</script>")[0]
    twin = script[script.index("function twin"):script.index("function switchLink")]
    cases = {
        "/repo/en/": ["en", "/repo/ja/"],
        "/repo/ja/index.html": ["ja", "/repo/en/index.html"],
        "/repo/en/chapters/en/01-positional-encoding.html":
            ["en", "/repo/ja/chapters/ja/01-positional-encoding.html"],
        "/home/me/book/_site/ja/chapters/ja/02-x.html": ["ja", "/home/me/book/_site/en/chapters/en/02-x.html"],
        "/repo/": None,
    }
    program = ('var LANGS = {en: "English", ja: "日本語"};\n' + twin
               + f"console.log(JSON.stringify({json.dumps(list(cases))}.map(twin)));")
    out = subprocess.run(["node", "-e", program], text=True, capture_output=True, check=True).stdout
    assert json.loads(out) == list(cases.values())


def chapter_titles(lang: str) -> list[tuple[str, str]]:
    """(number, title) of every numbered chapter of the edition's profile, the title from the
    notebook's first heading."""
    from tools import sitecheck

    titles = []
    for page in sitecheck.book_pages(ROOT, lang):
        if page.number is None or not page.number.isdigit():
            continue
        cells = json.loads((ROOT / page.source).read_text(encoding="utf-8"))["cells"]
        heading = next(line for cell in cells if cell["cell_type"] == "markdown"
                       for line in "".join(cell["source"]).splitlines() if line.startswith("# "))
        titles.append((page.number, heading[2:].split(" {#")[0].strip()))
    return titles


def test_preface_and_chooser_name_every_chapter():
    """Text kept current: each chapter the profiles list is named, with its number and title, in the
    Preface of its edition, and by its title in both languages on the chooser page."""
    chooser = (ROOT / "site" / "index.html").read_text(encoding="utf-8")
    for lang, mention in (("en", "Chapter {n}, {title}"), ("ja", "第 {n} 章　{title}")):
        preface = (ROOT / "chapters" / lang / "_preface.qmd").read_text(encoding="utf-8")
        titles = chapter_titles(lang)
        assert len(titles) >= 8
        for n, title in titles:
            assert mention.format(n=n, title=title) in preface, f"{lang} Preface does not name chapter {n}"
            assert title.replace("&", "&amp;") in chooser, f"site/index.html does not name {title!r}"


def test_japanese_references_keep_author_lists_latin():
    """site/book.csl: the Japanese edition writes "Press, Smith, and Lewis", never 「と」 or 「ほか」."""
    csl = (ROOT / "site" / "book.csl").read_text(encoding="utf-8")
    ja = csl[csl.index('<locale xml:lang="ja">'):]
    ja = ja[:ja.index("</locale>")]
    assert '<term name="and">and</term>' in ja and '<term name="et-al">et al.</term>' in ja
