"""What a chapter prints, in the page's language: sentences from a message catalogue, results as tables.

A chapter's code is the same in both editions and is written in English. A sentence it prints goes through
:func:`t`, which looks the English text up in the catalogue ``attnbook/locale/ja.po`` (GNU gettext's PO format,
keyed by the English text, as ``gettext`` would) and returns it in the language that ``plotting.setup(LANG)``
chose, with its ``{placeholders}`` filled in::

    print(t("rows of A sum to 1: {ok}", ok=bool(jnp.allclose(weights.sum(axis=1), 1.0))))

A result with several values is a :class:`Table`. On the page it is a Markdown table (``_repr_markdown_``: Quarto
renders it, and the site shows each row as a block on a phone); in a terminal and for nbval it is aligned plain text
(``__repr__``, the ``text/plain`` output nbval compares). Its column names go through the catalogue too; its cells
are printed as given, numbers in the column's format::

    Table(["d", "var(q·k)"], [(4, 4.02), (16, 15.9)], formats=[None, ".0f"])

A result measured with several seeds is one cell, :func:`mean_range`: the mean and, in brackets, the lowest and the
highest seed (``"0.25 (0.24–0.26)"``; ``"0.25（0.24–0.26）"`` on a Japanese page).

Both editions stay complete: a message missing from the catalogue, or one whose translation is empty or names other
placeholders, raises a ``KeyError`` in either language, so the notebook that prints it fails under nbval
(``tests/lib/test_report.py`` also checks every message a chapter's code names against the catalogue).
"""

from __future__ import annotations

import ast
import functools
import re
import string
from collections.abc import Sequence
from importlib import resources

import numpy as np

from . import plotting

CATALOGUES = {"ja": "ja.po"}  # language -> file in attnbook/locale; English is the key itself
_PO_STRING = re.compile(r'^(msgid|msgstr)?\s*("(?:[^"\\]|\\.)*")\s*$')


def parse_po(text: str) -> dict[str, str]:
    """The ``msgid -> msgstr`` pairs of a PO file (comments skipped, continued strings joined).

    Only the forms this book's catalogue uses: no plural forms, no ``msgctxt``. The header entry (empty msgid) is
    dropped.
    """
    entries: dict[str, str] = {}
    key = field = None
    parts: dict[str, list[str]] = {}

    def flush() -> None:
        if "msgid" in parts:
            msgid = "".join(parts["msgid"])
            if msgid in entries:
                raise ValueError(f"the catalogue has {msgid!r} twice")
            if msgid:
                entries[msgid] = "".join(parts.get("msgstr", []))

    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _PO_STRING.match(line)
        if match is None:
            raise ValueError(f"line {number} of the catalogue is not PO syntax: {line!r}")
        key, literal = match.groups()
        if key == "msgid":
            flush()
            parts = {}
        if key:
            field = key
            parts[field] = []
        elif field is None:
            raise ValueError(f"line {number} of the catalogue continues no msgid or msgstr: {line!r}")
        parts[field].append(ast.literal_eval(literal))
    flush()
    return entries


@functools.cache
def catalogue(lang: str) -> dict[str, str]:
    """The messages of ``lang``, English text -> translation (an identity catalogue for English)."""
    if lang not in plotting.LANGUAGES:
        raise ValueError(f"lang must be one of {plotting.LANGUAGES}, got {lang!r}")
    other = next(iter(CATALOGUES))
    messages = parse_po(resources.files("attnbook").joinpath("locale", CATALOGUES[other]).read_text("utf-8"))
    return messages if lang in CATALOGUES else {en: en for en in messages}


def placeholders(message: str) -> set[str]:
    """The names of the ``{placeholders}`` of a message (``{acc:.3f}`` -> ``acc``)."""
    return {name for _, name, _, _ in string.Formatter().parse(message) if name is not None}


def t(message: str, /, lang: str | None = None, **values) -> str:
    """``message`` (English) in the page's language, its ``{placeholders}`` filled in from ``values``.

    ``lang`` overrides the language of ``plotting.setup``. A message that the catalogue lacks, or whose
    translation is empty or names other placeholders, is a ``KeyError`` in every language.
    """
    lang = plotting.language() if lang is None else lang
    messages = catalogue(lang)
    if message not in messages:
        raise KeyError(f"{message!r} is not in the catalogue attnbook/locale/{CATALOGUES['ja']}: add it with its "
                       "Japanese translation (msgid / msgstr)")
    text = messages[message]
    if not text or placeholders(text) != placeholders(message):
        raise KeyError(f"the catalogue's translation of {message!r} is empty or names other placeholders "
                       f"({sorted(placeholders(text))} for {sorted(placeholders(message))})")
    return text.format(**values) if values or placeholders(message) else text


def binary_size(n_bytes) -> str:
    """A count of bytes in TiB, GiB, MiB or KiB, to three significant digits: ``binary_size(2**26)`` is
    ``"64 MiB"``, ``binary_size(4864)`` is ``"4.75 KiB"`` (below 1 KiB too: ``binary_size(512)`` is ``"0.5 KiB"``)."""
    if n_bytes < 0:
        raise ValueError(f"a count of bytes cannot be negative, got {n_bytes}")
    for unit, scale in [("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)]:
        if n_bytes >= scale or unit == "KiB":
            return f"{n_bytes / scale:.3g} {unit}"


def _cell(value, fmt: str | None) -> str:
    if value is None:
        return "–"
    if isinstance(value, str):
        return value
    if fmt == "bytes":
        return binary_size(value.item() if hasattr(value, "item") else value)
    if fmt is None:
        return str(value.item() if hasattr(value, "item") else value)
    return format(value.item() if hasattr(value, "item") else value, fmt)


class Table:
    """Labelled rows of results, a Markdown table on the page and aligned text for nbval.

    ``columns``: the English names of the columns (translated through :func:`t`); ``rows``: one sequence of values
    per row, as many as there are columns; ``formats``: one format specification per column (``".3f"``; ``"bytes"``
    for a count of bytes, as :func:`binary_size` writes it), or None for ``str``. A string cell is printed as it is (pass it through ``t`` to translate it), None as "–".
    """

    def __init__(self, columns: Sequence[str], rows: Sequence[Sequence], *, formats: Sequence[str | None] | None = None):
        if isinstance(columns, str) or not columns:
            raise TypeError(f"columns must be a non-empty sequence of column names, got {columns!r}")
        formats = [None] * len(columns) if formats is None else list(formats)
        if len(formats) != len(columns):
            raise ValueError(f"formats must have one entry per column ({len(columns)}), got {len(formats)}")
        self.columns = [t(name) for name in columns]
        self.rows = []
        for k, row in enumerate(rows):
            if len(row) != len(columns):
                raise ValueError(f"row {k} has {len(row)} values, the table has {len(columns)} columns: {row!r}")
            self.rows.append([_cell(value, fmt) for value, fmt in zip(row, formats)])
        self._numeric = [all(_is_number(row[j]) for row in self.rows) and bool(self.rows)
                         for j in range(len(columns))]

    def _repr_markdown_(self) -> str:
        def line(cells):
            return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

        rule = "|" + "|".join("---:" if numeric else "---" for numeric in self._numeric) + "|"
        return "\n".join([line(self.columns), rule] + [line(row) for row in self.rows])

    def __repr__(self) -> str:
        widths = [max([plotting_width(c) for c in [name] + [row[j] for row in self.rows]])
                  for j, name in enumerate(self.columns)]

        def line(cells):
            return "  ".join(_pad(c, w, right=numeric) for c, w, numeric in zip(cells, widths, self._numeric)).rstrip()

        return "\n".join([line(self.columns)] + [line(row) for row in self.rows])

    def __str__(self) -> str:
        return self.__repr__()


def mean_range(values, fmt: str = ".2f", lang: str | None = None) -> str:
    """One value per seed as a table cell: the mean and, in brackets, the lowest and the highest value.

    ``mean_range([0.24, 0.25, 0.26])`` is ``"0.25 (0.24–0.26)"``; a single value is printed alone. On a Japanese
    page the brackets are full-width, with no space before them, as the Japanese edition's prose writes them
    (README, "Japanese typography", rule 2): ``"0.25（0.24–0.26）"``. ``lang`` overrides the language of
    ``plotting.setup``.
    """
    values = np.asarray(values, dtype=float).ravel()
    if values.size == 0:
        raise ValueError("mean_range needs at least one value")
    if values.size == 1:
        return format(values[0], fmt)
    lang = plotting.language() if lang is None else lang
    mean, low, high = (format(v, fmt) for v in (values.mean(), values.min(), values.max()))
    return f"{mean}（{low}–{high}）" if lang == "ja" else f"{mean} ({low}–{high})"


def _is_number(text: str) -> bool:
    return re.fullmatch(r"[-+−]?(\d[\d,_ ]*)?(\.\d+)?(e[-+]?\d+)?%?|–", text.strip()) is not None and text.strip() != ""


def plotting_width(text: str) -> int:
    """Columns of ``text`` in a monospace font: 2 for a wide (East Asian) character."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _pad(text: str, width: int, *, right: bool) -> str:
    space = " " * (width - plotting_width(text))
    return space + text if right else text + space
