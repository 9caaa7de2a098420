#!/usr/bin/env bash
# Set up everything the book needs on a new machine (Python 3.11, pip and git are enough):
# a virtual environment in .venv with the library (editable) and the test tools.
#   bash tools/setup.sh            # library + tests (what CI uses)
#   bash tools/setup.sh site       # also the site tools (quarto-cli needs to reach GitHub)
set -euo pipefail
cd "$(dirname "$0")/.."
extras="test"
if [ "${1:-}" = "site" ]; then extras="test,site"; fi
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[${extras}]"
echo "Set up .venv with attnbook[${extras}]. Activate it with: source .venv/bin/activate"
