"""attnbook.report: the message catalogue and the result tables that chapters print through."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import plotting, report
from attnbook.attention import SelfAttention, softmax_gradient_norm
from attnbook.report import Table, parse_po, t
from tools import messages


@pytest.fixture
def japanese():
    plotting.setup("ja")
    yield
    plotting.setup("en")


def test_po_parser_reads_continued_strings_escapes_and_skips_the_header():
    text = ('# a comment\nmsgid ""\nmsgstr "Language: ja\\n"\n\n#: ch2\nmsgid "a \\"quoted\\" "\n"line"\n'
            'msgstr "「引用」"\n"の行"\n')
    assert parse_po(text) == {'a "quoted" line': "「引用」の行"}
    with pytest.raises(ValueError, match="twice"):
        parse_po('msgid "a"\nmsgstr "x"\nmsgid "a"\nmsgstr "y"\n')
    with pytest.raises(ValueError, match="not PO syntax"):
        parse_po("msgid a\n")


def test_every_message_a_chapter_prints_is_translated_and_every_entry_is_used():
    """Both editions stay complete: a message of a chapter's code missing from ja.po, an empty translation,
    a translation with other placeholders, or an entry no chapter prints fails here (tools.messages)."""
    assert messages.problems() == []


def test_messages_are_found_in_code():
    code = 'print(t("a {x}", x=1))\nTable(["col", "other"], rows)\nt(f"not {this}")\n%time t("magic")'
    assert sorted(messages.messages_in_code(code)) == ["a {x}", "col", "other"]


def test_t_translates_fills_placeholders_and_refuses_unknown_messages(japanese):
    assert t("weight") == "重み"
    assert t("weight", lang="en") == "weight"
    assert t("linear model, T = {T}", T=10) == "線形モデル、T = 10"
    for lang in ("en", "ja"):  # a message missing from the catalogue fails in both editions
        with pytest.raises(KeyError, match="not in the catalogue"):
            t("a sentence nobody translated", lang=lang)


def test_table_markdown_and_text_forms(japanese):
    table = Table(["process", "weight"], [("Markov", 0.5), ("dotmod", None)], formats=[None, ".2f"])
    assert table._repr_markdown_() == "| 生成過程 | 重み |\n|---|---:|\n| Markov | 0.50 |\n| dotmod | – |"
    # text form: columns aligned, a wide character counting two columns, numbers to the right
    assert repr(table).split("\n") == ["生成過程  重み", "Markov    0.50", "dotmod       –"]
    with pytest.raises(ValueError, match="row 0 has 1 values"):
        Table(["process", "weight"], [("Markov",)])
    with pytest.raises(KeyError, match="not in the catalogue"):
        Table(["no such column"], [])


def test_softmax_gradient_norm_is_the_norm_of_the_jacobian():
    scores = 4.0 * jax.random.normal(jax.random.key(0), (6, 9))
    jacobians = jax.vmap(jax.jacobian(jax.nn.softmax))(scores)
    expected = jnp.sqrt((jacobians**2).sum(axis=(1, 2)))
    np.testing.assert_allclose(softmax_gradient_norm(jax.nn.softmax(scores)), expected, rtol=1e-5, atol=1e-7)
    one_hot = jnp.array([[1.0, 0.0, 0.0]])  # saturated: zero gradient, not NaN
    assert softmax_gradient_norm(one_hot)[0] == 0.0


def test_last_token_is_the_last_row_of_the_output():
    layer = SelfAttention(4, 6, 3, key=jax.random.key(0))
    x = jax.random.normal(jax.random.key(1), (10, 4))
    assert jnp.array_equal(layer.last_token(x), layer(x)[0][-1])


def test_a_count_of_bytes_is_printed_in_the_largest_binary_unit_it_fills():
    table = Table(["KV cache"], [[512], [1024], [4864], [525056], [67112960], [3 * 1024 ** 3], [2**41]], formats=["bytes"])
    assert [row[0] for row in table.rows] == ["0.5 KiB", "1 KiB", "4.75 KiB", "513 KiB", "64 MiB", "3 GiB", "2 TiB"]
    assert report.binary_size(2**26) == "64 MiB"
    with pytest.raises(ValueError, match="negative"):
        Table(["KV cache"], [[-1]], formats=["bytes"])


def test_mean_range_prints_the_mean_and_the_lowest_and_highest_seed():
    assert report.mean_range([0.24, 0.26, 0.25]) == "0.25 (0.24–0.26)"
    assert report.mean_range(np.array([[1.0, 3.0]]), ".1f") == "2.0 (1.0–3.0)"
    assert report.mean_range(np.array([0.7049])) == "0.70"  # one value: no range
    with pytest.raises(ValueError, match="at least one"):
        report.mean_range([])


def test_mean_range_on_a_japanese_page_has_full_width_brackets(japanese):
    # the Japanese edition's typography (README): full-width brackets, no space before them, in printed output too
    assert report.mean_range([0.24, 0.26, 0.25]) == "0.25（0.24–0.26）"
    assert report.mean_range([0.24, 0.26, 0.25], lang="en") == "0.25 (0.24–0.26)"
    assert report.mean_range([-0.1, 0.3], "+.1f") == "+0.1（-0.1–+0.3）"
    table = repr(Table(["model", "loss"], [("RoPE", report.mean_range([1.0, 3.0], ".1f"))]))
    assert "2.0（1.0–3.0）" in table and "(" not in table
