#!/usr/bin/env bash
# Build the book as an EPUB and a PDF, both editions, from the notebooks' stored outputs.
#
#   bash tools/build_books.sh             # _books/en/attention-en.{epub,pdf}, _books/ja/attention-ja.{epub,pdf}
#   bash tools/build_books.sh epub        # only the EPUBs (Quarto alone, no LaTeX)
#   bash tools/build_books.sh pdf ja      # one format of one edition
#   python -m tools.books check           # then: EPUBCheck, fonts, glyphs, overfull lines, chapters, pages
#
# Needs Quarto (bash tools/setup.sh) and, for the PDF, LuaLaTeX with LuaTeX-ja from Debian's TeX Live
# (bash tools/setup.sh --books installs it, with epubcheck and poppler-utils). Nothing is downloaded
# while building: Quarto's automatic install of LaTeX packages is off (_quarto-books.yml).
#
# Each edition is `quarto render --profile <lang>,books --to <format>` (the Japanese PDF adds the
# profile books-ja: ltjsbook and the Noto CJK fonts), one render at a time, each into its own folder
# (a book's render empties its output folder), from which the book, and for the PDF its LaTeX source,
# log and table of contents, are copied to _books/<lang>/. What Quarto printed
# is in _books/<lang>/<format>.log. tools/build_site.sh copies the books into _site/<lang>/, where
# every page's sidebar links them (book.downloads in _quarto-en.yml / _quarto-ja.yml).
set -euo pipefail

cd "$(dirname "$0")/.."
if [ -z "${QUARTO:-}" ]; then
  if command -v quarto >/dev/null 2>&1; then QUARTO=quarto
  elif [ -x .venv/bin/quarto ]; then QUARTO=.venv/bin/quarto
  else
    echo "build_books: quarto not found; run 'bash tools/setup.sh'" >&2
    exit 1
  fi
fi
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] && PYTHON=.venv/bin/python

formats=() langs=()
for arg in "$@"; do
  case "$arg" in
    epub|pdf) formats+=("$arg") ;;
    en|ja) langs+=("$arg") ;;
    *) echo "build_books: unknown argument '$arg' (expected epub, pdf, en, ja)" >&2; exit 2 ;;
  esac
done
[ ${#formats[@]} -gt 0 ] || formats=(epub pdf)
[ ${#langs[@]} -gt 0 ] || langs=(en ja)

if [[ " ${formats[*]} " == *" pdf "* ]] && ! command -v lualatex >/dev/null 2>&1; then
  echo "build_books: lualatex not found; run 'bash tools/setup.sh --books' (Debian's TeX Live with LuaTeX-ja)" >&2
  exit 1
fi

# books/tex/fontawesome5.sty stands in for the package Quarto loads for callouts (see that file).
export TEXINPUTS="$PWD/books/tex//:${TEXINPUTS:-}"
export NO_COLOR=1

# Quarto renders from a scratch copy of the sources (as tools/build_site.sh does for the Japanese edition):
# a PDF's render leaves its LaTeX and each notebook's figures (chapters/*/NN-*_files/) beside the sources,
# and the site's render must not share Quarto's working files (.quarto/) with it.
case "$QUARTO" in */*) QUARTO="$(cd "$(dirname "$QUARTO")" && pwd)/$(basename "$QUARTO")" ;; esac
case "$PYTHON" in */*) PYTHON="$(cd "$(dirname "$PYTHON")" && pwd)/$(basename "$PYTHON")" ;; esac
repo=$PWD
scratch=$(mktemp -d "${TMPDIR:-/tmp}/build_books.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
tar --exclude=./.git --exclude=./_site --exclude=./_books --exclude=./.quarto --exclude=./.venv --exclude=./venv \
    --exclude=./node_modules --exclude=./.cache --exclude=./.hypothesis --exclude=./.pytest_cache \
    --exclude=__pycache__ -cf - . | tar -C "$scratch" -xf -

start=$(date +%s)
for lang in "${langs[@]}"; do
  mkdir -p "_books/$lang"
  for format in "${formats[@]}"; do
    profile="$lang,books"
    [ "$lang-$format" = ja-pdf ] && profile="$profile,books-ja"
    out="$scratch/_books/$lang-$format"
    t0=$(date +%s)
    echo "build_books: quarto render --profile $profile --to $format"
    if ! (cd "$scratch" && "$QUARTO" render --profile "$profile" --to "$format" --output-dir "$out") \
         > "_books/$lang/$format.log" 2>&1; then
      tail -40 "_books/$lang/$format.log" >&2
      echo "build_books: the $lang $format failed; Quarto's output is in _books/$lang/$format.log" >&2
      exit 1
    fi
    book="_books/$lang/attention-$lang.$format"
    cp "$out/attention-$lang.$format" "$book"
    if [ "$format" = epub ]; then
      "$PYTHON" -m tools.books fix-epub "$book" "$lang"
    else
      # The LaTeX source, log and table of contents, for tools/books.py's checks.
      # (Quarto names them after the book's first file, index.qmd, and leaves them in the project.)
      for ext in tex log toc; do
        for f in "$out/attention-$lang.$ext" "$scratch/attention-$lang.$ext" "$scratch/index.$ext"; do
          if [ -f "$f" ]; then cp "$f" "_books/$lang/attention-$lang.$ext"; break; fi
        done
      done
      rm -rf "$scratch"/index.{tex,log,toc,aux,out,pdf} "$scratch"/index_files "$scratch"/chapters/*/*_files
    fi
    echo "build_books: $book ($(du -k "$book" | cut -f1) KiB, $(( $(date +%s) - t0 )) s)"
  done
done
echo "build_books: built in $(( $(date +%s) - start )) s; check them with: python -m tools.books check"
