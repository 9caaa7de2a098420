"""Chapter 5's experiment (attnbook.experiments.ch05): its stored runs record the settings the chapter describes and
hold the claims it makes, its cost run writes what the chapter reads, and ``NextTokenModel.only`` (the chapter's live
AFT-full) computes what the stored run's ``using`` did."""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import experiments, lm, nn
from attnbook.experiments import ch05


def test_chapter5_settings_are_what_the_stored_runs_record():
    assert experiments.read_json("aft_cost.json")["settings"] == ch05.COST.to_dict()
    assert experiments.read_json("aft_digits.json")["settings"] == ch05.SETTINGS.to_dict()
    cost = experiments.read_csv("aft_cost.csv")
    assert [(r["mixer"], int(r["T"])) for r in cost] == [(name, n) for n in ch05.COST.lengths for name in ch05.MIXERS]
    assert all((r["seconds"] != "") == ch05.timed(r["mixer"], int(r["T"])) for r in cost)
    assert {int(r["d"]) for r in cost} == {ch05.COST.d}
    digits = experiments.read_csv("aft_digits.csv")
    assert [r["kind"] for r in digits] == list(ch05.KINDS)
    assert {int(r["seed"]) for r in digits} == {ch05.SETTINGS.model_seed}


def test_chapter5_a_changed_setting_no_longer_matches():
    cost = experiments.read_json("aft_cost.json")["settings"]
    for change in [{"d": 32}, {"window": 32}, {"lengths": (1024,)}, {"runs": 7}]:
        assert dataclasses.replace(ch05.COST, **change).to_dict() != cost, change
    digits = experiments.read_json("aft_digits.json")["settings"]
    for change in [{"steps": 81}, {"learning_rate": 1e-2}, {"split_seed": 0}, {"window": 7}]:
        assert dataclasses.replace(ch05.SETTINGS, **change).to_dict() != digits, change


def test_chapter5_stored_runs_hold_the_chapters_claims():
    memory, seconds = ch05.read_cost(experiments.read_csv("aft_cost.csv"))
    slope = lambda name: np.log(memory[name, 4096] / memory[name, 1024]) / np.log(4)  # noqa: E731
    assert abs(slope("attention") - 2) < 0.1 and all(abs(slope(name) - 1) < 0.1 for name in ch05.MIXERS
                                                      if name != "attention")
    assert 1 / 3 < memory["AFT-full", 4096] / memory["attention", 4096] < 3
    assert memory["AFT-simple", 4096] < memory["AFT-conv", 4096] < memory["AFT-local", 4096] < memory["AFT-full", 4096]
    others = max(seconds[name, 1024] for name in ch05.MIXERS if name != "AFT-full")
    assert seconds["AFT-full", 1024] / others > 3
    assert seconds["attention", 4096] / max(seconds["AFT-simple", 4096], seconds["AFT-conv", 4096]) > 2
    assert ("AFT-full", 4096) not in seconds
    runs = ch05.read_digits(experiments.read_csv("aft_digits.csv"))
    bits = [run["bits"] for run in runs.values()]
    assert max(bits) < 2.44 and max(bits) - min(bits) < 0.3  # the per-position baseline, the largest gap
    model = ch05.model()
    assert all(runs[kind]["parameters"] == model.using(kind).parameters() for kind in ch05.KINDS)


def test_chapter5_pixels_are_the_digits_split_once():
    train_pixels, test_pixels = ch05.pixels()
    assert train_pixels.shape == (1397, 64) and test_pixels.shape == (ch05.SETTINGS.test_images, 64)
    assert train_pixels.dtype == np.int32 and train_pixels.min() == 0 and train_pixels.max() == ch05.VALUES - 1
    both = np.concatenate([train_pixels, test_pixels])
    from sklearn.datasets import load_digits

    images = load_digits().images.reshape(-1, 64).astype(np.int32)
    assert sorted(map(bytes, both)) == sorted(map(bytes, images))


def test_only_keeps_the_chosen_layer_and_computes_what_using_computes():
    kinds = ("aft-full", "aft-simple")
    model = lm.NextTokenModel(kinds, vocab_size=5, num_classes=5, max_len=8, d_model=8, key=jax.random.key(0),
                               heads=2, window=3)
    tokens = jnp.asarray([0, 1, 2, 3, 4, 0], dtype=jnp.int32)
    forward = eqx.filter_jit(lambda m: m(tokens))
    gradient = eqx.filter_jit(eqx.filter_grad(lambda m: jnp.sum(m(tokens) ** 2)))
    chosen, alone = model.using("aft-full"), model.only("aft-full")
    assert isinstance(alone.blocks[0].mixer, type(model.blocks[0].mixer.mixers[0]))
    assert alone.parameters() == chosen.parameters() == nn.count_parameters(alone)
    np.testing.assert_allclose(forward(alone), forward(chosen), atol=1e-6)
    g_alone, g_chosen = gradient(alone), gradient(chosen)
    for a, c in zip(jax.tree.leaves(g_alone.blocks[0].mixer), jax.tree.leaves(g_chosen.blocks[0].mixer.mixers[0])):
        np.testing.assert_allclose(a, c, atol=1e-6)
    np.testing.assert_allclose(g_alone.embed, g_chosen.embed, atol=1e-6)
    with pytest.raises(ValueError, match="kind"):
        model.only("aft-fancy")
    with pytest.raises(ValueError, match="tuple of kinds"):
        alone.only("aft-full")


def test_chapter5_cost_run_writes_what_the_chapter_reads(tmp_path, monkeypatch):
    c = ch05.CostSettings(d=8, heads=2, window=4, lengths=(16, 32), runs=1, aft_full_max_length=16)
    every = ch05.mixers(c)
    monkeypatch.setattr(ch05, "mixers", lambda c: {name: every[name] for name in ("attention", "AFT-full")})
    rows = ch05.run_cost(tmp_path / "aft_cost.csv", c)
    assert [(r["mixer"], r["T"]) for r in rows] == [("attention", 16), ("AFT-full", 16), ("attention", 32),
                                                    ("AFT-full", 32)]
    memory, seconds = ch05.read_cost(experiments.read_csv("aft_cost.csv", tmp_path))
    assert set(memory) == {(r["mixer"], r["T"]) for r in rows} and all(v > 0 for v in memory.values())
    assert set(seconds) == {("attention", 16), ("AFT-full", 16), ("attention", 32)}
    assert experiments.read_json("aft_cost.json", tmp_path)["settings"] == c.to_dict()


@pytest.mark.parametrize("argv", [["cost"], ["digits"]])
def test_chapter5_run_overwrites_the_stored_results_only_when_told(argv, capsys):
    with pytest.raises(SystemExit):
        ch05.main(argv)
    assert "--write" in capsys.readouterr().err
