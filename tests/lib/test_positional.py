"""attnbook.positional against formulas written out here, element by element."""

import math

import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import positional


def reference_pe(length, d_model, base=10000.0):
    """PE[p, 2i] = sin(p / base**(2i/d)), PE[p, 2i+1] = cos(p / base**(2i/d)), by loops."""
    pe = np.zeros((length, d_model))
    for p in range(length):
        for col in range(d_model):
            two_i = col - col % 2
            angle = p / base ** (two_i / d_model)
            pe[p, col] = math.sin(angle) if col % 2 == 0 else math.cos(angle)
    return pe


@pytest.mark.parametrize("length, d_model, base", [(50, 16, 10000.0), (7, 5, 10000.0), (128, 64, 100.0), (1, 1, 10.0)])
def test_sinusoidal_matches_formula(length, d_model, base):
    pe = positional.sinusoidal_encoding(length, d_model, base)
    assert pe.shape == (length, d_model)
    assert pe.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(pe), reference_pe(length, d_model, base), atol=1e-5, rtol=0)


def test_first_pair_is_sin_then_cos():
    # The sources' plotting code swapped sin and cos; position 0 must give (sin 0, cos 0) = (0, 1).
    pe = positional.sinusoidal_encoding(3, 4)
    np.testing.assert_allclose(np.asarray(pe[0]), [0.0, 1.0, 0.0, 1.0], atol=1e-7)
    np.testing.assert_allclose(float(pe[1, 0]), math.sin(1.0), atol=1e-7)


@pytest.mark.parametrize("offset", [1, 2, 5, 17, 63, -4])
def test_rotation_property(offset):
    length, d_model = 200, 32
    pe = np.asarray(positional.sinusoidal_encoding(length, d_model))
    rot = np.asarray(positional.relative_rotation(offset, d_model))
    p = np.arange(max(0, -offset), min(length, length - offset))
    np.testing.assert_allclose(pe[p + offset], pe[p] @ rot, atol=1e-5, rtol=0)  # rows are tokens
    # a rotation: orthogonal, determinant 1
    np.testing.assert_allclose(rot @ rot.T, np.eye(d_model), atol=1e-6)
    # W_{-k} is the transpose of W_k, and the first block is [[cos, -sin], [sin, cos]] of k * omega_0 = k
    np.testing.assert_allclose(np.asarray(positional.relative_rotation(-offset, d_model)), rot.T, atol=1e-6)
    c, s = math.cos(offset), math.sin(offset)
    np.testing.assert_allclose(rot[:2, :2], [[c, -s], [s, c]], atol=1e-6)


def test_rope_relative_dot_products():
    rng = np.random.default_rng(0)
    q = jnp.asarray(np.tile(rng.normal(size=(1, 8)), (12, 1)), dtype=jnp.float32)
    k = jnp.asarray(np.tile(rng.normal(size=(1, 8)), (12, 1)), dtype=jnp.float32)
    scores = np.asarray(positional.rope(q) @ positional.rope(k).T)
    # Same content everywhere: the score depends only on m - n (constant along diagonals).
    for shift in range(-5, 6):
        diagonal = np.diagonal(scores, offset=shift)
        np.testing.assert_allclose(diagonal, diagonal[0], atol=1e-5)
    # RoPE preserves norms (a rotation per pair).
    np.testing.assert_allclose(np.linalg.norm(positional.rope(q), axis=1), np.linalg.norm(q, axis=1), rtol=1e-6)


def test_rope_matches_rotation_of_pairs():
    x = jnp.asarray(np.random.default_rng(1).normal(size=(6, 4)), dtype=jnp.float32)
    out = np.asarray(positional.rope(x, base=100.0))
    for p in range(6):
        for i in range(2):
            theta = p / 100.0 ** (2 * i / 4)
            a, b = float(x[p, 2 * i]), float(x[p, 2 * i + 1])
            expected = [a * math.cos(theta) - b * math.sin(theta), a * math.sin(theta) + b * math.cos(theta)]
            np.testing.assert_allclose(out[p, 2 * i : 2 * i + 2], expected, atol=1e-5)


def test_alibi():
    np.testing.assert_allclose(positional.alibi_slopes(8), [2.0 ** -(i + 1) for i in range(8)])
    np.testing.assert_allclose(positional.alibi_slopes(4), [2.0 ** (-2 * (i + 1)) for i in range(4)])
    assert len(positional.alibi_slopes(6)) == 6
    bias = np.asarray(positional.alibi_bias(5, 2))
    assert bias.shape == (2, 5, 5)
    assert bias[0, 4, 1] == pytest.approx(-positional.alibi_slopes(2)[0] * 3)
    np.testing.assert_array_equal(np.diagonal(bias, axis1=1, axis2=2), 0.0)


@pytest.mark.parametrize(
    "call, names",
    [
        (lambda: positional.sinusoidal_encoding(0, 8), ["length", "positive", "0"]),
        (lambda: positional.sinusoidal_encoding(8, -2), ["d_model", "positive", "-2"]),
        (lambda: positional.sinusoidal_encoding(8, 4, base=0.0), ["base", "0.0"]),
        (lambda: positional.relative_rotation(1, 5), ["d_model", "even", "5"]),
        (lambda: positional.rope(jnp.ones((4, 3))), ["x", "even", "(4, 3)"]),
        (lambda: positional.rope(jnp.ones((4,))), ["x", "(T, d)", "(4,)"]),
        (lambda: positional.alibi_bias(4, 0), ["num_heads", "0"]),
    ],
)
def test_bad_arguments(call, names):
    with pytest.raises(ValueError) as info:
        call()
    for name in names:
        assert name in str(info.value)


@pytest.mark.parametrize(
    "call, names",
    [
        (lambda: positional.sinusoidal_encoding(8, 2.5), ["d_model", "2.5"]),
        (lambda: positional.relative_rotation(1.5, 4), ["offset", "1.5"]),
        (lambda: positional.rope(jnp.ones((4, 2), dtype=jnp.int32)), ["x", "floating-point", "int32"]),
    ],
)
def test_wrong_types(call, names):
    with pytest.raises(TypeError) as info:
        call()
    for name in names:
        assert name in str(info.value)


def test_rms_row_norm():
    from attnbook.positional import rms_row_norm, sinusoidal_encoding

    assert rms_row_norm([[3.0, 4.0], [0.0, 0.0]]) == pytest.approx(np.sqrt(12.5))
    assert rms_row_norm(sinusoidal_encoding(64, 32)) == pytest.approx(4.0, rel=1e-6)  # every row has norm sqrt(d/2)
    with pytest.raises(ValueError, match="shape"):
        rms_row_norm(np.ones(3))
