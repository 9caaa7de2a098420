"""The book's structure (tools/bookcheck.py) and the authoring tools (tools/sync_code.py, ...).

Every check runs on the real repository, where it must find nothing, and on a copy of the book in
tmp_path that one test breaks on purpose, where it must report the broken file. The copies start
from the real chapters, so these tests grow with the book; a synthetic chapter stands in while
the book has none.
"""

from __future__ import annotations

import json
import re
import os
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest
import yaml
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from tools import bookcheck, colab_cell, execute_notebooks, glossary, sync_code

ROOT = Path(__file__).resolve().parent.parent
BOOK_FILES = ("_quarto.yml", "_quarto-en.yml", "_quarto-ja.yml", "index.qmd", "pyproject.toml",
              "environment.yml", "references.bib", "glossary.csv")


# ---------------------------------------------------------------------------------------------
# Building and breaking copies of the book


def synthetic_notebook(lang: str) -> nbformat.NotebookNode:
    """A small chapter with a label, references, a LANG line, tags and stored outputs."""
    caption = {"en": "A line", "ja": "直線"}[lang]
    text = {"en": "# Demo {#sec-demo}\n\n@fig-line shows a line; see @sec-demo.",
            "ja": "# デモ {#sec-demo}\n\n@fig-line は直線です。[-@sec-demo] も参照。"}[lang]
    cells = [
        new_markdown_cell(text),
        new_code_cell(f'LANG = "{lang}"\nimport numpy as np',
                      outputs=[], execution_count=1),
        new_code_cell(f'#| label: fig-line\n#| fig-cap: "{caption}"\nprint(np.arange(3))',
                      outputs=[new_output("stream", name="stdout", text="[0 1 2]\n")],
                      execution_count=2),
        new_code_cell("print('timing')", metadata={"tags": ["nbval-ignore-output"]},
                      outputs=[new_output("stream", name="stdout", text=f"timing {lang}\n")],
                      execution_count=3),
    ]
    return new_notebook(cells=cells, metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3", "language": "python"}})


def add_synthetic_chapter(root: Path, name: str = "99-synthetic.ipynb") -> None:
    for lang in bookcheck.LANGS:
        nbformat.write(synthetic_notebook(lang), root / "chapters" / lang / name)
        profile = root / f"_quarto-{lang}.yml"
        config = yaml.safe_load(profile.read_text(encoding="utf-8"))
        config["book"]["chapters"].append(f"chapters/{lang}/{name}")
        profile.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")


@pytest.fixture
def book(tmp_path: Path) -> Path:
    """A copy of the book's sources, with at least one pair of twin notebooks."""
    for name in BOOK_FILES:
        shutil.copy(ROOT / name, tmp_path / name)
    for folder in ("chapters", "site"):
        shutil.copytree(ROOT / folder, tmp_path / folder,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    if not any(bookcheck.twin_pairs(tmp_path)):
        add_synthetic_chapter(tmp_path)
    return tmp_path


@pytest.fixture
def pair(book: Path) -> tuple[Path, Path]:
    """The first (English, Japanese) notebook pair of the copy."""
    return next(bookcheck.twin_pairs(book))


def read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def write(path: Path, nb: dict) -> None:
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def edit(path: Path, change) -> None:
    nb = read(path)
    change(nb)
    write(path, nb)


def add_markdown(path: Path, text: str) -> None:
    edit(path, lambda nb: nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": text}))


def plain_code_cell(nb: dict) -> dict:
    """The first code cell whose outputs nbval compares and whose code has more than the LANG line."""
    return next(c for c in nb["cells"] if c["cell_type"] == "code"
                and not bookcheck.UNCOMPARED_TAGS & set(bookcheck.tags(c))
                and bookcheck.shared_code(c))


def new_problems(check, root: Path, breakage) -> list[str]:
    """The problems `check` reports after `breakage()` that it did not report before."""
    before = set(check(root))
    breakage()
    return [p for p in check(root) if p not in before]


def mentions(problems: list[str], *names: str) -> bool:
    return any(all(name in p for name in names) for p in problems)


def name(root: Path, path: Path) -> str:
    return bookcheck.rel(root, path)


# ---------------------------------------------------------------------------------------------
# The real book


@pytest.mark.parametrize("check", bookcheck.CHECKS, ids=lambda c: c.__name__)
def test_real_book(check):
    assert check(ROOT) == []


def test_cli_reports_and_exits_nonzero(book, pair, capsys):
    en, ja = pair
    ja.unlink()
    assert bookcheck.main([str(book)]) == 1
    assert name(book, en) in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# Each check on a broken copy


def test_missing_twin(book, pair):
    en, ja = pair
    problems = new_problems(bookcheck.check_twins, book, ja.unlink)
    assert mentions(problems, name(book, en), name(book, ja))


def test_changed_code_line(book, pair):
    en, ja = pair
    problems = new_problems(bookcheck.check_code_parity, book, lambda: edit(
        ja, lambda nb: plain_code_cell(nb).__setitem__("source", "x = 1  # not in English\n"
                                                       + "".join(plain_code_cell(nb)["source"]))))
    assert mentions(problems, name(book, en), name(book, ja), "code cell", "not in English")


def test_extra_code_cell(book, pair):
    en, ja = pair
    problems = new_problems(bookcheck.check_code_parity, book, lambda: edit(
        ja, lambda nb: nb["cells"].append(new_code_cell("print('only in Japanese')"))))
    assert mentions(problems, name(book, ja), "code cells", "only in Japanese")


def test_different_tags(book, pair):
    en, ja = pair
    problems = new_problems(bookcheck.check_code_parity, book, lambda: edit(
        ja, lambda nb: plain_code_cell(nb)["metadata"].__setitem__("tags", ["nbval-skip"])))
    assert mentions(problems, name(book, ja), "tags", "nbval-skip")


def test_option_lines_and_lang_line_may_differ(book, pair):
    en, ja = pair

    def retitle(nb):
        cell = plain_code_cell(nb)
        cell["source"] = '#| fig-cap: "別の説明"\n' + "".join(cell["source"])

    assert new_problems(bookcheck.check_code_parity, book, lambda: edit(ja, retitle)) == []


def test_wrong_lang_line(book, pair):
    en, ja = pair

    def relabel(nb):
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                cell["source"] = "".join(cell["source"]).replace('LANG = "ja"', 'LANG = "en"')

    problems = new_problems(bookcheck.check_code_parity, book, lambda: edit(ja, relabel))
    assert mentions(problems, name(book, ja), 'LANG = "ja"')


def test_different_stored_output(book, pair):
    en, ja = pair
    problems = new_problems(bookcheck.check_output_parity, book, lambda: edit(
        ja, lambda nb: plain_code_cell(nb)["outputs"].append(
            {"output_type": "stream", "name": "stdout", "text": ["only in Japanese\n"]})))
    assert mentions(problems, name(book, ja), "only in Japanese")


def test_stream_split_may_differ(book, pair):
    en, ja = pair

    def split(nb):
        cell = plain_code_cell(nb)
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["one\ntwo\n"]}]

    def split_differently(nb):
        cell = plain_code_cell(nb)
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["one\n"]},
                           {"output_type": "stream", "name": "stdout", "text": ["two\n"]}]

    edit(en, split)
    assert new_problems(bookcheck.check_output_parity, book, lambda: edit(ja, split_differently)) == []


def test_ignored_output_may_differ(book, pair):
    en, ja = pair

    def change_ignored(nb):
        cell = plain_code_cell(nb)
        cell["metadata"]["tags"] = ["nbval-ignore-output"]
        cell["outputs"].append({"output_type": "stream", "name": "stdout", "text": ["varies\n"]})

    edit(en, lambda nb: plain_code_cell(nb)["metadata"].__setitem__("tags", ["nbval-ignore-output"]))
    assert new_problems(bookcheck.check_output_parity, book, lambda: edit(ja, change_ignored)) == []


def test_language_specific_output_must_print_the_same_numbers(book, pair):
    en, ja = pair

    def printing(text):
        def change(nb):
            cell = plain_code_cell(nb)
            cell["metadata"]["tags"] = sorted(set(cell["metadata"].get("tags", [])) | {"lang-output"})
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": [text]}]
        return change

    edit(en, printing("T = 4096: memory 130 MiB, ratio 0.52 (float32)\n"))
    assert new_problems(bookcheck.check_output_parity, book, lambda: edit(
        ja, printing("T = 4096：メモリ 130 MiB、比 0.52（float32）\n"))) == []
    problems = new_problems(bookcheck.check_output_parity, book, lambda: edit(
        ja, printing("T = 4096：メモリ 131 MiB、比 0.52（float32）\n")))
    assert mentions(problems, name(book, ja), "lang-output", "number 2 is 130 vs 131")
    problems = new_problems(bookcheck.check_output_parity, book, lambda: edit(
        ja, printing("T = 4096：メモリ 130 MiB（float32）\n")))
    assert mentions(problems, name(book, ja), "number 3 is 0.52 vs 32")


def test_dangling_reference(book, pair):
    en, _ = pair
    problems = new_problems(bookcheck.check_cross_references, book,
                            lambda: add_markdown(en, "As @fig-nowhere shows, nothing."))
    assert mentions(problems, name(book, en), "@fig-nowhere")


def test_duplicate_label(book, pair):
    en, _ = pair
    problems = new_problems(bookcheck.check_cross_references, book, lambda: add_markdown(
        en, "## Once {#sec-twice}\n\n## Twice {#sec-twice}"))
    assert mentions(problems, name(book, en), "sec-twice", "already defined")


def test_label_defined_in_two_chapters(book):
    """Quarto resolves labels book-wide: chapter 4's @sec-ablations once led to chapter 7's section."""
    first, second = (p for p, _ in list(bookcheck.twin_pairs(book))[:2])
    problems = new_problems(bookcheck.check_cross_references, book, lambda: (
        add_markdown(first, "## Here {#sec-shared-name}"), add_markdown(second, "## There {#sec-shared-name}")))
    assert mentions(problems, name(book, second), "sec-shared-name", f"already defined in {name(book, first)}")


def test_japanese_reference_glued_to_text(book, pair):
    _, ja = pair
    problems = new_problems(bookcheck.check_cross_references, book, lambda: add_markdown(
        ja, "## 節 {#sec-glued}\n\n@sec-gluedを参照。図は@sec-glued です。"))
    assert mentions(problems, name(book, ja), "@sec-gluedを参照", "[-@sec-glued]")
    assert mentions(problems, name(book, ja), "glued to the preceding")


def test_not_references(book, pair):
    en, _ = pair
    text = ("Mail someone@fig-example.org; `@fig-in-code`; [-@sec-self] and [@sec-self; @sec-self].\n\n"
            "```python\n@fig-decorator\ndef f(): ...\n```\n\n## Self {#sec-self}")
    assert new_problems(bookcheck.check_cross_references, book, lambda: add_markdown(en, text)) == []


def test_unknown_citation(book, pair):
    _, ja = pair
    problems = new_problems(bookcheck.check_citations, book, lambda: add_markdown(
        ja, "Transformer [@nobody1999] の論文。"))
    assert mentions(problems, name(book, ja), "@nobody1999", "references.bib")


def test_missing_bibliography(book):
    problems = new_problems(bookcheck.check_citations, book, (book / "references.bib").unlink)
    assert mentions(problems, "references.bib", "does not exist")


def test_broken_link(book, pair):
    en, _ = pair
    problems = new_problems(bookcheck.check_links, book, lambda: add_markdown(
        en, "[gone](no-such-chapter.ipynb) and ![](img/none.png)"))
    assert mentions(problems, name(book, en), "no-such-chapter.ipynb")
    assert mentions(problems, name(book, en), "img/none.png")


def test_links_that_resolve(book, pair):
    en, ja = pair
    text = (f"[twin](../ja/{ja.name}), [html](../ja/{ja.stem}.html#top), [root](/index.qmd), "
            "[web](https://quarto.org), [mail](mailto:a@b.c), [here](#top)")
    assert new_problems(bookcheck.check_links, book, lambda: add_markdown(en, text)) == []


def test_included_file_needs_root_links(book):
    preface = book / "chapters" / "en" / "_preface.qmd"
    problems = new_problems(bookcheck.check_links, book, lambda: preface.write_text(
        preface.read_text(encoding="utf-8") + "\n[relative](01-anything.ipynb)\n", encoding="utf-8"))
    assert mentions(problems, "chapters/en/_preface.qmd", "must start with /")


def test_missing_include(book):
    index = book / "index.qmd"
    problems = new_problems(bookcheck.check_links, book, lambda: index.write_text(
        index.read_text(encoding="utf-8") + "\n{{< include chapters/en/_gone.qmd >}}\n", encoding="utf-8"))
    assert mentions(problems, "index.qmd", "_gone.qmd")


def test_link_to_missing_label(book, pair):
    en, ja = pair
    problems = new_problems(bookcheck.check_link_anchors, book, lambda: add_markdown(
        ja, f"[there](../en/{en.name}#sec-nowhere) and [here](#fig-nowhere)"))
    assert mentions(problems, name(book, ja), "sec-nowhere", name(book, en))
    assert mentions(problems, name(book, ja), "fig-nowhere")


def test_links_to_labels_that_exist(book, pair):
    en, _ = pair
    label = next(label for _, label in bookcheck.labels(en) if label.startswith("sec-"))
    text = (f"[a](../en/{en.name}#{label}), [b](../en/{en.stem}.html#{label}), [c](#{label}), "
            f"[heading]({en.name}#some-heading), [web](https://example.org/#sec-elsewhere)")
    assert new_problems(bookcheck.check_link_anchors, book, lambda: add_markdown(en, text)) == []


def test_profile_lists_missing_chapter(book):
    profile = book / "_quarto-en.yml"
    problems = new_problems(bookcheck.check_chapter_lists, book, lambda: profile.write_text(
        profile.read_text(encoding="utf-8") + "    - chapters/en/98-not-written.ipynb\n",
        encoding="utf-8"))
    assert mentions(problems, "_quarto-en.yml", "chapters/en/98-not-written.ipynb", "does not exist")
    assert mentions(problems, "_quarto-en.yml", "_quarto-ja.yml", "98-not-written")


def test_unlisted_chapter(book, pair):
    en, ja = pair
    extra = {p: p.with_name("97-unlisted.ipynb") for p in pair}
    problems = new_problems(bookcheck.check_chapter_lists, book,
                            lambda: [shutil.copy(p, q) for p, q in extra.items()])
    assert mentions(problems, "chapters/en/97-unlisted.ipynb", "_quarto-en.yml")
    assert mentions(problems, "chapters/ja/97-unlisted.ipynb", "_quarto-ja.yml")


def test_chapter_of_other_language(book, pair):
    en, _ = pair
    profile = book / "_quarto-ja.yml"
    problems = new_problems(bookcheck.check_chapter_lists, book, lambda: profile.write_text(
        profile.read_text(encoding="utf-8") + f"    - {name(book, en)}\n", encoding="utf-8"))
    assert mentions(problems, "_quarto-ja.yml", name(book, en), "other language")


def test_appendix_moved_into_chapters(book):
    profile = book / "_quarto-ja.yml"

    def move():
        config = yaml.safe_load(profile.read_text(encoding="utf-8"))
        chapters = config["book"]["chapters"]
        config["book"].setdefault("appendices", []).insert(0, chapters.pop())
        profile.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")

    problems = new_problems(bookcheck.check_chapter_lists, book, move)
    assert mentions(problems, "_quarto-en.yml", "_quarto-ja.yml", "appendices")


def test_no_bibliography_page(book):
    pages = [p for p in bookcheck.documents(book) if bookcheck.REFS_DIV.search(p.read_text(encoding="utf-8"))]
    assert pages  # the real book has a references page per language

    def remove_refs_divs():
        for page in pages:
            page.write_text(bookcheck.REFS_DIV.sub("::: {#not-refs}", page.read_text(encoding="utf-8")),
                            encoding="utf-8")

    problems = new_problems(bookcheck.check_bibliography_page, book, remove_refs_divs)
    assert mentions(problems, "_quarto-en.yml", "{#refs}")
    assert mentions(problems, "_quarto-ja.yml", "{#refs}")


def test_nested_parts_and_appendices():
    book = {"chapters": ["index.qmd", {"part": "Basics", "chapters": ["a.ipynb", {"href": "b.qmd"}]},
                         {"part": "p.qmd", "chapters": ["c.ipynb"]}],
            "appendices": ["errata.qmd"], "references": "refs.qmd"}
    assert bookcheck.chapter_files(book) == ["index.qmd", "a.ipynb", "b.qmd", "p.qmd", "c.ipynb",
                                             "refs.qmd", "errata.qmd"]


def test_stored_error(book, pair):
    en, _ = pair
    error = {"output_type": "error", "ename": "ZeroDivisionError", "evalue": "division by zero",
             "traceback": []}
    problems = new_problems(bookcheck.check_outputs, book, lambda: edit(
        en, lambda nb: plain_code_cell(nb)["outputs"].append(error)))
    assert mentions(problems, name(book, en), "ZeroDivisionError")


def test_no_outputs(book, pair):
    _, ja = pair

    def clear(nb):
        for cell in nb["cells"]:
            cell.get("outputs", []).clear()

    problems = new_problems(bookcheck.check_outputs, book, lambda: edit(ja, clear))
    assert mentions(problems, name(book, ja), "no stored outputs")


def test_nbval_comment(book, pair):
    en, _ = pair

    def comment(nb):
        cell = plain_code_cell(nb)
        cell["source"] = "# NBVAL_SKIP\n" + "".join(cell["source"])

    problems = new_problems(bookcheck.check_nbval_comments, book, lambda: edit(en, comment))
    assert mentions(problems, name(book, en), "NBVAL_SKIP", "tag")


@pytest.mark.parametrize("file, old, new, expected", [
    ("_quarto.yml", "  enabled: false", "  enabled: true", "execute.enabled"),
    ("_quarto-ja.yml", "lang: ja", "lang: en", "lang: ja"),
    ("_quarto-ja.yml", "output-dir: _site/ja", "output-dir: _site/en", "output-dir"),
    ("_quarto.yml", "book:\n", "book:\n  chapters: [index.qmd]\n", "book.chapters"),
])
def test_broken_quarto_config(book, file, old, new, expected):
    path = book / file
    text = path.read_text(encoding="utf-8")
    assert old in text
    problems = new_problems(bookcheck.check_quarto_config, book, lambda: path.write_text(
        text.replace(old, new, 1), encoding="utf-8"))
    assert mentions(problems, expected)


def test_environment_lacks_package(book):
    env = book / "environment.yml"
    text = env.read_text(encoding="utf-8")
    assert "  - nbval" in text
    problems = new_problems(bookcheck.check_environment, book, lambda: env.write_text(
        "".join(line for line in text.splitlines(keepends=True) if "nbval" not in line),
        encoding="utf-8"))
    assert mentions(problems, "environment.yml", "nbval")


def test_environment_extra_package(book):
    env = book / "environment.yml"
    problems = new_problems(bookcheck.check_environment, book, lambda: env.write_text(
        env.read_text(encoding="utf-8").replace("  - pip:\n", "  - scipy\n  - pip:\n"),
        encoding="utf-8"))
    assert mentions(problems, "environment.yml", "scipy")


# ---------------------------------------------------------------------------------------------
# The glossary (glossary.csv, tools/glossary.py)


def append_line(path: Path, line: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + line + "\n", encoding="utf-8")


def test_glossary_pages_follow_the_table(book):
    table = book / glossary.TABLE
    problems = new_problems(bookcheck.check_glossary, book, lambda: append_line(
        table, "sparse attention,スパースアテンション,A new term.,新しい用語。,疎アテンション,"))
    assert mentions(problems, "chapters/en/glossary.qmd", "python -m tools.glossary")
    assert mentions(problems, "chapters/ja/glossary.qmd", "python -m tools.glossary")
    assert mentions(problems, "chapters/en/glossary.qmd", "'sparse attention'")
    assert glossary.main(["--root", str(book), "--check"]) == 1

    assert glossary.main(["--root", str(book)]) == 0

    assert glossary.main(["--root", str(book), "--check"]) == 0
    assert not mentions(bookcheck.check_glossary(book), "glossary.qmd")
    page = glossary.page_path(book, "ja").read_text(encoding="utf-8")
    assert "| sparse attention | スパースアテンション | 新しい用語。 | 疎アテンション |" in page


def test_english_page_lists_every_term(book):
    page = glossary.page_path(book, "en")
    text = page.read_text(encoding="utf-8")
    assert "| einsum |" in text
    problems = new_problems(bookcheck.check_glossary, book, lambda: page.write_text(
        "".join(line for line in text.splitlines(keepends=True) if not line.startswith("| einsum |")),
        encoding="utf-8"))
    assert mentions(problems, "chapters/en/glossary.qmd", "does not list the term 'einsum'")


def test_rejected_term_in_japanese_notebook(book, pair):
    _, ja = pair
    problems = new_problems(bookcheck.check_glossary, book, lambda: add_markdown(
        ja, "各行の注意重みの和は 1 です。"))
    assert mentions(problems, name(book, ja), "'注意重み'", "アテンション重み")


def test_rejected_term_in_caption(book, pair):
    _, ja = pair

    def caption(nb):
        cell = plain_code_cell(nb)
        cell["source"] = '#| fig-cap: "ソフトマックスの出力"\n' + "".join(cell["source"])

    problems = new_problems(bookcheck.check_glossary, book, lambda: edit(ja, caption))
    assert mentions(problems, name(book, ja), "'ソフトマックス'")


def test_rejected_term_in_japanese_page(book):
    preface = book / "chapters" / "ja" / "_preface.qmd"
    problems = new_problems(bookcheck.check_glossary, book, lambda: append_line(
        preface, "\nこの本ではセルフアテンションを扱います。"))
    assert mentions(problems, "chapters/ja/_preface.qmd", "line", "'セルフアテンション'", "自己アテンション")


def test_rejected_term_broken_across_lines(book, pair):
    _, ja = pair
    problems = new_problems(bookcheck.check_glossary, book, lambda: add_markdown(
        ja, "各行の注意\n重みの和は 1 です。"))
    assert mentions(problems, name(book, ja), "'注意重み'")


def test_where_rejected_terms_may_appear(book, pair):
    en, ja = pair
    text = ("アテンション（注意機構）は重み付き平均です。`ソフトマックス` はコードの中です。\n\n"
            "```python\n# 注意重み\n```")
    assert new_problems(bookcheck.check_glossary, book, lambda: add_markdown(ja, text)) == []
    assert new_problems(bookcheck.check_glossary, book, lambda: add_markdown(en, "注意重み")) == []
    problems = new_problems(bookcheck.check_glossary, book, lambda: add_markdown(ja, "注意機構とは何か。"))
    assert mentions(problems, name(book, ja), "'注意機構'")


@pytest.mark.parametrize("row, expected", [
    ("attention mask,アテンションマスク,,,マスク,", "part of the chosen term"),
    ("einsum,einsum,,,アインシュタイン,", "listed twice"),
    ("sparse attention,スパースアテンション,,,疎アテンション,注意機構", "contains no rejected form"),
    ("sparse attention,スパースアテンション", "expected 6 columns"),
])
def test_broken_glossary_table(book, row, expected):
    problems = new_problems(bookcheck.check_glossary, book, lambda: append_line(book / glossary.TABLE, row))
    assert mentions(problems, glossary.TABLE, expected)


def test_missing_glossary_table(book):
    problems = new_problems(bookcheck.check_glossary, book, (book / glossary.TABLE).unlink)
    assert mentions(problems, glossary.TABLE, "missing")


def test_package_names_compare_like_pip():
    assert bookcheck.requirement_name("Matplotlib_Fontja>=1.0") == "matplotlib-fontja"
    assert bookcheck.requirement_name("quarto>=1.5") == "quarto-cli"
    assert bookcheck.requirement_name("PyYAML >=6 ; python_version>'3'") == "pyyaml"
    assert bookcheck.requirement_name("-e .") is None


# ---------------------------------------------------------------------------------------------
# sync_code


def test_sync_round_trip_keeps_translated_options(book, pair):
    en, ja = pair
    nb_en, nb_ja = nbformat.read(en, 4), nbformat.read(ja, 4)
    k, cell = next((k, c) for k, c in enumerate(sync_code.code_cells(nb_en))
                   if bookcheck.shared_code(c))
    cell.source += "\nedited = 'in English'"
    twin = sync_code.code_cells(nb_ja)[k]
    twin.source = '#| fig-cap: "日本語の説明"\n' + twin.source
    nbformat.write(nb_en, en)
    nbformat.write(nb_ja, ja)
    assert bookcheck.check_code_parity(book)  # out of step before the sync

    report = sync_code.run(en)

    synced = sync_code.code_cells(nbformat.read(ja, 4))[k]
    assert f"code cells {k + 1}" in report
    assert "edited = 'in English'" in synced.source
    assert '#| fig-cap: "日本語の説明"' in synced.source
    assert not synced.outputs
    assert bookcheck.check_code_parity(book) == []
    assert 'LANG = "ja"' in "".join(c.source for c in sync_code.code_cells(nbformat.read(ja, 4)))


def test_sync_refuses_misaligned_cells(book, pair):
    en, ja = pair
    nb = nbformat.read(en, 4)
    nb.cells.append(nbformat.v4.new_code_cell("print('new in English')"))
    nbformat.write(nb, en)
    with pytest.raises(sync_code.SyncError, match="new in English"):
        sync_code.run(en)


def test_sync_new_creates_twin(book):
    en = book / "chapters" / "en" / "96-new.ipynb"
    nbformat.write(synthetic_notebook("en"), en)
    assert sync_code.main([str(en), "--new"]) == 0
    ja = bookcheck.twin_path(book, en)
    twin = nbformat.read(ja, 4)
    assert not any(c.outputs for c in sync_code.code_cells(twin))
    assert bookcheck.lang_lines(read(ja)) == [(1, "ja")]
    assert sync_code.main([str(en), "--new"]) == 1  # never overwrites a twin


# ---------------------------------------------------------------------------------------------
# execute_notebooks


def test_execute_in_place(tmp_path):
    folder = tmp_path / "chapter"
    folder.mkdir()
    path = folder / "demo.ipynb"
    cell = new_code_cell("import os\nprint(os.path.basename(os.getcwd()))",
                         metadata={"tags": ["nbval-ignore-output"]})
    nbformat.write(new_notebook(cells=[cell]), path)

    execute_notebooks.execute(path, timeout=60)  # starts a real kernel, the one slow test here

    done = nbformat.read(path, 4).cells[0]
    assert done.outputs[0]["text"] == "chapter\n"  # ran in the notebook's folder
    assert done.metadata == {"tags": ["nbval-ignore-output"]}  # tags kept, no timing metadata


def test_execute_stops_on_failing_cell(tmp_path, monkeypatch):
    class FailingClient:
        """Stands in for nbclient's client: the second cell raises, as a real kernel would report."""

        def __init__(self, nb, on_cell_start, **kwargs):
            self.nb, self.on_cell_start = nb, on_cell_start

        def execute(self):
            self.on_cell_start(cell=self.nb.cells[1], cell_index=1)
            raise execute_notebooks.CellExecutionError("Traceback ...", "ZeroDivisionError",
                                                       "division by zero")

    path = tmp_path / "demo.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell("x = 1"), new_code_cell("1 / 0")]), path)
    before = path.read_bytes()
    monkeypatch.setattr(execute_notebooks, "NotebookClient", FailingClient)
    with pytest.raises(execute_notebooks.ExecutionFailed, match="(?s)demo.ipynb: cell 2 failed"):
        execute_notebooks.execute(path)
    assert path.read_bytes() == before  # a failed notebook is left as it was
    assert execute_notebooks.main([str(path)]) == 1


# ---------------------------------------------------------------------------------------------
# Site assets that run outside Python, when their runtimes are installed


def pandoc_command() -> list[str] | None:
    """Pandoc on PATH, or the one Quarto bundles (`quarto pandoc`), as the site build uses."""
    if shutil.which("pandoc"):
        return ["pandoc"]
    quarto = shutil.which("quarto") or ROOT / ".venv" / "bin" / "quarto"
    return [str(quarto), "pandoc"] if Path(quarto).exists() else None


@pytest.mark.skipif(pandoc_command() is None and os.environ.get("CI") != "true",
                    reason="pandoc is not installed (bash tools/setup.sh installs Quarto, which has it)")
def test_east_asian_line_break_filter():
    text = "日本語の文です。\n次の文です。\nEnglish\n続き。\n\n- 項目の\n  続き\n"
    pandoc = pandoc_command()
    assert pandoc, "pandoc is missing under CI"
    run = lambda *args: subprocess.run([*pandoc, "-t", "html", *args], input=text, text=True,
                                       capture_output=True, check=True).stdout
    filtered = run("--lua-filter", str(ROOT / "site" / "east-asian-line-breaks.lua"))
    assert "文です。次の文です。 English 続き。" in filtered.replace("\n", " ")
    assert filtered == run("-f", "markdown+east_asian_line_breaks")


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_language_switch_targets():
    html = (ROOT / "site" / "lang-switch.html").read_text(encoding="utf-8")
    script = html.split("<script>")[1].split("</script>")[0]
    twin = script[script.index("function twin"):script.index("function switchLink")]
    cases = {
        "/repo/en/": ["en", "/repo/ja/"],
        "/repo/ja/index.html": ["ja", "/repo/en/index.html"],
        "/repo/en/chapters/en/01-positional-encoding.html":
            ["en", "/repo/ja/chapters/ja/01-positional-encoding.html"],
        "/home/me/book/_site/ja/chapters/ja/02-x.html": ["ja", "/home/me/book/_site/en/chapters/en/02-x.html"],
        "/repo/": None,
    }
    program = ('var LANGS = {en: "English", ja: "日本語"};\n' + twin
               + f"console.log(JSON.stringify({json.dumps(list(cases))}.map(twin)));")
    out = subprocess.run(["node", "-e", program], text=True, capture_output=True, check=True).stdout
    assert json.loads(out) == list(cases.values())


# ---------------------------------------------------------------------------------------------
# The Colab install cell (tools/colab_cell.py)


class FakeShell:
    """Stands in for IPython's get_ipython(): records the line magics a cell runs."""

    def __init__(self):
        self.magics: list[tuple[str, str]] = []

    def run_line_magic(self, name: str, line: str) -> None:
        self.magics.append((name, line))


def run_colab_cell(monkeypatch, attnbook_installed: bool) -> list[tuple[str, str]]:
    """Run the cell as IPython would (magics transformed), with or without attnbook importable."""
    import importlib.util

    from IPython.core.inputtransformer2 import TransformerManager

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: (
        real_find_spec(name, *args) if attnbook_installed or name != "attnbook" else None))
    shell = FakeShell()
    code = TransformerManager().transform_cell(colab_cell.cell_source(ROOT))
    exec(compile(code, "<colab cell>", "exec"), {"get_ipython": lambda: shell})
    return shell.magics


def test_colab_cell_is_inert_where_attnbook_is_installed(monkeypatch):
    assert run_colab_cell(monkeypatch, attnbook_installed=True) == []


def test_colab_cell_installs_attnbook_from_the_repository_in_quarto_yml(monkeypatch):
    config = yaml.safe_load((ROOT / "_quarto.yml").read_text(encoding="utf-8"))["book"]
    url = config["repo-url"].removesuffix("/").removesuffix(".git")
    assert run_colab_cell(monkeypatch, attnbook_installed=False) == [
        ("pip", f'install --quiet "attnbook @ git+{url}@{config["repo-branch"]}"')]


def test_colab_cell_follows_the_repository(book, pair):
    en, _ = pair
    colab_cell.apply(en, book)
    config = book / "_quarto.yml"
    config.write_text(config.read_text(encoding="utf-8").replace(
        "repo-url: https://github.com/attnbook/attnbook", "repo-url: https://github.com/fork/attnbook"),
        encoding="utf-8")
    problems = bookcheck.check_colab_cell(book)
    assert mentions(problems, name(book, en), "python -m tools.colab_cell")
    assert colab_cell.apply(en, book) and "github.com/fork/attnbook@" in en.read_text(encoding="utf-8")
    assert not colab_cell.apply(en, book)  # already current


def test_colab_cell_must_come_first(book, pair):
    en, _ = pair
    nb = nbformat.read(en, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code"]
    nb.cells.remove(cells[0])
    nb.cells.append(cells[0])  # moved to the end
    nbformat.write(nb, en)
    assert mentions(bookcheck.check_colab_cell(book), name(book, en))


# ---------------------------------------------------------------------------------------------
# The commands a reader is told to type


def shell_commands(markdown: str) -> list[str]:
    """The commands of every ```bash block, without their comments."""
    blocks = re.findall(r"```bash\n(.*?)```", markdown, re.DOTALL)
    return [line.split("#")[0].strip() for block in blocks for line in block.splitlines()
            if line.split("#")[0].strip()]


@pytest.mark.parametrize("lang", bookcheck.LANGS)
def test_preface_commands_are_the_readmes(lang):
    readme = shell_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    preface = shell_commands((ROOT / "chapters" / lang / "_preface.qmd").read_text(encoding="utf-8"))
    assert preface and [c for c in preface if c not in readme] == []


def test_site_is_published_with_the_tested_quarto():
    setup = re.search(r"^QUARTO_VERSION=(\S+)", (ROOT / "tools" / "setup.sh").read_text("utf-8"), re.M)
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "publish.yml").read_text("utf-8"))
    steps = workflow["jobs"]["build"]["steps"]
    quarto = next(s for s in steps if str(s.get("uses", "")).startswith("quarto-dev/quarto-actions/setup"))
    assert str(quarto["with"]["version"]) == setup.group(1) == "1.7.34"
    assert any("pytest tests/test_site.py" in str(s.get("run", "")) for s in steps)


# ---------------------------------------------------------------------------------------------
# Japanese typography (the rule in the README's guide for authors)


@pytest.mark.parametrize("rule, broken, correct", [
    ("1 colon", "結果: 正解率は上がる。", "結果：正解率は上がる。"),
    ("1 colon", "**元記事:** 式が違う。", "**元記事**：式が違う。"),
    ("2 parentheses", "スケール化内積アテンション (scaled dot-product attention) を使う。",
     "スケール化内積アテンション（scaled dot-product attention）を使う。"),
    ("2 parentheses", "入力は (T, d) の行列です。", "入力は $(T, d)$ の行列、つまり `(T, d)` です。"),
    ("3 thousands separator", "系列長 131,072 まで測る。", "系列長 131072 まで測る。"),
    ("4 percent", "誤差は 0.5 % 以下です。", "誤差は 0.5% 以下です。"),
    ("5 counter", "方法はふたつあります。", "方法は 2 つあります。"),
    ("5 counter", "もう一つの方法です。", "もう 1 つの方法です。"),
    ("6 math list", "$Q$, $K$, $V$ を計算する。", "$Q$、$K$、$V$ を計算する。"),
    ("7 italics", "これは *重要* です。", "これは**重要**です。"),
    ("7 italics", "これは _重要_ です。", "これは「重要」です。"),
    ("8 space after bold", "**因果マスク** は未来を隠す。", "**因果マスク**は未来を隠す。"),
    ("9 line starts with 、/。", "行列 $A$ と $B$\n、そして $C$ を掛ける。", "行列 $A$ と $B$、\nそして $C$ を掛ける。"),
])
def test_typography_rule(book, pair, rule, broken, correct):
    _, ja = pair
    assert new_problems(bookcheck.check_typography, book, lambda: add_markdown(ja, correct)) == []
    problems = new_problems(bookcheck.check_typography, book, lambda: add_markdown(ja, broken))
    cell = len(read(ja)["cells"])
    line = 2 if rule.startswith("9") else 1
    assert mentions(problems, name(book, ja), f"(cell {cell}, line {line})", f"rule {rule}:"), problems


def test_typography_skips_what_is_not_japanese_prose(book, pair):
    en, ja = pair
    text = ("コードの `f(x): int` と数式 $f(x) = 1{,}000$ と [リンク](https://example.org/a_(b)) と"
            " <https://example.org/x:y> と [@vaswani2017] は対象外です。\n\n"
            "```python\nprint('結果: (1,000)')\n```\n\n"
            "Attention (in English): 1,000 tokens, 5 %.\n\n"
            "| English (term) | 日本語 |\n|:---|:---|\n| a (b) | アテンション |\n\n"
            ": 表の説明。 {#tbl-demo}\n\n::: {.callout-note}\n注意書きです。\n:::")
    assert new_problems(bookcheck.check_typography, book, lambda: add_markdown(ja, text)) == []
    assert new_problems(bookcheck.check_typography, book, lambda: add_markdown(en, "結果: (1,000)")) == []


def test_typography_in_captions_and_pages(book, pair):
    _, ja = pair

    def caption(nb):
        cell = plain_code_cell(nb)
        cell["source"] = '#| fig-cap: "時間 (秒)"\n' + "".join(cell["source"])

    problems = new_problems(bookcheck.check_typography, book, lambda: edit(ja, caption))
    assert mentions(problems, name(book, ja), "line 1)", "rule 2 parentheses")
    preface = book / "chapters" / "ja" / "_preface.qmd"
    lines = len(preface.read_text(encoding="utf-8").splitlines())
    problems = new_problems(bookcheck.check_typography, book, lambda: append_line(
        preface, "\n本書の目的: アテンションを理解する。"))
    assert mentions(problems, "chapters/ja/_preface.qmd", f"(line {lines + 2})", "rule 1 colon")
