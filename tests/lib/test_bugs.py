"""attnbook.bugs: every buggy version of the appendix fails its property, every correct version passes it.

Where an older test already checks the same property of the library, this file checks only that the property
function catches the bug (and passes the library, which is the property's own test); the older tests stay
where they are:

- future tokens: tests/lib/test_attention.py::test_causal_mask_blocks_gradient_from_the_future (the gradient
  form), tests/lib/test_transformer.py::test_decoder_does_not_look_ahead;
- fully masked rows: tests/lib/test_attention.py::test_fully_masked_row_is_zero_with_finite_gradients;
- window semantics: tests/lib/test_masking_sliding_window.py (the naive loop, ``min(i + 1, window)`` keys);
- RoPE's relative property and pair layout: tests/lib/test_positional.py::test_rope_relative_dot_products,
  ::test_rope_matches_rotation_of_pairs;
- YaRN: tests/lib/test_positional_scaling.py::test_yarn_matches_the_authors_code,
  ::test_yarn_keeps_high_frequencies_and_interpolates_low_ones;
- the cache: tests/lib/test_transformer.py::test_cached_decoding_equals_recomputing (one token at a time);
- half precision: tests/lib/test_attention.py::test_large_scores_stay_finite.

New here: queries after a cache (``Tq < Tk``), the cache trimmed to a window, split halves against adjacent
pairs, dropout, and a cache after a prefill of several tokens.
"""

import ast
import inspect
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import bugs
from attnbook.attention import masked_softmax
from attnbook.masking import sliding_window_mask
from attnbook.positional import rope

CASES = [
    # (property, buggy versions, correct versions)
    (bugs.future_tokens_do_not_leak, [bugs.attention_with_mha_style_mask], [bugs.causal_attention]),
    (bugs.fully_masked_rows_are_zero, [bugs.softmax_filled_with_large_negative, bugs.softmax_filled_with_minus_inf],
     [masked_softmax]),
    (bugs.queries_after_a_cache_see_their_past, [bugs.top_left_causal_attention], [bugs.cached_causal_attention]),
    (bugs.window_semantics, [bugs.window_mask_one_too_wide], [sliding_window_mask]),
    (bugs.trimmed_cache_matches_window, [bugs.decode_ignoring_the_window, bugs.decode_with_window_plus_one],
     [bugs.decode_with_trimmed_cache]),
    (bugs.rope_scores_depend_on_offset_only, [bugs.rope_rotate_half_interleaved_angles],
     [rope, bugs.rope_rotate_half]),
    (bugs.rope_convention, [bugs.rope_rotate_half_interleaved_angles, bugs.rope_rotate_half], [rope]),
    (bugs.yarn_keeps_the_fastest_pair, [bugs.yarn_as_position_division], [bugs.yarn_rope]),
    (bugs.dropout_weights_sum, [bugs.dropout_without_rescaling, bugs.dropout_before_the_softmax],
     [bugs.equinox_dropout]),
    (bugs.cache_matches_recompute, [bugs.cached_rope_step_from_zero], [bugs.cached_rope_step]),
    (bugs.half_precision_softmax, [bugs.float16_softmax_unshifted, bugs.float16_softmax_minus_1e9],
     [masked_softmax]),
]


def ids(cases, which):
    return [f"{prop.__name__}-{version.__name__}" for prop, *versions in cases for version in versions[which]]


BUGGY = [(prop, version) for prop, buggy, _ in CASES for version in buggy]
CORRECT = [(prop, version) for prop, _, correct in CASES for version in correct]


@pytest.mark.parametrize(("prop", "version"), BUGGY, ids=ids(CASES, 0))
def test_buggy_version_fails_its_property(prop, version):
    finding = prop(version)
    assert not finding.holds
    assert not np.isfinite(finding.deviation) or finding.deviation > 4 * finding.tolerance  # by a margin
    assert str(finding).startswith("✗")


@pytest.mark.parametrize(("prop", "version"), CORRECT, ids=ids(CASES, 1))
def test_correct_version_passes_its_property(prop, version):
    finding = prop(version)
    assert finding.holds, finding
    assert str(finding) == f"✓ ≤ {finding.tolerance:g}"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_findings_do_not_depend_on_the_seed(seed):
    for prop, buggy, correct in CASES:
        if "seed" not in prop.__code__.co_varnames:
            continue
        assert not any(prop(version, seed=seed).holds for version in buggy), prop.__name__
        assert all(prop(version, seed=seed).holds for version in correct), prop.__name__


def test_a_mask_in_the_multihead_convention_works_once_inverted():
    inverted = lambda q, k, v: bugs.scaled_dot_product_attention(  # noqa: E731
        q, k, v, mask=~jnp.triu(jnp.ones((len(q), len(k)), dtype=bool), k=1))[0]
    assert bugs.future_tokens_do_not_leak(inverted).holds


def test_split_halves_are_adjacent_pairs_with_the_features_reordered():
    x = jax.random.normal(jax.random.key(0), (8, 8))
    order = bugs.split_half_order(8)
    np.testing.assert_allclose(bugs.rope_rotate_half(x[:, order]), np.asarray(rope(x))[:, order], atol=1e-6)


def test_correct_dropout_may_sum_above_one_in_a_row():
    assert bugs.largest_row_sum() == pytest.approx(1 / (1 - 0.1), rel=1e-6)


def test_check_prints_one_row_per_version(capsys):
    bugs.check(bugs.window_semantics, bugs.window_mask_one_too_wide, sliding_window_mask)
    assert capsys.readouterr().out.splitlines() == [
        "window_semantics", "  window_mask_one_too_wide  ✗ 5", "  sliding_window_mask       ✓ ≤ 0"]


def test_a_table_too_wide_for_a_phone_puts_each_finding_under_its_name(capsys):
    bugs.check(bugs.fully_masked_rows_are_zero, bugs.softmax_filled_with_large_negative)
    assert capsys.readouterr().out.splitlines() == [
        "fully_masked_rows_are_zero", "  softmax_filled_with_large_negative", "    ✗ 0.25"]


def test_a_nan_is_a_failure():
    assert not bugs.Finding(float("nan"), 1.0).holds
    assert str(bugs.Finding(float("nan"), 1.0)) == "✗ nan"


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_appendix_shows_the_librarys_buggy_versions_verbatim(lang):
    """Every function the appendix defines is, character for character, the one of attnbook.bugs that the tests
    above show failing; and every buggy version tested here is shown in the appendix."""
    path = Path(__file__).resolve().parents[2] / "chapters" / lang / "bugs.ipynb"
    shown = {}
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        if source.lstrip().startswith(("#|", "%")):
            continue
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef):
                shown[node.name] = "\n".join(source.splitlines()[node.lineno - 1:node.end_lineno])
    for name, text in shown.items():
        if not hasattr(bugs, name):  # an exercise's starter or solution
            continue
        assert text == inspect.getsource(getattr(bugs, name)).rstrip("\n"), name
    assert {version.__name__ for _, version in BUGGY} <= set(shown)
