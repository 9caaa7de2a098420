"""The website as its readers see it: both editions rendered by Quarto, checked as files and in a browser.

The session builds the site once with ``bash tools/build_site.sh`` (as .ci/run and the README's test
command do), then

* runs every check of tools/sitecheck.py on it (numbering, chapter mentions, cross-references, the
  build log, images, links and anchors, ``<html lang>``, twins, search index, notebook links), and
  each of them on a copy broken on purpose, where it must report the break;
* drives Debian's Chromium with Selenium (no browser is ever downloaded): the language switch on
  every page, the chooser under file:// and HTTP, search in both languages.

Without Quarto or Chromium these tests are skipped with a reason that says how to install them,
except under ``CI=true``, where a missing tool is a failure: CI must never pass by skipping them.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tools import sitecheck
from tools.screenshots import CHROMIUM_ARGS, QuietHandler

ROOT = Path(__file__).resolve().parent.parent
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


@pytest.fixture(scope="session")
def site() -> Built:
    """The site, built once per test session from the current sources."""
    quarto = quarto_command()
    if quarto is None:
        missing("Quarto", "run 'bash tools/setup.sh', or install Quarto 1.7.34 "
                "(conda install -c conda-forge quarto, pip install quarto-cli, https://quarto.org)")
    before = git_status()
    start = time.perf_counter()
    result = subprocess.run(["bash", "tools/build_site.sh"], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "QUARTO": quarto})
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        pytest.fail(f"bash tools/build_site.sh failed ({result.returncode}):\n"
                    f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    print(f"\nsite built in {seconds:.0f} s (both editions)")
    return Built(ROOT / "_site", seconds, before, git_status())


# ---------------------------------------------------------------------------------------------
# The site as files


@pytest.mark.parametrize("check", sitecheck.CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_site_check(site: Built, check: Callable[[Path, Path], list[str]]) -> None:
    assert check(ROOT, site.path) == []


def test_first_chapter_and_figure_numbers(site: Built) -> None:
    """The issue's acceptance example: 01-positional-encoding is chapter 1, its first figure 1.1."""
    for lang, title, figure in (("en", "Positional encoding", "Figure 1.1"),
                                ("ja", "位置エンコーディング", "図 1.1")):
        html = (site.path / lang / "chapters" / lang / "01-positional-encoding.html").read_text("utf-8")
        assert re.search(r'<span class="chapter-number">1</span>&nbsp; <span class="chapter-title">'
                         + title, html)
        assert figure.replace(" ", "&nbsp;") in html


def test_build_leaves_the_work_tree_as_it_was(site: Built) -> None:
    if site.status_before is None:
        pytest.skip("not a git work tree")
    assert site.status_after == site.status_before


# ---------------------------------------------------------------------------------------------
# The checks find what is broken: each on a copy of the site broken in one way


@pytest.fixture
def broken(site: Built, tmp_path: Path) -> Path:
    copy = tmp_path / "_site"
    shutil.copytree(site.path, copy)
    return copy


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_a_chapter_numbered_wrongly_is_found(broken: Path) -> None:
    """What the first rendering showed: positional encoding as chapter 2, its figure as 2.1."""
    page = broken / "en" / "chapters" / "en" / "01-positional-encoding.html"
    title = '<h1 class="title"><span id="sec-positional-encoding" class="quarto-section-identifier">'
    edit(page, title + '<span class="chapter-number">1</span>', title + '<span class="chapter-number">2</span>')
    edit(page, "Figure&nbsp;1.1:", "Figure&nbsp;2.1:")
    problems = sitecheck.check_numbering(ROOT, broken)
    assert any("01-positional-encoding.html: the title carries number 2, expected 1" in p for p in problems)
    assert any("caption 'Figure 2.1: The sinusoidal" in p for p in problems)


def test_a_chapter_link_with_the_wrong_number_is_found(broken: Path) -> None:
    edit(broken / "en" / "index.html", "Chapter 1, Positional encoding", "Chapter 2, Positional encoding")
    problems = sitecheck.check_chapter_mentions(ROOT, broken)
    assert any("'Chapter 2, Positional encoding' leads to chapters/en/01-positional-encoding.html, "
               "which is numbered 1" in p for p in problems)


def test_japanese_section_references_are_checked(broken: Path) -> None:
    """「4.3 節」 (tools/japanese_xrefs.py) is checked like "Section 4.3"; 「セクション」 must not be left."""
    page = broken / "ja" / "chapters" / "ja" / "04-multi-head-attention.html"
    edit(page, "<span>4.3&nbsp;節</span>", "<span>5.3&nbsp;節</span>")
    edit(page, "<span>4.6&nbsp;節</span>", "<span>セクション&nbsp;4.6</span>")
    assert any("'5.3 節' leads to chapters/ja/04-multi-head-attention.html, which is numbered 4" in p
               for p in sitecheck.check_chapter_mentions(ROOT, broken))
    assert any("cross-reference 'セクション 4.6'" in p for p in sitecheck.check_languages(ROOT, broken))


def test_a_language_link_to_a_missing_page_is_found(broken: Path) -> None:
    (broken / "ja" / "chapters" / "ja" / "03-masking.html").unlink()
    problems = [p for p in sitecheck.check_languages(ROOT, broken) if "language link" in p]
    assert problems == ["en/chapters/en/03-masking.html: its language link leads to "
                        "ja/chapters/ja/03-masking.html, which is missing"]


def test_an_unresolved_cross_reference_is_found(broken: Path) -> None:
    edit(broken / "ja" / "chapters" / "ja" / "02-scaled-dot-product-attention.html",
         '<main class="content" id="quarto-document-content">',
         '<main class="content" id="quarto-document-content"><p>?@fig-missing を参照。</p>')
    problems = sitecheck.check_unresolved_references(ROOT, broken)
    assert any("02-scaled-dot-product-attention.html: unresolved cross-reference ?@fig-missing" in p
               for p in problems)


def test_a_broken_image_link_and_anchor_are_found(broken: Path) -> None:
    page = broken / "en" / "chapters" / "en" / "04-multi-head-attention.html"
    image = next(page.parent.glob("04-multi-head-attention_files/figure-html/*.png"))
    image.unlink()
    edit(page, '<main class="content" id="quarto-document-content">',
         '<main class="content" id="quarto-document-content"><a href="03-masking.html#sec-nowhere">3</a>')
    assert any(image.name in p for p in sitecheck.check_images(ROOT, broken))
    assert any("no id 'sec-nowhere'" in p for p in sitecheck.check_links(ROOT, broken))


def test_a_stale_downloadable_notebook_is_found(broken: Path) -> None:
    notebook = broken / "ja" / "chapters" / "ja" / "01-positional-encoding.ipynb"
    notebook.write_bytes(notebook.read_bytes() + b"\n")
    problems = sitecheck.check_notebook_links(ROOT, broken)
    assert problems == ["ja/chapters/ja/01-positional-encoding.html: the downloadable notebook "
                        "differs from chapters/ja/01-positional-encoding.ipynb"]


def test_an_unfolded_or_missing_solution_is_found(broken: Path) -> None:
    page = broken / "en" / "chapters" / "en" / "03-masking.html"
    edit(page, 'class="callout-1-contents callout-collapse collapse"', 'class="callout-1-contents callout-collapse collapse show"')
    assert sitecheck.check_solutions(ROOT, broken) == [
        "en/chapters/en/03-masking.html: the callout 'Solution 3.1' is not collapsed"]
    edit(page, 'title="Solution 3.1"', 'title="Solution"')
    assert sitecheck.check_solutions(ROOT, broken) == [
        "en/chapters/en/03-masking.html: no callout titled 'Solution 3.1'"]


# ---------------------------------------------------------------------------------------------
# In a real browser: Debian's Chromium driven by Selenium


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


@pytest.fixture(scope="session")
def browser() -> Iterator[Callable[[str], object]]:
    """Headless Chromium with a given preferred language: one per language, closed at the end."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = chromium_paths()
    started: dict[str, object] = {}

    def start(language: str = "en-US"):
        if language in started:
            return started[language]
        options = webdriver.ChromeOptions()
        options.binary_location = binary
        # tools.screenshots.CHROMIUM_ARGS: the pages load MathJax from a CDN, which here fails at
        # once, so the tests never depend on the network. "eager": a page counts as loaded when its
        # DOM is ready.
        options.page_load_strategy = "eager"
        for arg in (*CHROMIUM_ARGS, "--window-size=1280,900", f"--lang={language}"):
            options.add_argument(arg)
        options.add_experimental_option("prefs", {"intl.accept_languages": language})
        started[language] = webdriver.Chrome(service=Service(driver_path), options=options)
        return started[language]

    yield start
    for driver in started.values():
        driver.quit()


@pytest.fixture(scope="session")
def server(site: Built) -> Iterator[str]:
    """The site over HTTP on the loopback interface, as GitHub Pages would serve it."""
    handler = functools.partial(QuietHandler, directory=str(site.path))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


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


@pytest.mark.parametrize("protocol", ["http", "file"])
def test_language_switch_leads_to_the_same_page(site: Built, server: str, browser, protocol: str) -> None:
    from selenium.webdriver.common.by import By

    driver, base = browser(), base_url(protocol, site, server)
    for page in every_page():
        driver.get(f"{base}/{page}")
        links = wait_for(driver, lambda d: [a for a in d.find_elements(By.CSS_SELECTOR, "a.lang-switch")
                                            if a.is_displayed()], f"the language link on {page}")
        links[0].click()
        wait_for(driver, lambda d: site_path(d.current_url, base) != page, f"leaving {page}")
        lang = driver.execute_script("return document.documentElement.lang")
        landed = site_path(driver.current_url, base)
        assert (landed, lang) == (sitecheck.twin_page(page), page[:2] == "en" and "ja" or "en"), page
        assert driver.title, f"{landed} has no title (a missing page?)"


@pytest.mark.parametrize("protocol", ["file", "http"])
@pytest.mark.parametrize("language, edition", [("ja", "ja"), ("ja-JP", "ja"), ("en-US", "en"),
                                               ("fr", "en")])
def test_chooser_sends_the_reader_to_an_edition(site: Built, server: str, browser, protocol: str,
                                                 language: str, edition: str) -> None:
    driver, base = browser(language), base_url(protocol, site, server)
    driver.get(f"{base}/index.html")
    wait_for(driver, lambda d: site_path(d.current_url, base) != "index.html", "the redirect")
    assert site_path(driver.current_url, base) == f"{edition}/index.html"
    assert driver.execute_script("return document.documentElement.lang") == edition


@pytest.mark.parametrize("protocol", ["file", "http"])
def test_chooser_stays_with_choose_and_offers_both_editions(site: Built, server: str, browser,
                                                            protocol: str) -> None:
    from selenium.webdriver.common.by import By

    driver, base = browser("ja"), base_url(protocol, site, server)
    for edition in LANGS:
        driver.get(f"{base}/index.html#choose")
        assert site_path(driver.current_url, base) == "index.html"
        stylesheet = driver.execute_script(
            "return getComputedStyle(document.body).getPropertyValue('--bs-primary').trim()")
        assert stylesheet, "the chooser lost the book's Bootstrap theme"
        driver.find_element(By.ID, f"edition-{edition}").click()
        wait_for(driver, lambda d: site_path(d.current_url, base) == f"{edition}/index.html",
                 f"the {edition} edition")


def test_language_link_is_visible_on_a_phone(site: Built, server: str, browser) -> None:
    """At 390 px the sidebar is folded away; the top bar carries the language link."""
    from selenium.webdriver.common.by import By

    driver = browser("ja")
    driver.set_window_size(390, 844)
    try:
        driver.get(f"{server}/ja/chapters/ja/03-masking.html")
        visible = wait_for(driver, lambda d: [a for a in d.find_elements(By.CSS_SELECTOR, "a.lang-switch")
                                              if a.is_displayed()], "a visible language link")
        assert visible[0].get_attribute("href").endswith("/en/chapters/en/03-masking.html")
        width = driver.execute_script("return document.documentElement.scrollWidth")
        assert width <= 390, f"the page is {width} px wide on a 390 px screen (something overflows)"
    finally:
        driver.set_window_size(1280, 900)


def test_links_to_folders_open_their_index_from_disk(site: Built, browser) -> None:
    """Under file:// a link to "../../" would show a directory listing; the page fixes it."""
    from selenium.webdriver.common.by import By

    driver = browser()
    driver.get((site.path / "en" / "chapters" / "en" / "02-scaled-dot-product-attention.html").as_uri())
    title = wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".sidebar-title a"), "the title")
    assert title[0].get_attribute("href").endswith("/en/index.html")


@pytest.mark.parametrize("lang, word, chapter", [("ja", "マスク", "03-masking.html"),
                                                 ("ja", "位置エンコーディング", "01-positional-encoding.html"),
                                                 ("en", "masking", "03-masking.html"),
                                                 ("en", "sinusoidal", "01-positional-encoding.html")])
def test_search_finds_a_chapter_word(site: Built, server: str, browser, lang: str, word: str,
                                     chapter: str) -> None:
    from selenium.webdriver.common.by import By

    driver = browser(lang)
    driver.get(f"{server}/{lang}/index.html")
    box = wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#quarto-search input.aa-Input")
                   or d.find_elements(By.CSS_SELECTOR, "#quarto-search button"), "the search box")
    box[0].click()
    field = wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "input.aa-Input"), "the field")
    field[0].send_keys(word)
    results = wait_for(driver, lambda d: [a.get_attribute("href") for a in
                                          d.find_elements(By.CSS_SELECTOR, ".aa-Panel a")] or None,
                       f"search results for {word!r}")
    assert any(f"/{lang}/chapters/{lang}/{chapter}" in href for href in results), results
