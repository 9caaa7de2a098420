"""Japanese wording of cross-references to sections and chapters in the rendered Japanese edition.

    python -m tools.japanese_xrefs _site/ja      # tools/build_site.sh runs it after rendering

Quarto's Japanese prefixes put a loan word before the number: 「セクション 3.2」, 「チャプター 3」.
Japanese technical books write 「3.2 節」 and 「第 3 章」. Quarto resolves section references in its
HTML post-processing, after every Lua filter has run, so the link texts are rewritten here, in the
rendered pages. Figures, tables and equations keep Quarto's 「図 3.1」「表 3.1」「式 3.1」.
tools/sitecheck.py checks that no 「セクション」 link is left.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

XREF = re.compile(r'(<a [^>]*class="quarto-xref"[^>]*>)<span>(セクション|チャプター)(?:&nbsp;|\s|\u00a0)*'
                  r"([0-9A-Z.]+)</span></a>")


def rewrite(html: str) -> str:
    def replace(m: re.Match) -> str:
        words = f"{m[3]}&nbsp;節" if m[2] == "セクション" else f"第&nbsp;{m[3]}&nbsp;章"
        return f"{m[1]}<span>{words}</span></a>"
    return XREF.sub(replace, html)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_dir():
        print("usage: python -m tools.japanese_xrefs SITE_DIR", file=sys.stderr)
        return 2
    changed = 0
    for page in Path(args[0]).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        new = rewrite(text)
        if new != text:
            page.write_text(new, encoding="utf-8")
            changed += 1
    print(f"japanese_xrefs: rewrote section and chapter references in {changed} page(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
