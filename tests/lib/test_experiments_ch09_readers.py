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


def test_finetune_readers_agree_with_the_tables_read_by_hand():
    s = ch09.SETTINGS
    for name, rate in [("long_context_finetune.csv", None), ("long_context_finetune_lr.csv", s.finetune_second_learning_rate)]:
        rows = by_hand(name)
        for method in ["rope", "pi", "ntk", "yarn"]:
            for n in s.finetune_steps:
                for column in ["excess_beyond_L", "excess_first_L"]:
                    expected = [float(r[column]) for r in rows if r["method"] == method and r["steps_at_4L"] == str(n)]
                    assert len(expected) == len(s.seeds)
                    np.testing.assert_array_equal(ch09.finetune(method, n, column, learning_rate=rate), expected)
            first = next((n for n in s.finetune_steps
                          if max(float(r["excess_beyond_L"]) for r in rows
                                 if r["method"] == method and r["steps_at_4L"] == str(n)) < 0.1), None)
            assert ch09.first_below(method, 0.1, learning_rate=rate) == first
    rows = by_hand("long_context_finetune.csv")
    pretraining = ch09.ch08.SETTINGS.steps
    expected = [float(r["excess_beyond_L"]) for r in rows
                if r["method"] == "scratch" and r["steps_at_4L"] == str(pretraining + 10)]
    np.testing.assert_array_equal(ch09.scratch(10), expected)
    assert ch09.finetune_baseline() == next(float(r["excess_beyond_L"]) for r in rows if r["method"] == "current_token")
    assert ch09.first_below("rope", -1.0) is None
    with pytest.raises(ValueError):
        ch09.finetune("rope", 10, learning_rate=0.5)


def test_load_range_reads_every_recorded_load():
    meta = {"load_average_1min": {"before": 3.0, "after": 5.0, "after_each_part": {"min": 2.5, "max": 7.5}}}
    assert ch09.load_range(meta) == (2.5, 7.5)


def test_window_readers_agree_with_the_table_read_by_hand():
    rows = by_hand("long_context_window.csv")
    for encoding in ["rope", "alibi"]:
        for w in ch09.SETTINGS.windows:
            chosen = [r for r in rows if r["encoding"] == encoding and r["window"] == str(w)]
            assert len(chosen) == len(ch09.SETTINGS.seeds)
            np.testing.assert_array_equal(ch09.window(encoding, w), [float(r["excess_beyond_L"]) for r in chosen])
            np.testing.assert_array_equal(ch09.window(encoding, w, "excess_first_L"),
                                          [float(r["excess_first_L"]) for r in chosen])
            assert ch09.keys_per_query(w) == float(chosen[0]["keys_per_query"])
    assert ch09.window_baseline() == next(float(r["excess_beyond_L"]) for r in rows if r["encoding"] == "current_token")


def test_sink_readers_agree_with_the_tables_read_by_hand():
    mass = by_hand("long_context_sink_mass.csv")
    heads = by_hand("long_context_sink_heads.csv")
    L = ch09.ch08.SETTINGS.train_length
    for encoding in ["rope", "alibi", "rope_bos"]:
        chosen = [r for r in mass if r["encoding"] == encoding and r["block"] == "1"]
        curve = ch09.sink_curve(encoding, 1)
        at = [float(r["mass_on_key_0"]) for r in chosen if r["position"] == "40"]
        assert len(at) == len(ch09.SETTINGS.seeds) and curve[40] == pytest.approx(np.mean(at), abs=1e-12)
        v = ch09.head_mass(encoding, 4)
        one = next(r for r in heads if (r["encoding"], r["seed"], r["block"], r["head"], r["first_keys"])
                   == (encoding, "2", "1", "3", "4"))
        assert v[2, 1, 3] == float(one["mean_mass_queries_from_L"])
        assert ch09.uniform_mass(encoding, 4) == float(one["uniform_mass_queries_from_L"])
        ratios = [np.mean([float(r["mass_on_key_0"]) * (int(r["position"]) + 1) for r in mass
                           if (r["encoding"], r["seed"], r["block"]) == (encoding, str(s), str(b))
                           and 8 <= int(r["position"]) < L]) for s in ch09.SETTINGS.seeds for b in (0, 1)]
        assert ch09.inside_ratio(encoding) == pytest.approx(max(ratios), rel=1e-12)


def test_rolling_cache_readers_agree_with_the_tables_read_by_hand():
    s = ch09.SETTINGS
    whole, renumbered = by_hand("long_context_rolling_cache.csv"), by_hand("long_context_rolling_cache_renumbered.csv")

    def pick(rows, encoding, w, k):
        return [float(r["excess_beyond_L"]) for r in rows
                if (r["encoding"], r["window"], r["sinks"]) == (encoding, str(w), str(k))]

    for encoding in ["rope", "alibi", "rope_bos"]:
        for w in s.cache_windows:
            for k in s.cache_sinks:
                expected = pick(whole, encoding, w, k)
                assert len(expected) == len(s.seeds)
                np.testing.assert_array_equal(ch09.rolling_cache(encoding, w, k), expected)
                # k = 0 has no renumbered rows: numbering inside the cache changes no offset, the first table is read
                expected_renumbered = pick(renumbered, encoding, w, k) if k else expected
                assert len(expected_renumbered) == len(s.seeds)
                np.testing.assert_array_equal(ch09.rolling_cache(encoding, w, k, renumbered=True), expected_renumbered)
                for numbered, rows in [(False, expected), (True, expected_renumbered)]:
                    by_seed = np.mean(np.array(rows) - np.array(pick(whole, encoding, w, 0)))
                    assert ch09.cache_change(encoding, w, k, numbered) == pytest.approx(by_seed, abs=1e-12)
            assert ch09.cache_change(encoding, w, 0) == 0.0
        np.testing.assert_array_equal(ch09.rolling_cache(encoding, "full", 0), pick(whole, encoding, "full", 0))
    # the stored numbers chapter 9 quotes: renumbering removes the harm of the kept tokens for RoPE at w = 4
    assert ch09.cache_change("rope", 4, 1) > 0.15 > abs(ch09.cache_change("rope", 4, 1, renumbered=True))
    with pytest.raises(KeyError):
        ch09.rolling_cache("rope", 3, 1)  # no cache of 3 keys was run


def test_seeds_in_order_ranks_each_seed_as_the_table_read_by_hand():
    s = ch09.SETTINGS
    for name, rate in [("long_context_finetune.csv", None), ("long_context_finetune_lr.csv", s.finetune_second_learning_rate)]:
        rows = by_hand(name)
        for n in s.finetune_steps[1:]:
            per_seed = []
            for seed in s.seeds:
                excess = {r["method"]: float(r["excess_beyond_L"]) for r in rows
                          if r["steps_at_4L"] == str(n) and r["seed"] == str(seed) and r["method"] in ch09.methods()}
                per_seed.append(sorted(excess, key=excess.get))
                assert ch09.ranking(n, seed, learning_rate=rate) == per_seed[-1]
            for order in {tuple(r) for r in per_seed}:
                assert ch09.seeds_in_order(order, n, learning_rate=rate) == sum(list(order) == r for r in per_seed)
    best_first = ["yarn", "pi", "ntk", "rope"]
    assert ch09.seeds_in_order(best_first, 10) == 5  # the chapter's ranking after 10 steps, every seed
    assert ch09.seeds_in_order(best_first[::-1], 10) == 0
