"""The messages the chapters print, against the catalogue lib/attnbook/locale/ja.po (attnbook.report).

A message is the English first argument of ``t(...)`` or a column name of ``Table([...], ...)`` in a chapter's code,
when written as a string literal (an f-string or a variable is not a message: the catalogue is keyed by the text
itself, with ``{placeholders}`` for the values).

    python -m tools.messages                 # messages missing from the catalogue, untranslated, or unused
    python -m tools.messages --add           # append the missing ones to ja.po with an empty msgstr, to translate
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

from tools.book import code_cells, language_files, read_notebook

ROOT = Path(__file__).resolve().parent.parent
CATALOGUE = ROOT / "lib" / "attnbook" / "locale" / "ja.po"
MAGIC = re.compile(r"^(\s*)[%!].*$", re.MULTILINE)


def messages_in_code(code: str) -> list[str]:
    """The message literals of one cell's code."""
    try:
        tree = ast.parse(MAGIC.sub(r"\1pass", code))
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", getattr(node.func, "attr", None))
        if name == "t" and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            found.append(node.args[0].value)
        elif name == "Table" and node.args and isinstance(node.args[0], (ast.List, ast.Tuple)):
            found += [e.value for e in node.args[0].elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return found


def used_messages(root: Path = ROOT) -> dict[str, str]:
    """Every message of the English chapters' code -> the first notebook that prints it."""
    used: dict[str, str] = {}
    for path in language_files(root, "en"):
        if path.suffix != ".ipynb":
            continue
        for _, cell in code_cells(read_notebook(path)):
            for message in messages_in_code("".join(cell.get("source", ""))):
                used.setdefault(message, path.name)
    return used


def po_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


def problems(root: Path = ROOT) -> list[str]:
    from attnbook.report import parse_po, placeholders

    catalogue = parse_po((root / "lib" / "attnbook" / "locale" / "ja.po").read_text("utf-8"))
    used = used_messages(root)
    found = [f"{where}: {message!r} is not in the catalogue (python -m tools.messages --add, then translate it)"
             for message, where in used.items() if message not in catalogue]
    for message, translation in catalogue.items():
        if not translation:
            found.append(f"ja.po: {message!r} has no translation")
        elif placeholders(translation) != placeholders(message):
            found.append(f"ja.po: the translation of {message!r} names {sorted(placeholders(translation))}, "
                         f"the message {sorted(placeholders(message))}")
        if message not in used:
            found.append(f"ja.po: {message!r} is printed by no chapter; remove it")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--add", action="store_true", help="append missing messages with an empty translation")
    args = parser.parse_args(argv)
    if args.add:
        from attnbook.report import parse_po

        catalogue = parse_po(CATALOGUE.read_text("utf-8"))
        missing = [(m, w) for m, w in used_messages().items() if m not in catalogue]
        with CATALOGUE.open("a", encoding="utf-8") as f:
            for message, where in missing:
                f.write(f"\n#: {where}\nmsgid {po_string(message)}\nmsgstr \"\"\n")
        print(f"added {len(missing)} messages to {CATALOGUE.relative_to(ROOT)}")
    found = problems()
    for problem in found:
        print(problem)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
