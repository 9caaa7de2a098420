"""Chapter 11's exercises reject a deliberately wrong answer each and name their common mistakes (see
tests/book/test_exercises.py); their references agree with the library's scores."""

import jax
import numpy as np

from attnbook import induction
from attnbook.exercises import chapter11
from test_exercises import mistakes_named, wrong_answers_rejected


def previous_over_all_rows(weights):
    w = np.asarray(weights)
    return float(np.diagonal(w, offset=-1).sum() / w.shape[0])


def previous_is_self(weights):
    return float(np.diagonal(np.asarray(weights))[1:].mean())


def induction_first_occurrence(weights, period):
    return float(np.asarray(weights)[np.arange(period, 2 * period), np.arange(period)].mean())


def induction_rows_shifted(weights, period):
    return float(np.asarray(weights)[np.arange(period - 1, 2 * period - 1), np.arange(period)].mean())


def uniform_one_over_i(period):
    return float(np.mean(1.0 / np.arange(period, 2 * period)))


def uniform_whole_sequence(period):
    return 1.0 / (2 * period)


WRONG = {"11.1": previous_is_self, "11.2": induction_first_occurrence, "11.3": uniform_whole_sequence}

NAMED = {
    "11.1": [previous_over_all_rows, previous_is_self],
    "11.2": [induction_first_occurrence, induction_rows_shifted],
    "11.3": [uniform_one_over_i, uniform_whole_sequence],
}


def test_wrong_answers_are_rejected():
    wrong_answers_rejected(WRONG, chapter=11)


def test_common_mistakes_are_named():
    mistakes_named(NAMED, chapter=11)


def test_references_are_the_librarys_scores():
    rng = np.random.default_rng(0)
    for period in (1, 3, 8):
        w = chapter11._causal_pattern(rng, 2 * period + 1)
        assert np.isclose(chapter11.previous_token_score(w), float(induction.previous_token_score(w)), rtol=1e-5)
        assert np.isclose(chapter11.induction_score(w, period), float(induction.induction_score(w, period)), rtol=1e-5)
        uniform = np.tril(np.ones((2 * period, 2 * period))) / np.arange(1, 2 * period + 1)[:, None]
        assert np.isclose(chapter11.uniform_induction_score(period), float(induction.induction_score(uniform, period)),
                          rtol=1e-5)
