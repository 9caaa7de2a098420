"""Appendix B's exercises reject a deliberately wrong answer each and name both of their mistakes (see
tests/book/test_exercises.py); their references are the correct versions of attnbook.bugs, which pass the appendix's
properties (tests/lib/test_bugs.py)."""

import jax.numpy as jnp
import numpy as np

from attnbook import bugs
from attnbook.attention import scaled_dot_product_attention
from attnbook.positional import frequencies
from test_exercises import mistakes_named, wrong_answers_rejected


def mask_above_the_diagonal_of_the_cache(q, k, v):
    # j <= i + Tk - Tq + 1: one key of the future too many
    mask = jnp.tril(jnp.ones((len(q), len(k)), dtype=bool), k=len(k) - len(q) + 1)
    return scaled_dot_product_attention(q, k, v, mask=mask)[0]


def rope_with_the_sign_flipped(x):
    angles = np.repeat(np.arange(len(x))[:, None] * frequencies(x.shape[1])[None, :], 2, axis=1)
    swapped = jnp.stack([x[:, 1::2], -x[:, 0::2]], axis=-1).reshape(x.shape)  # turns backwards
    return x * jnp.cos(angles) + swapped * jnp.sin(angles)


WRONG = {"B.1": mask_above_the_diagonal_of_the_cache, "B.2": rope_with_the_sign_flipped}

NAMED = {
    "B.1": [bugs.top_left_causal_attention, lambda q, k, v: scaled_dot_product_attention(q, k, v)[0]],
    "B.2": [bugs.rope_rotate_half_interleaved_angles, bugs.rope_rotate_half],
}


def test_wrong_answers_are_rejected():
    wrong_answers_rejected(WRONG, chapter="B")


def test_mistakes_are_named():
    mistakes_named(NAMED, chapter="B")
