"""attnbook.positional under bad and extreme input: each error names its argument (issue 10)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import positional


@pytest.mark.parametrize(
    "call, kind, match",
    [
        (lambda: positional.sinusoidal_encoding(0, 8), ValueError, "length.*0"),
        (lambda: positional.sinusoidal_encoding(-3, 8), ValueError, "length.*-3"),
        (lambda: positional.sinusoidal_encoding(2.0, 8), TypeError, "length.*2.0"),
        (lambda: positional.sinusoidal_encoding(True, 8), TypeError, "length"),
        (lambda: positional.sinusoidal_encoding(8, 0), ValueError, "d_model.*0"),
        (lambda: positional.sinusoidal_encoding(8, "8"), TypeError, "d_model"),
        (lambda: positional.sinusoidal_encoding(8, 4, base=0.0), ValueError, "base.*0.0"),
        (lambda: positional.sinusoidal_encoding(8, 4, base=-1.0), ValueError, "base.*-1.0"),
        (lambda: positional.sinusoidal_encoding(8, 4, base=float("nan")), ValueError, "base.*nan"),
        (lambda: positional.sinusoidal_encoding(8, 4, base=float("inf")), ValueError, "base.*inf"),
        (lambda: positional.frequencies(0), ValueError, "d_model"),
        (lambda: positional.relative_rotation(1, 5), ValueError, "d_model.*even.*5"),
        (lambda: positional.relative_rotation(1.5, 4), TypeError, "offset.*1.5"),
        (lambda: positional.relative_rotation(True, 4), TypeError, "offset"),
        (lambda: positional.relative_rotation(1, 4, base=0.0), ValueError, "base"),
        (lambda: positional.alibi_slopes(0), ValueError, "num_heads.*0"),
        (lambda: positional.alibi_slopes(2.0), TypeError, "num_heads"),
        (lambda: positional.alibi_bias(0, 2), ValueError, "length.*0"),
        (lambda: positional.alibi_bias(4, -1), ValueError, "num_heads.*-1"),
    ],
)
def test_bad_python_arguments(call, kind, match):
    with pytest.raises(kind, match=match):
        call()


@pytest.mark.parametrize(
    "x, kind, match",
    [
        (jnp.ones((4, 2), dtype=jnp.int32), TypeError, r"x must be a floating-point array, got dtype int32"),
        (np.ones((4, 2), dtype=np.int64), TypeError, r"x must be a floating-point array, got dtype int"),
        (jnp.ones((4, 2), dtype=bool), TypeError, r"x must be a floating-point.*bool"),
        (jnp.ones((4,)), ValueError, r"x must have shape \(T, d\), got an array of shape \(4,\)"),
        (jnp.ones((2, 4, 2)), ValueError, r"x must have shape \(T, d\).*\(2, 4, 2\)"),
        (jnp.ones((4, 3)), ValueError, r"x must have an even number.*\(4, 3\)"),
        ("abc", TypeError, "x must be an array"),
    ],
)
def test_rope_bad_x(x, kind, match):
    with pytest.raises(kind, match=match):
        positional.rope(x)
    if hasattr(x, "dtype"):  # the same check when traced: shapes and dtypes are static under jit
        with pytest.raises(kind, match=match):
            jax.jit(positional.rope)(x)


def test_rope_on_integers_is_no_longer_garbage_but_an_error():
    """Issue 10: rope on int input computed int cos/sin (all 0 or 1) and returned garbage."""
    tokens = jnp.arange(8).reshape(4, 2)
    with pytest.raises(TypeError, match="x"):
        positional.rope(tokens)
    floats = positional.rope(tokens.astype(jnp.float32))  # what the caller meant
    assert floats.dtype == jnp.float32 and not np.array_equal(np.asarray(floats), np.asarray(tokens))


def test_rope_edge_cases():
    assert positional.rope(jnp.zeros((0, 4))).shape == (0, 4)  # T = 0: an empty result of the right shape
    np.testing.assert_allclose(positional.rope([[1.0, 0.0], [1.0, 0.0]]),  # nested lists are arrays
                               [[1.0, 0.0], [np.cos(1.0), np.sin(1.0)]], rtol=1e-6)
    x = jnp.asarray(np.random.default_rng(0).normal(size=(64, 8)), dtype=jnp.float32)
    for dtype in (jnp.float16, jnp.bfloat16):  # low precision: same dtype out, error of that dtype
        low = positional.rope(x.astype(dtype))
        assert low.dtype == dtype
        np.testing.assert_allclose(np.asarray(low, dtype=np.float32), positional.rope(x), atol=0.05)
    nan_row = x.at[3].set(jnp.nan)  # a NaN reaches only its own token's row
    rows_with_nan = np.isnan(np.asarray(positional.rope(nan_row))).any(axis=1)
    np.testing.assert_array_equal(np.flatnonzero(rows_with_nan), [3])
