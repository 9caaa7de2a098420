"""The checks of the book's structure (tools/bookcheck.py).

Every check runs on the real repository, where it must find nothing, and on a copy of the book in
tmp_path that one test breaks on purpose, where it must report the broken file (the copies:
tests/book_copy.py, tests/conftest.py). The glossary's check is tested in tests/book/test_glossary.py,
the Colab cell's in tests/book/test_colab_cell.py.
"""

from __future__ import annotations

import shutil

import pytest
import yaml
from nbformat.v4 import new_code_cell

from book_copy import (ROOT, add_markdown, append_line, edit, mentions, name, new_problems, plain_code_cell,
                       read)
from tools import bookcheck
from tools.book import documents, twin_pairs


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
    first, second = (p for p, _ in list(twin_pairs(book))[:2])
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


def test_included_file_needs_root_links(book):
    preface = book / "chapters" / "en" / "_preface.qmd"
    problems = new_problems(bookcheck.check_includes, book, lambda: preface.write_text(
        preface.read_text(encoding="utf-8") + "\n[relative](01-anything.ipynb)\n", encoding="utf-8"))
    assert mentions(problems, "chapters/en/_preface.qmd", "must start with /")


def test_missing_include(book):
    index = book / "index.qmd"
    problems = new_problems(bookcheck.check_includes, book, lambda: index.write_text(
        index.read_text(encoding="utf-8") + "\n{{< include chapters/en/_gone.qmd >}}\n", encoding="utf-8"))
    assert mentions(problems, "index.qmd", "_gone.qmd")


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
    pages = [p for p in documents(book) if bookcheck.REFS_DIV.search(p.read_text(encoding="utf-8"))]
    assert pages  # the real book has a references page per language

    def remove_refs_divs():
        for page in pages:
            page.write_text(bookcheck.REFS_DIV.sub("::: {#not-refs}", page.read_text(encoding="utf-8")),
                            encoding="utf-8")

    problems = new_problems(bookcheck.check_bibliography_page, book, remove_refs_divs)
    assert mentions(problems, "_quarto-en.yml", "{#refs}")
    assert mentions(problems, "_quarto-ja.yml", "{#refs}")




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



def test_package_names_compare_like_pip():
    assert bookcheck.requirement_name("Matplotlib_Fontja>=1.0") == "matplotlib-fontja"
    assert bookcheck.requirement_name("quarto>=1.5") == "quarto-cli"
    assert bookcheck.requirement_name("PyYAML >=6 ; python_version>'3'") == "pyyaml"
    assert bookcheck.requirement_name("-e .") is None


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
    ("10 bold that cannot close", "**うまくいきます。**5 つのモデルは学習します。", "**うまくいきます**。5 つのモデルは学習します。"),
    ("10 bold that cannot close", "前の文です。**どこでも同じ規則です。**データは同じです。",
     "前の文です。**どこでも同じ規則です**。データは同じです。**$L$ より先でも**同じです。"),
    ("10 bold that cannot close", "これは**「重要」**です。", "これは「**重要**」です。"),
    ("10 bold that cannot close", "前の文です。** 太字の文です**。", "前の文です。**太字の文です**。"),
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


@pytest.mark.parametrize("text, joined", [
    ("ステップごとに計算し\nます。", "ステップごとに計算します。"),
    ("計算します。\nPress を押します。", "計算します。Press を押します。"),  # next to 。 the break goes
    ("**太字の\n**続きと [リンクの\n文](a.ipynb#sec-x)です。", "**太字の**続きと [リンクの文](a.ipynb#sec-x)です。"),
    ("* 項目の\n  続きです。", "* 項目の続きです。"),
    ("`jax.jit` を使い\nます。", "`jax.jit` を使います。"),
])
def test_join_japanese_lines(text, joined):
    assert bookcheck.join_japanese_lines(text) == joined


@pytest.mark.parametrize("text", [
    "`jax.jit` を\n`jax.vmap` と使います。",  # a space belongs between Japanese and code
    "英語の term\nです。",
    "段落です。\n\n次の段落です。",
    "```python\n# コメント\n# 続き\n```",
    "$$\nあ\nい\n$$",
    "| 列 |\n|:---|\n| 値 |",
    "## 見出し\n本文です。",
    "本文です。\n* 項目です。",
])
def test_join_japanese_lines_keeps_other_breaks(text):
    assert bookcheck.join_japanese_lines(text) == text


def test_japanese_line_break_in_a_notebook(book, pair):
    en, ja = pair
    problems = new_problems(bookcheck.check_japanese_line_breaks, book, lambda: add_markdown(ja, "一行目の文は\n二行目で終わります。"))
    assert mentions(problems, name(book, ja), f"(cell {len(read(ja)['cells'])}, line 1)", "join the lines"), problems
    assert new_problems(bookcheck.check_japanese_line_breaks, book, lambda: add_markdown(en, "一行目の\n二行目")) == []


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


def test_caption_style(book, pair):
    """Rule 11: captions and alt text in the plain form; the English edition is not read."""
    en, ja = pair

    def captions(polite):
        def change(nb):
            cell = plain_code_cell(nb)
            cap = "損失を描きます。点線は一様な推測です。" if polite else "損失を描いた。点線は一様な推測。"
            alt = "2 本の線があります。" if polite else "2 本の線がある。"
            cell["source"] = f'#| fig-cap: "{cap}"\n#| fig-alt: "{alt}"\n' + "".join(cell["source"])
        return change

    problems = new_problems(bookcheck.check_caption_style, book, lambda: edit(ja, captions(True)))
    assert mentions(problems, name(book, ja), "rule 11 fig-cap", "'ます'")
    assert mentions(problems, name(book, ja), "rule 11 fig-alt", "'ます'")
    assert new_problems(bookcheck.check_caption_style, book, lambda: edit(ja, captions(False))) == []
    assert new_problems(bookcheck.check_caption_style, book, lambda: edit(en, captions(True))) == []


def test_japanese_output_typography(book, pair):
    """A Japanese page prints Japanese punctuation and breaks its lines between phrases (issue 43's findings)."""
    _, ja = pair
    bad = ["コードのみ、2 層:", "  1.60; 1.63 -> 1.65", "RoPE（そのまま）, k = 1：", "利得が半分", "未満になる",
           "キーバイアスの 10", "倍以上：True", "保存", "した MHA"]
    good = ["コードのみ、2 層：", "  1.60、1.63 → 1.65", "T = 256, w = 2:", "半分未満になる", "シード 0：0.83"]
    problems = new_problems(bookcheck.check_japanese_outputs, book, lambda: edit(
        ja, lambda nb: plain_code_cell(nb)["outputs"].append(
            {"output_type": "stream", "name": "stdout", "text": ["\n".join(bad + ["", ""] + good) + "\n"]})))
    assert mentions(problems, name(book, ja), "ASCII ':' in a Japanese output", "コードのみ、2 層:")
    assert mentions(problems, "ASCII '->', ';' in a Japanese output", "1.60; 1.63")
    assert mentions(problems, "ASCII ',' in a Japanese output", "RoPE（そのまま）, k")
    for before, after in (("利得が半分", "未満になる"), ("キーバイアスの 10", "倍以上：True"), ("保存", "した MHA")):
        assert mentions(problems, "inside a word", repr(before), repr(after)), problems
    assert len(problems) == 6, problems  # nothing in the good lines: full-width marks, ASCII after Latin text


def test_japanese_output_ranges_in_full_width_brackets(book, pair):
    """A mean and its seed range print 「1.02（0.89–1.10）」 on a Japanese page, in a stream and in a Markdown table
    (issue 43: half- and full-width brackets were mixed in the tables of chapters 9-11)."""
    en, ja = pair
    bad = ["素の RoPE  1.02 (0.89–1.10)", "利得 +0.43 (+0.43–+0.44)"]
    good = ["素の RoPE  1.02（0.89–1.10）", "入力 (128, 256)、正解 (128, 256)", "4  (6, 4, 8)  4224", "a (1–2)"]

    def outputs(nb):
        cell = plain_code_cell(nb)
        cell["outputs"].append({"output_type": "stream", "name": "stdout", "text": ["\n".join(bad + good) + "\n"]})
        table = "| モデル | 差 |\n|---|---|\n| ALiBi | 0.14 (0.12–0.17) |\n| YaRN | 0.07（0.05–0.10） |"
        cell["outputs"].append({"output_type": "display_data", "metadata": {},
                                "data": {"text/markdown": [table], "text/plain": ["a table"]}})

    problems = new_problems(bookcheck.check_japanese_outputs, book, lambda: edit(ja, outputs))
    assert mentions(problems, name(book, ja), "range in half-width brackets", "1.02 (0.89–1.10)")
    assert mentions(problems, "range in half-width brackets", "+0.43 (+0.43–+0.44)")
    assert mentions(problems, "range in half-width brackets", "| ALiBi | 0.14 (0.12–0.17) |")
    assert len(problems) == 3, problems  # not the good lines: shapes, full-width ranges, a range after a letter
    assert new_problems(bookcheck.check_japanese_outputs, book, lambda: edit(en, outputs)) == []  # English as it is


def test_figure_outputs(book, pair):
    """A figure cell that also displays a table is found (it becomes a sub-figure, and a duplicate id in the EPUB)."""
    en, _ = pair

    def outputs(count):
        def change(nb):
            cell = plain_code_cell(nb)
            cell["source"] = "#| label: fig-broken\n" + "".join(cell["source"])
            shown = {"output_type": "display_data", "metadata": {}, "data": {"text/plain": ["<Figure>"]}}
            cell["outputs"] = [dict(shown) for _ in range(count)]
        return change

    problems = new_problems(bookcheck.check_figure_outputs, book, lambda: edit(en, outputs(2)))
    assert mentions(problems, name(book, en), "a figure cell displays 2 outputs")
    assert new_problems(bookcheck.check_figure_outputs, book, lambda: edit(en, outputs(1))) == []
