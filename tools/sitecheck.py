"""Checks of the rendered website (_site/), both editions, as a reader would find it.

    python -m tools.sitecheck            # after bash tools/build_site.sh; lists every problem

Each check takes the repository root and the site folder and returns a list of problems (empty
when all is well), so tests/site/test_site.py can run it on the real site and on a copy broken on
purpose. What needs a browser (the language switch, the chooser, search) is tested there too.

The site's layout, from tools/build_site.sh and the profiles:

    _site/index.html                          the language chooser
    _site/<lang>/index.html                   the preface (index.qmd)
    _site/<lang>/chapters/<lang>/<stem>.html  a chapter or appendix (chapters/<lang>/<stem>.*)
    _site/<lang>/chapters/<lang>/<stem>.ipynb the notebook, for download
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

from tools.book import LANGS, chapter_files, load_yaml, other_language, profile_path, repository

ROOT = Path(__file__).resolve().parent.parent
LOG_NAME = ".site-build.log"
# A chapter's number is its file's: chapters/<lang>/01-positional-encoding.ipynb is chapter 1.
CHAPTER_FILE = re.compile(r"^(?P<number>\d+)-")
# Words that name a numbered thing in the page's language, before its number.
XREF_WORDS = r"(?:Figure|Table|Equation|Section|Chapter|図|表|式|セクション|章)"
XREF_TEXT = re.compile(XREF_WORDS + r"\s*(?P<number>[0-9A-Z]+)(?:\.\d+)*$"
                       r"|^(?P<section>[0-9A-Z]+)(?:\.\d+)*\s*節$")  # 「3.2 節」
CHAPTER_MENTION = re.compile(r"\b[Cc]hapters?\s+(?P<number>\d+)|第\s*(?P<ja>\d+)\s*章")
CAPTION_NUMBER = re.compile(r"^(?:Figure|Table|図|表)\s*(?P<number>[0-9A-Z]+)\.\d+")
APPENDIX_TITLE = re.compile(r"^(?:Appendix|付録)\s*(?P<letter>[A-Z])\s*—")
EQUATION_TAG = re.compile(r"\\tag\{(?P<number>[0-9A-Z]+)\.\d+\}")
NBSP = "\u00a0"


# ---------------------------------------------------------------------------------------------
# A small DOM: enough of an HTML page to look at its elements and their text


class Element:
    def __init__(self, tag: str, attrs: dict[str, str], parent: Element | None):
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Element | str] = []

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self) -> Iterator[Element]:
        """This element and every element inside it, in document order.

        With a stack, not nested generators: those cost the depth of the tree for every element, and
        a chapter page is deep enough that check_links spent minutes in them."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(c for c in reversed(node.children) if isinstance(c, Element))

    def find_all(self, tag: str | None = None, cls: str | None = None) -> list[Element]:
        return [e for e in self.iter()
                if (tag is None or e.tag == tag) and (cls is None or cls in e.classes)]


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


class TreeBuilder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {}, None)
        self.node = self.root

    def handle_starttag(self, tag, attrs):
        element = Element(tag, {k: v or "" for k, v in attrs}, self.node)
        self.node.children.append(element)
        if tag not in VOID:
            self.node = element

    def handle_startendtag(self, tag, attrs):
        self.node.children.append(Element(tag, {k: v or "" for k, v in attrs}, self.node))

    def handle_endtag(self, tag):
        node = self.node
        while node is not self.root and node.tag != tag:
            node = node.parent
        if node is not self.root:
            self.node = node.parent

    def handle_data(self, data):
        self.node.children.append(data)


_DIGESTS: dict[tuple[Path, int, int], bytes] = {}
_PARSED: dict[bytes, Element] = {}


def digest(path: Path) -> bytes:
    """A digest of the file's bytes, computed once per version of the file (path, mtime and size)."""
    stat = path.stat()
    key = (path, stat.st_mtime_ns, stat.st_size)
    if key not in _DIGESTS:
        _DIGESTS[key] = hashlib.blake2b(path.read_bytes(), digest_size=16).digest()
    return _DIGESTS[key]


def parse(path: Path) -> Element:
    """The page's tree, parsed once per content: a copy of the site (tests/site/test_site.py breaks one
    page of a copy per test) reuses the trees of every page it did not change."""
    key = digest(path)
    if key not in _PARSED:
        builder = TreeBuilder()
        builder.feed(path.read_text(encoding="utf-8"))
        _PARSED[key] = builder.root
    return _PARSED[key]


def main_content(doc: Element) -> Element:
    """The page's own content (no sidebar, no table of contents)."""
    return next((e for e in doc.iter() if e.attrs.get("id") == "quarto-document-content"), doc)


# ---------------------------------------------------------------------------------------------
# The pages the site must have


class Page:
    """One page of one edition: its source, its HTML file, and its number in the book."""

    def __init__(self, lang: str, source: str, html: str, number: str | None):
        self.lang, self.source, self.html, self.number = lang, source, html, number

    def __repr__(self) -> str:
        return f"Page({self.lang}, {self.html}, number={self.number})"


def html_path(source: str) -> str:
    """The page a source renders to, relative to its edition's folder."""
    return str(PurePosixPath(source).with_suffix(".html"))


def book_pages(root: Path, lang: str) -> list[Page]:
    """Every page of one edition, in the order of the profile, with the number it must carry."""
    book = load_yaml(profile_path(root, lang)).get("book") or {}
    pages = []
    for source in chapter_files({"chapters": book.get("chapters")}):
        match = CHAPTER_FILE.match(PurePosixPath(source).name)
        pages.append(Page(lang, source, html_path(source), str(int(match["number"])) if match else None))
    for k, source in enumerate(chapter_files({"appendices": book.get("appendices")})):
        pages.append(Page(lang, source, html_path(source), chr(ord("A") + k)))
    return pages


def page_numbers(root: Path, lang: str) -> dict[str, str | None]:
    """Page path in the edition -> the number it must carry."""
    return {p.html: p.number for p in book_pages(root, lang)}


def edition_files(site: Path, lang: str) -> list[Path]:
    return sorted((site / lang).rglob("*.html"))


def rel(site: Path, path: Path) -> str:
    return path.relative_to(site).as_posix()


def edition_page(site: Path, lang: str, target: Path | None) -> str | None:
    """The page `target` (a resolved link) inside the edition `lang`, or None outside it."""
    edition = (site / lang).resolve()
    if target is None or not target.is_relative_to(edition):
        return None
    return target.relative_to(edition).as_posix()


def twin_page(path: str) -> str:
    """The same page in the other edition, by the rule site/lang-switch.html applies to URLs.

    ``en/chapters/en/x.html <-> ja/chapters/ja/x.html``; ``en/index.html <-> ja/index.html``.
    """
    parts = path.split("/")
    lang = parts[0]
    other = other_language(lang)
    return "/".join(other if (k == 0 or (k == 2 and parts[1] == "chapters")) else p
                    for k, p in enumerate(parts))


def resolve(site: Path, page: Path, href: str) -> tuple[Path | None, str]:
    """(file, fragment) a relative link of `page` points at; file None for other sites."""
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or href.startswith(("mailto:", "javascript:")):
        return None, ""
    resolved = (page if not parts.path else page.parent / unquote(parts.path)).resolve()
    if resolved.is_dir() or parts.path.endswith("/"):
        resolved = resolved / "index.html"
    return resolved, unquote(parts.fragment)


# ---------------------------------------------------------------------------------------------
# Checks


def check_pages(root: Path, site: Path) -> list[str]:
    """Every chapter and appendix of each profile is a page; the chooser is there too."""
    problems = [] if (site / "index.html").is_file() else ["_site/index.html (the chooser) is missing"]
    for lang in LANGS:
        for page in book_pages(root, lang):
            if not (site / lang / page.html).is_file():
                problems.append(f"{lang}/{page.html} is missing ({page.source} is in {profile_path(root, lang).name})")
    return problems


def title_number(doc: Element) -> str | None:
    """The number in the page's title (h1.title), or None for an unnumbered page.

    Chapters: <span class="chapter-number">3</span>; appendices: "Appendix A — Errata" / 「付録 A — 正誤表」.
    """
    for h1 in doc.find_all("h1", "title"):
        numbers = h1.find_all("span", "chapter-number")
        if numbers:
            return numbers[0].text().strip()
        m = APPENDIX_TITLE.match(h1.text().replace(NBSP, " ").strip())
        return m["letter"] if m else None
    return None


def check_numbering(root: Path, site: Path) -> list[str]:
    """Chapter N of the file name is N in the title, the sidebar, sections, figures, tables, equations."""
    problems = []
    for lang in LANGS:
        numbers = page_numbers(root, lang)
        for page in book_pages(root, lang):
            path = site / lang / page.html
            if not path.is_file():
                continue  # check_pages reports this
            doc, where = parse(path), f"{lang}/{page.html}"
            found = title_number(doc)
            if found != page.number:
                problems.append(f"{where}: the title carries number {found}, expected {page.number}"
                                + (" (unnumbered)" if page.number is None else ""))
            problems += sidebar_numbers(site, lang, path, doc, numbers)
            if page.number is None:
                continue
            content = main_content(doc)
            for span in content.find_all("span", "header-section-number"):
                if span.text().split(".")[0] != page.number:
                    problems.append(f"{where}: section {span.text()} in chapter {page.number}")
            for caption in content.find_all("figcaption"):
                text = caption.text().replace(NBSP, " ").strip()
                m = CAPTION_NUMBER.match(text)
                if m and m["number"] != page.number:
                    problems.append(f"{where}: caption {text[:30]!r} in chapter {page.number}")
            for m in EQUATION_TAG.finditer(content.text()):
                if m["number"] != page.number:
                    problems.append(f"{where}: equation {m.group(0)} in chapter {page.number}")
    return problems


def sidebar_numbers(site: Path, lang: str, page: Path, doc: Element,
                    numbers: dict[str, str | None]) -> list[str]:
    """Each sidebar entry carries the number of the page it links to."""
    problems = []
    for sidebar in (e for e in doc.iter() if e.attrs.get("id") == "quarto-sidebar"):
        for a in sidebar.find_all("a", "sidebar-link"):
            if "href" not in a.attrs:
                continue  # a section heading (Appendices)
            key = edition_page(site, lang, resolve(site, page, a.attrs["href"])[0])
            if key is None:
                continue
            spans = a.find_all("span", "chapter-number")
            found = spans[0].text().strip() if spans else None
            if key in numbers and found != numbers[key]:
                problems.append(f"{rel(site, page)}: the sidebar numbers {key} {found}, expected {numbers[key]}")
        break
    return problems


def check_chapter_mentions(root: Path, site: Path) -> list[str]:
    """Every "chapter N" / 「第 N 章」 / "Figure N.k" in the prose points at chapter N.

    A link whose text names a number must lead to the page of that number; a mention without a
    link must name a chapter the book has.
    """
    problems = []
    for lang in LANGS:
        numbers = page_numbers(root, lang)
        chapters = {n for n in numbers.values() if n is not None and n.isdigit()}
        for page in book_pages(root, lang):
            path = site / lang / page.html
            if not path.is_file():
                continue
            content, where = main_content(parse(path)), f"{lang}/{page.html}"
            linked = set()
            for a in content.find_all("a"):
                text = a.text().replace(NBSP, " ").strip()
                m = CHAPTER_MENTION.match(text) or XREF_TEXT.match(text)
                if not m:
                    continue
                linked.add(id(a))
                key = edition_page(site, lang, resolve(site, path, a.attrs.get("href", ""))[0])
                if key is None:
                    continue
                said = next(v for k, v in m.groupdict().items() if v and k in ("number", "ja", "section"))
                if key in numbers and said != numbers[key]:
                    problems.append(f"{where}: the link {text[:40]!r} leads to {key}, which is "
                                    f"numbered {numbers[key]}")
            text = "".join(unlinked_text(content, linked))
            for m in CHAPTER_MENTION.finditer(text):
                said = m["number"] or m["ja"]
                if said not in chapters:
                    problems.append(f"{where}: {m.group(0)!r} names a chapter the book does not have")
    return problems


def unlinked_text(node: Element, skip: set[int]) -> Iterator[str]:
    for c in node.children:
        if isinstance(c, str):
            yield c
        elif id(c) not in skip and c.tag not in ("script", "style", "pre", "code"):
            yield from unlinked_text(c, skip)


def check_unresolved_references(root: Path, site: Path) -> list[str]:
    """No cross-reference left unresolved (Quarto prints ?@fig-x), no warning in the build log."""
    problems = []
    for lang in LANGS:
        for path in edition_files(site, lang):
            text = main_content(parse(path)).text()
            for m in re.finditer(r"\?@[\w:.-]+", text):
                problems.append(f"{rel(site, path)}: unresolved cross-reference {m.group(0)}")
    log = root / LOG_NAME
    if not log.is_file():
        problems.append(f"{LOG_NAME} is missing: build the site with bash tools/build_site.sh")
    else:
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            if re.match(r"^\s*(WARN|WARNING|ERROR)\b", line):
                problems.append(f"{LOG_NAME}: {line.strip()}")
    return problems


def check_images(root: Path, site: Path) -> list[str]:
    """Every <img> of every page resolves to a file."""
    problems = []
    for lang in LANGS:
        for path in edition_files(site, lang):
            for img in parse(path).find_all("img"):
                src = img.attrs.get("src", "")
                if src.startswith("data:"):
                    continue
                target, _ = resolve(site, path, src)
                if target is not None and not target.is_file():
                    problems.append(f"{rel(site, path)}: image {src} does not exist")
    return problems


_IDS: dict[bytes, set[str]] = {}


def ids(path: Path) -> set[str]:
    """The ids of a page (computed once per content of the file: check_links asks for every link)."""
    key = digest(path)
    if key not in _IDS:
        _IDS[key] = {e.attrs["id"] for e in parse(path).iter() if "id" in e.attrs}
    return _IDS[key]


def check_links(root: Path, site: Path) -> list[str]:
    """Every internal link of every page (chooser included) reaches a file, and its anchor an id."""
    problems = []
    pages = [site / "index.html"] + [p for lang in LANGS for p in edition_files(site, lang)]
    # The sidebar's downloads (the EPUB and the PDF, tools/build_books.sh) are in a site built after them;
    # in one built without any book, their links are expected to lead nowhere.
    books = {(site / lang / f"attention-{lang}.{ext}").resolve() for lang in LANGS for ext in ("epub", "pdf")}
    with_books = any(book.is_file() for book in books)
    for path in pages:
        if not path.is_file():
            continue
        for a in parse(path).find_all("a"):
            href = a.attrs.get("href")
            if not href:
                continue
            target, fragment = resolve(site, path, href)
            if target is None:
                continue
            if not target.is_relative_to(site.resolve()):
                problems.append(f"{rel(site, path)}: link {href} leaves the site")
            elif not target.is_file():
                if target in books and not with_books:
                    continue
                problems.append(f"{rel(site, path)}: link {href} leads to a missing file")
            elif fragment and target.suffix == ".html" and fragment not in ids(target):
                problems.append(f"{rel(site, path)}: link {href}: no id {fragment!r} in "
                                f"{rel(site, target)}")
    return problems


def check_languages(root: Path, site: Path) -> list[str]:
    """<html lang> is the edition's language, every page has its twin in the other edition, and
    the Japanese edition's references say 「3.2 節」, not 「セクション 3.2」 (tools/japanese_xrefs.py)."""
    problems = []
    for path in edition_files(site, "ja"):
        for a in parse(path).find_all("a", "quarto-xref"):
            text = a.text().replace(NBSP, " ").strip()
            if re.match(r"^(セクション|チャプター)", text):
                problems.append(f"{rel(site, path)}: cross-reference {text!r}; "
                                "tools/japanese_xrefs.py writes it as 「N 節」")
    for lang in LANGS:
        for path in edition_files(site, lang):
            html = next(iter(parse(path).find_all("html")), None)
            found = html.attrs.get("lang") if html is not None else None
            if found != lang:
                problems.append(f"{rel(site, path)}: <html lang={found!r}>, expected {lang!r}")
        for page in book_pages(root, lang):
            twin = twin_page(f"{lang}/{page.html}")
            if (site / lang / page.html).is_file() and not (site / twin).is_file():
                problems.append(f"{lang}/{page.html}: its language link leads to {twin}, which is missing")
    return problems


def check_search_index(root: Path, site: Path) -> list[str]:
    """Each edition's search.json covers every page of that edition."""
    problems = []
    for lang in LANGS:
        index = site / lang / "search.json"
        if not index.is_file():
            problems.append(f"{lang}/search.json is missing")
            continue
        entries = json.loads(index.read_text(encoding="utf-8"))
        covered = {e.get("href", "").split("#")[0] for e in entries}
        for page in book_pages(root, lang):
            if page.html not in covered:
                problems.append(f"{lang}/search.json has no entry for {page.html}")
    return problems


def colab_url(root: Path, source: str) -> str:
    repo, branch = repository(root)
    return f"https://colab.research.google.com/github/{repo}/blob/{branch}/{source}"


def notebook_pages(root: Path, site: Path) -> Iterator[tuple[str, Page, Path, str]]:
    """(language, page, rendered file, "lang/page.html") of every chapter rendered from a notebook."""
    for lang in LANGS:
        for page in book_pages(root, lang):
            path = site / lang / page.html
            if page.source.endswith(".ipynb") and path.is_file():  # a missing page: check_pages reports it
                yield lang, page, path, f"{lang}/{page.html}"


def check_notebook_links(root: Path, site: Path) -> list[str]:
    """A chapter from a notebook links to that notebook (a copy beside it) and to it in Colab."""
    problems = []
    for _, page, path, where in notebook_pages(root, site):
        links = {a.attrs.get("href", ""): a for a in parse(path).find_all("a", "notebook-link")}
        download = [h for h, a in links.items() if "download" in a.attrs]
        if len(download) != 1:
            problems.append(f"{where}: expected one notebook download link, found {len(download)}")
        else:
            target, _ = resolve(site, path, download[0])
            if target is None or not target.is_file():
                problems.append(f"{where}: the download link {download[0]} leads to no file")
            elif target.read_bytes() != (root / page.source).read_bytes():
                problems.append(f"{where}: the downloadable notebook differs from {page.source}")
        if colab_url(root, page.source) not in links:
            problems.append(f"{where}: no link to {colab_url(root, page.source)}")
    return problems


SOLUTION_TITLE = {"en": "Solution {id}", "ja": "解答例 {id}"}
CHECK_CALL = re.compile(r"""exercises\.check\(\s*["'](?P<id>(?:\d+|[A-Z])\.\d+)["']""")  # "3.1", or "B.1" in an appendix


def solution_ids(root: Path, source: str) -> list[str]:
    """Ids of the exercises whose solution (a code cell not tagged exercise-starter) the notebook checks."""
    nb = json.loads((root / source).read_text(encoding="utf-8"))
    return [m["id"] for cell in nb["cells"] if cell["cell_type"] == "code"
            and "exercise-starter" not in cell.get("metadata", {}).get("tags", [])
            for m in CHECK_CALL.finditer("".join(cell["source"]))]


def check_solutions(root: Path, site: Path) -> list[str]:
    """Each exercise's worked solution is on its chapter's page, folded: a collapsed callout-tip
    titled "Solution N.k" (「解答例 N.k」) holding the solution's code and its ✓ output."""
    problems = []
    for lang, page, path, where in notebook_pages(root, site):
        callouts = {e.attrs.get("title", ""): e for e in main_content(parse(path)).find_all("div", "callout-tip")}
        for ident in solution_ids(root, page.source):
            title = SOLUTION_TITLE[lang].format(id=ident)
            callout = callouts.get(title)
            if callout is None:
                problems.append(f"{where}: no callout titled {title!r}")
                continue
            bodies = callout.find_all("div", "callout-collapse")
            if not bodies or "show" in bodies[0].classes or "collapse" not in bodies[0].classes:
                problems.append(f"{where}: the callout {title!r} is not collapsed")
                continue
            text = bodies[0].text()
            if not re.search(r"""exercises\.check\(\s*["']%s["']""" % re.escape(ident), text):
                problems.append(f"{where}: the callout {title!r} does not hold the solution's check")
            if f"✓ {ident}:" not in text and f"✓ {ident}：" not in text:  # the Japanese colon is full-width
                problems.append(f"{where}: the callout {title!r} does not show the check's ✓ output")
            if not bodies[0].find_all("div", "exercise-check"):
                problems.append(f"{where}: the check in {title!r} is not marked exercise-check "
                                "(site/exercise-output.lua), so its output would not wrap on a phone")
    return problems


REMOTE_IN_HTML = re.compile(
    r"<(?P<tag>script|img|iframe|source|video|audio|embed|link)\b(?P<attrs>[^>]*)>", re.IGNORECASE)
REMOTE_URL = re.compile(r"""(?:src|href|srcset|data)\s*=\s*["']?\s*(?P<url>(?:https?:)?//[^"'\s>]+)""",
                        re.IGNORECASE)
REMOTE_IN_CSS = re.compile(r"""(?:@import\s*(?:url\()?|url\()\s*["']?(?P<url>(?:https?:)?//[^"')\s]+)""",
                           re.IGNORECASE)
# <link rel=...> values that only name another page, never load it.
LINK_NOT_LOADED = {"alternate", "canonical", "next", "prev", "author", "license", "help", "search"}


def check_offline(root: Path, site: Path) -> list[str]:
    """The site works with no network: no page loads a script, stylesheet, font, image or frame over
    http(s) (links to papers are fine), and no stylesheet imports one (site/offline.py)."""
    problems = []
    for path in sorted(site.rglob("*.html")):
        text = path.read_text(encoding="utf-8")
        for tag in REMOTE_IN_HTML.finditer(text):
            attrs = tag["attrs"]
            if tag["tag"].lower() == "link":
                rel_value = re.search(r"""rel\s*=\s*["']?([^"'>]+)""", attrs, re.IGNORECASE)
                if rel_value and set(rel_value[1].lower().split()) <= LINK_NOT_LOADED:
                    continue
            for url in REMOTE_URL.finditer(attrs):
                problems.append(f"{rel(site, path)}: <{tag['tag']}> loads {url['url']}")
        for url in REMOTE_IN_CSS.finditer(text):
            problems.append(f"{rel(site, path)}: a style loads {url['url']}")
    for path in sorted(site.rglob("*.css")):
        for url in REMOTE_IN_CSS.finditer(path.read_text(encoding="utf-8", errors="replace")):
            problems.append(f"{rel(site, path)}: loads {url['url']}")
    return problems


def neighbour_text(element: Element, step: int) -> str:
    """The text just before (step -1) or after (step 1) ``element`` in its parent, "" at either end."""
    siblings = element.parent.children if element.parent is not None else []
    k = next((k for k, c in enumerate(siblings) if c is element), None)
    if k is None or not 0 <= k + step < len(siblings):
        return ""
    other = siblings[k + step]
    return other if isinstance(other, str) else other.text()


def check_citations(root: Path, site: Path) -> list[str]:
    """Citations as each edition's typography wants them. Japanese: a parenthetical citation sits in
    full-width parentheses, 「（Haviv et al. 2022）」, with no space before 「（」 or after 「）」
    (site/book-ja.csl, site/ja-citations.lua); no half-width parenthesis in a citation. English: "(Haviv
    et al. 2022)", never a full-width parenthesis."""
    problems = []
    for lang in LANGS:
        for path in edition_files(site, lang):
            for span in main_content(parse(path)).find_all("span", "citation"):
                text = span.text()
                where = f"{rel(site, path)}: citation {text!r}"
                if lang != "ja":
                    if "（" in text or "）" in text:
                        problems.append(f"{where} has full-width parentheses in the English edition")
                    continue
                if "(" in text or ")" in text:
                    problems.append(f"{where} has half-width parentheses; the Japanese edition wants 「（…）」")
                if " （" in text or (text.startswith("（") and neighbour_text(span, -1)[-1:].isspace()):
                    problems.append(f"{where} has a space before 「（」")
                if text.endswith("）") and neighbour_text(span, 1)[:1].isspace():
                    problems.append(f"{where} has a space after 「）」")
    return problems


CHECKS: tuple[Callable[[Path, Path], list[str]], ...] = (
    check_pages,
    check_numbering,
    check_chapter_mentions,
    check_unresolved_references,
    check_images,
    check_links,
    check_languages,
    check_search_index,
    check_notebook_links,
    check_solutions,
    check_offline,
    check_citations,
)


def run_all(root: Path, site: Path) -> list[str]:
    return [f"[{check.__name__.removeprefix('check_')}] {problem}"
            for check in CHECKS for problem in check(root, site)]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    site = Path(args[0]) if args else ROOT / "_site"
    if not site.is_dir():
        print(f"sitecheck: {site} does not exist; build it with bash tools/build_site.sh", file=sys.stderr)
        return 2
    problems = run_all(ROOT, site)
    for problem in problems:
        print(problem)
    print(f"sitecheck: {len(problems)} problem(s)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
