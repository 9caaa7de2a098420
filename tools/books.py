"""The book as an EPUB and a PDF: the step after Quarto's render, and the checks of what it built.

    python -m tools.books fix-epub _books/ja/attention-ja.epub   # tools/build_books.sh runs it
    python -m tools.books check [_books]                          # every check below; exit 1 on a problem

tools/build_books.sh renders each edition with Quarto (the profiles books and books-ja,
_quarto-books.yml) into _books/<lang>/attention-<lang>.{epub,pdf}, with the LaTeX log beside the PDF.

fix-epub finishes the EPUB where pandoc's output is not valid EPUB 3 or not yet Japanese:

* the navigation document has MathML when a heading has a formula, and EPUB 3 then requires the
  `mathml` property on its manifest item, which pandoc declares only for the chapters (OPF-014);
* the Japanese edition's references to sections and chapters read 「3.2 節」「第 3 章」, as on the
  website (tools/japanese_xrefs.py, which tools/build_site.sh runs on the HTML pages).

The checks (tests/book/test_books.py runs each on a copy broken on purpose, tests/book/test_books_build.py on
the built books):

* check_epub: EPUBCheck (Debian's `epubcheck`) reports no error or warning;
* check_fonts: `pdffonts` lists every font as embedded;
* check_text: `pdftotext` has no U+FFFD (a character the font could not map);
* check_log: the LaTeX log has no "Missing character" (a glyph no font had) and no overfull line
  wider than a tolerance;
* check_chapters: the PDF's outline has every chapter and appendix of the profile's list, in order,
  with the website's numbers (1 ... 11, A ... C);
* check_pages: the page count is sane.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tools import japanese_xrefs

ROOT = Path(__file__).resolve().parent.parent
LANGS = ("en", "ja")
# An overfull line wider than this is a problem: a few points is a word that TeX could not break
# in a narrow table cell; a code line running into the margin is tens of points.
OVERFULL_TOLERANCE_PT = 12.0
PAGES = (150, 1500)


def book_files(books: Path, lang: str) -> dict[str, Path]:
    stem = books / lang / f"attention-{lang}"
    return {"epub": stem.with_suffix(".epub"), "pdf": stem.with_suffix(".pdf"),
            "log": stem.with_suffix(".log"), "tex": stem.with_suffix(".tex")}


# ---------------------------------------------------------------------------------------------- EPUB

# In the EPUB, Quarto writes a reference's text without the <span> of the website's pages.
EPUB_XREF = re.compile(r'(<a [^>]*class="quarto-xref"[^>]*>)(セクション|チャプター)(?:&nbsp;|\s|\u00a0)*([0-9A-Z.]+)</a>')


def japanese_xref_links(xhtml: str) -> str:
    """「セクション 3.2」 -> 「3.2 節」, 「チャプター 3」 -> 「第 3 章」, as tools/japanese_xrefs.py on the site."""
    def replace(m: re.Match) -> str:
        words = f"{m[3]}\u00a0節" if m[2] == "セクション" else f"第\u00a0{m[3]}\u00a0章"
        return f"{m[1]}{words}</a>"
    return EPUB_XREF.sub(replace, xhtml)


def fix_epub(path: Path, lang: str) -> None:
    """Rewrite the EPUB in place (see the module's docstring); the mimetype stays first and stored."""
    with zipfile.ZipFile(path) as zin:
        items = [(info, zin.read(info.filename)) for info in zin.infolist()]
    names = {info.filename: data for info, data in items}
    nav_has_math = any(name.endswith("nav.xhtml") and b"<math" in data for name, data in names.items())
    out = []
    for info, data in items:
        if info.filename.endswith(".opf") and nav_has_math:
            text = data.decode("utf-8")
            text = re.sub(r'(<item [^>]*properties=")nav(")', r"\1nav mathml\2", text)
            data = text.encode("utf-8")
        elif info.filename.endswith(".xhtml") and lang == "ja":
            data = japanese_xref_links(japanese_xrefs.rewrite(data.decode("utf-8"))).encode("utf-8")
        out.append((info, data))
    tmp = path.with_suffix(".tmp.epub")
    with zipfile.ZipFile(tmp, "w") as zout:
        for info, data in out:
            compress = zipfile.ZIP_STORED if info.filename == "mimetype" else zipfile.ZIP_DEFLATED
            zout.writestr(info.filename, data, compress_type=compress)
    tmp.replace(path)


def epubcheck_command() -> list[str] | None:
    """Debian's epubcheck is an executable jar; run it with java so binfmt_misc is not needed."""
    jar = next((p for p in (Path("/usr/share/java/epubcheck.jar"), Path("/usr/bin/epubcheck")) if p.exists()), None)
    if jar is not None and shutil.which("java"):
        return ["java", "-jar", str(jar)]
    return [shutil.which("epubcheck")] if shutil.which("epubcheck") else None


def check_epub(path: Path) -> list[str]:
    command = epubcheck_command()
    if command is None:
        return ["epubcheck is not installed: bash tools/setup.sh --books"]
    result = subprocess.run([*command, str(path)], capture_output=True, text=True)
    lines = (result.stdout + result.stderr).splitlines()
    problems = [f"{path.name}: {line}" for line in lines if re.match(r"^(FATAL|ERROR|WARNING)\(", line)]
    if result.returncode != 0 and not problems:
        problems.append(f"{path.name}: epubcheck exited {result.returncode}: {lines[-3:]}")
    return problems


# ----------------------------------------------------------------------------------------------- PDF

def pdffonts_problems(listing: str, name: str = "PDF") -> list[str]:
    """Fonts of `pdffonts` output whose `emb` column is not `yes`."""
    problems = []
    lines = listing.splitlines()
    header = next((i for i, line in enumerate(lines) if line.startswith("name") and " emb " in line), None)
    if header is None:
        return [f"{name}: unreadable pdffonts output"]
    # The columns are fixed-width, as the dashes under the header show.
    dashes = lines[header + 1]
    spans, start = [], 0
    for part in dashes.split(" "):
        spans.append((start, start + len(part)))
        start += len(part) + 1
    columns = lines[header].split()
    emb = columns.index("emb")
    for line in lines[header + 2:]:
        if not line.strip():
            continue
        lo, hi = spans[emb]
        if line[lo:hi].strip() != "yes":
            problems.append(f"{name}: font not embedded: {line[:spans[0][1]].strip()}")
    return problems


def check_fonts(pdf: Path) -> list[str]:
    listing = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True, check=True).stdout
    return pdffonts_problems(listing, pdf.name)


def text_problems(text: str, name: str = "PDF") -> list[str]:
    count = text.count("\ufffd")
    return [f"{name}: {count} replacement characters (U+FFFD) in its text"] if count else []


def check_text(pdf: Path) -> list[str]:
    text = subprocess.run(["pdftotext", "-enc", "UTF-8", str(pdf), "-"], capture_output=True, text=True,
                          check=True).stdout
    return text_problems(text, pdf.name)


def log_problems(log: str, name: str = "log", tolerance: float = OVERFULL_TOLERANCE_PT) -> list[str]:
    problems = []
    missing = re.findall(r"Missing character: There is no (.+?) in font (.+?)!", log)
    for char, font in sorted(set(missing)):
        problems.append(f"{name}: missing character {char} in font {font}")
    for width, where in re.findall(r"Overfull \\hbox \((\d+(?:\.\d+)?)pt too wide\) (.*)", log):
        if float(width) > tolerance:
            problems.append(f"{name}: overfull line {width}pt too wide {where.strip()}")
    return problems


def check_log(log: Path) -> list[str]:
    return log_problems(log.read_text(encoding="utf-8", errors="replace"), log.name)


def expected_chapters(lang: str) -> list[tuple[str, str]]:
    """(number, file stem) of every chapter and appendix in the profile's order: 1 ... 11, A ... C."""
    import yaml

    config = yaml.safe_load((ROOT / f"_quarto-{lang}.yml").read_text(encoding="utf-8"))
    chapters = [c for c in config["book"]["chapters"] if isinstance(c, str)]
    appendices = config["book"]["appendices"]
    numbered = [(str(i), c) for i, c in enumerate(chapters, 1)]
    numbered += [(chr(ord("A") + i), a) for i, a in enumerate(appendices)]
    return [(n, Path(f).stem) for n, f in numbered]


def chapter_titles(lang: str) -> list[tuple[str, str]]:
    """(number, title) from each chapter's first heading, as the website numbers them."""
    import json

    titles = []
    for number, stem in expected_chapters(lang):
        path = next((ROOT / "chapters" / lang).glob(f"{stem}.*"))
        if path.suffix == ".ipynb":
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
            source = next("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        else:
            source = path.read_text(encoding="utf-8")
        heading = next(line for line in source.splitlines() if line.startswith("# "))
        titles.append((number, re.sub(r"\s*\{.*\}\s*$", "", heading[2:]).strip()))
    return titles


def outline_problems(outline: list[str], titles: list[tuple[str, str]], name: str = "PDF") -> list[str]:
    """Each (number, title) appears in the outline as "<number> <title>", in order."""
    problems, position = [], 0
    normalise = lambda s: re.sub(r"\s+", " ", s.replace("\u00a0", " ")).strip()  # noqa: E731
    entries = [normalise(e) for e in outline]
    for number, title in titles:
        wanted = normalise(f"{number} {title}")
        try:
            position = entries.index(wanted, position) + 1
        except ValueError:
            where = "elsewhere in the outline" if wanted in entries else "not in the outline"
            problems.append(f"{name}: chapter '{wanted}' not found in order ({where})")
    return problems


def pdf_outline(tex_toc: Path) -> list[str]:
    """The chapter entries of LaTeX's .toc: "<number> <title>" (hyperref's \\numberline entries)."""
    entries = []
    text = tex_toc.read_text(encoding="utf-8", errors="replace")
    for m in re.finditer(r"\\contentsline \{chapter\}\{\\numberline \{([^}]*)\}(.*)\}\{\d+\}\{[^}]*\}%?$",
                         text, re.M):
        title = re.sub(r"\\[a-zA-Z]+\s*|[{}]", "", m[2]).strip()
        # The Japanese class (ltjsbook) numbers 「第1章」「付録A」: the site's 1 and A.
        number = re.sub(r"^第\s*(\d+)\s*章$|^付録\s*([A-Z])$", lambda n: n[1] or n[2], m[1].strip())
        entries.append(f"{number} {title}")
    return entries


def check_chapters(pdf: Path, lang: str) -> list[str]:
    toc = pdf.with_suffix(".toc")
    if not toc.is_file():
        return [f"{pdf.name}: no {toc.name} beside it (keep-tex in _quarto-books.yml)"]
    return outline_problems(pdf_outline(toc), chapter_titles(lang), pdf.name)


def page_count(pdf: Path) -> int:
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    return int(re.search(r"^Pages:\s+(\d+)", info, re.M)[1])


def check_pages(pdf: Path, bounds: tuple[int, int] = PAGES) -> list[str]:
    pages = page_count(pdf)
    return [] if bounds[0] <= pages <= bounds[1] else [f"{pdf.name}: {pages} pages, expected {bounds}"]


def check(books: Path) -> list[str]:
    problems = []
    for lang in LANGS:
        files = book_files(books, lang)
        for kind in ("epub", "pdf", "log"):
            if not files[kind].is_file():
                problems.append(f"{files[kind]} is missing: bash tools/build_books.sh")
        if files["epub"].is_file():
            problems += check_epub(files["epub"])
        if files["pdf"].is_file():
            problems += check_fonts(files["pdf"]) + check_text(files["pdf"]) + check_pages(files["pdf"])
            problems += check_chapters(files["pdf"], lang)
        if files["log"].is_file():
            problems += check_log(files["log"])
    return problems


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 3 and args[0] == "fix-epub":
        fix_epub(Path(args[1]), args[2])
        return 0
    if args and args[0] == "check" and len(args) <= 2:
        problems = check(Path(args[1]) if len(args) == 2 else ROOT / "_books")
        for problem in problems:
            print(problem)
        print(f"books: {len(problems)} problems")
        return 1 if problems else 0
    print("usage: python -m tools.books fix-epub EPUB LANG | check [BOOKS_DIR]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
