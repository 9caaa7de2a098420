"""Chapter 1's exercises reject a deliberately wrong answer each (see tests/book/test_exercises.py)."""

import jax.numpy as jnp
import numpy as np

from attnbook import exercises, positional
from attnbook.attention import scaled_dot_product_attention
from attnbook.exercises import chapter1
from attnbook.masking import causal_mask
from test_exercises import mistakes_named, wrong_answers_rejected


def sources_encoding(length, d_model):
    """The exponent of source articles 000/003, which starts at 2/d instead of 0."""
    i = np.arange(d_model // 2)
    angles = np.arange(length)[:, None] / 10000.0 ** (2 * (i + 1) / d_model)
    pe = np.empty((length, d_model))
    pe[:, 0::2], pe[:, 1::2] = np.sin(angles), np.cos(angles)
    return jnp.asarray(pe, dtype=jnp.float32)


def rope_rotate_half(x):
    """The other RoPE convention (GPT-NeoX, Hugging Face's Llama): feature i paired with i + d/2."""
    length, d = x.shape
    angles = np.arange(length)[:, None] * positional.frequencies(d)[None, :]
    first, second = x[:, : d // 2], x[:, d // 2 :]
    return jnp.concatenate([first * np.cos(angles) - second * np.sin(angles),
                            first * np.sin(angles) + second * np.cos(angles)], axis=1)


WRONG = {
    "1.1": sources_encoding,
    "1.2": lambda offset, d_model: positional.relative_rotation(-offset, d_model),  # the transpose: shifts back
    "1.3": rope_rotate_half,
    "1.4": 0.225,  # the value at length 16, as if the weight shrank with the sequence
}


def test_wrong_answers_are_rejected():
    wrong_answers_rejected(WRONG, chapter=1)


def test_shift_query_peaks_k_positions_away():
    """1.2's reference makes the query of position p score highest against position p + offset."""
    pe = positional.sinusoidal_encoding(64, 32)
    for k in (3, -5):
        w = exercises.get("1.2").reference(k, 32)
        scores = np.asarray((pe @ w) @ pe.T)
        p = np.arange(max(0, -k), 64 - max(0, k))
        assert np.array_equal(scores[p].argmax(axis=1), p + k)


def test_alibi_reference_matches_attention_and_the_geometric_series():
    """1.4's reference: the library's attention with equal scores, and (1 - e^-m) / (1 - e^-mT)."""
    length = 200
    same = jnp.zeros((length, 1))
    bias = positional.alibi_bias(length, 4)[0]
    weights = scaled_dot_product_attention(same, same, same, mask=causal_mask(length), bias=bias)[1]
    from attnbook.exercises import chapter1

    assert np.isclose(chapter1._alibi_self_weight(length), float(weights[-1, -1]), rtol=1e-5)
    m = positional.alibi_slopes(4)[0]
    assert np.isclose(exercises.get("1.4").reference(), (1 - np.exp(-m)) / (1 - np.exp(-1000 * m)), rtol=1e-9)


# One mistaken answer per common mistake of each exercise (attnbook.exercises.chapter1), in their order.
NAMED = {
    "1.1": [sources_encoding,
            lambda length, d_model: chapter1._sinusoid(length, d_model, column_index=True),
            lambda length, d_model: chapter1._sinusoid(length, d_model, base=float(length)),
            lambda length, d_model: chapter1._sinusoid(length, d_model, swapped=True),
            lambda length, d_model: chapter1._sinusoid(length, d_model, halves=True)],
    "1.2": [WRONG["1.2"]],
    "1.3": [rope_rotate_half, lambda x: chapter1._rope_variant(x, sign=-1.0)],
    "1.4": [1 / 1000, 0.225],
}


def test_common_mistakes_are_named():
    mistakes_named(NAMED, chapter=1)
