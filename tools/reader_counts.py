"""Count what a reader meets on the page that is the book's machinery rather than attention (issue 41).

Over the visible code cells (not ``#| include: false``) and the stored outputs of one edition:

- ``helpers``: functions and classes defined in the main text of a chapter (exercise cells, the starters and the
  folded solutions, are the reader's own work and counted apart as ``exercise_defs``);
- ``twice``: string literals with Japanese text in the code, each a sentence written a second time for the other
  language (``tr(en, ja)``); ``tr_calls`` counts the calls themselves;
- ``wrapping``: code that fits text to a phone by hand: a string literal with a line break inside a ``print`` or
  ``tr`` call, and comments about phones or column counts;
- ``true_false``: printed lines (streams, text results and Markdown tables) that end in ``True`` or ``False``, and
  ``bare``, those of them that print no number;
- ``printed``: every printed line, for scale.

    python -m tools.reader_counts                 # the English edition, one line per chapter and the totals
    python -m tools.reader_counts --lang ja
    python -m tools.reader_counts --list true_false chapters/en/02-scaled-dot-product-attention.ipynb
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import tokenize
from pathlib import Path

from tools.book import code_cells, language_files, read_notebook, tags

ROOT = Path(__file__).resolve().parent.parent
JAPANESE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uff01-\uff5e\u3000-\u303f]")
INCLUDE_FALSE = re.compile(r"^\s*#\|\s*include:\s*false\s*$", re.MULTILINE)
PHONE_COMMENT = re.compile(r"phone|\b\d+ columns?\b|column count|legible|narrow:", re.IGNORECASE)
NUMBER = re.compile(r"\d")
EXERCISE_TAG = "exercise-starter"
SOLUTION_OPEN = re.compile(r'callout-tip[^}]*title="(Solution|解答)')
KINDS = ("helpers", "exercise_defs", "twice", "tr_calls", "wrapping", "true_false", "bare", "printed")


def visible_cells(nb: dict):
    """(cell index, cell, in_exercise) for every visible code cell, in_exercise for starters and solutions."""
    in_solution = False
    for i, cell in enumerate(nb["cells"]):
        text = "".join(cell.get("source", ""))
        if cell["cell_type"] == "markdown":
            if SOLUTION_OPEN.search(text):
                in_solution = True
            elif text.strip() == ":::":
                in_solution = False
            continue
        if cell["cell_type"] != "code" or INCLUDE_FALSE.search(text):
            continue
        yield i, cell, in_solution or EXERCISE_TAG in tags(cell)


def _code(cell: dict) -> str:
    """The cell's source with IPython magics and shell lines blanked, so that ``ast`` reads it."""
    return "".join(re.sub(r"^(\s*)[%!].*$", r"\1pass", line) for line in
                   "".join(cell.get("source", "")).splitlines(keepends=True))


def printed_lines(cell: dict) -> list[str]:
    lines = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            lines += "".join(out.get("text", "")).splitlines()
        elif out.get("output_type") in ("execute_result", "display_data"):
            data = out.get("data", {})
            for kind in ("text/markdown", "text/plain"):  # what the page shows: the Markdown form if there is one
                if kind in data:
                    if kind == "text/plain" and any(k.startswith("image/") for k in data):
                        break  # a figure's "<Figure size ...>"
                    lines += "".join(data[kind]).splitlines()
                    break
    return [line for line in lines if line.strip()]


def count_cell(cell: dict, in_exercise: bool) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {kind: [] for kind in KINDS}
    code = _code(cell)
    try:
        tree = ast.parse(code)
    except SyntaxError:
        tree = ast.Module(body=[], type_ignores=[])
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found["exercise_defs" if in_exercise else "helpers"].append(node.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and JAPANESE.search(node.value):
            found["twice"].append(node.value[:40])
        if isinstance(node, ast.JoinedStr) and any(isinstance(v, ast.Constant) and JAPANESE.search(str(v.value))
                                                   for v in node.values):
            found["twice"].append(ast.unparse(node)[:40])
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            if name in ("tr", "say") and len(node.args) >= 2:
                found["tr_calls"].append(ast.unparse(node)[:40])
            if name in ("print", "tr", "say", "t"):
                for arg in ast.walk(node):
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and "\n" in arg.value.strip("\n"):
                        found["wrapping"].append(repr(arg.value[:40]))
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type == tokenize.COMMENT and PHONE_COMMENT.search(token.string) and not token.string.startswith("#|"):
                found["wrapping"].append(token.string[:60])
    except (tokenize.TokenError, IndentationError):
        pass
    for line in printed_lines(cell):
        found["printed"].append(line)
        if re.search(r"\b(True|False)\s*$", line):
            found["true_false"].append(line.strip())
            if not NUMBER.search(line):
                found["bare"].append(line.strip())
    return found


def count_notebook(path: Path) -> dict[str, list[str]]:
    total: dict[str, list[str]] = {kind: [] for kind in KINDS}
    for i, cell, in_exercise in visible_cells(read_notebook(path)):
        for kind, items in count_cell(cell, in_exercise).items():
            total[kind] += [f"cell {i}: {item}" for item in items]
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--lang", default="en")
    parser.add_argument("--list", choices=KINDS, help="print every item of this kind")
    args = parser.parse_args(argv)
    paths = args.notebooks or [p for p in language_files(ROOT, args.lang) if p.suffix == ".ipynb"]
    totals = dict.fromkeys(KINDS, 0)
    print(f"{'notebook':40s} " + " ".join(f"{k:>13s}" for k in KINDS))
    for path in paths:
        counts = count_notebook(path)
        print(f"{path.name[:40]:40s} " + " ".join(f"{len(counts[k]):13d}" for k in KINDS))
        for k in KINDS:
            totals[k] += len(counts[k])
        if args.list:
            for item in counts[args.list]:
                print("    " + item)
    print(f"{'total':40s} " + " ".join(f"{totals[k]:13d}" for k in KINDS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
