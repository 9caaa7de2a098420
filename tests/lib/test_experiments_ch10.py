"""attnbook.experiments.ch10's readers of the stored results: each returns what the CSV file holds, seed by seed, and
a selection that matches nothing is an error, not an empty answer."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from attnbook import experiments
from attnbook.experiments import ch10


def raw(name: str) -> list[dict]:
    """The stored file read with the csv module alone, independently of attnbook.experiments.store."""
    with (experiments.RESULTS / name).open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def test_the_readers_return_the_stored_rows_seed_by_seed():
    rows = raw("kv_heads_quality.csv")
    want = [float(r["excess"]) for r in rows if (r["method"], r["kv_heads"], r["steps"]) == ("from_scratch", "2", "300")]
    assert len(want) == len(ch10.SETTINGS.seeds)
    np.testing.assert_array_equal(ch10.quality(2), want)
    assert ch10.baseline("optimum", "loss") == float(next(r["loss"] for r in rows if r["method"] == "optimum"))
    assert ch10.baseline("current_token") == float(next(r["excess"] for r in rows if r["method"] == "current_token"))
    np.testing.assert_array_equal(ch10.latent(28), [float(r["excess"]) for r in raw("latent_quality.csv")
                                                    if r["rank"] == "28"])
    np.testing.assert_array_equal(ch10.equal_parameters(1, "ff_width"),
                                  [float(r["ff_width"]) for r in raw("kv_heads_equal_parameters.csv")
                                   if r["kv_heads"] == "1"])
    np.testing.assert_array_equal(ch10.uptraining("uptrained", 1, 15),
                                  [float(r["excess"]) for r in raw("kv_heads_uptraining_grid.csv")
                                   if (r["method"], r["kv_heads"], r["step"]) == ("uptrained", "1", "15")])
    recall = raw("kv_heads_recall.csv")
    np.testing.assert_array_equal(ch10.recall(4), [float(r["accuracy"]) for r in recall
                                                   if r["method"] == "trained" and r["kv_heads"] == "4"])
    assert ch10.recall_baseline("bag_of_values", "accuracy") == float(
        next(r["accuracy"] for r in recall if r["method"] == "bag_of_values"))
    curves = raw("kv_heads_recall_curves.csv")
    seed_3 = [float(r["loss"]) for r in curves if (r["kv_heads"], r["seed"]) == ("2", "3")]
    assert ch10.recall_curve(2).shape == (len(ch10.SETTINGS.seeds), len(seed_3))
    np.testing.assert_array_equal(ch10.recall_curve(2)[3], seed_3)
    decoding = raw("kv_decoding.csv")
    assert ch10.decoding("mqa", context=2048) == float(
        next(r["ms_per_token"] for r in decoding if (r["method"], r["context"]) == ("mqa", "2048")))
    assert ch10.decoding("mla", "cache_bytes_per_token") == float(
        next(r["cache_bytes_per_token"] for r in decoding if r["method"] == "mla"))


def test_a_selection_that_matches_nothing_is_an_error():
    with pytest.raises(KeyError, match="no row"):
        ch10.quality(3)  # no run with 3 key/value heads
    with pytest.raises(KeyError, match="no column"):
        ch10.latent(12, "no_such_column")


def test_run_summary_reads_the_lowest_and_highest_load():
    meta = {"date": "2026-11-26T10:00:00", "machine": {"cpu_model": "CPU", "cores": 2},
            "load_average_1min": {"before": 4.5, "after": 5.5, "after_each_run": {"min": 3.0, "max": 7.5}}}
    assert ch10.run_summary(meta) == dict(cpu="CPU", cores=2, date="2026-11-26", low=3.0, high=7.5)
    stored = ch10.run_summary(experiments.read_json("kv_heads_quality.json"))
    assert stored["low"] <= stored["high"] and stored["date"] == "2026-11-26"


def test_decode_cost_counts_the_cache_the_weights_and_the_flops():
    s = ch10.DECODING
    mha, mqa, mla = (ch10.decode_cost(m, 1000) for m in ("mha", "mqa", "mla"))
    assert mha["cache_bytes"] == 1000 * 2 * s.heads * s.key_dim * 4 and mqa["cache_bytes"] == 1000 * 2 * s.key_dim * 4
    assert mla["cache_bytes"] == 1000 * (s.mla_rank + s.mla_rope_dim) * 4
    # MHA: two FLOPs per float32 number read, cache and weights alike
    assert mha["intensity"] == pytest.approx(0.5)
    # grouping shares the keys, not the arithmetic: the attention FLOPs are the same for every G
    attention = {m: c["flops"] - c["weight_bytes"] // 2 for m, c in [("mha", mha), ("mqa", mqa)]}
    assert attention["mha"] == attention["mqa"] == s.heads * 1000 * 4 * s.key_dim
    assert mla["flops"] - mla["weight_bytes"] // 2 == s.heads * 1000 * 2 * (2 * s.mla_rank + s.mla_rope_dim)
    assert mha["intensity"] < ch10.decode_cost("gqa-4", 1000)["intensity"] < mqa["intensity"]
    with pytest.raises(ValueError, match="method"):
        ch10.decode_cost("mqa-repeated", 1000)
