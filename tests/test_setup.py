"""The commands a reader is told to type (README.md, the prefaces) and the Quarto the site is
published with (tools/setup.sh, .github/workflows/publish.yml)."""

from __future__ import annotations

import re

import pytest
import yaml

from book_copy import ROOT
from tools.book import LANGS


def shell_commands(markdown: str) -> list[str]:
    """The commands of every ```bash block, without their comments."""
    blocks = re.findall(r"```bash\n(.*?)```", markdown, re.DOTALL)
    return [line.split("#")[0].strip() for block in blocks for line in block.splitlines()
            if line.split("#")[0].strip()]


@pytest.mark.parametrize("lang", LANGS)
def test_preface_commands_are_the_readmes(lang):
    readme = shell_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    preface = shell_commands((ROOT / "chapters" / lang / "_preface.qmd").read_text(encoding="utf-8"))
    assert preface and [c for c in preface if c not in readme] == []


def test_site_is_published_with_the_tested_quarto():
    setup = re.search(r"^QUARTO_VERSION=(\S+)", (ROOT / "tools" / "setup.sh").read_text("utf-8"), re.M)
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "publish.yml").read_text("utf-8"))
    steps = workflow["jobs"]["build"]["steps"]
    quarto = next(s for s in steps if str(s.get("uses", "")).startswith("quarto-dev/quarto-actions/setup"))
    assert str(quarto["with"]["version"]) == setup.group(1) == "1.7.34"
    assert any("pytest tests/test_site.py" in str(s.get("run", "")) for s in steps)
