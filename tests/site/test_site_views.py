"""Every page of both editions in Chromium, at a desktop's and a phone's width: layout, accessibility
(axe-core) and the language links.

One pass per width over every page of both editions (``views``: 1280 px over HTTP, 390 px over
file://), each page loaded once, in which the layout checks, axe-core (at 1280 px) and the language
links are all run; the whole of it took 1054 s with a page load per check and a click per language
link, 553 s so (both on a loaded two-core machine). It is its own file so that pytest-xdist
(``--dist loadfile``) runs it on one worker while test_site.py runs on the other, both on the one
build of the site (the ``site`` fixture, tests/site/conftest.py): of test_site.py's 316 s without the
build (load 12-15 on two cores), these page views were 189 s.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest

from site_session import LANGS, ROOT, Built, base_url, every_page, missing, site_path
from tools import figure_fonts, sitecheck


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
