"""Make the built site self-contained: run by tools/build_site.sh after both editions are rendered.

    python3 site/offline.py _site

Quarto's pages load MathJax (and an ES6 polyfill no current browser needs) from CDNs, which a
reader offline, a downloaded copy opened over file:// and the tests on a machine without internet
cannot reach. This script

* copies npm's MathJax 3 (node_modules/mathjax, pinned in package-lock.json; `npm ci` installs it)
  into each edition: _site/<lang>/site_libs/mathjax/ (the combined tex-chtml-full.js, its fonts, and
  the accessibility parts its menu loads on demand);
* points every page at that copy by a RELATIVE url (Quarto's `html-math-method: url` is one string for
  every page, so it cannot be relative at every depth), which works under any base path and file://;
* drops the polyfill <script>.

The theme's web font is switched off in site/theme.scss. tools/sitecheck.py (check_offline) checks
that no page, stylesheet or script tag of the site loads anything over http(s).
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MATHJAX = ROOT / "node_modules" / "mathjax" / "es5"
# What the pages need: the combined component, its CommonHTML fonts, and what its menu loads lazily
# (assistive MathML, the explorer and the speech rule engine).
MATHJAX_PARTS = ("tex-chtml-full.js", "output/chtml/fonts/woff-v2", "a11y", "sre", "ui")
MATHJAX_TAG = re.compile(r'<script src="https://cdn\.jsdelivr\.net/npm/mathjax@3/es5/tex-chtml-full\.js"'
                         r'(?P<rest>[^>]*)></script>')
POLYFILL_TAG = re.compile(r'[ \t]*<script src="https://cdnjs\.cloudflare\.com/polyfill/[^"]*"></script>\n?')


def copy_mathjax(edition: Path) -> None:
    if not (MATHJAX / "tex-chtml-full.js").is_file():
        sys.exit(f"offline: {MATHJAX} is missing; run 'npm ci' (bash tools/setup.sh does) to install "
                 "the MathJax that package-lock.json pins")
    target = edition / "site_libs" / "mathjax"
    shutil.rmtree(target, ignore_errors=True)
    for part in MATHJAX_PARTS:
        source = MATHJAX / part
        if source.is_dir():
            shutil.copytree(source, target / part)
        elif source.is_file():
            (target / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / part)
    shutil.copy2(MATHJAX.parent / "LICENSE", target / "LICENSE")


def rewrite(page: Path, edition: Path) -> bool:
    prefix = "../" * (len(page.relative_to(edition).parts) - 1)
    text = page.read_text(encoding="utf-8")
    new = MATHJAX_TAG.sub(lambda m: f'<script src="{prefix}site_libs/mathjax/tex-chtml-full.js"'
                                    f'{m["rest"]}></script>', text)
    new = POLYFILL_TAG.sub("", new)
    if new != text:
        page.write_text(new, encoding="utf-8")
        return True
    return False


def main(argv: list[str]) -> int:
    site = Path(argv[0]) if argv else ROOT / "_site"
    changed = 0
    for lang in ("en", "ja"):
        edition = site / lang
        copy_mathjax(edition)
        changed += sum(rewrite(page, edition) for page in edition.rglob("*.html"))
    print(f"offline: MathJax copied into both editions; {changed} page(s) point at it")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
