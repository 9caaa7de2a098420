"""What the site's test files share: the build, the browser's paths, and helpers for driving pages.

The fixtures built from these (``site``, ``browser``, ``server``) are in tests/site/conftest.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

from tools import sitecheck

ROOT = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
LANGS = ("en", "ja")


def missing(what: str, how: str) -> None:
    """Skip the test outside CI; fail it under CI=true."""
    message = f"{what} is not installed: {how}"
    if IN_CI:
        pytest.fail(f"{message} (CI=true: the site tests must run, not skip)")
    pytest.skip(message)


def quarto_command() -> str | None:
    if os.environ.get("QUARTO"):
        return os.environ["QUARTO"]
    venv_quarto = ROOT / ".venv" / "bin" / "quarto"
    return shutil.which("quarto") or (str(venv_quarto) if venv_quarto.exists() else None)


def git_status() -> str | None:
    """`git status --porcelain` of the checkout, or None outside a git work tree."""
    try:
        result = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT,
                                capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return result.stdout


@dataclass
class Built:
    path: Path
    seconds: float
    status_before: str | None
    status_after: str | None
    error: str | None = None  # why `bash tools/build_site.sh` failed, or None

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "path": str(self.path)})

    @classmethod
    def from_json(cls, text: str) -> Built:
        data = json.loads(text)
        return cls(**{**data, "path": Path(data["path"])})


def build_site(quarto: str) -> Built:
    """Run ``bash tools/build_site.sh``: the site from the current sources, in ROOT/_site."""
    before = git_status()
    start = time.perf_counter()
    result = subprocess.run(["bash", "tools/build_site.sh"], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "QUARTO": quarto})
    seconds = time.perf_counter() - start
    error = None if result.returncode == 0 else (
        f"bash tools/build_site.sh failed ({result.returncode}):\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return Built(ROOT / "_site", seconds, before, git_status(), error)


def chromium_paths() -> tuple[str, str]:
    # Debian's chromium here; GitHub's Ubuntu runners have Chrome and put chromedriver in $CHROMEWEBDRIVER.
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver") or shutil.which(
        "chromedriver", path=os.environ.get("CHROMEWEBDRIVER", "") or None)
    if not browser or not driver:
        missing("Chromium", "install Debian's chromium, chromium-driver and fonts-noto-cjk "
                "(bash tools/setup.sh does it as root)")
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing("selenium", "pip install -e '.[test]'")
    return browser, driver


def base_url(protocol: str, site: Built, server: str) -> str:
    return server if protocol == "http" else site.path.resolve().as_uri()


def wait_for(driver, condition: Callable[[object], object], what: str, seconds: float = 10.0):
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait
    try:
        return WebDriverWait(driver, seconds).until(condition)
    except TimeoutException:
        raise AssertionError(f"timed out after {seconds} s waiting for {what} at {driver.current_url}")


def site_path(url: str, base: str) -> str:
    """The page's path inside the site, with a folder read as its index.html."""
    path = url.split("#")[0].split("?")[0].removeprefix(base).lstrip("/")
    return path + "index.html" if path.endswith("/") or not path else path


def every_page() -> list[str]:
    return [f"{lang}/{page.html}" for lang in LANGS for page in sitecheck.book_pages(ROOT, lang)]
