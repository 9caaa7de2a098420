"""Chapter 9's readers of the stored runs (attnbook.experiments.ch09), against the stored tables read with the csv
module."""

import csv

import numpy as np
import pytest

from attnbook import experiments
from attnbook.experiments import ch09


def by_hand(name):
    with open(experiments.RESULTS / name, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def test_rope_scaling_readers_agree_with_the_tables_read_by_hand():
    rows = by_hand("rope_scaling.csv")
    for method in ["rope", "pi", "ntk", "yarn", "yarn_no_temperature", "alibi"]:
        for T in (64, 128, 256):
            expected = [float(r["excess_beyond_L"]) for r in rows
                        if r["method"] == method and int(r["eval_length"]) == T]
            assert len(expected) == len(ch09.SETTINGS.seeds)
            np.testing.assert_array_equal(ch09.no_finetune(method, T), expected)
        optimum = next(float(r["loss_beyond_L"]) for r in rows if r["method"] == "optimum" and r["eval_length"] == "128")
        assert ch09.optimum_beyond_L(128) == optimum
    comparisons = by_hand("rope_scaling_comparisons.csv")
    for r in comparisons:
        assert ch09.seeds_below(r["method"], r["below"], int(r["eval_length"])) == int(r["seeds_below"])


def test_a_selection_that_matches_nothing_is_an_error():
    with pytest.raises(KeyError):
        ch09.no_finetune("no_such_method", 128)
    with pytest.raises(KeyError):
        ch09.seeds_below("yarn", "rope", 7)
