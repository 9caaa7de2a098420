"""Chapter 9's RoPE scalings (attnbook.positional): exact at scale 1, and equal to the authors' reference code.

The references below are transcribed with NumPy (float64) from the YaRN authors' repository, jquesnelle/yarn,
commit 995db5b575e75230b3384d658f8b944c9662f775 (2024-04-17), fetched with the ``fetch`` tool:

- scaled_rope/LlamaYaRNScaledRotaryEmbedding.py: ``find_correction_dim``, ``find_correction_range``,
  ``linear_ramp_mask``, ``get_mscale`` and ``LlamaYaRNScaledRotaryEmbedding.yarn`` (``inv_freq`` and ``mscale``;
  the cos/sin caches are multiplied by ``mscale``). In that file these functions are module-level (the Hugging Face
  port names them ``_yarn_find_correction_range``, ``_yarn_linear_ramp_mask``, ``_yarn_get_mscale``).
- scaled_rope/LlamaLinearScaledRotaryEmbedding.py (position interpolation: ``t /= self.scale``);
- scaled_rope/LlamaNTKScaledRotaryEmbedding.py (``base = base * alpha ** (dim / (dim-2))``).

The reference code stores its tables as ``cat((freqs, freqs))``, the "rotate half" layout; the book's RoPE rotates
adjacent pairs ``(2i, 2i + 1)``, so the comparison is made on the per-pair angles and on the rotated vectors,
with the reference's rotation written for adjacent pairs.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import positional as P

# --- the references, transcribed (torch -> numpy, float32 -> float64) ------------------------------------------


def ref_find_correction_dim(num_rotations, dim, base=10000, max_position_embeddings=2048):
    return (dim * math.log(max_position_embeddings / (num_rotations * 2 * math.pi))) / (2 * math.log(base))


def ref_find_correction_range(low_rot, high_rot, dim, base=10000, max_position_embeddings=2048):
    low = math.floor(ref_find_correction_dim(low_rot, dim, base, max_position_embeddings))
    high = math.ceil(ref_find_correction_dim(high_rot, dim, base, max_position_embeddings))
    return max(low, 0), min(high, dim - 1)  # Clamp values just in case


def ref_linear_ramp_mask(min, max, dim):  # noqa: A002 (the reference's names)
    if min == max:
        max += 0.001  # Prevent singularity
    linear_func = (np.arange(dim, dtype=np.float64) - min) / (max - min)
    return np.clip(linear_func, 0, 1)


def ref_get_mscale(scale=1):
    if scale <= 1:
        return 1.0
    return 0.1 * math.log(scale) + 1.0


def ref_yarn(dim, base, scale, original_max_position_embeddings, beta_fast=32, beta_slow=1, extrapolation_factor=1,
             attn_factor=1):
    """``LlamaYaRNScaledRotaryEmbedding.yarn``: returns ``(inv_freq, mscale)``."""
    pos_freqs = base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    inv_freq_extrapolation = 1.0 / pos_freqs
    inv_freq_interpolation = 1.0 / (scale * pos_freqs)
    low, high = ref_find_correction_range(beta_fast, beta_slow, dim, base, original_max_position_embeddings)
    inv_freq_mask = (1 - ref_linear_ramp_mask(low, high, dim // 2)) * extrapolation_factor
    inv_freq = inv_freq_interpolation * (1 - inv_freq_mask) + inv_freq_extrapolation * inv_freq_mask
    return inv_freq, float(ref_get_mscale(scale) * attn_factor)


def ref_linear_angles(dim, base, scale, length):
    """``LlamaLinearScaledRotaryEmbedding``: ``t = arange(length) / scale``, ``freqs = t x inv_freq``."""
    inv_freq = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    t = np.arange(length, dtype=np.float64) / scale
    return np.einsum("i,j->ij", t, inv_freq)


def ref_ntk_inv_freq(dim, base, alpha):
    """``LlamaNTKScaledRotaryEmbedding``: the raised base, then the usual inverse frequencies."""
    base = base * alpha ** (dim / (dim - 2))
    return 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float64) / dim))


def rotate_pairs(x, angles, mscale=1.0):
    """RoPE on adjacent pairs with the reference's angle table and magnitude (cos and sin times mscale)."""
    cos, sin = np.cos(angles) * mscale, np.sin(angles) * mscale
    out = np.empty_like(x, dtype=np.float64)
    out[:, 0::2] = x[:, 0::2] * cos - x[:, 1::2] * sin
    out[:, 1::2] = x[:, 0::2] * sin + x[:, 1::2] * cos
    return out


# --- the tests ---------------------------------------------------------------------------------------------------

SCALINGS_AT_1 = [P.PositionInterpolation(1.0), P.NTKAwareScaling(1), P.YaRNScaling(1.0, 32),
                 P.YaRNScaling(1.0, 2048, alpha=2.0, beta=16.0)]


@pytest.mark.parametrize("scaling", SCALINGS_AT_1, ids=repr)
@pytest.mark.parametrize("d, base", [(8, 10000.0), (64, 10000.0), (128, 500000.0), (4, 10.0)])
def test_scale_one_is_plain_rope_exactly(scaling, d, base):
    np.testing.assert_array_equal(scaling.frequencies(d, base), P.frequencies(d, base))
    assert scaling.magnitude == 1.0
    x = jax.random.normal(jax.random.key(d), (300, d))
    assert np.array_equal(np.asarray(P.rope(x, base, scaling=scaling)), np.asarray(P.rope(x, base)))
    q, k, v = (jax.random.normal(kk, (50, 3, d)) for kk in jax.random.split(jax.random.key(1), 3))
    for got, want in zip(P.rope_heads(q, k, v, scaling=scaling), P.rope_heads(q, k, v)):
        assert np.array_equal(np.asarray(got), np.asarray(want))
    for got, want in zip(P.scaled_rope_heads(scaling)(q, k, v), P.rope_heads(q, k, v)):
        assert np.array_equal(np.asarray(got), np.asarray(want))


def test_no_scaling_is_the_unchanged_hook():
    assert P.scaled_rope_heads(None) is P.rope_heads


@pytest.mark.parametrize("scale", [1.5, 2.0, 4.0, 8.0, 16.0, 32.0])
@pytest.mark.parametrize("d, base, original", [(8, 10000.0, 32), (64, 10000.0, 2048), (128, 10000.0, 4096),
                                               (128, 500000.0, 8192), (16, 10000.0, 16), (32, 10.0, 4)])
def test_yarn_matches_the_authors_code(scale, d, base, original):
    scaling = P.YaRNScaling(scale, original)
    inv_freq, mscale = ref_yarn(d, base, scale, original)
    np.testing.assert_allclose(scaling.frequencies(d, base), inv_freq, rtol=1e-14, atol=0)
    assert scaling.magnitude == pytest.approx(mscale, rel=1e-15)
    assert scaling.correction_range(d, base) == ref_find_correction_range(32, 1, d, base, original)


@pytest.mark.parametrize("scale", [1.5, 16.0])
@pytest.mark.parametrize("d, base, original", [(8, 10000.0, 32), (128, 500000.0, 8192), (32, 10.0, 4)])
def test_yarn_rope_rotates_as_the_authors_code(scale, d, base, original):
    """The rotation itself, past the trained length (one compilation per case, so fewer cases than above)."""
    scaling = P.YaRNScaling(scale, original)
    inv_freq, mscale = ref_yarn(d, base, scale, original)
    length = min(8 * original, 4096)
    x = np.asarray(jax.random.normal(jax.random.key(3), (length, d)))
    want = rotate_pairs(x.astype(np.float64), np.arange(length)[:, None] * inv_freq[None, :], mscale)
    np.testing.assert_allclose(np.asarray(P.rope(x, base, scaling=scaling)), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("alpha, beta", [(1.0, 32.0), (2.0, 16.0), (0.5, 64.0)])
def test_yarn_alpha_beta_are_the_reference_beta_slow_and_fast(alpha, beta):
    got = P.YaRNScaling(4.0, 2048, alpha=alpha, beta=beta).frequencies(128)
    want, _ = ref_yarn(128, 10000.0, 4.0, 2048, beta_fast=beta, beta_slow=alpha)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)


def test_yarn_keeps_high_frequencies_and_interpolates_low_ones():
    """Llama-2-like sizes (d = 128, L = 4096): the first pairs turn > 32 times and are kept, the last < once."""
    scaling = P.YaRNScaling(8.0, 4096)
    omega, plain = scaling.frequencies(128), P.frequencies(128)
    turns = 4096 * plain / (2 * np.pi)
    np.testing.assert_array_equal(omega[turns > 40], plain[turns > 40])
    np.testing.assert_allclose(omega[turns < 0.8], plain[turns < 0.8] / 8, rtol=1e-14)
    assert np.all(np.diff(omega / plain) <= 0)  # the ramp: from 1 down to 1/s


@pytest.mark.parametrize("scale", [1.5, 2.0, 4.0, 8.0])
@pytest.mark.parametrize("d, base", [(8, 10000.0), (64, 10000.0), (128, 500000.0)])
def test_position_interpolation_matches_the_authors_code(scale, d, base):
    length = 200
    want = ref_linear_angles(d, base, scale, length)
    got = np.arange(length)[:, None] * P.PositionInterpolation(scale).frequencies(d, base)[None, :]
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    x = np.asarray(jax.random.normal(jax.random.key(5), (length, d)))
    np.testing.assert_allclose(np.asarray(P.rope(x, base, scaling=P.PositionInterpolation(scale))),
                               rotate_pairs(x.astype(np.float64), want), rtol=1e-5, atol=1e-5)


def test_position_interpolation_keeps_angles_inside_the_trained_range():
    """PI's point: at L' = s L, the largest angle of every pair is that of position L - 1 / s < L."""
    L, s, d = 32, 4, 8
    omega = P.PositionInterpolation(s).frequencies(d)
    assert np.all((s * L - 1) * omega < L * P.frequencies(d))


@pytest.mark.parametrize("scale", [1.5, 2.0, 4.0, 8.0])
@pytest.mark.parametrize("d, base", [(8, 10000.0), (64, 10000.0), (128, 500000.0)])
def test_ntk_aware_matches_the_authors_code(scale, d, base):
    np.testing.assert_allclose(P.NTKAwareScaling(scale).frequencies(d, base), ref_ntk_inv_freq(d, base, scale),
                               rtol=1e-13, atol=0)
    x = np.asarray(jax.random.normal(jax.random.key(6), (200, d)))
    want = rotate_pairs(x.astype(np.float64), np.arange(200)[:, None] * ref_ntk_inv_freq(d, base, scale)[None, :])
    np.testing.assert_allclose(np.asarray(P.rope(x, base, scaling=P.NTKAwareScaling(scale))), want,
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("scale", [2.0, 8.0])
def test_ntk_aware_keeps_the_highest_and_divides_the_lowest_frequency_by_s(scale):
    omega, plain = P.NTKAwareScaling(scale).frequencies(64), P.frequencies(64)
    assert omega[0] == plain[0] == 1.0
    np.testing.assert_allclose(omega[-1], plain[-1] / scale, rtol=1e-13)


def test_scaled_rope_still_depends_on_relative_position_only():
    """Every scaling changes the frequencies, not the rotation: scores depend on m - n only."""
    q, k = (jax.random.normal(kk, (1, 16)) for kk in jax.random.split(jax.random.key(7)))
    for scaling in (P.PositionInterpolation(4.0), P.NTKAwareScaling(4.0), P.YaRNScaling(4.0, 32)):
        def score(m, n):
            rq = P.rope(jnp.tile(q, (m + 1, 1)), scaling=scaling)[m]
            rk = P.rope(jnp.tile(k, (n + 1, 1)), scaling=scaling)[n]
            return float(rq @ rk)

        assert score(10, 3) == pytest.approx(score(57, 50), rel=1e-4, abs=1e-4)


def test_yarn_temperature_multiplies_the_rotated_vectors():
    """YaRN's sqrt(1/t) multiplies queries and keys after the rotation, so the logits get 1/t = magnitude**2."""
    scaling = P.YaRNScaling(16.0, 32)
    assert scaling.magnitude == pytest.approx(0.1 * math.log(16.0) + 1.0)
    x = np.asarray(jax.random.normal(jax.random.key(8), (20, 8)))
    angles = np.arange(20)[:, None] * scaling.frequencies(8)[None, :]
    np.testing.assert_allclose(np.asarray(P.rope(x, scaling=scaling)),
                               rotate_pairs(x.astype(np.float64), angles) * scaling.magnitude, rtol=1e-5, atol=1e-5)


def test_scalings_work_under_jit_and_are_static():
    scaling = P.YaRNScaling(4.0, 32)
    x = jax.random.normal(jax.random.key(9), (64, 8))
    f = jax.jit(lambda x: P.rope(x, scaling=scaling))
    np.testing.assert_allclose(np.asarray(f(x)), np.asarray(P.rope(x, scaling=scaling)), rtol=1e-6, atol=1e-6)
    assert hash(scaling) == hash(P.YaRNScaling(4, 32))  # frozen and hashable: usable as a static argument


def test_ntk_aware_leaves_a_third_of_a_large_heads_pairs_at_new_angles():
    """Chapter 9's count for a head of 128 features, L = 2048, s = 4: 23 of 64 pairs turn less than once over L, and
    under NTK-aware scaling 22 of them reach, at 4L, angles beyond the largest they had in training."""
    from attnbook.positional import NTKAwareScaling, frequencies

    d, length, s = 128, 2048, 4
    trained = length * frequencies(d)  # the largest angle of each pair over positions 0..L
    scaled = s * length * NTKAwareScaling(s).frequencies(d)  # the same at 4L with the raised base
    below_one_turn = trained < 2 * np.pi
    assert below_one_turn.sum() == 23
    assert (below_one_turn & (scaled > trained)).sum() == 22
