"""The website as its readers see it: both editions rendered by Quarto, checked as files and in a browser.

The session builds the site once with ``bash tools/build_site.sh`` (as .ci/run and the README's test
command do), then

* runs every check of tools/sitecheck.py on it (numbering, chapter mentions, cross-references, the
  build log, images, links and anchors, ``<html lang>``, twins, search index, notebook links), and
  each of them on a copy broken on purpose, where it must report the break;
* drives Debian's Chromium with Selenium (no browser is ever downloaded): the chooser under file://
  and HTTP, search in both languages, and one pass per width over every page of both editions
  (``views``: 1280 px over HTTP, 390 px over file://), each page loaded once, in which the layout
  checks, axe-core (at 1280 px) and the language links are all run; the whole file took 1054 s with
  a page load per check and a click per language link, 553 s so (both on a loaded two-core machine).

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

from tools import figure_fonts, sitecheck
from tools.screenshots import CHROMIUM_ARGS, QuietHandler

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
        # tools.screenshots.CHROMIUM_ARGS: no host but the loopback resolves, so the tests never
        # depend on the network (the site serves its own MathJax). "eager": a page counts as loaded
        # when its DOM is ready.
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
def test_language_switch_leads_to_the_same_page(views, protocol: str) -> None:
    """On every page, every language link (the visible one a reader clicks and any folded away) leads
    to the same page in the other edition, which exists: it has the other language and a title.

    A link is a plain <a href> (site/lang-switch.html), so its resolved href is where a click lands;
    the twin is itself a page of the same pass. Over HTTP at 1280 px, over file:// at 390 px (VIEWS)."""
    width = next(w for w, (proto, _) in VIEWS.items() if proto == protocol)
    seen = {page: view for (w, page), view in views.items() if w == width}
    problems = []
    for page, view in seen.items():
        twin = sitecheck.twin_page(page)
        if not any(link["visible"] for link in view["links"]):
            problems.append(f"{page}: no visible language link")
        for link in view["links"]:
            if site_path(link["href"], view["base"]) != twin:
                problems.append(f"{page}: a language link leads to {link['href']}, not {twin}")
        landed = seen.get(twin)
        if landed is None:
            problems.append(f"{page}: its twin {twin} is not a page of the book")
        elif (landed["lang"], bool(landed["title"])) != (page[:2] == "en" and "ja" or "en", True):
            problems.append(f"{page}: its twin {twin} has lang {landed['lang']!r} and title {landed['title']!r}")
    assert len(seen) == len(every_page())
    assert not problems, "\n" + "\n".join(problems)


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
    # The hrefs in one script: the panel re-renders as results arrive (an element looked up first and
    # read after could be stale); wait until the chapter is among them, or say what was found.
    hrefs = "return Array.prototype.map.call(document.querySelectorAll('.aa-Panel a'), function (a) { return a.href; });"
    target = f"/{lang}/chapters/{lang}/{chapter}"
    try:
        wait_for(driver, lambda d: any(target in href for href in d.execute_script(hrefs)),
                 f"search results for {word!r}")
    except AssertionError as error:
        raise AssertionError(f"{error}; found {driver.execute_script(hrefs)}") from None


def test_a_remote_script_or_font_is_found(broken: Path) -> None:
    """The site works offline: a page or stylesheet that loads from a CDN is reported."""
    page = broken / "en" / "chapters" / "en" / "03-masking.html"
    edit(page, "</head>", '<script src="https://cdn.example.org/x.js"></script>\n'
                          '<link rel="alternate" hreflang="ja" href="https://example.org/ja/">\n</head>')
    css = next((broken / "ja" / "site_libs" / "bootstrap").glob("bootstrap-*.min.css"))
    css.write_text('@import "https://fonts.googleapis.com/css2?family=X";\n' + css.read_text("utf-8"), "utf-8")
    assert sitecheck.check_offline(ROOT, broken) == [
        "en/chapters/en/03-masking.html: <script> loads https://cdn.example.org/x.js",
        f"ja/site_libs/bootstrap/{css.name}: loads https://fonts.googleapis.com/css2?family=X"]


def test_equations_are_typeset_from_the_site_itself(views) -> None:
    """MathJax comes from _site/<lang>/site_libs/mathjax by a relative url: typeset under file://."""
    for lang in LANGS:
        page = f"{lang}/chapters/{lang}/01-positional-encoding.html"
        view = views[390, page]
        assert view["base"].startswith("file:"), view["base"]
        assert view["typeset"] > 10, f"{lang}: only {view['typeset']} typeset formulas (MathJax did not load?)"


# ---------------------------------------------------------------------------------------------
# Layout: every page, both editions, on a phone and a desktop, with the equations typeset

# Waits for MathJax (and the fonts) before measuring; `done` is Selenium's callback.
TYPESET = """
var done = arguments[arguments.length - 1], width = arguments[0];
var p = window.MathJax && MathJax.startup && MathJax.startup.promise;
Promise.all([p || Promise.resolve(), document.fonts ? document.fonts.ready : null]).then(function () {
"""

# One function per page: every finding as [element, what is wrong], given to `report`. Folded
# solutions are opened first, since a reader can open them.
LAYOUT_FUNCTION = r"""
function attnbookLayout(width, report) {
  document.querySelectorAll(".callout-collapse.collapse").forEach(function (e) {
    e.classList.add("show");
    e.dispatchEvent(new Event("shown.bs.collapse", {bubbles: true}));  // as Bootstrap does on opening
  });
  var out = [];
  // Measured in the next frame. Opening a solution (the "show" class) lays it out at once, and
  // site/math-overflow.html and site/table-stack.html refit on shown.bs.collapse synchronously, inside
  // dispatchEvent above; site/accessibility.html's 50 ms timer only adds tabindex, which nothing here
  // reads. (A fixed 100 ms wait here cost 6 s a session, 58 page views.)
  requestAnimationFrame(function () {
  function label(el) {
    var name = el.tagName.toLowerCase() + (el.className && typeof el.className === "string"
      ? "." + el.className.trim().split(/\s+/).slice(0, 2).join(".") : "");
    var sec = el.closest("section[id]"), cell = el.closest(".cell[id], figure[id], div[id^=tbl-]");
    var where = (cell && cell.id) || (sec && sec.id) || "";
    var text = (el.textContent || "").replace(/\s+/g, " ").trim().slice(0, 40);
    return name + (where ? " in #" + where : "") + " «" + text + "»";
  }
  function visible(el) {
    var r = el.getBoundingClientRect(), s = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && s.visibility !== "hidden" && s.display !== "none";
  }
  var root = document.documentElement;
  // On a phone an overflowing page is zoomed out: innerWidth grows with it.
  var wide = Math.max(root.scrollWidth, innerWidth);
  if (wide > width) {
    // Name the culprits: visible elements that stick out past the screen while their parent does not.
    // (Not fixed bars, which follow the zoomed-out viewport, nor what scrolls inside a box.)
    var culprits = Array.prototype.filter.call(document.body.querySelectorAll("*"), function (el) {
      var r = el.getBoundingClientRect(), p = el.parentElement && el.parentElement.getBoundingClientRect();
      if (!(r.width > 0 && r.right > width + 1 && p && p.right <= width + 1)) return false;
      for (var a = el; a && a !== document.body; a = a.parentElement) {
        var s = getComputedStyle(a);
        if (s.position === "fixed" || (a !== el && s.overflowX !== "visible")) return false;
      }
      return true;
    }).slice(0, 3).map(label);
    out.push(["page", "the page is " + wide + " px wide on a " + width + " px screen" +
              (culprits.length ? " (sticking out: " + culprits.join("; ") + ")" : "")]);
  }
  // The language link and search, visible and inside the viewport.
  ["a.lang-switch", ".quarto-search-button, #quarto-search .aa-DetachedSearchButton, #quarto-search"].forEach(function (sel) {
    var shown = Array.prototype.filter.call(document.querySelectorAll(sel), visible);
    var inside = shown.filter(function (el) {
      var r = el.getBoundingClientRect();
      return r.left >= 0 && r.right <= width && r.top >= 0 && r.bottom <= innerHeight;
    });
    if (!inside.length) out.push(["top bar", sel.split(",")[0] + " is not visible inside the viewport"]);
  });
  var main = document.querySelector("main#quarto-document-content") || document.querySelector("main");
  var column = main.getBoundingClientRect();
  var toc = document.querySelector("#quarto-margin-sidebar");
  var tocLeft = toc && visible(toc) && toc.getBoundingClientRect().width > 0 ? toc.getBoundingClientRect().left : Infinity;
  var boxes = main.querySelectorAll('mjx-container, .cell-output pre, div.sourceCode, pre, table');
  boxes.forEach(function (el) {
    if (!visible(el) || el.closest(".column-margin, .column-page, .column-screen, .column-body-outset")) return;
    if (el.tagName === "PRE" && el.parentElement.closest("div.sourceCode, .cell-output")) return;
    var r = el.getBoundingClientRect();
    if (r.right > Math.min(column.right, width) + 1 || r.left < Math.max(column.left, 0) - 1)
      out.push([label(el), "is " + Math.round(r.width) + " px wide and spills past the column (" +
                Math.round(column.left) + "-" + Math.round(column.right) + " px)"]);
    if (r.right > tocLeft + 1 && r.top < toc.getBoundingClientRect().bottom)
      out.push([label(el), "overlaps the table of contents"]);
    // An equation's number stays in sight, beside or under its formula, never over it
    // (site/math-overflow.html): on a phone (4.3) had its number past the screen's edge.
    if (el.tagName === "MJX-CONTAINER") el.querySelectorAll("mjx-labels mjx-mtd").forEach(function (tag) {
      var t = tag.getBoundingClientRect(), f = el.querySelector("mjx-mtable[side] > mjx-table");
      var fr = f && f.getBoundingClientRect();
      if (t.width > 0 && (t.right > r.right + 1 || t.left < r.left - 1))
        out.push([label(el), "has its number " + tag.textContent + " outside its box (" + Math.round(t.left) +
                  "-" + Math.round(t.right) + " px in " + Math.round(r.left) + "-" + Math.round(r.right) + " px)"]);
      else if (fr && t.width > 0 && t.left < fr.right - 1 && t.right > fr.left + 1 && t.top < fr.bottom - 1 &&
               t.bottom > fr.top + 1)
        out.push([label(el), "has its number " + tag.textContent + " over its formula"]);
    });
    // On a phone a table never scrolls sideways: one too wide is stacked (site/table-stack.html).
    if (width < 600 && el.tagName === "TABLE" && el.scrollWidth > el.clientWidth + 1) {
      out.push([label(el), "scrolls sideways on a phone (" + el.scrollWidth + " px in " + el.clientWidth +
                " px): a wide table must be stacked, one block per row"]);
      return;
    }
    // Content wider than its box: it must scroll inside the box (its own or a wrapper's) with a cue.
    var box = el, inner = el.tagName === "DIV" ? el.querySelector("pre") || el : el;
    if (inner.scrollWidth <= inner.clientWidth + 1 && el.scrollWidth <= el.clientWidth + 1) return;
    var scroller = [inner, el, el.parentElement].find(function (e) {
      var o = getComputedStyle(e).overflowX;
      return (o === "auto" || o === "scroll") && e.scrollWidth > e.clientWidth + 1;
    });
    if (!scroller) { out.push([label(el), "is cut: its content is " + inner.scrollWidth + " px in a " + inner.clientWidth + " px box that does not scroll"]); return; }
    var s = getComputedStyle(scroller);
    var bar = scroller.offsetHeight - scroller.clientHeight - parseFloat(s.borderTopWidth) - parseFloat(s.borderBottomWidth);
    var cue = bar >= 4 || /gradient/.test(s.backgroundImage) || scroller.classList.contains("scroll-cue");
    if (!cue) out.push([label(el), "scrolls (" + scroller.scrollWidth + " px in " + scroller.clientWidth + " px) with no visible cue"]);
  });
  report(out);
  });
}
"""

# What one load of a page gives, once MathJax has typeset it: its language links (resolved href and
# whether a reader sees them), <html lang>, title, number of typeset formulas; then, when axe-core was
# injected, its serious and critical violations (before the layout check opens folded solutions, so
# axe sees the page as loaded); then the layout findings.
VIEW_JS = TYPESET + LAYOUT_FUNCTION + r"""
  function shown(el) {
    var r = el.getBoundingClientRect(), s = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && s.visibility !== "hidden" && s.display !== "none";
  }
  var view = {
    links: Array.prototype.map.call(document.querySelectorAll("a.lang-switch"), function (a) {
      return {href: a.href, visible: shown(a)}; }),
    lang: document.documentElement.lang, title: document.title,
    typeset: document.querySelectorAll("mjx-container").length, axe: null, layout: null,
    column: (function (m) { return m ? m.getBoundingClientRect().width : null; })(
      document.querySelector("main#quarto-document-content"))};
  var audit = window.axe ? axe.run(document, {resultTypes: ["violations"]}).then(function (r) {
    return r.violations.filter(function (v) { return v.impact === "serious" || v.impact === "critical"; })
      .map(function (v) { return {id: v.id, impact: v.impact, help: v.help,
        nodes: v.nodes.slice(0, 5).map(function (n) { return n.target.join(" "); }), count: v.nodes.length}; });
  }, function (e) { return [{id: "axe-error", impact: "critical", help: String(e), nodes: [], count: 1}]; })
    : Promise.resolve(null);
  audit.then(function (found) {
    view.axe = found;
    if (!width) { done(view); return; }
    attnbookLayout(width, function (out) { view.layout = out; done(view); });
  });
});
"""

# Each width is one pass over every page of both editions, each page loaded once: at 1280 px over
# HTTP, as GitHub Pages serves the site, with axe-core; at 390 px (a phone) over file://, as a
# downloaded copy opens. Layout and language links are checked in both.
VIEWS = {1280: ("http", 900), 390: ("file", 844)}
LAYOUT_WIDTHS = {width: height for width, (_, height) in VIEWS.items()}


@pytest.fixture(scope="session")
def views(site: Built, server: str, browser) -> dict[tuple[int, str], dict]:
    """Every page at each width of VIEWS, loaded once: what VIEW_JS found there (plus the base url),
    and for the chooser (index.html#choose, key (0, ...)) axe-core's findings only."""
    if not AXE.is_file():
        missing("axe-core", "run 'npm ci' (bash tools/setup.sh does) to install node_modules/axe-core")
    axe = AXE.read_text(encoding="utf-8")
    driver = browser()
    found: dict[tuple[int, str], dict] = {}
    start = time.perf_counter()
    try:
        for width, (protocol, height) in VIEWS.items():
            base = base_url(protocol, site, server)
            driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
                "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})
            for page in every_page():
                driver.get(f"{base}/{page}")
                if protocol == "http":
                    driver.execute_script(axe)
                found[width, page] = {**driver.execute_async_script(VIEW_JS, width), "base": base}
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        driver.get(f"{server}/index.html#choose")
        driver.execute_script(axe)
        found[0, "index.html#choose"] = {**driver.execute_async_script(VIEW_JS, 0), "base": server}
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    print(f"\n{len(found)} page views (layout, axe-core, language links) in {time.perf_counter() - start:.0f} s")
    return found


@pytest.fixture(scope="session")
def layout(views) -> dict[tuple[int, str], list[tuple[str, str]]]:
    """Every page at each width, its layout findings (element, what is wrong) from LAYOUT_FUNCTION."""
    return {key: [tuple(f) for f in view["layout"]] for key, view in views.items() if key[0]}


def report(findings: dict[tuple[int, str], list[tuple[str, str]]], keep: Callable[[str, str], bool]) -> str:
    lines = []
    for (width, page), found in findings.items():
        for element, what in found:
            if keep(element, what):
                lines.append(f"{page} at {width} px: {element} {what}")
    return "\n".join(lines)


@pytest.mark.parametrize("width", list(LAYOUT_WIDTHS))
def test_no_page_is_wider_than_the_screen_and_the_top_bar_fits(layout, width: int) -> None:
    problems = report({k: v for k, v in layout.items() if k[0] == width},
                      lambda element, what: element in ("page", "top bar"))
    assert not problems, "\n" + problems


@pytest.mark.parametrize("width", list(LAYOUT_WIDTHS))
def test_wide_equations_outputs_code_and_tables_scroll_in_their_own_box(layout, width: int) -> None:
    """No display equation, output, code block or table wider than the column or over the table of
    contents; content wider than its box scrolls inside it, with a visible cue (a scrollbar)."""
    problems = report({k: v for k, v in layout.items() if k[0] == width},
                      lambda element, what: element not in ("page", "top bar"))
    assert not problems, "\n" + problems


def test_figure_text_is_sized_for_the_measured_column(views) -> None:
    """tools.figure_fonts reads a figure's smallest text on the page from the text column's width at 1280 and
    390 px (COLUMN_PX, PHONE_COLUMN_PX): every chapter's column is that wide."""
    expected = {1280: figure_fonts.COLUMN_PX, 390: figure_fonts.PHONE_COLUMN_PX}
    chapters = [(width, page, view["column"]) for (width, page), view in views.items()
                if width in expected and re.search(r"/\d\d-[^/]+\.html$", page)]
    assert len(chapters) >= 2 * len(LANGS) * 10
    wrong = [f"{page} at {width} px: {column} px, figure_fonts says {expected[width]}"
             for width, page, column in chapters if column is None or abs(column - expected[width]) > 1]
    assert not wrong, "\n" + "\n".join(wrong)


def test_japanese_references_read_naturally(site: Built) -> None:
    """「Press, Smith, と Lewis 2022」 was CSL's Japanese "and"; site/book.csl keeps the Latin form."""
    html = (site.path / "ja" / "chapters" / "ja" / "references.html").read_text("utf-8")
    html = re.sub(r"<(script|style)\b.*?</\1>", "", html, flags=re.S)  # a script's "i<n" is no tag
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))
    assert not re.search(r",\s*と\s", text), re.search(r".{40},\s*と\s.{20}", text)
    assert "Press, Smith, and Lewis" in text and "On Layer Normalization in the Transformer" in text


# ---------------------------------------------------------------------------------------------
# Accessibility: axe-core (npm, pinned in package-lock.json) on every page of both editions

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"


@pytest.fixture(scope="session")
def axe_results(views) -> dict[str, list[dict]]:
    """The serious and critical violations axe-core finds on every page (at 1280 px) and the chooser."""
    results = {page: view["axe"] for (width, page), view in views.items() if width in (0, 1280)}
    assert len(results) == len(every_page()) + 1 and all(r is not None for r in results.values())
    return results


def test_axe_finds_no_serious_or_critical_violation(axe_results: dict[str, list[dict]]) -> None:
    problems = [f"{page}: {v['impact']} {v['id']} ({v['help']}) on {v['count']} element(s): "
                + ", ".join(v["nodes"]) for page, found in axe_results.items() for v in found]
    assert not problems, "\n" + "\n".join(problems)


# ---------------------------------------------------------------------------------------------
# Interactive figures (site/widgets/): each driven in Chromium and compared with attnbook
#
# A widget writes what it shows into data attributes (site/widgets/widgets.js): the plotted numbers
# (data-values, JSON rounded to 1e-7) on each figure, its settings and the numbers it drew on its root.
# Each test loads one chapter page over HTTP in the session's browser, sets the controls as a reader
# would (a range input's value and an `input` event, a click, a key), and compares the figure with the
# library on the same inputs. Each names, in its docstring, a break it catches.

WIDGET_ATOL = 1e-5

# Sets a control by its data-control name: a range input or <select> with data-choices (the values its
# positions stand for) is moved to the position of `value`; a checkbox is clicked when it differs.
SET_CONTROL = """
var root = document.querySelector(arguments[0]), value = arguments[2];
var input = root.querySelector('[data-control="' + arguments[1] + '"]');
if (input.type === "checkbox") { if (input.checked !== value) input.click(); return; }
var choices = input.dataset.choices ? JSON.parse(input.dataset.choices) : null;
var position = choices ? choices.indexOf(value) : value;
if (position < 0) throw new Error(arguments[1] + ": no choice " + value + " in " + input.dataset.choices);
input.value = String(position);
input.dispatchEvent(new Event(input.tagName === "SELECT" ? "change" : "input", {bubbles: true}));
"""


def mulberry32_normals(seed: int, count: int) -> list[float]:
    """The standard normal numbers W.rng(seed).normals(count) draws in the browser (site/widgets/widgets.js:
    mulberry32 uniforms, Box-Muller with the second value dropped), for a test that replicates a draw."""
    import math

    state, out = seed & 0xFFFFFFFF, []

    def uniform() -> float:
        nonlocal state
        state = (state + 0x6D2B79F5) & 0xFFFFFFFF
        x = (((state ^ (state >> 15)) * (state | 1)) & 0xFFFFFFFF)
        x ^= (x + (((x ^ (x >> 7)) * (x | 61)) & 0xFFFFFFFF)) & 0xFFFFFFFF
        return ((x ^ (x >> 14)) & 0xFFFFFFFF) / 4294967296

    for _ in range(count):
        u, v = 1 - uniform(), uniform()
        out.append(math.sqrt(-2 * math.log(u)) * math.cos(2 * math.pi * v))
    return out


class Widget:
    """One widget on a chapter page, loaded in the browser: read its attributes, set its controls."""

    def __init__(self, driver, base: str, lang: str, chapter: str, name: str) -> None:
        """`base`: the site's url, over HTTP (the `server` fixture) or file:// (base_url)."""
        self.driver, self.root = driver, f'.attn-widget[data-widget="{name}"]'
        driver.get(f"{base}/{lang}/chapters/{lang}/{chapter}.html")
        state = wait_for(driver, lambda d: d.execute_script(
            "var e = document.querySelector(arguments[0]);"
            "return e && (e.dataset.error ? 'error: ' + e.dataset.error : e.dataset.ready);", self.root),
            f"the widget {name} to start")
        assert state == "true", f"{name}: {state}"

    def attribute(self, name: str, figure: str | None = None, series: str | None = None):
        """The JSON in attribute `name` of the root, or of its plot with data-figure=`figure` (and of that
        plot's series with data-series=`series`)."""
        import json
        where = self.root + (f' [data-figure="{figure}"]' if figure else "") + (
            f' [data-series="{series}"]' if series else "")
        return json.loads(self.driver.execute_script(
            "return document.querySelector(arguments[0]).getAttribute(arguments[1]);", where, name))

    def values(self, figure: str, series: str | None = None):
        """What a plot shows (data-values) as a float64 array: a heat-map's matrix, a series' y."""
        import numpy as np
        return np.asarray(self.attribute("data-values", figure, series), dtype=np.float64)

    def set(self, control: str, value) -> None:
        self.driver.execute_script(SET_CONTROL, self.root, control, value)

    def element(self, css: str):
        from selenium.webdriver.common.by import By
        return self.driver.find_element(By.CSS_SELECTOR, f"{self.root} {css}")


def test_widget_sinusoidal_encoding_agrees_with_the_library(site: Built, server: str, browser) -> None:
    """Chapter 1: the heat-map is attnbook.positional.sinusoidal_encoding(64, d, base) and the curve is
    PE[p] . PE[p+k], k = 0..63, for two settings; the arrow key moves d. Catches, e.g., a widget that
    swaps sin and cos or uses 2i/d with i the column (not the pair) in its exponent."""
    import numpy as np
    from selenium.webdriver.common.keys import Keys

    from attnbook import positional

    widget = Widget(browser(), server, "en", "01-positional-encoding", "ch01-sinusoidal")
    assert widget.attribute("data-d") == 32
    widget.element('[data-control="d"]').send_keys(Keys.ARROW_RIGHT)  # keyboard: the next width, 48
    assert widget.attribute("data-d") == 48
    for d, base, p in ((16, 100, 5), (128, 1_000_000, 150)):
        widget.set("d", d)
        widget.set("base", base)
        widget.set("p", p)
        assert (widget.attribute("data-d"), widget.attribute("data-base"), widget.attribute("data-p")) == (d, base, p)
        pe = np.asarray(positional.sinusoidal_encoding(64, d, base=float(base)), dtype=np.float64)
        np.testing.assert_allclose(widget.values("encoding"), pe, rtol=0, atol=WIDGET_ATOL)
        rows = np.asarray(positional.sinusoidal_encoding(p + 64, d, base=float(base)), dtype=np.float64)
        # PE in float32 (the library's dtype): each entry within 6e-8, so a sum of d products within d * 1.2e-7.
        np.testing.assert_allclose(widget.values("dots", "dots"), rows[p:] @ rows[p], rtol=0,
                                   atol=WIDGET_ATOL + d * 1.2e-7)


def test_widget_softmax_saturation_agrees_with_jax(site: Built, server: str, browser) -> None:
    """Chapter 2: for the page's fixed draw (data-q, data-keys: the same seeded draw as in Python), the
    weights with and without the 1/sqrt(d_k) scale are jax.nn.softmax of the same scores, for two
    (d_k, temperature). Catches, e.g., a widget that scales by 1/d_k or forgets the temperature in one of
    the two."""
    import jax
    import numpy as np

    widget = Widget(browser(), server, "en", "02-scaled-dot-product-attention", "ch02-saturation")
    q, keys = np.asarray(widget.attribute("data-q")), np.asarray(widget.attribute("data-keys"))
    assert q.shape == (256,) and keys.shape == (8, 256)
    draw = np.asarray(mulberry32_normals(2, 9 * 256))  # the seeded generator: the same numbers in Python
    np.testing.assert_allclose(np.concatenate([q, keys.ravel()]), draw, rtol=0, atol=1e-7)
    for d, tau in ((64, 1), (256, 0.5)):
        widget.set("d", d)
        widget.set("tau", tau)
        scores = keys[:, :d] @ q[:d] / tau
        np.testing.assert_allclose(widget.values("weights", "plain"), jax.nn.softmax(scores), rtol=0, atol=WIDGET_ATOL)
        np.testing.assert_allclose(widget.values("weights", "scaled"), jax.nn.softmax(scores / np.sqrt(d)),
                                   rtol=0, atol=WIDGET_ATOL)
    assert widget.values("weights", "plain").max() > 0.99 > widget.values("weights", "scaled").max()


def test_widget_mask_agrees_with_the_library(site: Built, server: str, browser) -> None:
    """Chapter 3: each preset's mask is attnbook.masking's (none, causal_mask, padding_mask, sliding_window_mask),
    and the weights under it, and under a mask built by clicks and keys with a fully masked row, are
    attnbook.attention.scaled_dot_product_attention's (zeros for that row), on the Japanese page opened from
    disk. Catches, e.g., a widget that
    gives a fully masked row uniform weights or NaN, or a causal preset that is transposed."""
    import jax
    import numpy as np
    from selenium.webdriver.common.keys import Keys

    from attnbook import attention, masking

    # The Japanese page opened from disk (file://): the scripts load by relative urls, labels follow <html lang>.
    widget = Widget(browser(), base_url("file", site, server), "ja", "03-masking", "ch03-mask")
    assert widget.element('[data-preset="causal"]').text == "因果マスク"
    q, k = np.asarray(widget.attribute("data-q")), np.asarray(widget.attribute("data-k"))
    assert q.shape == k.shape == (6, 4)

    # One compilation for every mask (op by op, the first call alone took 3 s on the loaded machine).
    weights_under = jax.jit(lambda mask: attention.scaled_dot_product_attention(q, k, np.eye(6), mask=mask)[1])

    def check(expected_mask=None) -> np.ndarray:
        mask = np.asarray(widget.attribute("data-mask"), dtype=bool)
        if expected_mask is not None:
            np.testing.assert_array_equal(mask, expected_mask)
        np.testing.assert_allclose(widget.values("weights"), weights_under(mask), rtol=0, atol=WIDGET_ATOL)
        return mask

    presets = {"none": np.ones((6, 6), bool), "padding": masking.padding_mask(np.array([4]), 6)[0],
               "window": masking.sliding_window_mask(6, 3), "causal": masking.causal_mask(6)}
    for name, expected in presets.items():
        widget.element(f'[data-preset="{name}"]').click()
        check(np.asarray(expected))
    for i, j in ((2, 0), (2, 1), (2, 2), (0, 5)):  # forbid every key of query 2; let query 0 see key 5
        widget.element(f'[data-cell="{i},{j}"]').click()
    widget.element('[data-cell="4,1"]').send_keys(Keys.SPACE)  # keyboard: forbid key 1 for query 4
    mask = check()
    assert not mask[2].any() and mask[0, 5] and not mask[4, 1]
    assert not widget.values("weights")[2].any()  # the fully masked row: zeros, as the library returns


def test_widget_aft_local_agrees_with_the_library(site: Built, server: str, browser) -> None:
    """Chapter 5: AFT-local's weights for the page's fixed keys K and bias w (data-k, data-w) are
    attnbook.aft.aft_local's on one channel per key (v = identity, q = 0, so the output is half the weights),
    and the framed window is |t - t'| < s, for two (T, s, causal), the second causal with s >= T (AFT-full).
    Catches, e.g., a widget that masks
    the keys outside the window (local attention) instead of giving them the bias 0."""
    import numpy as np

    from attnbook import aft

    widget = Widget(browser(), server, "en", "05-attention-free-transformer", "ch05-aft-local")
    keys, w = np.asarray(widget.attribute("data-k")), np.asarray(widget.attribute("data-w"))
    assert keys.shape == (16,) and w.shape == (16, 16)
    for length, window, causal in ((12, 3, False), (9, 16, True)):  # each a compilation of aft_local
        widget.set("T", length)
        widget.set("s", window)
        widget.set("causal", causal)
        assert (widget.attribute("data-t"), widget.attribute("data-s"), widget.attribute("data-causal")) == (
            length, window, causal)
        k = np.repeat(keys[:length, None], length, axis=1)  # (T, T): key t' in every channel
        out = aft.aft_local(np.zeros((length, length)), k, np.eye(length), w[:length, :length], window, causal=causal)
        np.testing.assert_allclose(widget.values("weights"), 2 * np.asarray(out), rtol=0, atol=WIDGET_ATOL)
        offsets = np.abs(np.arange(length)[:, None] - np.arange(length)[None, :])
        np.testing.assert_array_equal(widget.attribute("data-window", "weights"), offsets < window)


# ---------------------------------------------------------------------------------------------
# Interactive figures of stored results and trained models (chapters 4 and 6-10)
#
# These widgets show benchmarks and trained models: their data (site/widgets/chNN-data.js) is exported by
# tools/export_widget_data.py from lib/attnbook/experiments/results/ (tests/book/test_export_widget_data.py checks that each file is
# what the tool writes now). Each test below drives one widget as the tests above do, and compares what it
# shows with the stored CSV files, read here on their own, and with attnbook's functions on the same inputs.

STORED = ROOT / "lib" / "attnbook" / "experiments" / "results"


def stored_rows(name: str) -> list[dict[str, str]]:
    import csv
    with open(STORED / name, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def raw(widget: Widget, name: str) -> str:
    """A root attribute's text (the control's value as the widget names it), not JSON."""
    return widget.driver.execute_script("return document.querySelector(arguments[0]).getAttribute(arguments[1]);",
                                        widget.root, name)


def test_widget_kv_cache_agrees_with_the_library_and_the_stored_runs(site: Built, server: str, browser) -> None:
    """Chapter 10: for each task and G, the cache shown is attnbook.kv.cache_bytes_per_token of the task's layer
    with kv_heads = G, times T tokens and l layers, and the quality shown is each seed's stored result
    (kv_heads_recall.csv: accuracy; kv_heads_quality.csv: excess after 300 steps from scratch). Catches,
    e.g., a widget that counts the query heads H instead of G, forgets the values' half, or shows another
    G's row."""
    import equinox as eqx
    import jax
    import numpy as np

    from attnbook import kv
    from attnbook.mha import MultiHeadAttention

    widget = Widget(browser(), server, "en", "10-smaller-caches", "ch10-kv-heads")
    recall = stored_rows("kv_heads_recall.csv")
    quality = stored_rows("kv_heads_quality.csv")
    expected = {
        "recall": (8, {g: [float(r["accuracy"]) for r in recall if r["method"] == "trained" and r["kv_heads"] == str(g)]
                       for g in (8, 4, 2, 1)}),
        "markov": (4, {g: [float(r["excess"]) for r in quality if r["method"] == "from_scratch"
                           and r["kv_heads"] == str(g) and r["steps"] == "300"] for g in (4, 2, 1)})}
    @functools.cache
    def per_token(heads: int, g: int) -> int:
        """kv.cache_bytes_per_token of the task's layer (d_model 32) with G key/value heads; the layer is built
        abstractly (equinox.filter_eval_shape: its sizes, no weights drawn)."""
        layer = eqx.filter_eval_shape(MultiHeadAttention, 32, heads, 32 // heads, kv_heads=g, key=jax.random.key(0))
        return kv.cache_bytes_per_token(layer)

    for task, t, layers in (("recall", 4096, 2), ("markov", 131072, 80), ("recall", 256, 1)):
        heads, results = expected[task]
        widget.set("task", task)
        widget.set("T", t)
        widget.set("layers", layers)
        for g in results:
            widget.set("g", g)
            assert (raw(widget, "data-task"), widget.attribute("data-g")) == (task, g)
            assert widget.attribute("data-bytes") == per_token(heads, g) * t * layers
            np.testing.assert_allclose(widget.attribute("data-quality"), results[g], rtol=0, atol=5e-4)
        np.testing.assert_allclose(widget.values("cache", "cache"),
                                   [per_token(heads, g) * t * layers / 1024 for g in sorted(results)], rtol=1e-7)
    assert per_token(8, 8) == 2 * 8 * 4 * 4  # MHA: a key and a value of 4 numbers per head, float32


def seed_mean_curve(rows: list[dict], column: str, value: str, length: int):
    """The loss at each position of a per-position CSV's rows with `column` = `value` at eval_length `length`, mean
    over the seeds (chapters 8 and 9 store one row per seed and position)."""
    import numpy as np
    table: dict[str, list[float]] = {}
    for r in rows:
        if r[column] == value and r["eval_length"] == str(length):
            table.setdefault(r["seed"], [0.0] * length)[int(r["position"])] = float(r["loss"])
    return np.mean(list(table.values()), axis=0)


def test_widget_per_position_loss_agrees_with_the_stored_runs(site: Built, server: str, browser) -> None:
    """Chapter 8: for three encodings and lengths, the curve is positions_per_position.csv's loss at each position,
    mean over the seeds (shown to 2 decimals), with the optimum and current-token rows of the same length, and
    the summary is each seed's loss of positions_extrapolation.csv (all positions at L, beyond L otherwise).
    Catches, e.g., a widget that shows 8L's curve whatever the length, or one seed instead of the mean."""
    import numpy as np

    widget = Widget(browser(), server, "ja", "08-positions-measured", "ch08-per-position")
    rows, summary = stored_rows("positions_per_position.csv"), stored_rows("positions_extrapolation.csv")

    def curve(encoding: str, length: int):
        return seed_mean_curve(rows, "encoding", encoding, length)

    for encoding, length in (("alibi", 256), ("sinusoidal", 64), ("t5", 32)):
        widget.set("encoding", encoding)
        widget.set("length", length)
        assert (raw(widget, "data-encoding"), widget.attribute("data-length")) == (encoding, length)
        for name in (encoding, "optimum", "current_token"):
            np.testing.assert_allclose(widget.values("loss", name), curve(name, length), rtol=0, atol=0.005 + 1e-9)
        field = "loss_all" if length == 32 else "loss_beyond_L"
        np.testing.assert_allclose(widget.attribute("data-summary"),
                                   [float(r[field]) for r in summary
                                    if r["encoding"] == encoding and r["eval_length"] == str(length)], rtol=0, atol=5e-4)


def test_widget_cost_agrees_with_the_stored_benchmark(site: Built, server: str, browser) -> None:
    """Chapter 6: at four lengths and both passes, each method's row shows attention_cost.csv's median time (ms, 3
    significant digits) where it was measured, its temporary memory (MiB) and its status (skipped over the time or
    the memory limit: where it runs out); the plots carry the same numbers. The memory is XLA's analysis, stored:
    attnbook has no formula for it (attnbook.cost.temporary_bytes measures it). Catches, e.g., a widget that shows
    the fastest run instead of the median, or a time where the benchmark skipped the run."""
    import numpy as np

    widget = Widget(browser(), server, "en", "06-cost-of-attention", "ch06-cost")
    rows = stored_rows("attention_cost.csv")
    methods = ["attention", "jax.nn", "chunked", "aft-full", "aft-local", "aft-simple", "aft-conv"]
    for t, mode in ((128, "forward"), (16384, "forward"), (32768, "forward+backward"), (131072, "forward")):
        widget.set("T", t)
        widget.set("mode", mode)
        assert (widget.attribute("data-t"), raw(widget, "data-mode")) == (t, mode)
        shown = widget.driver.execute_script(
            "return Array.from(document.querySelectorAll(arguments[0] + ' tr[data-method]')).map(function (r) {"
            "return [r.dataset.method, r.dataset.status, JSON.parse(r.dataset.ms), +r.dataset.mib]; });", widget.root)
        assert [s[0] for s in shown] == methods
        for method, status, ms, mib in shown:
            row = next(r for r in rows if r["method"] == method and r["mode"] == mode and r["T"] == str(t))
            assert status == row["status"].removeprefix("skipped: ")
            if status == "measured":
                np.testing.assert_allclose(ms, float(row["seconds"]) * 1e3, rtol=5e-3)
            else:
                assert ms is None
            np.testing.assert_allclose(mib, float(row["temp_bytes"]) / 2**20, rtol=5e-3)
    for method in methods:  # the plots of the last pass: measured times and planned memory, log10
        chosen = sorted((r for r in rows if r["method"] == method and r["mode"] == "forward"), key=lambda r: int(r["T"]))
        np.testing.assert_allclose(widget.values("memory", method),
                                   np.log10([float(r["temp_bytes"]) / 2**20 for r in chosen]), rtol=0, atol=3e-3)
        np.testing.assert_allclose(widget.values("time", method),
                                   np.log10([float(r["seconds"]) * 1e3 for r in chosen if r["status"] == "measured"]),
                                   rtol=0, atol=3e-3)
    assert "jax.nn" in widget.element(".aw-note").text and "AFT-simple" not in widget.element(".aw-note").text


def test_widget_rope_scaling_agrees_with_the_stored_runs(site: Built, server: str, browser) -> None:
    """Chapter 9: for three methods and lengths, the curve is rope_scaling_per_position.csv's loss at each position,
    mean over the seeds (2 decimals), with plain RoPE's, and each seed's excess beyond L is rope_scaling.csv's.
    Catches, e.g., a widget that shows another length's curve for a stretched method (whose curve depends on
    s = T / L) or plain RoPE's numbers for every method."""
    import numpy as np

    widget = Widget(browser(), server, "en", "09-longer-contexts", "ch09-scaling")
    rows, summary = stored_rows("rope_scaling_per_position.csv"), stored_rows("rope_scaling.csv")

    def curve(method: str, length: int):
        return seed_mean_curve(rows, "method", method, length)

    for method, length in (("ntk", 256), ("pi", 64), ("yarn", 128)):
        widget.set("method", method)
        widget.set("length", length)
        assert (raw(widget, "data-method"), widget.attribute("data-length")) == (method, length)
        for name in (method, "rope", "optimum"):
            np.testing.assert_allclose(widget.values("loss", name), curve(name, length), rtol=0, atol=0.005 + 1e-9)
        np.testing.assert_allclose(widget.attribute("data-excess"),
                                   [float(r["excess_beyond_L"]) for r in summary
                                    if r["method"] == method and r["eval_length"] == str(length)], rtol=0, atol=5e-4)


def test_widget_heads_agree_with_the_stored_layer(site: Built, server: str, browser) -> None:
    """Chapter 4: for every query token, each head's weights are those of the layer stored in tools/widget_models/
    (equinox.tree_deserialise_leaves into chapter 4's mha(key_bias_positions=5)) on input 0 of the chapter's inputs
    (default_rng(2023)), recomputed here with attnbook; the arrow key moves the token. Catches, e.g., a widget
    that shows the weights to a token (a column) instead of from it (a row), or numbers tokens from 0."""
    import numpy as np
    from selenium.webdriver.common.keys import Keys

    from tools import export_widget_data as export

    widget = Widget(browser(), server, "en", "04-multi-head-attention", "ch04-heads")
    x = export.chapter4_inputs()[0]
    _, weights = export.chapter4_layer()(x, x, x)  # (heads, query, key)
    assert widget.attribute("data-query") == 1
    widget.element('[data-control="query"]').send_keys(Keys.ARROW_RIGHT)  # keyboard: token 2
    assert widget.attribute("data-query") == 2
    for token in (1, 3, 5):
        widget.set("query", token)
        np.testing.assert_allclose(widget.values("weights"), np.asarray(weights)[:, token - 1, :], rtol=0, atol=5e-4 + 1e-7)
    assert "4, 5, 6, 7" in widget.element(".aw-note").text  # the chapter's caption: heads 4 to 7 read token 2


def test_widget_decoding_agrees_with_the_library(site: Built, server: str, browser) -> None:
    """Chapter 7: for two strings and three steps, the decoded tokens are those of transformer.greedy_decode_cached
    on the model stored in tools/widget_models/ (tools/export_widget_data.py checks that greedy_decode agrees),
    and the counts are what the two functions
    compute: the keys projected by each self- and cross-attention layer and the scores of each self-attention
    layer, recorded while jax traces them (lax.scan's step is one traced function, run n times). The
    cached step's cross.project(h, h, h)[0] keeps only the query, so only projections of the source's S rows
    count for cross-attention. Catches, e.g., a widget that counts the prefix (t rows) instead of the fixed
    buffer without the cache, or recomputes the source's keys at every cached step."""
    import jax
    import numpy as np

    from attnbook import mha, transformer
    from tools import export_widget_data as export

    model = export.chapter7_model()
    n, blocks = 8, len(model.decoder.blocks)

    def record(decode, source):
        """What one step of the decoding loop computes, summed over the blocks: self-attention
        keys, source keys projected and self-attention scores, from one trace of `decode` (traced by
        jax.eval_shape after jax.clear_caches(): no compilation, and no cached trace skips the Python code;
        lax.scan traces its step once and runs that same step n times); and the source keys projected before the
        loop (projections with no attend)."""
        calls = []
        project, attend, scan = mha.MultiHeadAttention.project, mha.MultiHeadAttention.attend, jax.lax.scan

        def counting_project(self, q, k, v):
            calls.append(("project", k.shape[0]))
            return project(self, q, k, v)

        def counting_attend(self, q, k, v, *args, **kwargs):
            calls.append(("attend", q.shape[0] * k.shape[0]))
            return attend(self, q, k, v, *args, **kwargs)

        def marked_scan(*args, **kwargs):
            calls.append(("scan", 0))
            return scan(*args, **kwargs)

        mha.MultiHeadAttention.project, mha.MultiHeadAttention.attend = counting_project, counting_attend
        jax.lax.scan = marked_scan
        try:
            jax.clear_caches()
            jax.eval_shape(lambda: decode(model, source, n, transformer.START))
        finally:
            mha.MultiHeadAttention.project, mha.MultiHeadAttention.attend = project, attend
            jax.lax.scan = scan
        start = calls.index(("scan", 0))
        before, body = calls[:start], calls[start + 1:]
        pairs = [(body[i][1], body[i + 1][1]) for i in range(0, len(body), 2)]
        assert all(body[i][0] == "project" and body[i + 1][0] == "attend" for i in range(0, len(body), 2))
        assert len(pairs) % (2 * blocks) == 0  # every block: self-attention, then cross-attention
        step = pairs[:2 * blocks]  # one trace of the step
        lone = [size for i, (kind, size) in enumerate(before)  # a projection with no attend: the source's, once
                if kind == "project" and (i + 1 == len(before) or before[i + 1][0] != "attend")]
        return {
            "self_kv": sum(keys for keys, _ in step[0::2]),
            "cross_kv": sum(keys for keys, _ in step[1::2] if keys == n),  # the source's S = 8 rows, not (h, h, h)
            "scores": sum(scores for _, scores in step[0::2])}, sum(lone)

    widget = Widget(browser(), server, "en", "07-transformer", "ch07-decoding")
    for string in (0, 3):
        widget.set("string", string)
        source = np.asarray(widget.attribute("data-source"), dtype=np.int32)
        # Compiling a decoder costs seconds: the tokens come from the cached one here; the export tool checks that
        # transformer.greedy_decode gives the same tokens for every string it exports.
        tokens = [int(v) for v in transformer.greedy_decode_cached(model, source, n, transformer.START)[0]]
        for step in (1, 8):
            widget.set("step", step)
            assert widget.attribute("data-decoded") == tokens[:step]
    # The counts do not depend on the string.
    (plain, plain_before), (cached, cached_before) = (record(transformer.greedy_decode, source),
                                                      record(transformer.greedy_decode_cached, source))
    for step in (1, 4, 8):
        widget.set("step", step)
        assert widget.attribute("data-step") == step
        counts = widget.attribute("data-counts")
        for name, steps, before in (("plain", plain, plain_before), ("cached", cached, cached_before)):
            shown = counts[name]
            assert shown["self_kv"] * blocks == steps["self_kv"]
            assert shown["self_kv_total"] * blocks == step * steps["self_kv"]
            assert shown["cross_kv_total"] * blocks == before + step * steps["cross_kv"]
            assert shown["scores"] * blocks == steps["scores"]
            assert shown["scores_total"] * blocks == step * steps["scores"]
        states = widget.driver.execute_script(
            "return Array.from(document.querySelectorAll(arguments[0] + ' .aw-row')).map(function (r) {"
            "return Array.from(r.children).map(function (c) { return c.dataset.state; }); });", widget.root)
        assert states[0].count("padding") == n - step and states[1].count("computed") == 1
        assert states[1].count("cached") == step - 1


def test_widget_induction_scores_agree_with_the_stored_runs_and_the_library(site: Built, server: str, browser) -> None:
    """Chapter 11: for three runs (variant, depth, seed) and steps, each head's induction and previous-token scores
    are induction_heads_scores.csv's (3 decimals), the curves are the highest of any head at every stored step, the
    losses on the first and the second copy of repeated held-out code are induction_heads_training.csv's (2
    decimals), and the dashed baselines are attnbook.induction.induction_score (period P) and previous_token_score
    of uniform causal attention over T positions; the arrow key moves the step. On the Japanese page, with the
    glossary's terms. Catches, e.g., a widget that shows another step's (or layer's) heads, swaps the two copies,
    or a uniform baseline summed from i = P - 1 or divided by T instead of T - 1."""
    import numpy as np
    from selenium.webdriver.common.keys import Keys

    from attnbook import induction

    widget = Widget(browser(), server, "ja", "11-induction-heads", "ch11-induction")
    scores, training = stored_rows("induction_heads_scores.csv"), stored_rows("induction_heads_training.csv")
    runs = {(r["variant"], int(r["depth"]), int(r["seed"])) for r in training}
    steps = sorted({int(r["step"]) for r in training})
    text = widget.element(".aw-title").text + widget.element(".aw-note").text
    assert "帰納スコア" in text and "直前トークンスコア" in text

    import json
    settings = [run["settings"] for run in json.loads((STORED / "induction_heads.json").read_text())["runs"].values()]
    period, context = settings[0]["repeated_period"], settings[0]["context"]  # 64 and 128 as run
    t = np.arange(context)
    uniform = np.tril(np.ones((context, context))) / (t + 1)[:, None]
    expected = {"induction": float(induction.induction_score(uniform, period)),
                "previous_token": float(induction.previous_token_score(uniform))}
    np.testing.assert_allclose([widget.attribute("data-baselines")[k] for k in expected], list(expected.values()),
                               rtol=0, atol=1e-6)
    for name, value in expected.items():
        np.testing.assert_allclose(widget.values("scores", f"uniform_{name}"), [value, value], rtol=0, atol=1e-6)

    step = widget.attribute("data-step")
    widget.element('[data-control="step"]').send_keys(Keys.ARROW_RIGHT)  # keyboard: the next stored step
    assert widget.attribute("data-step") == steps[steps.index(step) + 1]
    chosen = [c for c in (("curriculum", 2, 0, 600), ("plain", 1, 2, steps[-1]), ("curriculum", 1, 1, 0),
                          ("plain", 2, 0, 300)) if c[:3] in runs]
    assert len(chosen) >= 2, sorted(runs)
    for variant, depth, seed, step in chosen:
        for control, value in (("variant", variant), ("depth", depth), ("seed", seed), ("step", step)):
            widget.set(control, value)
        assert (raw(widget, "data-variant"), widget.attribute("data-depth"), widget.attribute("data-seed"),
                widget.attribute("data-step")) == (variant, depth, seed, step)
        mine = [r for r in scores if (r["variant"], int(r["depth"]), int(r["seed"])) == (variant, depth, seed)]
        for name in ("induction", "previous_token"):
            heads = np.zeros((depth, 4))
            for r in mine:
                if int(r["step"]) == step:
                    heads[int(r["layer"]), int(r["head"])] = float(r[name])
            np.testing.assert_allclose(widget.values(name), heads, rtol=0, atol=5e-4 + 1e-7)
            highest = [max(float(r[name]) for r in mine if int(r["step"]) == s) for s in steps]
            np.testing.assert_allclose(widget.values("scores", name), highest, rtol=0, atol=5e-4 + 1e-7)
        np.testing.assert_allclose(widget.values("scores", "chosen"), [0, 1])
        assert widget.attribute("data-x", "scores", "chosen") == [step, step]
        row = next(r for r in training if (r["variant"], int(r["depth"]), int(r["seed"]), int(r["step"]))
                   == (variant, depth, seed, step))
        np.testing.assert_allclose(widget.attribute("data-code-loss"),
                                   [float(row["code_repeat_loss_first"]), float(row["code_repeat_loss_second"])],
                                   rtol=0, atol=0.005 + 1e-9)
