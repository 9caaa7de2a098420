"""attnbook.cost under bad input: each error names its argument (issue 10)."""

import jax
import jax.numpy as jnp
import pytest

from attnbook import cost

SPEC = jax.ShapeDtypeStruct((16, 4), jnp.float32)


def scores(q, k):
    return q @ k.T


def scaled(x, factor):
    return x * factor


@pytest.mark.parametrize(
    "call, kind, match",
    [
        (lambda: cost.compiled(None, SPEC, SPEC), TypeError, "fn must be a function, got NoneType"),
        (lambda: cost.temporary_bytes("scores", SPEC, SPEC), TypeError, "fn must be a function, got str"),
        # a shape where a ShapeDtypeStruct was meant: would have been traced as two integer scalars
        (lambda: cost.temporary_bytes(scores, (16, 4), SPEC), TypeError,
         r"args\[0\] must be arrays or jax.ShapeDtypeStruct.*got int 16"),
        (lambda: cost.compiled(scaled, SPEC, 2.0), TypeError, r"args\[1\] must be arrays.*static_argnames.*float 2.0"),
        (lambda: cost.compiled(scores, SPEC, SPEC, all_buffers="yes"), TypeError, "all_buffers must be True or False"),
        (lambda: cost.compiled(scaled, SPEC, 2.0, static_argnames=1), TypeError, "static_argnames must be a name"),
        (lambda: cost.median_seconds(None), TypeError, "fn must be a function"),
        (lambda: cost.median_seconds(jnp.sin, jnp.ones(3), repeats=0), ValueError, "repeats.*0"),
        (lambda: cost.median_seconds(jnp.sin, jnp.ones(3), repeats=2.5), TypeError, "repeats.*2.5"),
        (lambda: cost.median_seconds(jnp.sin, jnp.ones(3), warmup=-1), ValueError, "warmup.*-1"),
        (lambda: cost.median_seconds(jnp.sin, jnp.ones(3), warmup=None), TypeError, "warmup.*None"),
    ],
)
def test_bad_arguments(call, kind, match):
    with pytest.raises(kind, match=match):
        call()


def test_valid_arguments():
    assert cost.temporary_bytes(scores, SPEC, SPEC) >= 0
    assert cost.temporary_bytes(scores, jnp.ones((16, 4)), jnp.ones((16, 4)), all_buffers=False) >= 0
    for names in ("factor", ("factor",)):  # Python values through static_argnames, by position or keyword
        program = cost.compiled(scaled, SPEC, 2.0, static_argnames=names)
        assert program(jnp.ones((16, 4)))[0, 0] == 2.0
    assert cost.compiled(jax.jit(scores), SPEC, SPEC) is not None  # an already jitted function
    assert cost.median_seconds(jax.jit(jnp.sin), jnp.ones(3), repeats=2, warmup=0) >= 0


@pytest.mark.parametrize(
    "call, kind, match",
    [
        (lambda: cost.attention_flops(0, 4, 8), ValueError, "tq must be a positive integer, got 0"),
        (lambda: cost.attention_flops(4, 4.0, 8), TypeError, "tk must be a positive integer, got float 4.0"),
        (lambda: cost.attention_flops(4, 4, 8, backward=1), TypeError, "backward must be True or False"),
        (lambda: cost.attention_flops(4, 4, 8, causal="no"), TypeError, "causal must be True or False"),
        (lambda: cost.attention_bytes(4, 4, 8, query_block=0), ValueError, "query_block must be a positive integer"),
        (lambda: cost.attention_bytes(4, 4, -8), ValueError, "d must be a positive integer, got -8"),
        (lambda: cost.attention_bytes(4, 4, 8, itemsize=2.0), TypeError, "itemsize must be a positive integer"),
        (lambda: cost.attention_bytes(4, 4, 8, score_trips=0), ValueError, "score_trips must be a positive integer"),
        (lambda: cost.attention_flops(4, 4, 8, recomputed_scores=True), ValueError, "recomputed_scores.*backward=True"),
        (lambda: cost.attention_flops(4, 4, 8, recomputed_forward=True), ValueError, "recomputed_forward.*backward=True"),
        (lambda: cost.attention_flops(4, 4, 8, backward=True, recomputed_scores=None), TypeError,
         "recomputed_scores must be True or False"),
    ],
)
def test_bad_sizes_of_the_hardware_counts(call, kind, match):
    with pytest.raises(kind, match=match):
        call()
