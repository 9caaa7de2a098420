"""Chapter 12's home (attnbook.experiments.ch12): its readers against the stored tables read by hand, its models'
sizes and state arithmetic, and a two-step run of its command into a temporary folder."""

import dataclasses
import subprocess
import sys

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
    # As a reader runs it: its own process, XLA's default flags. The timeout turns a hang into a failure: with
    # jax.scipy.linalg.solve_triangular in the delta rule, this run waited forever in 5 of 8 tries (two batched LAPACK
    # solves, each waiting for the other's thread of XLA's 2-thread pool); with forward substitution, 0 of 8.
    command = [sys.executable, "-m", "attnbook.experiments.ch12", "--steps", "2", "--out", str(tmp_path),
               "--runs", "4x2", "--models", "attention", "delta"]
    subprocess.run(command, check=True, timeout=120, capture_output=True, text=True)
    rows = experiments.read_csv(ch12.RECALL_CSV, tmp_path)
    assert {(r["model"], r["pairs"], r["heads"]) for r in rows} == {("attention", "4", "2"), ("delta", "4", "2")}
    assert len(rows) == 2 * len(ch12.SETTINGS.seeds)
    assert all(0.0 <= float(r["accuracy"]) <= 1.0 for r in rows)


def test_plain_attention_at_eight_heads_is_stored_and_read():
    acc = ch12.recall("attention", 8, 8)
    assert np.allclose(acc, [0.9922, 0.3477, 0.3296, 0.3213, 0.3418])
    assert abs(acc.mean() - 0.4665) < 1e-3


def test_compare_against_a_hand_computation():
    a, b = np.array([1.0, 0.9, 0.8, 0.95, 0.7]), np.array([0.9, 0.95, 0.7, 0.9, 0.6])
    c = ch12.compare(a, b, 2048)
    d = a - b
    assert np.isclose(c["mean"], d.mean()) and c["positive"] == 4
    assert np.isclose(c["seed_se"], np.sqrt(((d - d.mean()) ** 2).sum() / 4 / 5))
    pa, pb = a.mean(), b.mean()
    assert np.isclose(c["evaluation_se"], np.sqrt((pa * (1 - pa) + pb * (1 - pb)) / 2048))
    assert np.isclose(c["sign_p"], 6 / 32)  # P(X >= 4), X ~ Binomial(5, 1/2)
    assert ch12.compare(a, a * 0.5, 10)["sign_p"] == 1 / 32
    assert ch12.queries(8) == 2048
    with pytest.raises(ValueError, match="same length"):
        ch12.compare(a, b[:3], 10)


def test_fisher_p_against_the_hypergeometric_tables():
    # 2 of 5 against 5 of 5: tables with 2, 3, 4, 5 successes in the first group have 21, 105, 105, 21 of 252
    assert np.isclose(ch12.fisher_p(2, 5, 5, 5), 42 / 252)
    assert np.isclose(ch12.fisher_p(3, 5, 3, 5), 1.0)
    try:
        import scipy.stats
    except ImportError:
        return
    for counts in [(0, 5, 5, 5), (1, 6, 4, 5), (2, 5, 5, 5)]:
        table = [[counts[0], counts[1] - counts[0]], [counts[2], counts[3] - counts[2]]]
        assert np.isclose(ch12.fisher_p(*counts), scipy.stats.fisher_exact(table)[1])
    with pytest.raises(ValueError, match="exceed"):
        ch12.fisher_p(6, 5, 1, 5)
