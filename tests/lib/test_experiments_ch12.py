"""Chapter 12's home (attnbook.experiments.ch12): its readers against the stored tables read by hand, its models'
sizes and state arithmetic, and a two-step run of its command into a temporary folder."""

import dataclasses

import numpy as np
import pytest

from attnbook import experiments
from attnbook.experiments import ch12
from attnbook.linear_attention import LinearAttention


def test_recall_readers_agree_with_the_table_read_by_hand():
    rows = experiments.read_csv(ch12.RECALL_CSV)
    for model, pairs, heads in {(r["model"], r["pairs"], r["heads"]) for r in rows}:
        mine = sorted((int(r["seed"]), float(r["accuracy"])) for r in rows
                      if (r["model"], r["pairs"], r["heads"]) == (model, pairs, heads))
        assert [s for s, _ in mine] == list(ch12.SETTINGS.seeds) == ch12.recall_seeds(model, int(pairs), int(heads))
        np.testing.assert_array_equal(ch12.recall(model, int(pairs), int(heads)), [a for _, a in mine])
    assert ch12.recall("ssd", 8, 2, "state_numbers")[0] == ch12.state_numbers("ssd", 2, 32)
    assert ch12.recall("attention", 16, 2, "state_numbers")[0] == ch12.state_numbers("attention", 2, 64) == 2 * 32 * 64
    with pytest.raises(KeyError):
        ch12.recall("attention", 3, 2)
    assert ch12.chance() == 1 / 32


def test_stored_parameters_are_the_models_and_nearly_equal():
    for model in ch12.MODELS:
        built = ch12.recall_model(model, pairs=8, heads=2, seed=0)
        assert ch12.count_parameters(built) == ch12.recall(model, 8, 2, "parameters")[0]
    counts = [ch12.recall(m, 8, 2, "parameters")[0] for m in ch12.MODELS]
    assert max(counts) / min(counts) < 1.06  # equal parameters, to within 6%


def test_state_shrinks_with_the_heads_at_equal_parameters():
    """The projections do not depend on the heads (the gates of SSD and the delta rule add 4 numbers a head)."""
    wide, narrow = (LinearAttention(32, h, 32 // h, rule="retention", key=ch12.jax.random.key(0)) for h in (2, 8))
    assert ch12.count_parameters(wide) + 6 == ch12.count_parameters(narrow)  # one decay a head
    assert wide.state_bytes() == 4 * 2 * 16 * 16 and narrow.state_bytes() == 4 * 8 * 4 * 4


def test_decoding_readers_and_bytes():
    rows = experiments.read_csv(ch12.COST_CSV)
    for r in rows:
        assert ch12.decoding(r["model"], int(r["context"])) == float(r["us_per_token"])
        assert ch12.decoding_bytes(r["model"], int(r["context"])) == int(r["bytes"])
    assert ch12.decoding_bytes("attention", 1024) == 1024 * 2 * 4 * 64 * 4  # a key and a value per head, float32
    assert ch12.decoding_bytes("ssd", 1024) == ch12.decoding_bytes("ssd", 16)  # the same at every context
    summary = ch12.recall_run_summary()
    assert summary["commands"] >= 1 and summary["low"] <= summary["high"]


def test_the_command_runs_and_writes_its_table(tmp_path):
    ch12.main(["--steps", "2", "--out", str(tmp_path), "--runs", "4x2", "--models", "attention", "delta"])
    rows = experiments.read_csv(ch12.RECALL_CSV, tmp_path)
    assert {(r["model"], r["pairs"], r["heads"]) for r in rows} == {("attention", "4", "2"), ("delta", "4", "2")}
    assert len(rows) == 2 * len(ch12.SETTINGS.seeds)
    assert all(0.0 <= float(r["accuracy"]) <= 1.0 for r in rows)
