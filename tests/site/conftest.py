"""The website's tests: both editions built with tools/build_site.sh and read in Chromium (links, numbering, search,
widgets, phone widths, citations, offline assets). Without Quarto or a browser they skip, except under CI=true,
where a missing tool fails them: `python -m pytest tests/site`.
"""
