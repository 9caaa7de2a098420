"""The commands a reader is told to type (README.md, the prefaces), the Quarto the site is published
with (tools/setup.sh, .github/workflows/publish.yml), and how tools/setup.sh fails (with a fake
interpreter: nothing is installed)."""

from __future__ import annotations

import os
import re
import subprocess

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
    assert any("pytest tests/site/test_site.py" in str(s.get("run", "")) for s in steps)


# ---------------------------------------------------------------------------------------------
# tools/setup.sh's failures, with a fake interpreter (no install): the Python version is checked first,
# the library and the test tools are installed before the website's tools, and a failed step ends with
# one line that names it (and, for the website part, --no-site).

FAKE_PYTHON = r"""#!/usr/bin/env bash
echo "$*" >> "$FAKE_LOG"
case "$*" in
  *"sys.version_info < (3, 11)"*) exit "${FAKE_TOO_OLD:-0}" ;;
  *"print("*) echo 3.10.4; exit 0 ;;
  "-m venv .venv") mkdir -p .venv/bin && cp "$0" .venv/bin/python; exit 0 ;;
  *"$FAKE_FAIL_ON"*) echo "Error downloading Quarto: <urlopen error [Errno -2] Name or service not known>"; exit 1 ;;
  *) exit 0 ;;
esac
"""


def run_setup(tmp_path, *args, fail_on="@@nothing@@", too_old=False):
    """tools/setup.sh in a copy of its own (no ../shared beside it), with the fake interpreter as PYTHON."""
    repo = tmp_path / "repo"
    (repo / "tools").mkdir(parents=True)
    (repo / "tools" / "setup.sh").write_text((ROOT / "tools" / "setup.sh").read_text("utf-8"), "utf-8")
    python = tmp_path / "python3"
    python.write_text(FAKE_PYTHON, "utf-8")
    python.chmod(0o755)
    log = tmp_path / "calls.log"
    env = {**os.environ, "PYTHON": str(python), "FAKE_LOG": str(log), "FAKE_FAIL_ON": fail_on,
           "FAKE_TOO_OLD": "1" if too_old else "0"}
    done = subprocess.run(["bash", str(repo / "tools" / "setup.sh"), *args], env=env, capture_output=True,
                          text=True, timeout=60)
    calls = log.read_text("utf-8").splitlines() if log.exists() else []
    return done, calls, repo


def test_setup_checks_the_python_version_first(tmp_path):
    done, calls, repo = run_setup(tmp_path, too_old=True)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"setup: the book needs Python 3.11 or newer; '{tmp_path / 'python3'}' is Python 3.10.4 "
        "(set PYTHON=/path/to/python3.11 or newer)."]
    assert not (repo / ".venv").exists() and not any("pip" in c for c in calls)


def test_setup_names_a_missing_interpreter(tmp_path):
    done = subprocess.run(["bash", str(ROOT / "tools" / "setup.sh"), "--no-site"],
                          env={**os.environ, "PYTHON": str(tmp_path / "no-such-python")},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "not found; install Python 3.11 or newer" in done.stderr


def test_setup_rejects_an_unknown_argument(tmp_path):
    done, _, _ = run_setup(tmp_path, "--no-sight")
    assert done.returncode == 2 and "unknown argument '--no-sight'" in done.stderr


def test_a_failed_library_step_ends_with_one_line_naming_it(tmp_path):
    done, calls, _ = run_setup(tmp_path, fail_on="-r requirements.lock")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "setup: FAILED while installing the locked packages of requirements.lock (exit 1): the messages above say why.")
    assert not any("[test" in c for c in calls)  # nothing after the failed step


def test_the_site_step_fails_last_with_its_cause_and_no_site(tmp_path):
    """Quarto's download fails: the library and the test tools were installed before, and the one line names the
    step, quotes the cause from pip's log and points at --no-site."""
    done, calls, repo = run_setup(tmp_path, fail_on="[test,site]")
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("setup: FAILED while installing Quarto 1.7.34 (PyPI's quarto-cli, which downloads it "
                           "from GitHub) and jupyter (exit 1): Error downloading Quarto: <urlopen error")
    assert "(pip's full output: .venv/setup-site.log)" in last and "bash tools/setup.sh --no-site" in last
    assert "urlopen error" in (repo / ".venv" / "setup-site.log").read_text("utf-8")
    order = [next(i for i, c in enumerate(calls) if marker in c) for marker in ("[test]", "npm", "[test,site]")]
    assert order == sorted(order)  # library and test tools, textlint, then the site


def test_no_site_installs_the_library_and_the_test_tools_only(tmp_path):
    done, calls, _ = run_setup(tmp_path, "--no-site", fail_on="[test,site]")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1].startswith("Set up .venv with attnbook[test], the versions of")
    assert any("-e .[test]" in c for c in calls) and not any("site" in c for c in calls)
