"""Screenshots of every page of the built site, both editions, at desktop and phone widths.

    python -m tools.screenshots OUT          # after bash tools/build_site.sh
    python -m tools.screenshots OUT --pages en/chapters/en/03-masking.html --widths 390
    python -m tools.screenshots OUT --unfold ...   # the exercises' solutions shown open

For authors, to look at the site as readers do (headless Chromium from Debian). The site serves its
own MathJax (site/offline.py), so the pages are captured as built, with their equations typeset and
no network; only --unfold serves a temporary copy, whose solutions are shown open. Each page is
captured in full length, cut into PNGs of at most --max-height pixels: OUT/<lang>-<page>-<width>-<k>.png.
"""

from __future__ import annotations

import argparse
import base64
import functools
import http.server
import re
import shutil
import sys
import tempfile
import threading
from pathlib import Path

from tools import sitecheck

ROOT = Path(__file__).resolve().parent.parent
# Headless Chromium on a machine without internet: no calls home at start-up, and every host but
# the loopback resolves to nothing, so a request to the network fails at once instead of hanging
# (the site needs none: tools/sitecheck.py check_offline).
CHROMIUM_ARGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1")
FOLDED = re.compile(r'(class="callout-\d+-contents callout-collapse collapse)(")')


def site_copy(site: Path, into: Path) -> Path:
    """A copy of the site in which every collapsed callout (the exercises' solutions) is shown open."""
    copy = into / "site"
    shutil.copytree(site, copy)
    for page in copy.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        new = FOLDED.sub(r"\1 show\2", text)
        if new != text:
            page.write_text(new, encoding="utf-8")
    return copy


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def start_driver(width: int, language: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    # Scrollbars are shown: a box that scrolls sideways shows it by its scrollbar (site/book.css).
    for arg in (*CHROMIUM_ARGS, f"--lang={language}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"),
                              options=options)
    # A phone is a narrow viewport with a device scale; a desktop a 1280-pixel window.
    mobile = width < 600
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": 844 if mobile else 900, "deviceScaleFactor": 1, "mobile": mobile})
    return driver


def capture(driver, url: str, out: Path, stem: str, max_height: int) -> list[Path]:
    """The whole page as PNG slices of at most max_height pixels."""
    driver.get(url)
    driver.execute_script("return document.fonts ? document.fonts.ready : null")
    # Wait for MathJax to typeset (it sets MathJax.startup.promise) before measuring the height.
    driver.execute_async_script("""
        var done = arguments[arguments.length - 1];
        var p = window.MathJax && MathJax.startup && MathJax.startup.promise;
        (p || Promise.resolve()).then(function () { setTimeout(done, 300); }, function () { done(); });
    """)
    width = driver.execute_script("return document.documentElement.clientWidth")
    height = driver.execute_script("return document.documentElement.scrollHeight")
    paths = []
    for k, top in enumerate(range(0, height, max_height)):
        clip = {"x": 0, "y": top, "width": width, "height": min(max_height, height - top), "scale": 1}
        shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
            "format": "png", "clip": clip, "captureBeyondViewport": True})
        path = out / f"{stem}-{k + 1}.png"
        path.write_bytes(base64.b64decode(shot["data"]))
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for the PNG files")
    parser.add_argument("--site", type=Path, default=ROOT / "_site")
    parser.add_argument("--pages", nargs="*", help="pages inside the site (default: every page and the chooser)")
    parser.add_argument("--widths", nargs="*", type=int, default=[1280, 390])
    parser.add_argument("--max-height", type=int, default=2400)
    parser.add_argument("--unfold", action="store_true", help="show the folded solutions of the exercises open")
    args = parser.parse_args(argv)
    if not args.site.is_dir():
        print(f"screenshots: {args.site} does not exist; run bash tools/build_site.sh", file=sys.stderr)
        return 2
    pages = args.pages or ["index.html#choose"] + [
        f"{lang}/{p.html}" for lang in sitecheck.LANGS for p in sitecheck.book_pages(ROOT, lang)]
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        served = site_copy(args.site, Path(tmp)) if args.unfold else args.site
        handler = functools.partial(QuietHandler, directory=str(served))
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{httpd.server_address[1]}"
        try:
            for width in args.widths:
                for lang in sitecheck.LANGS:
                    driver = start_driver(width, lang)
                    try:
                        for page in pages:
                            if not (page.startswith(f"{lang}/") or (lang == "en" and "/" not in page)):
                                continue
                            stem = re.sub(r"[^A-Za-z0-9]+", "-", page.split("#")[0].removesuffix(".html"))
                            for path in capture(driver, f"{base}/{page}", args.out, f"{stem}-{width}",
                                                args.max_height):
                                print(path)
                    finally:
                        driver.quit()
        finally:
            httpd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
