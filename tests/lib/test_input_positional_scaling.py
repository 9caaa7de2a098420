"""Chapter 9's RoPE scalings under bad input: each error names its argument, also under jit (issue 25)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import positional as P


@pytest.mark.parametrize(
    "call, kind, match",
    [
        (lambda: P.PositionInterpolation(0.5), ValueError, r"scale must be >= 1.*0.5"),
        (lambda: P.PositionInterpolation(0.0), ValueError, "scale.*0.0"),
        (lambda: P.PositionInterpolation(-2.0), ValueError, "scale.*-2.0"),
        (lambda: P.PositionInterpolation(float("nan")), ValueError, "scale.*nan"),
        (lambda: P.PositionInterpolation(float("inf")), ValueError, "scale.*inf"),
        (lambda: P.PositionInterpolation("4"), TypeError, "scale"),
        (lambda: P.PositionInterpolation(True), TypeError, "scale"),
        (lambda: P.NTKAwareScaling(0.9), ValueError, "scale.*0.9"),
        (lambda: P.NTKAwareScaling(None), TypeError, "scale"),
        (lambda: P.NTKAwareScaling(2.0).frequencies(2), ValueError, "d.*>= 4.*2"),
        (lambda: P.NTKAwareScaling(2.0).frequencies(7), ValueError, "d.*even.*7"),
        (lambda: P.NTKAwareScaling(2.0).frequencies(8, base=0.0), ValueError, "base.*0.0"),
        (lambda: P.PositionInterpolation(2.0).frequencies(5), ValueError, "d.*even.*5"),
        (lambda: P.PositionInterpolation(2.0).frequencies(2.0), TypeError, "d"),
        (lambda: P.YaRNScaling(4.0, 0), ValueError, "original_length.*0"),
        (lambda: P.YaRNScaling(4.0, 32.0), TypeError, "original_length"),
        (lambda: P.YaRNScaling(4.0), TypeError, "original_length"),
        (lambda: P.YaRNScaling(0.25, 32), ValueError, "scale.*0.25"),
        (lambda: P.YaRNScaling(4.0, 32, alpha=32.0, beta=1.0), ValueError, "alpha must be below beta"),
        (lambda: P.YaRNScaling(4.0, 32, alpha=0.0), ValueError, "alpha.*0.0"),
        (lambda: P.YaRNScaling(4.0, 32, beta=float("inf")), ValueError, "beta.*inf"),
        (lambda: P.YaRNScaling(4.0, 32).frequencies(9), ValueError, "d.*even.*9"),
        (lambda: P.YaRNScaling(4.0, 32).frequencies(8, base=-1.0), ValueError, "base.*-1.0"),
        (lambda: P.rope(jnp.ones((4, 8)), scaling=4.0), TypeError, "scaling.*PositionInterpolation"),
        (lambda: P.rope(jnp.ones((4, 8)), scaling="yarn"), TypeError, "scaling"),
        (lambda: P.rope_heads(jnp.ones((4, 2, 8)), jnp.ones((4, 2, 8)), jnp.ones((4, 2, 8)), scaling=2),
         TypeError, "scaling"),
        (lambda: P.scaled_rope_heads("pi"), TypeError, "scaling"),
        (lambda: P.rope(jnp.ones((4, 2)), scaling=P.NTKAwareScaling(2.0)), ValueError, "d.*>= 4"),
        (lambda: P.rope(jnp.ones((4, 7)), scaling=P.NTKAwareScaling(2.0)), ValueError, "even.*7"),
        (lambda: P.rope(jnp.ones((4, 8), dtype=jnp.int32), scaling=P.YaRNScaling(2.0, 4)), TypeError, "x.*float"),
    ],
)
def test_bad_arguments(call, kind, match):
    with pytest.raises(kind, match=match):
        call()


def test_scalings_are_frozen():
    scaling = P.YaRNScaling(4.0, 32)
    with pytest.raises(Exception, match="cannot assign"):
        scaling.scale = 8.0


def test_bad_scaling_is_a_clear_error_under_jit():
    """The scaling is a Python value, static under jit: the error is raised while tracing, with the same message."""
    x = jnp.ones((4, 8))
    with pytest.raises(TypeError, match="scaling must be None, a PositionInterpolation"):
        jax.jit(lambda x: P.rope(x, scaling=2.0))(x)
    with pytest.raises(TypeError, match="scaling must be None, a PositionInterpolation.*RopeScaling"):
        P.rope(x, scaling=P.RopeScaling(2.0))  # the shared base of the three, no scaling of its own
    with pytest.raises(ValueError, match="even.*7"):
        jax.jit(lambda x: P.rope(x, scaling=P.YaRNScaling(2.0, 4)))(jnp.ones((4, 7)))
    with pytest.raises(ValueError, match="scale must be >= 1"):
        jax.jit(lambda x: P.rope(x, scaling=P.PositionInterpolation(0.5)))(x)


@pytest.mark.parametrize("scaling", [P.PositionInterpolation(8.0), P.NTKAwareScaling(8.0), P.YaRNScaling(8.0, 32)],
                         ids=repr)
def test_extreme_inputs(scaling):
    """Empty sequences give empty outputs; NaN in one token stays in that token; float16 stays float16."""
    assert P.rope(jnp.ones((0, 8)), scaling=scaling).shape == (0, 8)
    x = np.ones((5, 8), np.float32)
    x[2, 3] = np.nan
    out = np.asarray(P.rope(x, scaling=scaling))
    assert np.isnan(out[2]).any() and np.isfinite(np.delete(out, 2, axis=0)).all()
    assert P.rope(jnp.ones((5, 8), jnp.float16), scaling=scaling).dtype == jnp.float16
    assert np.isfinite(np.asarray(P.rope(jnp.ones((5000, 8)), scaling=scaling))).all()
