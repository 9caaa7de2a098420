"""Chapter 3's exercises reject a deliberately wrong answer each (see tests/test_exercises.py)."""

import jax.numpy as jnp

from test_exercises import wrong_answers_rejected

WRONG = {
    "3.1": lambda T: jnp.tri(T, k=-1, dtype=bool),  # the sources' mask: strictly below the diagonal
}


def test_wrong_answers_are_rejected():
    wrong_answers_rejected(WRONG, chapter=3)
