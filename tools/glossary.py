"""The glossary appendix, generated from the one table of the book's terms, glossary.csv.

    python -m tools.glossary           # write chapters/en/glossary.qmd and chapters/ja/glossary.qmd
    python -m tools.glossary --check   # exit status 1 if a page is not what the table generates

glossary.csv (at the repository root, UTF-8) has one row per concept and these columns:

english           the English term
japanese          the Japanese term, used throughout the Japanese edition
note, note_ja     an optional note for the English and the Japanese page
rejected          Japanese alternatives that must not appear in the Japanese chapters, separated by |
allowed_context   phrases, separated by |, inside which a rejected form may appear after all: e.g.
                  アテンション（注意機構）, the gloss that introduces the idea of attention

Edit the table, run this tool and commit the table with both pages. tools.bookcheck.check_glossary
checks that the pages are up to date and that no Japanese chapter uses a rejected form.
"""

from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import dataclass
from pathlib import Path

TABLE = "glossary.csv"
COLUMNS = ("english", "japanese", "note", "note_ja", "rejected", "allowed_context")
PAGE = "glossary.qmd"
SEPARATOR = "|"
GENERATED = ("<!-- Generated from glossary.csv by `python -m tools.glossary`: "
             "edit the table and run the tool, do not edit this page. -->")

INTRO = {
    "en": """\
# Glossary {#sec-glossary}

Each concept has one name in this book. The table gives the English term and the Japanese term that the
Japanese edition uses for it throughout, roughly in the order in which the chapters introduce them, so that
a reader of one edition can find their way in the other. Model names (Transformer, AFT) and a few words that
are also code (softmax, einsum) stay in English in both editions.
""",
    "ja": """\
# 用語集 {#sec-glossary}

本書では、1 つの概念を 1 つの用語で呼びます。下の表は、英語版の用語と日本語版で一貫して使う訳語の対応で、
おおむね章に登場する順に並べています。英語の文献や英語版を読むときの手がかりにしてください。
モデル名（Transformer、AFT）と、softmax や einsum のようにコードにも現れる語は、どちらの版でも英語のまま書きます。
「使わない表記」の列には、同じ概念を指す別の訳語や表記のうち、本書では使わないものを挙げています。
ほかの文献でこれらの表記を見かけたら、同じ概念のことだと考えてください。
""",
}

HEADER = {
    "en": ("English", "Japanese (日本語)", "Note"),
    "ja": ("英語", "日本語", "備考", "使わない表記"),
}


class TableError(Exception):
    """glossary.csv cannot be used as it is; the message says why."""


@dataclass(frozen=True)
class Term:
    english: str
    japanese: str
    note: str = ""
    note_ja: str = ""
    rejected: tuple[str, ...] = ()
    allowed_context: tuple[str, ...] = ()

    def rejected_in(self, text: str) -> list[str]:
        """The rejected forms that occur in `text` outside the allowed contexts."""
        for phrase in self.allowed_context:
            text = text.replace(phrase, "\0")
        return [form for form in self.rejected if form in text]


def split(cell: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in cell.split(SEPARATOR) if part.strip())


def read_table(root: Path) -> list[Term]:
    """The terms of glossary.csv, checked for the mistakes that would make the table useless."""
    path = root / TABLE
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise TableError(f"{TABLE}: the header must be {','.join(COLUMNS)} "
                             f"(found {','.join(reader.fieldnames or ())})")
        rows = list(reader)
    terms, seen = [], set()
    for line, row in enumerate(rows, start=2):
        if None in row or any(value is None for value in row.values()):
            raise TableError(f"{TABLE} line {line}: expected {len(COLUMNS)} columns")
        term = Term(row["english"].strip(), row["japanese"].strip(), row["note"].strip(),
                    row["note_ja"].strip(), split(row["rejected"]), split(row["allowed_context"]))
        if not term.english or not term.japanese:
            raise TableError(f"{TABLE} line {line}: english and japanese must not be empty")
        if term.english in seen:
            raise TableError(f"{TABLE} line {line}: {term.english!r} is listed twice")
        seen.add(term.english)
        for form in term.rejected:
            if form in term.japanese:
                raise TableError(f"{TABLE} line {line}: the rejected form {form!r} is part of the "
                                 f"chosen term {term.japanese!r}, so every use would be rejected")
        for phrase in term.allowed_context:
            if not any(form in phrase for form in term.rejected):
                raise TableError(f"{TABLE} line {line}: the allowed context {phrase!r} contains "
                                 "no rejected form")
        terms.append(term)
    return terms


def page_path(root: Path, lang: str) -> Path:
    return root / "chapters" / lang / PAGE


def cell(text: str) -> str:
    """Text for a cell of a Markdown pipe table."""
    return " ".join(text.split()).replace(SEPARATOR, "\\" + SEPARATOR)


def table_row(cells: tuple[str, ...] | list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


SPELLINGS = "prh.yml"
SPELLING_SECTION = """\

## 表記 {#sec-glossary-spelling}

次の語は、書き方を 1 つに決めています（`prh.yml`。`python -m tools.lint_prose` が textlint で確かめます）。

"""


def read_spellings(root: Path) -> list[str]:
    """The book's spellings, as the ``prh`` line of each rule of prh.yml says them (「持つ（もつ とは書きません）」)."""
    path = root / SPELLINGS
    if not path.exists():
        return []
    import yaml

    rules = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("rules", [])
    return [rule["prh"] for rule in rules if rule.get("prh")]


def render(terms: list[Term], lang: str, spellings: list[str] = ()) -> str:
    """The glossary page of one language; the Japanese one ends with the book's spellings."""
    header = HEADER[lang]
    rows = [table_row(header), "|" + "---|" * len(header)]
    for term in terms:
        if lang == "en":
            cells = [term.english, term.japanese, term.note]
        else:
            cells = [term.english, term.japanese, term.note_ja, "、".join(term.rejected)]
        rows.append(table_row([cell(c) for c in cells]))
    page = f"{GENERATED}\n\n{INTRO[lang]}\n" + "\n".join(rows) + "\n"
    if lang == "ja" and spellings:
        page += SPELLING_SECTION + "".join(f"- {line}\n" for line in spellings)
    return page


def page_terms(text: str) -> list[str]:
    """The first cell of every row of a page's table, header and separator excluded."""
    found = []
    for line in text.splitlines():
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells, current, escaped = [], "", False
        for char in line.strip()[1:]:
            if escaped:
                current, escaped = current + char, False
            elif char == "\\":
                escaped = True
            elif char == SEPARATOR:
                cells.append(current.strip())
                current = ""
            else:
                current += char
        if cells:
            found.append(cells[0])
    return found[1:]  # the header row comes first


def stale_pages(root: Path, terms: list[Term]) -> list[Path]:
    """The pages that are missing or differ from what the table generates."""
    return [page_path(root, lang) for lang in ("en", "ja")
            if not page_path(root, lang).exists()
            or page_path(root, lang).read_text(encoding="utf-8") != render(terms, lang, read_spellings(root))]


def write_pages(root: Path, terms: list[Term]) -> list[Path]:
    """Write the pages that are out of date; return them."""
    stale = stale_pages(root, terms)
    for path in stale:
        lang = path.parent.name
        path.write_text(render(terms, lang, read_spellings(root)), encoding="utf-8")
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report pages that are out of date")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="the repository root (default: this repository)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    try:
        terms = read_table(root)
    except (OSError, TableError) as error:
        print(f"glossary: {error}", file=sys.stderr)
        return 1
    if args.check:
        stale = stale_pages(root, terms)
        for path in stale:
            print(f"{path.relative_to(root).as_posix()} is out of date; run python -m tools.glossary")
        return 1 if stale else 0
    for path in write_pages(root, terms):
        print(f"glossary: wrote {path.relative_to(root).as_posix()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
