"""Site assets that run outside Python (site/east-asian-line-breaks.lua, site/lang-switch.html),
when their runtimes are installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from book_copy import ROOT


def pandoc_command() -> list[str] | None:
    """Pandoc on PATH, or the one Quarto bundles (`quarto pandoc`), as the site build uses."""
    if shutil.which("pandoc"):
        return ["pandoc"]
    quarto = shutil.which("quarto") or ROOT / ".venv" / "bin" / "quarto"
    return [str(quarto), "pandoc"] if Path(quarto).exists() else None


@pytest.mark.skipif(pandoc_command() is None and os.environ.get("CI") != "true",
                    reason="pandoc is not installed (bash tools/setup.sh installs Quarto, which has it)")
def test_east_asian_line_break_filter():
    text = "日本語の文です。\n次の文です。\nEnglish\n続き。\n\n- 項目の\n  続き\n"
    pandoc = pandoc_command()
    assert pandoc, "pandoc is missing under CI"
    run = lambda *args: subprocess.run([*pandoc, "-t", "html", *args], input=text, text=True,
                                       capture_output=True, check=True).stdout
    filtered = run("--lua-filter", str(ROOT / "site" / "east-asian-line-breaks.lua"))
    assert "文です。次の文です。 English 続き。" in filtered.replace("\n", " ")
    assert filtered == run("-f", "markdown+east_asian_line_breaks")


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_language_switch_targets():
    html = (ROOT / "site" / "lang-switch.html").read_text(encoding="utf-8")
    script = html.split("<script>")[1].split("</script>")[0]
    twin = script[script.index("function twin"):script.index("function switchLink")]
    cases = {
        "/repo/en/": ["en", "/repo/ja/"],
        "/repo/ja/index.html": ["ja", "/repo/en/index.html"],
        "/repo/en/chapters/en/01-positional-encoding.html":
            ["en", "/repo/ja/chapters/ja/01-positional-encoding.html"],
        "/home/me/book/_site/ja/chapters/ja/02-x.html": ["ja", "/home/me/book/_site/en/chapters/en/02-x.html"],
        "/repo/": None,
    }
    program = ('var LANGS = {en: "English", ja: "日本語"};\n' + twin
               + f"console.log(JSON.stringify({json.dumps(list(cases))}.map(twin)));")
    out = subprocess.run(["node", "-e", program], text=True, capture_output=True, check=True).stdout
    assert json.loads(out) == list(cases.values())
