"""The book as an EPUB and a PDF, full part: build both formats of both editions and check them.

Runs only when asked, for it takes many minutes (LaTeX typesets some 300 pages per edition):

    ATTNBOOK_BOOKS=build python -m pytest -p no:xdist -o addopts= tests/book/test_books_build.py   # build, then check
    ATTNBOOK_BOOKS=built python -m pytest -p no:xdist -o addopts= tests/book/test_books_build.py   # check _books/ as built

.github/workflows/books.yml runs it weekly; tests/book/test_books.py (the README's test command) is the fast part,
where each check is also shown to fail on an input broken on purpose. Here the checks of tools/books.py run
on the real books, and EPUBCheck and pdffonts once more on copies broken on purpose.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from tools import books

ROOT = Path(__file__).resolve().parents[2]
MODE = os.environ.get("ATTNBOOK_BOOKS", "")
BOOKS = ROOT / "_books"
LANGS = ("en", "ja")

pytestmark = pytest.mark.skipif(MODE not in ("build", "built"),
                                reason="the books' build takes many minutes: ATTNBOOK_BOOKS=build (or =built)")


@pytest.fixture(scope="module")
def built() -> Path:
    if MODE == "build":
        subprocess.run(["bash", "tools/build_books.sh"], cwd=ROOT, check=True)
    for lang in LANGS:
        for kind, path in books.book_files(BOOKS, lang).items():
            if kind != "tex" and not path.is_file():
                pytest.fail(f"{path} is missing: bash tools/build_books.sh")
    return BOOKS


@pytest.mark.parametrize("lang", LANGS)
def test_epub_passes_epubcheck(built: Path, lang: str) -> None:
    assert books.check_epub(books.book_files(built, lang)["epub"]) == []


@pytest.mark.parametrize("lang", LANGS)
def test_pdf_fonts_glyphs_lines_chapters_pages(built: Path, lang: str) -> None:
    files = books.book_files(built, lang)
    assert books.check_fonts(files["pdf"]) == []
    assert books.check_text(files["pdf"]) == []
    assert books.check_log(files["log"]) == []
    assert books.check_chapters(files["pdf"], lang) == []
    assert books.check_pages(files["pdf"]) == []


def test_widgets_point_to_the_website(built: Path) -> None:
    for lang in LANGS:
        with zipfile.ZipFile(books.book_files(built, lang)["epub"]) as z:
            text = "".join(z.read(n).decode() for n in z.namelist() if n.endswith(".xhtml"))
        assert "attn-widget" not in text
        assert text.count('class="widget-fallback"') == 11  # one interactive figure per chapter
        assert f"https://attnbook.github.io/attnbook/{lang}/chapters/{lang}/01-positional-encoding.html" in text


def test_epubcheck_finds_a_broken_copy(built: Path, tmp_path: Path) -> None:
    source = books.book_files(built, "en")["epub"]
    broken = tmp_path / "broken.epub"
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(broken, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename.endswith("ch002.xhtml"):
                data = data.replace(b"</p>", b"<br></p>", 1)  # HTML, not XHTML
            zout.writestr(info, data)
    assert books.check_epub(broken)


def test_pdffonts_finds_a_font_not_embedded(built: Path, tmp_path: Path) -> None:
    """A PDF that uses a base-14 font without embedding it, written by hand."""
    pdf = tmp_path / "bare.pdf"
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 4 0 R"
               b" /Resources << /Font << /F1 5 0 R >> >> >>",
               b"<< /Length 37 >>\nstream\nBT /F1 12 Tf 20 100 Td (bare) Tj ET\nendstream",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out, offsets = b"%PDF-1.4\n", []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    pdf.write_bytes(out)
    if shutil.which("pdffonts") is None:
        pytest.fail("pdffonts is missing: bash tools/setup.sh --books")
    assert books.check_fonts(pdf) == ["bare.pdf: font not embedded: Helvetica"]
