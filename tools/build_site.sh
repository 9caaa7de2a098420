#!/usr/bin/env bash
# Build the website: both language editions and the language chooser, into _site/.
#
#   bash tools/build_site.sh
#
#   _site/index.html   sends a reader to en/ or ja/ (from site/index.html)
#   _site/en/          quarto render --profile en
#   _site/ja/          quarto render --profile ja
#
# Quarto renders the notebooks' stored outputs and never executes them (_quarto.yml), so this
# needs Quarto and Jupyter but not the book's Python dependencies.
set -euo pipefail

cd "$(dirname "$0")/.."

if ! command -v quarto >/dev/null 2>&1; then
  echo "build_site: quarto not found; install it (python -m pip install -e '.[site]'," \
       "conda env create -f environment.yml, or https://quarto.org/docs/get-started/)" >&2
  exit 1
fi

# Each profile cleans only its own output-dir; start from nothing so no stale page survives.
rm -rf _site
for lang in en ja; do
  echo "build_site: rendering the '${lang}' edition"
  quarto render --profile "${lang}"
  test -f "_site/${lang}/index.html" || { echo "build_site: _site/${lang}/index.html is missing" >&2; exit 1; }
done

cp site/index.html _site/index.html
# For publishing _site from a branch: tell GitHub Pages not to run Jekyll over it.
touch _site/.nojekyll

echo "build_site: site in $(pwd)/_site (open _site/index.html, _site/en/index.html or _site/ja/index.html)"
