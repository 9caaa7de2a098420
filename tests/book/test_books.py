"""The book as an EPUB and a PDF, fast part: its configuration, the widget filter on a tiny document, and
each check of tools/books.py shown to fail on an input broken on purpose. A second or two, no Quarto,
no LaTeX. tests/book/test_books_build.py builds both books of both editions and checks them, when asked.
"""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
import yaml

from tools import books

ROOT = Path(__file__).resolve().parents[2]


def profile(name: str) -> dict:
    return yaml.safe_load((ROOT / f"_quarto-{name}.yml").read_text(encoding="utf-8"))


def test_books_profiles_only_add_to_a_language() -> None:
    """`books` is not in the language group, so the site's renders (--profile en / ja) never read it."""
    group = yaml.safe_load((ROOT / "_quarto.yml").read_text(encoding="utf-8"))["profile"]["group"]
    assert all("books" not in g and "books-ja" not in g for g in group)
    pdf = profile("books")["format"]["pdf"]
    assert pdf["pdf-engine"] == "lualatex" and pdf["latex-auto-install"] is False
    assert pdf["callout-icon"] is False  # books/tex/fontawesome5.sty stands in for the icons' package
    assert profile("books")["format"]["epub"]["html-math-method"] == "mathml"
    assert profile("books-ja")["format"]["pdf"]["documentclass"] == "ltjsbook"
    assert all((ROOT / f).is_file() for f in profile("books")["format"]["pdf"]["include-in-header"])


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_sidebar_links_the_books(lang: str) -> None:
    book = profile(lang)["book"]
    assert book["output-file"] == f"attention-{lang}"
    assert book["downloads"] == ["pdf", "epub"]
    assert books.book_files(ROOT / "_books", lang)["pdf"].name == f"attention-{lang}.pdf"


def pandoc() -> str:
    quarto = shutil.which("quarto") or str(ROOT / ".venv" / "bin" / "quarto")
    bundled = Path(quarto).resolve().parent / "tools" / "x86_64" / "pandoc"
    found = str(bundled) if bundled.exists() else shutil.which("pandoc")
    if found is None:
        pytest.skip("pandoc is not installed (Quarto bundles it: bash tools/setup.sh)")
    return found


# What Quarto's Lua runtime gives a filter, as far as books/widget-fallback.lua uses it; pandoc runs each
# filter in its own environment, so the shim is put in front of the filter's text (filter.lua).
SHIM = ("quarto = { doc = { is_format = function(f) return FORMAT == f"
        " or (f == \"epub\" and FORMAT:match(\"^epub\") ~= nil) or (f == \"pdf\" and FORMAT == \"latex\") end } }\n")

TINY = """---
lang: {lang}
book-site-url: https://example.org/book/
book:
  chapters: [index.qmd, chapters/{lang}/01-positional-encoding.ipynb]
---

# Preface

See [chapter 1](chapters/{lang}/01-positional-encoding.ipynb) and [its section](01-positional-encoding.ipynb#sec-x).

# Positional encoding {{#sec-positional-encoding}}

The interactive figure below redraws the heat-map.

<div class="attn-widget" data-widget="ch01-sinusoidal">

This interactive figure runs on the book's website.

</div>

$$\\begin{{aligned}} a &= \\max\\Bigl(m\\Bigr) \\end{{aligned}}$$
"""


def write_inputs(tmp_path: Path, lang: str) -> None:
    filter_text = (ROOT / "books" / "widget-fallback.lua").read_text(encoding="utf-8")
    (tmp_path / "filter.lua").write_text(SHIM + filter_text, encoding="utf-8")
    (tmp_path / "tiny.md").write_text(TINY.format(lang=lang), encoding="utf-8")


def run_filter(tmp_path: Path, lang: str, to: str) -> str:
    write_inputs(tmp_path, lang)
    result = subprocess.run([pandoc(), "tiny.md", "-t", to, "--lua-filter", "filter.lua"],
                            cwd=tmp_path, capture_output=True, text=True, check=True)
    return result.stdout


@pytest.mark.parametrize("lang, sentence", [("en", "This interactive figure runs on the book's website: "),
                                            ("ja", "この対話的な図は本書のウェブサイトで動きます：")])
def test_widget_becomes_a_sentence_and_a_link_to_its_page(tmp_path: Path, lang: str, sentence: str) -> None:
    page = f"https://example.org/book/{lang}/chapters/{lang}/01-positional-encoding.html"
    latex = run_filter(tmp_path, lang, "latex")
    assert "attn-widget" not in latex and page in latex
    assert sentence.split("：")[0].split("'")[-1].strip(": ") in latex
    # Links to a chapter's file point into the book: its first heading, or the anchor given.
    assert r"\hyperref[sec-positional-encoding]" in latex and r"\hyperref[sec-x]" in latex


def test_epub_gets_xhtml_and_mathml_it_can_parse(tmp_path: Path) -> None:
    html = run_filter(tmp_path, "en", "html")  # FORMAT "html" is the site: the filter leaves it alone
    assert 'class="attn-widget"' in html
    epub = tmp_path / "tiny.epub"
    subprocess.run([pandoc(), "tiny.md", "-o", str(epub), "--mathml", "--lua-filter", "filter.lua"],
                   cwd=tmp_path, capture_output=True, text=True, check=True)
    with zipfile.ZipFile(epub) as z:
        text = "".join(z.read(n).decode() for n in z.namelist() if n.endswith(".xhtml"))
    assert "widget-fallback" in text and "attn-widget" not in text
    assert "<math" in text and "\\Bigl" not in text  # converted, not left as TeX


# The checks, each on an input broken on purpose ---------------------------------------------------

def test_log_check_finds_missing_glyphs_and_wide_lines() -> None:
    log = ("Missing character: There is no ☂ (U+2602) in font [lmroman10-regular]:+tlig;!\n"
           "Overfull \\hbox (3.1pt too wide) in paragraph at lines 10--11\n"
           "Overfull \\hbox (48.2pt too wide) in paragraph at lines 20--21\n")
    problems = books.log_problems(log)
    assert len(problems) == 2
    assert "missing character ☂ (U+2602)" in problems[0] and "48.2pt" in problems[1]
    assert books.log_problems("Output written on attention-en.pdf (300 pages).\n") == []


PDFFONTS = """name                                 type              encoding         emb sub uni object ID
------------------------------------ ----------------- ---------------- --- --- --- ---------
ABCDEF+LMRoman10-Regular             CID Type 0C       Identity-H       yes yes yes      5  0
Helvetica                            Type 1            WinAnsi          no  no  no       9  0
"""


def test_font_check_finds_a_font_not_embedded() -> None:
    assert books.pdffonts_problems(PDFFONTS) == ["PDF: font not embedded: Helvetica"]
    assert books.pdffonts_problems(PDFFONTS.replace("no  no  no ", "yes no  no ")) == []


def test_text_check_finds_replacement_characters() -> None:
    assert books.text_problems("アテンション \ufffd を") and books.text_problems("アテンション") == []


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_chapter_check_finds_a_wrong_order_or_number(lang: str) -> None:
    titles = books.chapter_titles(lang)
    numbers = [n for n, _ in titles]
    chapters = sum(n.isdigit() for n in numbers)  # the numbered chapters, then the appendices A, B, C
    assert chapters >= 12 and numbers[:chapters] == [str(i) for i in range(1, chapters + 1)]
    assert numbers[chapters:chapters + 3] == ["A", "B", "C"]
    outline = [f"{n} {t}" for n, t in titles]
    assert books.outline_problems(outline, titles) == []
    swapped = outline[:]
    swapped[2], swapped[3] = swapped[3], swapped[2]
    assert books.outline_problems(swapped, titles)
    renumbered = [e.replace("3 ", "4 ", 1) if e.startswith("3 ") else e for e in outline]
    assert books.outline_problems(renumbered, titles)


def test_toc_entries_are_read_from_latex(tmp_path: Path) -> None:
    text = ("\\contentsline {chapter}{\\numberline {1}Positional encoding}{1}{chapter.1}%\n"
            "\\contentsline {section}{\\numberline {1.1}Tokens}{2}{section.1.1}%\n"
            "\\contentsline {chapter}{\\numberline {A}Errata}{300}{appendix.A}%\n"
            "\\contentsline {chapter}{\\numberline {第2章}マスク}{30}{chapter.2}%\n"
            "\\contentsline {chapter}{\\numberline {付録B}用語集}{310}{appendix.B}%\n")
    path = tmp_path / "attention-en.toc"
    path.write_text(text, encoding="utf-8")
    assert books.pdf_outline(path) == ["1 Positional encoding", "A Errata", "2 マスク", "B 用語集"]


def test_epub_fix_declares_mathml_in_the_navigation(tmp_path: Path) -> None:
    epub = tmp_path / "book.epub"
    with zipfile.ZipFile(epub, "w") as z:
        z.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        z.writestr("EPUB/content.opf", '<item id="nav" href="nav.xhtml" properties="nav" />')
        z.writestr("EPUB/nav.xhtml", "<a>Why divide by <math><msqrt><mi>d</mi></msqrt></math></a>")
        z.writestr("EPUB/text/ch001.xhtml",
                   '<a href="#sec-x" class="quarto-xref"><span>セクション&nbsp;3.2</span></a> '
                   '<a href="ch002.xhtml#sec-y" class="quarto-xref">セクション 1.5</a>')
    books.fix_epub(epub, "ja")
    with zipfile.ZipFile(epub) as z:
        assert z.infolist()[0].filename == "mimetype" and z.infolist()[0].compress_type == zipfile.ZIP_STORED
        assert 'properties="nav mathml"' in z.read("EPUB/content.opf").decode()
        text = z.read("EPUB/text/ch001.xhtml").decode()
        assert "3.2&nbsp;節" in text and "1.5\u00a0節</a>" in text and "セクション" not in text


def test_japanese_pdf_references_read_as_a_japanese_book(tmp_path: Path) -> None:
    """Quarto writes 「セクション~\\ref{}」; the Japanese PDF reads 「\\ref{}~節」 and 「第~\\ref{}~章」."""
    write_inputs(tmp_path, "ja")
    (tmp_path / "tiny.md").write_text(
        "---\nlang: ja\n---\n\n前の節（セクション\u00a0`\\ref{sec-x}`{=latex}）と"
        "チャプター\u00a0`\\ref{sec-y}`{=latex}を見ます。\n", encoding="utf-8")
    latex = subprocess.run([pandoc(), "tiny.md", "-t", "latex", "--lua-filter", "filter.lua"], cwd=tmp_path,
                           capture_output=True, text=True, check=True).stdout
    assert "（\\ref{sec-x}~節）と第~\\ref{sec-y}~章を" in latex and "セクション" not in latex


def test_inline_code_may_break_in_the_pdf(tmp_path: Path) -> None:
    """A long identifier in running text breaks after . _ ( , = and keeps every character, escaped."""
    write_inputs(tmp_path, "ja")
    (tmp_path / "tiny.md").write_text("---\nlang: ja\n---\n\n個でした。`attnbook.mha(d_model=1)` と `a{b}$c#d%e&f~g^h\\\\i`\n",
                                      encoding="utf-8")
    latex = subprocess.run([pandoc(), "tiny.md", "-t", "latex", "--lua-filter", "filter.lua"], cwd=tmp_path,
                           capture_output=True, text=True, check=True).stdout
    assert r"\texttt{attnbook.\allowbreak{}mha(\allowbreak{}d\_\allowbreak{}model=\allowbreak{}1)}" in latex
    assert r"\texttt{a\{b\}\$c\#d\%e\&f\textasciitilde{}g\^{}h\textbackslash{}\textbackslash{}i}" in latex


def test_site_link_check_requires_the_books_once_one_is_there(tmp_path: Path) -> None:
    """The sidebar's download links lead nowhere in a site built without the books (the site tests' build);
    once a book is in the site (tools/build_books.sh before tools/build_site.sh), a missing one is reported."""
    from tools import sitecheck

    for lang in ("en", "ja"):
        (tmp_path / lang).mkdir()
        (tmp_path / lang / "index.html").write_text(
            f'<html lang="{lang}"><body><a href="./attention-{lang}.pdf">PDF</a>'
            f'<a href="./attention-{lang}.epub">EPUB</a></body></html>', encoding="utf-8")
    (tmp_path / "index.html").write_text("<html><body></body></html>", encoding="utf-8")
    assert not [p for p in sitecheck.check_links(ROOT, tmp_path) if "attention-" in p]
    (tmp_path / "en" / "attention-en.epub").write_bytes(b"PK")
    problems = [p for p in sitecheck.check_links(ROOT, tmp_path) if "attention-" in p]
    assert len(problems) == 3 and any("attention-en.pdf" in p for p in problems)
