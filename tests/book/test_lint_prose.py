"""tools.lint_prose: textlint over the Japanese edition, codespell over the English one and the code."""

from pathlib import Path

from tools import lint_prose
from tools.lint_prose import Block

ROOT = Path(__file__).resolve().parents[2]


def test_markdown_for_textlint_hides_math_code_and_tables():
    text = "行列 $X W_Q$ と `np.outer` を使います。\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n$$\nQ = X W_Q\n$$\n"
    out = lint_prose.textlint_markdown(text)
    assert "W_Q" not in out and "np.outer" not in out and "|" not in out
    assert out.count(lint_prose.PLACEHOLDER) == 3
    assert out.split("\n")[6] == lint_prose.PLACEHOLDER  # line numbers are kept: the display math is on line 7


def test_textlint_finds_what_the_book_forbids_and_points_at_the_cell():
    """The linter can fail: a wrong spelling, a sentence of over 100 characters, だ/である in a です/ます text."""
    notebook = ROOT / "chapters" / "ja" / "made-up.ipynb"
    long = "この文は長すぎます" + "、そしてまだ続きます" * 12 + "。"
    blocks = [Block(notebook, "cell 3, ", "この層は性質をもちます。\n\n位置は行で表します。行はトークンです。これは約束である。"),
              Block(notebook, "cell 5, ", long)]
    found = lint_prose.run_textlint(ROOT, blocks)
    assert any("cell 3, line 1" in f and "[prh]" in f and "持つ（もつ とは書きません）" in f for f in found), found
    assert any("cell 3, line 3" in f and "[no-mix-dearu-desumasu]" in f for f in found), found
    assert any("cell 5, line 1" in f and "[sentence-length]" in f for f in found), found
    assert all(f.startswith("chapters/ja/made-up.ipynb (cell ") for f in found), found


def test_textlint_finds_the_drift_of_chapters_9_to_11():
    """prh.yml's rules for issue 43's drift classes: め as a counter, 特徴 as a counter of a head's features,
    x for times. (値 for value and 復号 are the glossary's: tests/book/test_glossary.py.)"""
    notebook = ROOT / "chapters" / "ja" / "made-up.ipynb"
    blocks = [Block(notebook, "cell 1, ", "2 回めの実行です。"), Block(notebook, "cell 2, ", "8 特徴のヘッドです。"),
              Block(notebook, "cell 3, ", "キャッシュは 2.0x 小さくなります。"),
              Block(notebook, "cell 4, ", "2 回目の実行で、8 次元のヘッドと 7 特徴量のトークンを 2.0 倍にします。")]
    found = lint_prose.run_textlint(ROOT, blocks)
    for cell, expected in (("cell 1,", "2 回目"), ("cell 2,", "8 次元"), ("cell 3,", "2.0 倍")):
        assert any(cell in f and "[prh]" in f and expected in f for f in found), found
    assert not any("cell 4," in f for f in found), found


def test_textlint_accepts_the_exceptions_the_configuration_justifies():
    block = Block(ROOT / "x.qmd", "", "クエリもキーも 1 つのトークンから作ります。（b）各ステップは $n$ 個のスコアを計算します。")
    assert lint_prose.run_textlint(ROOT, [block]) == []


def test_the_japanese_edition_passes_textlint():
    found = lint_prose.run_textlint(ROOT, lint_prose.japanese_blocks(ROOT))
    assert not found, "\n".join(found)


def test_codespell_finds_a_misspelling(tmp_path, monkeypatch):
    bad = tmp_path / "bad.py"
    bad.write_text("# the attention " + "wie" + "ghts\n", encoding="utf-8")  # spelt out here, codespell reads this file
    monkeypatch.setattr(lint_prose, "english_sources", lambda root, out: [bad])
    found = lint_prose.run_codespell(ROOT)
    assert len(found) == 1 and "ghts ==> weights" in found[0], found


def test_the_english_edition_and_the_code_pass_codespell():
    found = lint_prose.run_codespell(ROOT)
    assert not found, "\n".join(found)
