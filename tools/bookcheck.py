"""Checks of the book's structure that need no Quarto.

Quarto cannot run where the book is tested, so everything it would complain about (and a few
things it would silently get wrong) is checked here instead: twins in both languages, identical
code, identical stored outputs, cross-references, citations, includes (the links, images and anchors
of the pages are tools/sitecheck.py's, on the rendered site), chapter lists, stored outputs, the
Quarto profiles, the glossary (its pages against
glossary.csv, the Japanese chapters against the terms it rejects), the Japanese typography rule
of the README's guide for authors, and environment.yml.

Every check is a function ``check_*(root) -> list[str]`` over the repository root, returning
human-readable problems (an empty list means the check passed), so tests can run each one on the
real repository and on a deliberately broken copy. The book's files are found and read through
tools/book.py; the Colab cell's check is tools/colab_cell.py's.

    python -m tools.bookcheck          # print every problem; exit status 1 if there is any
"""

from __future__ import annotations

import os
import re
import unicodedata
import sys
import tomllib
from collections.abc import Callable, Iterator
from itertools import zip_longest
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

from tools import glossary
from tools.book import (CHAPTERS, LANGS, OPTION_LINE, chapter_files, code_cells,
                        describe_cell_difference, documents, lang_lines, language_files, language_of,
                        load_yaml, notebooks, other_language, profile_path, read_notebook, rel,
                        shared_code, shared_texts, source_lines, tags, twin_pairs, twin_path)
from tools.colab_cell import check_colab_cell

# Cells with these tags have outputs that nbval does not compare, so twins may differ there.
UNCOMPARED_TAGS = frozenset({"nbval-ignore-output", "nbval-skip"})
# Cells with this tag print language-specific text (labels through plotting.tr): twins' outputs
# there may differ in words, but must print the same numbers in the same order.
LANG_OUTPUT_TAG = "lang-output"
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|(?<=[\w.])\d+(?:\.\d+)?")
# Packages named differently on conda-forge and PyPI (conda name -> PyPI name).
CONDA_TO_PYPI = {"quarto": "quarto-cli"}
# The pyproject extras that environment.yml must cover besides the runtime dependencies.
ENV_EXTRAS = ("test", "site")

LABEL_OPTION = re.compile(r"""^\s*#\|\s*label:\s*["']?(?P<label>[A-Za-z0-9_:.-]+)["']?\s*$""")
NBVAL_COMMENT = re.compile(r"#\s*NBVAL_", re.IGNORECASE)
XREF_KINDS = ("fig", "sec", "tbl", "eq")
# Pandoc reads a citation key (cross-references are citations too) as alphanumerics of any
# script with internal punctuation.
AT_KEY = re.compile(r"@(?P<key>[A-Za-z0-9_][\w:.#$%&+?<>~/-]*)")
BIBTEX_KEY = re.compile(r"^\s*@\w+\s*\{\s*(?P<key>[^,\s]+)\s*,", re.MULTILINE)
KEY_TRAILING_PUNCTUATION = ":.#$%&+?<>~/-"
ATTRIBUTE_LABEL = re.compile(r"\{[^{}\n]*?#(?P<label>(?:%s)-[A-Za-z0-9_:.-]+)" % "|".join(XREF_KINDS))
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?(?P<target>[^\s)>]+)>?(?:\s+[\"'(][^)]*)?\)")
INCLUDE = re.compile(r"\{\{<\s*include\s+(?P<target>[^\s>]+)\s*>\}\}")
URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


# ---------------------------------------------------------------------------------------------
# Reading documents: their Markdown without code, their cell options


def without_code(text: str, code: str = "") -> str:
    """Markdown with fenced code blocks, inline code and HTML comments blanked out.

    Line numbers are kept (blocks become empty lines) so messages can point at a line. Inline
    code becomes `code` (nothing by default).
    """
    text = HTML_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    lines, fence = [], None
    for line in text.splitlines():
        match = FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)[0] * len(match.group(1))
            lines.append("")
        elif fence is not None:
            if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = None
            lines.append("")
        else:
            lines.append(INLINE_CODE.sub(code, line))
    return "\n".join(lines)


def markdown_texts(path: Path) -> list[tuple[str, str]]:
    """(where, markdown without code) for each markdown part of a document."""
    if path.suffix == ".ipynb":
        nb = read_notebook(path)
        return [(f"cell {i + 1}", without_code("\n".join(source_lines(c))))
                for i, c in enumerate(nb.get("cells", [])) if c.get("cell_type") == "markdown"]
    return [("", without_code(path.read_text(encoding="utf-8")))]


def option_lines(path: Path) -> list[tuple[str, str]]:
    """(where, line) for each ``#|`` cell option line of a document."""
    if path.suffix == ".ipynb":
        return [(f"cell {i + 1}", line) for i, c in code_cells(read_notebook(path))
                for line in source_lines(c) if OPTION_LINE.match(line)]
    lines = path.read_text(encoding="utf-8").splitlines()
    return [(f"line {n + 1}", line) for n, line in enumerate(lines) if OPTION_LINE.match(line)]


def at(path: str, where: str) -> str:
    return f"{path} ({where})" if where else path


# ---------------------------------------------------------------------------------------------
# Twins and code parity


def check_twins(root: Path) -> list[str]:
    """Every notebook and page under chapters/<lang>/ has its twin in the other language."""
    problems = []
    for lang in LANGS:
        for path in language_files(root, lang):
            twin = twin_path(root, path)
            if not twin.exists():
                problems.append(f"{rel(root, path)} has no twin: {rel(root, twin)} is missing")
    return problems


def check_code_parity(root: Path) -> list[str]:
    """Twins have the same code cells: same code without ``#|`` lines and the LANG line, same tags."""
    problems = []
    for lang in LANGS:
        for path in language_files(root, lang):
            if path.suffix != ".ipynb":
                continue
            declared = lang_lines(read_notebook(path))
            if [d for _, d in declared] != [lang]:
                found = ", ".join(f'LANG = "{d}" in cell {i + 1}' for i, d in declared) or "none"
                problems.append(f'{rel(root, path)}: needs exactly one code line LANG = "{lang}" '
                                f"(found {found})")
    for path, twin in twin_pairs(root):
        a, b = code_cells(read_notebook(path)), code_cells(read_notebook(twin))
        name, twin_name = rel(root, path), rel(root, twin)
        if len(a) != len(b):
            difference = describe_cell_difference(shared_texts(c for _, c in a),
                                                  shared_texts(c for _, c in b))
            problems.append(f"{name} has {len(a)} code cells, {twin_name} has {len(b)}: {difference}")
            continue
        for k, ((i, cell), (j, twin_cell)) in enumerate(zip(a, b)):
            here = f"code cell {k + 1} (cell {i + 1} in {name}, cell {j + 1} in {twin_name})"
            x, y = shared_code(cell), shared_code(twin_cell)
            if [line for _, line in x] != [line for _, line in y]:
                m = next((m for m, (p, q) in enumerate(zip(x, y)) if p[1] != q[1]), min(len(x), len(y)))
                left = x[m] if m < len(x) else (None, "<end of cell>")
                right = y[m] if m < len(y) else (None, "<end of cell>")
                line = f"line {left[0] + 1}" if left[0] is not None else "its end"
                problems.append(f"{name} and {twin_name} differ in {here} at {line}: "
                                f"{left[1]!r} vs {right[1]!r}")
                break
            if tags(cell) != tags(twin_cell):
                problems.append(f"{name} and {twin_name} have different tags in {here}: "
                                f"{tags(cell)} vs {tags(twin_cell)}")
    return problems


def text_outputs(cell: dict) -> list[tuple[str, str]]:
    """The outputs nbval compares as text: streams and text/plain results.

    Consecutive writes to one stream are joined, as nbval does: how the kernel splits a cell's
    stdout into messages depends on timing, not on the code.
    """
    texts: list[tuple[str, str]] = []
    for out in cell.get("outputs", []):
        kind = out.get("output_type")
        if kind == "stream":
            stream, text = f"stream {out.get('name')}", "".join(out.get("text", ""))
            if texts and texts[-1][0] == stream:
                texts[-1] = (stream, texts[-1][1] + text)
            else:
                texts.append((stream, text))
        elif kind in ("execute_result", "display_data") and "text/plain" in out.get("data", {}):
            texts.append(("text/plain", "".join(out["data"]["text/plain"])))
    return texts


def numbers(text: str) -> list[str]:
    """The numbers a text prints, in order, as written."""
    return NUMBER.findall(text)


def number_difference(x: list[tuple[str, str]], y: list[tuple[str, str]]) -> str | None:
    """Where two cells' text outputs differ in their kinds or numbers (None if only in words)."""
    if [kind for kind, _ in x] != [kind for kind, _ in y]:
        return f"outputs {[kind for kind, _ in x]} vs {[kind for kind, _ in y]}"
    for (kind, a), (_, b) in zip(x, y):
        p, q = numbers(a), numbers(b)
        if p != q:
            m = next((m for m, (u, v) in enumerate(zip(p, q)) if u != v), min(len(p), len(q)))
            u, v = (n[m] if m < len(n) else "<none>" for n in (p, q))
            return f"{kind}: number {m + 1} is {u} vs {v} ({len(p)} vs {len(q)} numbers)"
    return None


def check_output_parity(root: Path) -> list[str]:
    """Twins' stored text outputs agree wherever nbval compares them; in cells tagged
    ``lang-output`` (labels printed through ``tr``), the numbers they print agree."""
    problems = []
    for path, twin in twin_pairs(root):
        a, b = code_cells(read_notebook(path)), code_cells(read_notebook(twin))
        if len(a) != len(b):
            continue  # check_code_parity reports this
        for k, ((i, cell), (_, twin_cell)) in enumerate(zip(a, b)):
            if UNCOMPARED_TAGS & (set(tags(cell)) | set(tags(twin_cell))):
                continue
            x, y = text_outputs(cell), text_outputs(twin_cell)
            if x == y:
                continue
            if LANG_OUTPUT_TAG in tags(cell):
                problem = number_difference(x, y)
                if problem:
                    problems.append(f"{rel(root, path)} and {rel(root, twin)} print different numbers in "
                                    f"code cell {k + 1} (cell {i + 1}, tagged {LANG_OUTPUT_TAG}): {problem}; "
                                    "re-execute both (python -m tools.execute_notebooks)")
                continue
            p, q = next((p, q) for p, q in zip_longest(x, y, fillvalue=("no output", "")) if p != q)
            detail = f"{p[0]} {p[1][:80]!r} vs {q[0]} {q[1][:80]!r}"
            problems.append(f"{rel(root, path)} and {rel(root, twin)} have different stored outputs "
                            f"in code cell {k + 1} (cell {i + 1}): {detail}; re-execute both "
                            "(python -m tools.execute_notebooks)")
    return problems


# ---------------------------------------------------------------------------------------------
# Stored outputs


def check_outputs(root: Path) -> list[str]:
    """Every notebook has stored outputs, and none of them is an error."""
    problems = []
    for path in notebooks(root):
        cells = code_cells(read_notebook(path))
        if not any(c.get("outputs") for _, c in cells):
            problems.append(f"{rel(root, path)} has no stored outputs; run "
                            f"python -m tools.execute_notebooks {rel(root, path)}")
        for i, cell in cells:
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error":
                    problems.append(f"{rel(root, path)} (cell {i + 1}) stores an error output: "
                                    f"{out.get('ename')}: {out.get('evalue')}")
    return problems


# ---------------------------------------------------------------------------------------------
RICH_OUTPUTS = ("text/markdown", "text/html", "text/latex", "image/png", "image/jpeg", "image/svg+xml")
OUTPUT_ASIS = re.compile(r"^\s*#\|\s*output:\s*asis\s*$", re.MULTILINE)


def printed_lines(cell: dict) -> Iterator[str]:
    """The lines of a cell's outputs that the site shows as text in an output block: streams (unless the cell's
    output is Markdown, ``#| output: asis``) and text/plain results that have no richer form (a table given as
    Markdown, a figure) that the page shows instead."""
    asis = bool(OUTPUT_ASIS.search("".join(cell.get("source", ""))))
    for out in cell.get("outputs", []):
        kind = out.get("output_type")
        if kind == "stream" and not asis:
            yield from "".join(out.get("text", "")).split("\n")
        elif kind in ("execute_result", "display_data"):
            data = out.get("data", {})
            if "text/plain" in data and not any(rich in data for rich in RICH_OUTPUTS):
                yield from "".join(data["text/plain"]).split("\n")


# Printed lines on a phone: the page's job, not the code's. An output block wraps its lines on a narrow screen
# (site/book.css) and a result with several values is a table (attnbook.report.Table: a Markdown table that
# site/table-stack.html stacks on a phone), so no check counts the columns of what a chapter prints.


# What a Japanese page prints: its punctuation is Japanese, and a line breaks only between phrases. ASCII ``:`` or
# ``,`` right after Japanese text (「コードのみ、2 層:」「RoPE（そのまま）, k = 1」), and ``;`` or ``->`` anywhere (「1.60;
# 1.63 -> 1.65」), are English typography; write 「：」「、」「→」. A line that starts with a counter or the end of a
# word, after a line that ends in a number or a word (「半分\n未満」「10\n倍以上」「保存\nした」「1500\nから」), breaks
# what a reader reads as one word; break before the number or after 「、」 instead.
JAPANESE_OUTPUT_MARKS = re.compile(
    "(?<=[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\u3000-\u303f\uff00-\uffef])[ \t]*([:,])|(;|->)")
# A number's range in half-width brackets, as English prints it ("0.25 (0.24–0.26)"); a Japanese page writes the
# brackets full-width with no space (「0.25（0.24–0.26）」, report.mean_range), as its prose does (typography rule 2).
HALF_WIDTH_RANGE = re.compile(r"(?<=\d) \((?=[-+−]?\d[^)]*[–〜~-][-+−]?\d[^)]*\))")
WORD_CONTINUATION = re.compile(r"^\s*(?:した|して|する|される|未満|以上|以下|以内|倍|個|から|まで|分の)")
ENDS_IN_WORD = re.compile("[0-9\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]$")
# Notebooks whose printed output this check does not read yet, with the reason. Remove an entry once its notebook
# passes: each is a chapter whose printing another change is rewriting.
JAPANESE_OUTPUT_EXCEPTIONS: dict[str, str] = {
    "02-scaled-dot-product-attention.ipynb": "'->' between a weather sequence and the next day it predicts (cell 8)",
}


def check_japanese_outputs(root: Path) -> list[str]:
    """What the Japanese notebooks print is Japanese typography (JAPANESE_OUTPUT_MARKS, ranges in full-width brackets:
    HALF_WIDTH_RANGE) and breaks its lines between phrases, never between a number and its counter or inside a word
    (WORD_CONTINUATION)."""
    problems = []
    for path in notebooks(root):
        if language_of(root, path) != "ja" or path.name in JAPANESE_OUTPUT_EXCEPTIONS:
            continue
        for i, cell in code_cells(read_notebook(path)):
            lines = list(printed_lines(cell))
            tables = [line for out in cell.get("outputs", []) for line in
                      "".join(out.get("data", {}).get("text/markdown", "")).splitlines()]
            for line in lines + tables:
                if HALF_WIDTH_RANGE.search(line):
                    problems.append(f"{rel(root, path)} (cell {i + 1}) prints a range in half-width brackets in a "
                                    f"Japanese output: {line.strip()[:50]!r}; write 「0.25（0.24–0.26）」 "
                                    "(report.mean_range does)")
            for k, line in enumerate(lines):
                marks = sorted({m.group(1) or m.group(2) for m in JAPANESE_OUTPUT_MARKS.finditer(line)})
                if marks:
                    problems.append(f"{rel(root, path)} (cell {i + 1}) prints ASCII {', '.join(map(repr, marks))} "
                                    f"in a Japanese output: {line.strip()[:50]!r}; write 「：」, 「、」 or 「→」")
                if k and ENDS_IN_WORD.search(lines[k - 1].rstrip()) and WORD_CONTINUATION.match(line):
                    problems.append(f"{rel(root, path)} (cell {i + 1}) breaks a line inside a word or between a "
                                    f"number and its counter: {lines[k - 1].strip()[-12:]!r} / {line.strip()[:12]!r}; "
                                    "break before the number or after 「、」")
    return problems


def check_nbval_comments(root: Path) -> list[str]:
    """nbval is steered with cell tags, never ``# NBVAL_...`` comments (they would show on the site)."""
    return [f"{rel(root, path)} (cell {i + 1}): {line.strip()!r}; use the cell tag "
            "(e.g. nbval-ignore-output) instead of the comment"
            for path in notebooks(root) for i, cell in code_cells(read_notebook(path))
            for line in source_lines(cell) if NBVAL_COMMENT.search(line)]


# ---------------------------------------------------------------------------------------------
# Cross-references and links


def labels(path: Path) -> list[tuple[str, str]]:
    """(where, label) of every cross-reference label a document defines."""
    found = [(where, m.group("label")) for where, line in option_lines(path)
             for m in [LABEL_OPTION.match(line)] if m and m.group("label").startswith(
                 tuple(k + "-" for k in XREF_KINDS))]
    found += [(where, m.group("label")) for where, text in markdown_texts(path)
              for m in ATTRIBUTE_LABEL.finditer(text)]
    return found


def is_xref(key: str) -> bool:
    return key.startswith(tuple(k + "-" for k in XREF_KINDS))


def citations(path: Path) -> Iterator[tuple[str, str, str | None]]:
    """(where, key, complaint) for each ``@key`` Pandoc would read: cross-references and citations.

    `complaint` is set when Pandoc would not read the text as the key the author meant: glued to
    a preceding letter (Pandoc leaves it as text) or followed by a letter, as happens in Japanese
    without a space (Pandoc reads ``@fig-aの`` as the key ``fig-aの``).
    """
    texts = markdown_texts(path) + [(where, line.split(":", 1)[-1]) for where, line in option_lines(path)]
    for where, text in texts:
        for m in AT_KEY.finditer(text):
            before = text[m.start() - 1] if m.start() else " "
            key = m.group("key").rstrip(KEY_TRAILING_PUNCTUATION)
            if before.isascii() and (before.isalnum() or before in "_.@/"):
                continue  # an e-mail address, a path or a decorator, not a reference
            if before.isalnum():
                yield where, key, f"@{key} is glued to the preceding {before!r}; put a space before it"
            elif not key.isascii():
                ascii_key = re.match(r"[A-Za-z0-9_:.#$%&+?<>~/-]*", key).group(0).rstrip(
                    KEY_TRAILING_PUNCTUATION)
                yield where, key, (f"Pandoc reads the reference as @{key}; put a space after "
                                   f"@{ascii_key} or write [-@{ascii_key}]")
            else:
                yield where, key, None


def references(path: Path) -> Iterator[tuple[str, str, str | None]]:
    """(where, key, complaint) of each ``@fig-``/``@sec-``/``@tbl-``/``@eq-`` reference."""
    return ((where, key, c) for where, key, c in citations(path) if is_xref(key))


def check_cross_references(root: Path) -> list[str]:
    """Every reference has a label in the same document, and no label is defined twice, in one
    document or in two documents of one edition (Quarto resolves labels book-wide: a reference to a
    label that two chapters define leads to one of them, silently)."""
    problems = []
    owner: dict[tuple[str | None, str], str] = {}
    for path in documents(root):
        name = rel(root, path)
        defined = labels(path)
        for where, label in defined:
            first = owner.setdefault((language_of(root, path), label), name)
            if first != name:
                problems.append(f"{at(name, where)}: label {label} is already defined in {first}; "
                                "labels must be unique in the book (Quarto would resolve references to one of them)")
        seen: dict[str, str] = {}
        for where, label in defined:
            if label in seen:
                problems.append(f"{at(name, where)}: label {label} is already defined "
                                f"({seen[label] or 'earlier'})")
            seen.setdefault(label, where)
        for where, key, complaint in references(path):
            if complaint:
                problems.append(f"{at(name, where)}: {complaint}")
            elif key not in seen:
                problems.append(f"{at(name, where)}: @{key} has no matching label in {name}")
    return problems


def bibliographies(root: Path) -> list[Path]:
    """The bibliography files _quarto.yml names."""
    config = root / "_quarto.yml"
    files = load_yaml(config).get("bibliography") if config.exists() else None
    return [root / f for f in ([files] if isinstance(files, str) else files or [])]


def check_citations(root: Path) -> list[str]:
    """Every citation names an entry of a bibliography that _quarto.yml declares and that exists."""
    problems, keys = [], set()
    for path in bibliographies(root):
        if path.exists():
            keys |= set(BIBTEX_KEY.findall(path.read_text(encoding="utf-8")))
        else:
            problems.append(f"_quarto.yml names the bibliography {rel(root, path)}, which does not exist")
    for path in documents(root):
        for where, key, complaint in citations(path):
            if is_xref(key):
                continue  # check_cross_references
            if complaint:
                problems.append(f"{at(rel(root, path), where)}: {complaint}")
            elif key not in keys:
                where_to = ", ".join(rel(root, b) for b in bibliographies(root)) or \
                    "a bibliography (none is declared in _quarto.yml)"
                problems.append(f"{at(rel(root, path), where)}: citation @{key} is not in {where_to}")
    return problems


def link_targets(path: Path) -> Iterator[tuple[str, str, str]]:
    """(where, kind, target) of every link, image and include in a document."""
    for where, text in markdown_texts(path):
        for m in LINK.finditer(text):
            yield where, "link", m.group("target")
    # Includes are shortcodes, so they may sit anywhere, even in what looks like code.
    texts = ([(f"cell {i + 1}", "\n".join(source_lines(c)))
              for i, c in enumerate(read_notebook(path).get("cells", []))]
             if path.suffix == ".ipynb" else [("", path.read_text(encoding="utf-8"))])
    for where, text in texts:
        for m in INCLUDE.finditer(HTML_COMMENT.sub("", text)):
            yield where, "include", m.group("target")


def resolves(root: Path, base: Path, target: str) -> bool:
    """Whether a target names a file of the sources (a root-relative one from ``root``)."""
    return Path(os.path.normpath(root / target.lstrip("/") if target.startswith("/") else base / target)).exists()


def check_includes(root: Path) -> list[str]:
    """Every include names a file, and a link in an included file (``_*.qmd``) starts with ``/``.

    The other links, images and anchors are checked once, in the rendered site (tools/sitecheck.py's
    check_links and check_images: every link of every page, the ones Quarto writes included, against the
    ids the pages really have); what is the sources' own is checked here: Quarto stops at a missing
    include, and a relative link in an included file resolves from the file that includes it, so the site
    shows only its consequence, a link to a page that is not there."""
    problems = []
    for path in documents(root):
        name = rel(root, path)
        for where, kind, target in link_targets(path):
            if URL_SCHEME.match(target) or target.startswith(("#", "{{")):
                continue
            file = unquote(target.split("#", 1)[0].split("?", 1)[0])
            if not file:
                continue
            if kind == "link" and path.name.startswith("_") and not file.startswith("/"):
                problems.append(f"{at(name, where)}: {target} must start with / (project root), "
                                "because links in an included file resolve from the including file")
            elif kind == "include" and not resolves(root, path.parent, file):
                problems.append(f"{at(name, where)}: {kind} {target} does not resolve to a file")
    return problems


# ---------------------------------------------------------------------------------------------
# Quarto configuration and chapter lists


def check_quarto_config(root: Path) -> list[str]:
    """The base config disables execution; each profile sets its `lang` and its own output-dir."""
    base_path = root / "_quarto.yml"
    if not base_path.exists():
        return ["_quarto.yml is missing"]
    base = load_yaml(base_path)
    problems = []
    if base.get("project", {}).get("type") != "book":
        problems.append("_quarto.yml: project.type must be book")
    if (base.get("execute") or {}).get("enabled") is not False:
        problems.append("_quarto.yml: set execute.enabled: false so Quarto renders the stored "
                        "outputs and never runs a notebook")
    for key in ("chapters", "appendices"):
        if key in (base.get("book") or {}):
            problems.append(f"_quarto.yml: book.{key} belongs in the profiles only (Quarto "
                            "concatenates lists when it merges a profile over _quarto.yml)")
    output_dirs = {}
    for lang in LANGS:
        path = profile_path(root, lang)
        if not path.exists():
            problems.append(f"{path.name} is missing")
            continue
        profile = load_yaml(path)
        if profile.get("lang") != lang:
            problems.append(f"{path.name}: set lang: {lang} (found {profile.get('lang')!r})")
        out = (profile.get("project") or {}).get("output-dir")
        if not out:
            problems.append(f"{path.name}: set project.output-dir (e.g. _site/{lang})")
        elif out in output_dirs.values() or out == (base.get("project") or {}).get("output-dir"):
            problems.append(f"{path.name}: output-dir {out} is shared with another edition")
        output_dirs[lang] = out
    return problems


def check_chapter_lists(root: Path) -> list[str]:
    """Profiles list existing files, the same chapters in the same order, and every chapter."""
    problems, lists, appendices = [], {}, {}
    for lang in LANGS:
        path = profile_path(root, lang)
        if not path.exists():
            continue  # check_quarto_config reports this
        book = load_yaml(path).get("book") or {}
        files = chapter_files(book)
        lists[lang] = files
        appendices[lang] = chapter_files({"appendices": book.get("appendices")})
        if not any(PurePosixPath(f).name.startswith("index.") and "/" not in f for f in files):
            problems.append(f"{path.name}: the chapter list must start with the home page index.qmd "
                            "(Quarto books need one at the project root)")
        for f in files:
            if not (root / f).is_file():
                problems.append(f"{path.name} lists {f}, which does not exist")
            if f.startswith(f"{CHAPTERS}/{other_language(lang)}/"):
                problems.append(f"{path.name} lists {f}, a chapter of the other language")
        listed = set(files)
        for doc in language_files(root, lang):
            if not doc.name.startswith("_") and rel(root, doc) not in listed:
                problems.append(f"{rel(root, doc)} is not listed in {path.name}")
    if len(lists) == len(LANGS):
        generic = {lang: [re.sub(rf"^{CHAPTERS}/{lang}/", f"{CHAPTERS}/*/", f) for f in files]
                   for lang, files in lists.items()}
        a, b = (generic[lang] for lang in LANGS)
        if a != b:
            k = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            x = lists[LANGS[0]][k] if k < len(a) else "<end>"
            y = lists[LANGS[1]][k] if k < len(b) else "<end>"
            problems.append(f"{profile_path(root, LANGS[0]).name} and {profile_path(root, LANGS[1]).name} "
                            f"list different chapters at position {k + 1}: {x} vs {y}")
        # The same files in the same order, but one of them an appendix in only one language.
        x, y = ([re.sub(rf"^{CHAPTERS}/{lang}/", f"{CHAPTERS}/*/", f) for f in appendices[lang]]
                for lang in LANGS)
        if a == b and x != y:
            problems.append(f"{profile_path(root, LANGS[0]).name} and {profile_path(root, LANGS[1]).name} "
                            f"list different appendices (book.appendices): {x} vs {y}")
    return problems


REFS_DIV = re.compile(r"^:::\s*\{#refs([\s}]|.*?\})\s*$", re.MULTILINE)


def check_bibliography_page(root: Path) -> list[str]:
    """When the book cites, each profile lists a page with the ``::: {#refs}`` div.

    Quarto puts the bibliography of the whole book on the first page of the render list that has
    the div (book-bibliography.ts, the regex of pandoc-partition.ts), so without one the citations
    link nowhere (https://quarto.org/docs/books/book-structure.html#references).
    """
    if not bibliographies(root) or not any(not is_xref(key) for path in documents(root)
                                           for _, key, _ in citations(path)):
        return []
    problems = []
    for lang in LANGS:
        path = profile_path(root, lang)
        if not path.exists():
            continue  # check_quarto_config reports this
        files = [root / f for f in chapter_files(load_yaml(path).get("book") or {})]
        if not any(f.is_file() and f.suffix in (".qmd", ".md")
                   and REFS_DIV.search(without_code(f.read_text(encoding="utf-8"))) for f in files):
            problems.append(f"{path.name} lists no page with a ::: {{#refs}} div, where Quarto puts "
                            "the book's bibliography (e.g. chapters/<lang>/references.qmd)")
    return problems


# ---------------------------------------------------------------------------------------------
# The glossary: glossary.csv, its generated pages, and the terms of the Japanese chapters


def check_glossary(root: Path) -> list[str]:
    """The glossary pages are what glossary.csv generates, the English page lists every English
    term, and the Japanese pages and notebooks (text and cell options such as fig-cap) use the
    table's terms, never a form it rejects (python -m tools.glossary rewrites the pages)."""
    if not (root / glossary.TABLE).exists():
        return [f"{glossary.TABLE} is missing: the glossary appendix is generated from it"]
    try:
        terms = glossary.read_table(root)
    except glossary.TableError as error:
        return [str(error)]
    problems = [f"{rel(root, page)} is missing or differs from {glossary.TABLE}; run python -m tools.glossary"
                for page in glossary.stale_pages(root, terms)]
    english_page = glossary.page_path(root, LANGS[0])
    if english_page.exists():
        listed = set(glossary.page_terms(english_page.read_text(encoding="utf-8")))
        problems += [f"{rel(root, english_page)} does not list the term {term.english!r}"
                     for term in terms if term.english not in listed]
    japanese_page = glossary.page_path(root, "ja")
    for path in language_files(root, "ja"):
        if path == japanese_page:
            continue  # the page shows the rejected forms on purpose
        for where, text in markdown_texts(path) + option_lines(path):
            # Japanese paragraphs break lines anywhere, even inside a term, and render without a space.
            joined = re.sub(r"\n[ \t>]*", "", text)
            for term in terms:
                for form in term.rejected_in(joined):
                    if not where:  # a page: point at the first line with the form, if it is on one
                        where = next((f"line {n + 1}" for n, line in enumerate(text.splitlines())
                                      if form in line), "")
                    problems.append(f"{at(rel(root, path), where)}: {form!r} is not the book's term; "
                                    f"write {term.japanese!r} ({term.english}, {glossary.TABLE})")
    return problems


# ---------------------------------------------------------------------------------------------
# Japanese typography (the rule in the README's guide for authors)

# Kana and kanji: a paragraph with one of them is Japanese prose.
JAPANESE_LETTER = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
# Letters and the full-width punctuation and forms that Japanese text uses.
JAPANESE_CHAR = JAPANESE_LETTER + "\u3000-\u303f\uff00-\uffef"
HAS_JAPANESE = re.compile(f"[{JAPANESE_LETTER}]")
# What the checker puts where it blanked out math and code, so rules can see that something was
# there (rule 6 needs to see the math) without reading inside it.
MATH, CODE, URL_MARK, CITE = "\ue000", "\ue001", "\ue002", "\ue003"
FRONT_MATTER = re.compile(r"\A---\n.*?\n---[ \t]*(?=\n|\Z)", re.DOTALL)
DISPLAY_MATH = re.compile(r"\$\$.*?\$\$", re.DOTALL)
INLINE_MATH = re.compile(r"\$(?![\s$])(?:\\.|[^$\\])+?(?<![\s\\])\$(?!\d)")
SHORTCODE = re.compile(r"\{\{<.*?>\}\}", re.DOTALL)
LINK_TARGET = re.compile(r"\]\(\s*<?(?:[^\s()<>]|\([^\s()]*\))*>?(?:\s+[\"'][^\"'\n]*[\"'])?\s*\)")
AUTOLINK = re.compile(r"<[A-Za-z][A-Za-z0-9+.-]*:[^\s>]*>")
BARE_URL = re.compile(r"\b(?:https?|file|mailto):[\x21-\x7e]+")
HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")
ATTRIBUTES = re.compile(r"\{[#.:-][^{}\n]*\}|\{[A-Za-z-]+=[^{}\n]*\}")
BRACKET_CITATION = re.compile(r"\[[^\[\]\n]*?-?@[A-Za-z0-9_][^\[\]\n]*\]")
DIV_FENCE = re.compile(r"^[ \t]*:::.*$", re.MULTILINE)
# The colon that starts a table caption (": Caption {#tbl-x}") or a definition is syntax.
CAPTION_COLON = re.compile(r"^(?:Table)?:(?=[ \t])", re.MULTILINE)
# A table row: its cells without Japanese (English terms, numbers) are not Japanese prose.
TABLE_ROW = re.compile(r"^[ \t]*\|.*$", re.MULTILINE)
READABLE_MARKS = {MATH: "$…$", CODE: "`…`", URL_MARK: "<url>", CITE: "@…"}
CAPTION_OPTION = re.compile(r"^\s*#\|\s*(?:fig|tbl)-(?:cap|subcap|alt)\s*:\s?(?P<value>.*)$")

DOUBLE_STAR = re.compile(r"(?<!\*)\*\*(?!\*)")


def _punctuation(char: str) -> bool:
    """CommonMark's punctuation: Unicode punctuation and symbols (「。」「、」「」」 included); the marks prose()
    leaves for math, code, citations and URLs stand for ``$``, a backtick, ``@`` and ``<``, punctuation too."""
    return unicodedata.category(char)[0] in "PS" or char in READABLE_MARKS


class BoldFlanking:
    """The ``**`` that CommonMark cannot use (rule 10): it reads ``**`` pairs left to right, and a closing
    ``**`` right after punctuation must be followed by a space or punctuation (「…です。**次」 does not
    close), an opening ``**`` right before punctuation must follow a space or punctuation (「文**「」 does
    not open). Pandoc (the website) is more lenient, so the page looks right while a notebook does not.
    Matches are the offending ``**``, with the regex match interface the other rules have."""

    def finditer(self, text: str):
        for line in re.finditer(r"[^\n]+", text):
            for n, m in enumerate(DOUBLE_STAR.finditer(line.group(0))):
                before = line.group(0)[m.start() - 1] if m.start() else " "
                after = line.group(0)[m.end()] if m.end() < len(line.group(0)) else " "
                inner, outer = (before, after) if n % 2 else (after, before)  # closing: inner is before
                if inner.isspace() or _punctuation(inner) and not (outer.isspace() or _punctuation(outer)):
                    yield DOUBLE_STAR.match(text, line.start() + m.start())


TYPOGRAPHY_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("1 colon", re.compile(f"(?<=[{JAPANESE_CHAR}])[ \\t]*:(?!:)|(?<!:):[ \\t]*(?=[{JAPANESE_LETTER}])"),
     "half-width ':' in Japanese prose; write the full-width 「：」"),
    ("2 parentheses", re.compile(r"[()]"),
     "half-width parenthesis in Japanese prose; write （…）, or shapes as code or math"),
    ("3 thousands separator", re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3})+(?![\d,])"),
     "thousands separator; write the number without commas, as the code prints it"),
    ("4 percent", re.compile(r"\d[ \t]+[%％]"), "space before %; write it directly after the number"),
    ("5 counter", re.compile(r"ひとつ|ふたつ|みっつ|よっつ|(?<![一-龯])[一二三四五六七八九]つ|\dつ"),
     "counter; write a digit, a space and つ (「1 つ」「2 つ」)"),
    ("6 math list", re.compile(f"{MATH}[ \\t]*,[ \\t\\n]*{MATH}"),
     "math items separated by ','; separate them with 「、」 (「$Q$、$K$、$V$」)"),
    ("7 italics", re.compile(
        f"(?<![*\\w])\\*(?![\\s*])[^*\\n]*?[{JAPANESE_LETTER}][^*\\n]*?(?<![\\s*])\\*(?![*\\w])"
        f"|(?<![\\w])_(?![\\s_])[^_\\n]*?[{JAPANESE_LETTER}][^_\\n]*?(?<![\\s_])_(?!\\w)"),
     "italics on Japanese text; use 「」 or bold"),
    ("8 space after bold", re.compile(
        f"\\*\\*(?![\\s*])[^*\\n]*?[{JAPANESE_LETTER}]\\*\\*[ \\t]+(?=[{JAPANESE_LETTER}、。])"),
     "space between a closing ** and the Japanese text after it; remove it"),
    ("9 line starts with 、/。", re.compile(r"^[ \t>]*[、。，．]", re.MULTILINE),
     "line of prose starts with 、 or 。; keep the punctuation on the line before"),
    ("10 bold that cannot close", BoldFlanking(),
     "CommonMark cannot close (or open) this ** between punctuation and a letter, so Jupyter, Colab and "
     "GitHub show raw asterisks; move the 。/、/」 outside the bold (「**…します**。」)"),
)


def prose(text: str) -> str:
    """Markdown with everything that is not prose blanked out, lines kept.

    Code (fenced and inline), math, URLs and link targets, citation keys and cross-references,
    HTML, Quarto attributes, shortcodes, div fences and YAML front matter are not prose. Code and
    math leave a mark (one private-use character) so rules see that something stood there.
    """
    def blank(mark: str):
        return lambda m: mark + "\n" * m.group(0).count("\n")

    text = FRONT_MATTER.sub(blank(""), text)
    text = without_code(text, code=CODE)
    text = DISPLAY_MATH.sub(blank(MATH), text)
    text = INLINE_MATH.sub(blank(MATH), text)
    text = SHORTCODE.sub(blank(""), text)
    text = LINK_TARGET.sub("]", text)
    text = AUTOLINK.sub(URL_MARK, text)
    text = BARE_URL.sub(URL_MARK, text)
    text = HTML_TAG.sub(blank(""), text)
    text = ATTRIBUTES.sub("", text)
    text = BRACKET_CITATION.sub(CITE, text)
    text = AT_KEY.sub(CITE, text)
    text = CAPTION_COLON.sub("", text)
    text = TABLE_ROW.sub(lambda m: "|".join(cell if HAS_JAPANESE.search(cell) else " " * len(cell)
                                            for cell in m.group(0).split("|")), text)
    return DIV_FENCE.sub("", text)


def typography_problems(text: str) -> list[tuple[int, str, str, str]]:
    """(line number from 1, rule, message, excerpt) for each rule broken in the Japanese
    paragraphs of one piece of Markdown; at most one finding per rule and line."""
    found: dict[tuple[int, str], tuple[int, str, str, str]] = {}
    offset = 0
    for paragraph in re.split(r"(\n[ \t>]*\n)", prose(text)):
        if paragraph.strip() and HAS_JAPANESE.search(paragraph) and not paragraph.startswith("\n"):
            for rule, pattern, message in TYPOGRAPHY_RULES:
                for m in pattern.finditer(paragraph):
                    line = offset + paragraph.count("\n", 0, m.start()) + 1
                    start = max(paragraph.rfind("\n", 0, m.start()) + 1, m.start() - 20)
                    end = paragraph.find("\n", m.end())
                    end = min(m.end() + 20, len(paragraph) if end < 0 else end)
                    excerpt = paragraph[start:end]
                    for mark, readable in READABLE_MARKS.items():
                        excerpt = excerpt.replace(mark, readable)
                    found.setdefault((line, rule), (line, rule, message, excerpt.strip()))
        offset += paragraph.count("\n")
    return sorted(found.values())


def typography_texts(path: Path) -> list[tuple[str, str]]:
    """(where prefix, Markdown) of the prose of a document: its Markdown cells or the page, and
    the captions of its code cells (each caption option's value on the option's line number)."""
    if path.suffix != ".ipynb":
        return [("", path.read_text(encoding="utf-8"))]
    texts = []
    for i, cell in enumerate(read_notebook(path).get("cells", [])):
        lines = source_lines(cell)
        if cell.get("cell_type") == "markdown":
            texts.append((f"cell {i + 1}, ", "\n".join(lines)))
        elif cell.get("cell_type") == "code":
            captions = [m.group("value").strip().strip("\"'") if m else ""
                        for m in map(CAPTION_OPTION.match, lines)]
            if any(captions):
                texts.append((f"cell {i + 1}, ", "\n".join(captions)))
    return texts


# Rule 11 of the README's typography: captions and alt text are written in the plain form or end on a noun
# (「…を描いた。」「…のベースライン。」), as in chapters 1-8, never in です/ます.
POLITE_ENDING = re.compile(r"(?:です|ます|ません|ました|でした|でしょう)(?=[。」）]|$)")


def check_caption_style(root: Path) -> list[str]:
    """The figure and table captions and the alt text of the Japanese notebooks follow rule 11: no sentence of
    them ends in です/ます."""
    problems = []
    for path in notebooks(root):
        if language_of(root, path) != "ja":
            continue
        for i, cell in code_cells(read_notebook(path)):
            for line in source_lines(cell):
                m = CAPTION_OPTION.match(line)
                if m and POLITE_ENDING.search(m.group("value")):
                    key = line.split(":", 1)[0].lstrip("#| ").strip()
                    end = POLITE_ENDING.search(m.group("value"))
                    problems.append(f"{rel(root, path)} (cell {i + 1}): rule 11 {key}: a caption or alt text ends "
                                    f"a sentence in {end.group(0)!r}: {m.group('value')[max(0, end.start() - 20):end.end()]!r}; "
                                    "write it in the plain form or end on a noun (「…を示す。」「…のベースライン。」)")
    return problems


# A line break inside a Japanese sentence. The website drops it (site/east-asian-line-breaks.lua), but Jupyter, Colab
# and GitHub render a notebook's Markdown with CommonMark, where it is a space: 「計算し ます」. So the Japanese
# notebooks break lines only where a space belongs (next to Latin text or code) or between paragraphs. The rule is
# the filter's: a break between two wide characters, or next to full-width punctuation, goes.
BLOCK_START = re.compile(r"^[ \t]*(?:[-*+][ \t]|\d+[.)][ \t]|#|>|\||:::|\$\$|```|~~~|<|:[ \t]|\{|!\[)")
CODE_OR_MATH_FENCE = re.compile(r"^[ \t]*(?:```|~~~|\$\$)")
LINK_END = re.compile(r"\]\([^()\s]*\)$|\]\{[^{}]*\}$|\]\[[^\]]*\]$")


def _wide(char: str) -> bool:
    cp = ord(char)
    return (0x1100 <= cp <= 0x115F or 0x2E80 <= cp <= 0xA4CF or 0xAC00 <= cp <= 0xD7A3 or 0xF900 <= cp <= 0xFAFF
            or 0xFE30 <= cp <= 0xFE4F or 0xFF00 <= cp <= 0xFF60 or 0xFFE0 <= cp <= 0xFFE6 or cp >= 0x20000)


def _cjk_punctuation(char: str) -> bool:
    cp = ord(char)
    return (0x3000 <= cp <= 0x303F or 0xFF01 <= cp <= 0xFF0F or 0xFF1A <= cp <= 0xFF20 or 0xFF3B <= cp <= 0xFF40
            or 0xFF5B <= cp <= 0xFF65)


def _breaks_inside_sentence(line: str, following: str) -> bool:
    """Whether the break between two lines of one paragraph sits inside Japanese text, as the filter sees it:
    the text's last and first characters, through bold, italics and a link's brackets and target."""
    end = LINK_END.sub("", line.rstrip()).rstrip("*_")
    start = following.lstrip(" \t").lstrip("*_[")
    if not end or not start:
        return False
    before, after = end[-1], start[0]
    return (_wide(before) and _wide(after)) or _cjk_punctuation(before) or _cjk_punctuation(after)


def join_japanese_lines(text: str) -> str:
    """``text`` (Markdown) with the line breaks inside Japanese sentences removed, code, math, tables, headings and
    other block starts left as they are."""
    lines, out, fenced = text.split("\n"), [], False
    for line in lines:
        joinable = (out and not fenced and line.strip() and out[-1].strip() and not BLOCK_START.match(line)
                    and not re.match(r"^[ \t]*(?:#|\||:::|\$\$|```|~~~|<)", out[-1])
                    and _breaks_inside_sentence(out[-1], line))
        if CODE_OR_MATH_FENCE.match(line) and not (line.count("$$") == 2 and line.strip() != "$$"):
            fenced = not fenced
        if joinable:
            out[-1] = out[-1].rstrip() + line.lstrip(" \t")
        else:
            out.append(line)
    return "\n".join(out)


def check_japanese_line_breaks(root: Path) -> list[str]:
    """No Markdown cell of a Japanese notebook breaks a line inside a Japanese sentence (join_japanese_lines)."""
    problems = []
    for path in notebooks(root):
        if language_of(root, path) != "ja":
            continue
        for i, cell in enumerate(read_notebook(path).get("cells", [])):
            text = "\n".join(source_lines(cell))
            if cell.get("cell_type") == "markdown" and join_japanese_lines(text) != text:
                first = next(n for n, (a, b) in enumerate(zip(text.split("\n"), join_japanese_lines(text).split("\n")))
                             if a != b)
                problems.append(f"{rel(root, path)} (cell {i + 1}, line {first + 1}): a line break inside a Japanese "
                                "sentence shows as a space in Jupyter, Colab and GitHub; join the lines "
                                "(tools.bookcheck.join_japanese_lines does it)")
    return problems


def check_figure_outputs(root: Path) -> list[str]:
    """A cell labelled as a figure (``#| label: fig-...``) displays one output, the figure. A second display (a
    table printed before or after it) becomes a sub-figure: a stray "(a)"/"(b)" caption on the site, and in the
    EPUB two elements with one id, which EPUBCheck rejects. Print the table from the next cell."""
    problems = []
    for path in notebooks(root):
        for i, cell in code_cells(read_notebook(path)):
            if not any(line.startswith("#| label: fig-") for line in source_lines(cell)):
                continue
            shown = [o for o in cell.get("outputs", []) if o.get("output_type") in ("display_data", "execute_result")]
            if len(shown) > 1:
                problems.append(f"{rel(root, path)} (cell {i + 1}): a figure cell displays {len(shown)} outputs; "
                                "display only the figure there and print anything else from the next cell")
    return problems


def check_typography(root: Path) -> list[str]:
    """The Japanese prose (Markdown cells, figure and table captions and pages of chapters/ja/,
    and Japanese paragraphs of the root pages) follows the book's Japanese typography rule
    (README, guide for authors): each finding names the file, the line and the rule."""
    problems = []
    for path in documents(root):
        if language_of(root, path) == LANGS[0]:
            continue
        for where, text in typography_texts(path):
            for line, rule, message, excerpt in typography_problems(text):
                problems.append(f"{rel(root, path)} ({where}line {line}): rule {rule}: {message}: "
                                f"{excerpt!r}")
    return problems


# ---------------------------------------------------------------------------------------------
# environment.yml against pyproject.toml


def normalize(name: str) -> str:
    """A package name as PEP 503 compares them, with conda-forge names mapped to PyPI's."""
    name = re.sub(r"[-_.]+", "-", name.strip().lower())
    return CONDA_TO_PYPI.get(name, name)


def requirement_name(spec: str) -> str | None:
    """The package a requirement or conda spec names (None for pip options and paths)."""
    spec = spec.strip()
    if not spec or spec.startswith(("-", ".", "/")) or "://" in spec:
        return None
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", spec)
    return normalize(match.group(0)) if match else None


def pyproject_packages(root: Path) -> set[str]:
    with (root / "pyproject.toml").open("rb") as f:
        project = tomllib.load(f)["project"]
    extras = project.get("optional-dependencies", {})
    specs = [*project.get("dependencies", []), *(s for e in ENV_EXTRAS for s in extras.get(e, []))]
    return {n for n in map(requirement_name, specs) if n}


def environment_packages(env: dict) -> tuple[set[str], list[str]]:
    """(packages, conda specs) of environment.yml, pip section included."""
    conda, pip = [], []
    for dep in env.get("dependencies") or []:
        if isinstance(dep, str):
            conda.append(dep)
        elif isinstance(dep, dict):
            pip.extend(dep.get("pip") or [])
    names = {n for n in map(requirement_name, conda + pip) if n} - {"python", "pip"}
    return names, conda


def check_environment(root: Path) -> list[str]:
    """environment.yml (conda-forge, Python 3.11, Quarto) installs what pyproject.toml lists."""
    path = root / "environment.yml"
    if not path.exists():
        return ["environment.yml is missing"]
    env = load_yaml(path)
    problems = []
    if "conda-forge" not in (env.get("channels") or []):
        problems.append("environment.yml: use the conda-forge channel")
    packages, conda = environment_packages(env)
    if not any(re.fullmatch(r"python\s*=+\s*3\.11(\.\*)?", spec.strip()) for spec in conda):
        problems.append("environment.yml: pin python=3.11")
    expected = pyproject_packages(root)
    for name in sorted(expected - packages):
        problems.append(f"environment.yml lacks {name}, which pyproject.toml requires")
    for name in sorted(packages - expected):
        problems.append(f"environment.yml has {name}, which pyproject.toml does not list")
    return problems


# ---------------------------------------------------------------------------------------------

CHECKS: tuple[Callable[[Path], list[str]], ...] = (
    check_quarto_config,
    check_chapter_lists,
    check_bibliography_page,
    check_twins,
    check_code_parity,
    check_output_parity,
    check_outputs,
    check_japanese_outputs,
    check_nbval_comments,
    check_cross_references,
    check_citations,
    check_includes,
    check_glossary,
    check_typography,
    check_japanese_line_breaks,
    check_caption_style,
    check_figure_outputs,
    check_colab_cell,
    check_environment,
)


def run_all(root: Path) -> list[str]:
    """Every problem every check finds, each prefixed with the check's name."""
    return [f"[{check.__name__.removeprefix('check_')}] {problem}"
            for check in CHECKS for problem in check(root)]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0] if args else Path(__file__).resolve().parent.parent).resolve()
    problems = run_all(root)
    for problem in problems:
        print(problem)
    print(f"bookcheck: {len(problems)} problem(s) in {len(CHECKS)} checks", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
