"""The website as its readers see it: both editions rendered by Quarto, checked as files and in a browser.

The site is built once per test run with ``bash tools/build_site.sh`` (as .ci/run and the README's test
command do; the ``site`` fixture of tests/site/conftest.py, shared with test_site_views.py). This file

* runs every check of tools/sitecheck.py on it (numbering, chapter mentions, cross-references, the
  build log, images, links and anchors, ``<html lang>``, twins, search index, notebook links), and
  each of them on a copy broken on purpose, where it must report the break;
* drives Debian's Chromium with Selenium (no browser is ever downloaded): the chooser under file://
  and HTTP, search in both languages, the language link on a phone, and every interactive figure.

Every page of both editions at two widths (layout, axe-core, language links) is test_site_views.py's,
which pytest-xdist runs on the other worker at the same time.

Without Quarto or Chromium these tests are skipped with a reason that says how to install them,
except under ``CI=true``, where a missing tool is a failure: CI must never pass by skipping them.
"""

from __future__ import annotations

import functools
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from site_session import LANGS, ROOT, Built, base_url, site_path, wait_for
from tools import sitecheck


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
    """The one check of links, images and anchors (tools/bookcheck.py checks only includes): a missing page,
    image or id is reported, in this page or another; links that resolve, to the twin, an id there or
    here, a folder, another site or an address, are not."""
    page = broken / "en" / "chapters" / "en" / "04-multi-head-attention.html"
    image = next(page.parent.glob("04-multi-head-attention_files/figure-html/*.png"))
    image.unlink()
    where = "en/chapters/en/04-multi-head-attention.html"
    edit(page, '<main class="content" id="quarto-document-content">',
         '<main class="content" id="quarto-document-content"><a href="03-masking.html#sec-nowhere">3</a>'
         '<a href="no-such-chapter.html">gone</a><img src="img/none.png" alt=""><a href="#fig-nowhere">here</a>'
         '<a href="../../../ja/chapters/ja/04-multi-head-attention.html#sec-mha">twin</a><a href="#sec-shapes">'
         'shapes</a><a href="../../">home</a><a href="https://quarto.org">web</a><a href="mailto:a@b.c">mail</a>')
    images = sitecheck.check_images(ROOT, broken)
    assert any(image.name in p for p in images)
    assert f"{where}: image img/none.png does not exist" in images and len(images) == 2
    assert sorted(sitecheck.check_links(ROOT, broken)) == sorted([
        f"{where}: link 03-masking.html#sec-nowhere: no id 'sec-nowhere' in en/chapters/en/03-masking.html",
        f"{where}: link no-such-chapter.html leads to a missing file",
        f"{where}: link #fig-nowhere: no id 'fig-nowhere' in {where}",
        f"{where}: link {image.relative_to(page.parent).as_posix()} leads to a missing file"])  # the figure's zoom link


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
# In a real browser: Debian's Chromium driven by Selenium (the browser, server fixtures: conftest.py)


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


def test_japanese_references_read_naturally(site: Built) -> None:
    """「Press, Smith, と Lewis 2022」 was CSL's Japanese "and"; site/book.csl keeps the Latin form."""
    html = (site.path / "ja" / "chapters" / "ja" / "references.html").read_text("utf-8")
    html = re.sub(r"<(script|style)\b.*?</\1>", "", html, flags=re.S)  # a script's "i<n" is no tag
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))
    assert not re.search(r",\s*と\s", text), re.search(r".{40},\s*と\s.{20}", text)
    assert "Press, Smith, and Lewis" in text and "On Layer Normalization in the Transformer" in text


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
    on chapter 7's stored model (attnbook.experiments.ch07.stored_model; tools/export_widget_data.py checks that greedy_decode agrees),
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
