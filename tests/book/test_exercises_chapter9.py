"""Chapter 9's exercises reject a deliberately wrong answer each and name their common mistakes (see
tests/book/test_exercises.py); the stored answer of 9.4 is read again from the benchmark's results."""

import csv
from pathlib import Path

import numpy as np

from attnbook import exercises, positional
from attnbook.exercises import chapter9
from test_exercises import mistakes_named, wrong_answers_rejected

RESULTS = Path(__file__).resolve().parents[2] / "lib" / "attnbook" / "experiments" / "results"


def ntk_base_times_s(d, scale):  # the base multiplied by s, without the exponent d / (d - 2)
    return positional.frequencies(d, 10000.0 * scale)


def ntk_as_pi(d, scale):  # every frequency divided by s: position interpolation
    return positional.frequencies(d) / scale


def mask_sinks_not_causal(T, window, sinks):
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    return ((j <= i) & (i - j < window)) | (j < sinks)


def mask_window_inclusive(T, window, sinks):
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    return (j <= i) & ((i - j <= window) | (j < sinks))


def keys_window_everywhere(T, window):  # every query as if it had a full window
    return float(min(window, T))


def keys_without_itself(T, window):
    return float(np.mean(np.minimum(np.arange(T), window)))


WRONG = {
    "9.1": ntk_base_times_s,
    "9.2": mask_sinks_not_causal,
    "9.3": keys_window_everywhere,
    "9.4": "rope",
}

NAMED = {
    "9.1": [ntk_base_times_s, ntk_as_pi],
    "9.2": [mask_sinks_not_causal, mask_window_inclusive],
    "9.3": [keys_window_everywhere, keys_without_itself],
    "9.4": ["rope"],
}


def test_wrong_answers_are_rejected():
    wrong_answers_rejected(WRONG, chapter=9)


def test_common_mistakes_are_named():
    mistakes_named(NAMED, chapter=9)


def test_keys_per_query_in_closed_form():
    for T, w in [(256, 2), (256, 32), (100, 7), (5, 9)]:
        closed = (T + 1) / 2 if w >= T else (w * (w + 1) / 2 + (T - w) * w) / T
        assert np.isclose(chapter9.keys_per_query(T, w), closed)


def test_ntk_lowest_pair_divided_by_exactly_s():
    for d in (4, 8, 128):
        ratio = chapter9.ntk_frequencies(d, 4.0) / positional.frequencies(d)
        assert np.isclose(ratio[0], 1.0) and np.isclose(ratio[-1], 0.25)


def test_stored_answer_matches_the_benchmark_results():
    with open(RESULTS / "long_context_finetune.csv", encoding="utf-8", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["steps_at_4L"] == "10"]
    mean = {m: np.mean([float(r["excess_beyond_L"]) for r in rows if r["method"] == m])
            for m in ("rope", "pi", "ntk", "yarn")}
    assert exercises.get("9.4").reference() == min(mean, key=mean.get)
