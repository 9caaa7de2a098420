"""Copy the code cells of a notebook to its twin in the other language.

    python -m tools.sync_code chapters/en/01-positional-encoding.ipynb         # update the twin
    python -m tools.sync_code chapters/en/02-scaled-dot-product.ipynb --new    # create the twin

Code cells are matched by position. Each twin cell takes the source cell's code and tags but keeps
its own ``#|`` option lines (matched by option key, so a translated ``fig-cap`` survives) and its
own ``LANG = ...`` line; markdown cells are untouched. Outputs are never copied: a twin cell whose
code changes loses its stored outputs, and the author re-executes the twin
(``python -m tools.execute_notebooks <twin>``).

With ``--new`` the twin does not exist yet and is created as a copy of the whole notebook, without
outputs and with its own LANG line, ready for the markdown to be translated.
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path

import nbformat

from tools.book import (CHAPTERS, LANG_LINE, OPTION_LINE, describe_cell_difference, language_of,
                        shared_texts, twin_path)

OPTION_KEY = re.compile(r"^\s*#\|\s?(?P<key>[A-Za-z0-9_-]+)\s*:")


class SyncError(Exception):
    """The notebooks cannot be synced as they are; the message says why."""


def split_options(lines: list[str]) -> tuple[list[tuple[str | None, list[str]]], list[str]]:
    """Split a cell into its ``#|`` options, grouped by key with their continuation lines, and code."""
    options: list[tuple[str | None, list[str]]] = []
    code = []
    for line in lines:
        if not OPTION_LINE.match(line):
            code.append(line)
        elif (m := OPTION_KEY.match(line)) or not options:
            options.append((m.group("key") if m else None, [line]))
        else:
            options[-1][1].append(line)  # a continuation line of a multi-line YAML value
    return options, code


def merge_options(source: list[tuple[str | None, list[str]]],
                  twin: list[tuple[str | None, list[str]]]) -> list[str]:
    """The source's options in its order, with the twin's line wherever the twin sets the same key;
    options only the twin sets (a translated fig-alt, say) follow."""
    twin_by_key = {key: lines for key, lines in twin if key is not None}
    source_keys = {key for key, _ in source}
    merged = [line for key, lines in source for line in twin_by_key.get(key, lines)]
    merged += [line for key, lines in twin if key is None or key not in source_keys for line in lines]
    return merged


def merge_cell(source_cell: dict, twin_cell: dict, lang_line: str) -> bool:
    """Give `twin_cell` the code and tags of `source_cell`; return whether its code changed."""
    source_options, source_code = split_options(source_cell.source.splitlines())
    twin_options, _ = split_options(twin_cell.source.splitlines())
    code = [lang_line if LANG_LINE.match(line) else line for line in source_code]
    new_source = "\n".join(merge_options(source_options, twin_options) + code)
    changed = new_source != twin_cell.source
    twin_cell.source = new_source
    if source_cell.metadata.get("tags"):
        twin_cell.metadata["tags"] = list(source_cell.metadata["tags"])
    else:
        twin_cell.metadata.pop("tags", None)
    if changed:
        twin_cell.outputs = []
        twin_cell.execution_count = None
    return changed


def twin_lang_line(twin: nbformat.NotebookNode, lang: str) -> str:
    """The twin's own LANG line, or a fresh one for its language."""
    for cell in twin.cells:
        if cell.cell_type == "code":
            for line in cell.source.splitlines():
                if LANG_LINE.match(line):
                    return line
    return f'LANG = "{lang}"'


def code_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [cell for cell in nb.cells if cell.cell_type == "code"]


def sync(source: nbformat.NotebookNode, twin: nbformat.NotebookNode, twin_lang: str) -> list[int]:
    """Copy code and tags from `source` into `twin` in place; return the changed code cells (1-based)."""
    a, b = code_cells(source), code_cells(twin)
    if len(a) != len(b):
        raise SyncError(
            f"the source has {len(a)} code cells and the twin {len(b)}: "
            f"{describe_cell_difference(shared_texts(a), shared_texts(b))}. Add or delete code cells "
            "in the twin so they line up (an empty code cell is enough, this tool fills it in), then run again.")
    lang_line = twin_lang_line(twin, twin_lang)
    return [k + 1 for k, (x, y) in enumerate(zip(a, b)) if merge_cell(x, y, lang_line)]


def new_twin(source: nbformat.NotebookNode, twin_lang: str) -> nbformat.NotebookNode:
    """A copy of the whole notebook for the other language, without outputs."""
    twin = copy.deepcopy(source)
    lang_line = f'LANG = "{twin_lang}"'
    for cell in code_cells(twin):
        cell.source = "\n".join(lang_line if LANG_LINE.match(line) else line
                                for line in cell.source.splitlines())
        cell.outputs = []
        cell.execution_count = None
    return twin


def run(path: Path, new: bool = False, root: Path | None = None) -> str:
    """Sync the twin of the notebook at `path`; return a one-line report."""
    path = path.resolve()
    # The book's root is the folder holding chapters/, so any copy of the book works.
    root = (root or next((p.parent for p in path.parents if p.name == CHAPTERS), path.parent)).resolve()
    lang = language_of(root, path)
    if lang is None or path.suffix != ".ipynb":
        raise SyncError(f"{path} is not a notebook under chapters/<language>/ of {root}")
    target = twin_path(root, path)
    twin_lang = language_of(root, target)
    source = nbformat.read(path, as_version=4)
    shown = target.relative_to(root).as_posix()
    if new:
        if target.exists():
            raise SyncError(f"{shown} already exists; drop --new to update its code")
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(new_twin(source, twin_lang), target)
        return f"created {shown}: translate its markdown cells, then execute it"
    if not target.exists():
        raise SyncError(f"{shown} does not exist; use --new to create it")
    twin = nbformat.read(target, as_version=4)
    before = nbformat.writes(twin)
    changed = sync(source, twin, twin_lang)
    if nbformat.writes(twin) == before:
        return f"{shown} already has the same code and tags"
    nbformat.write(twin, target)
    if not changed:
        return f"updated the tags of {shown}"
    cells = ", ".join(map(str, changed))
    return f"updated code cells {cells} of {shown}; their outputs were cleared, re-execute it"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", type=Path, help="the notebook whose code is copied")
    parser.add_argument("--new", action="store_true", help="create the twin as a full copy")
    args = parser.parse_args(argv)
    try:
        print(run(args.notebook, new=args.new))
    except SyncError as error:
        print(f"sync_code: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
