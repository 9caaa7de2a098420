#!/usr/bin/env bash
# Set up everything the book needs on a new machine (Python 3.11, pip and git are enough):
# a virtual environment in .venv with the library (editable) and the test tools.
#
#   bash tools/setup.sh            # library, test tools, and what builds and tests the website:
#                                  # Quarto (as .venv/bin/quarto) and, on Debian/Ubuntu as root,
#                                  # Chromium for the browser tests
#   bash tools/setup.sh --no-site  # library and test tools only (the site tests then skip)
#
# Quarto: from ../shared/quarto when that folder exists (this project's own machines, which cannot
# reach GitHub), otherwise PyPI's quarto-cli (which downloads Quarto from GitHub). Conda users can
# `conda install -c conda-forge quarto` instead.
set -euo pipefail
cd "$(dirname "$0")/.."
QUARTO_VERSION=1.7.34   # the version the site is tested with; .github/workflows/publish.yml pins it too

site=yes
case "${1:-}" in
  --no-site) site=no ;;
  ""|site) ;;
  *) echo "setup: unknown argument '$1' (expected nothing or --no-site)" >&2; exit 2 ;;
esac
shared=../shared/quarto/install.sh

python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# The `site` extra is PyPI's quarto-cli; with ../shared/quarto beside the checkout it is not needed.
if [ "$site" = yes ] && [ ! -f "$shared" ]; then extras="test,site"; else extras="test"; fi
.venv/bin/python -m pip install --quiet -e ".[${extras}]"

if [ "$site" = yes ]; then
  if [ -f "$shared" ]; then
    ln -sf "$(bash "$shared" | tail -1)" .venv/bin/quarto
  fi
  version=$(.venv/bin/quarto --version)
  echo "Quarto ${version} at .venv/bin/quarto"
  if [ "$version" != "$QUARTO_VERSION" ]; then
    echo "setup: the site is tested with Quarto ${QUARTO_VERSION}, not ${version}" >&2
  fi

  # A real browser for tests/test_site.py (language switch, chooser, search). Only from the system's
  # packages: nothing downloads a browser at run time.
  if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver fonts-noto-cjk >/dev/null
    else
      echo "setup: no chromium/chromedriver; the browser tests will be skipped (install Debian's" \
           "chromium, chromium-driver and fonts-noto-cjk to run them)" >&2
    fi
  fi
fi
echo "Set up .venv with attnbook[${extras}]. Activate it with: source .venv/bin/activate"
