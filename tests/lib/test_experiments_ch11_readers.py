"""Chapter 11's readers of the stored runs and its probes (attnbook.experiments.ch11), against the stored tables
read by hand and against hand-built inputs."""

import numpy as np
import pytest

from attnbook import corpus, experiments, induction
from attnbook.experiments import ch11


def test_stored_readers_agree_with_the_tables_read_by_hand():
    rows = experiments.read_csv("induction_heads_training.csv")
    assert ch11.stored_seeds() == sorted({int(r["seed"]) for r in rows}) == [0, 1, 2]
    steps, held = ch11.curve("curriculum", 2, "heldout_loss", 1)
    by_hand = [(int(r["step"]), float(r["heldout_loss"])) for r in rows
               if (r["variant"], r["depth"], r["seed"]) == ("curriculum", "2", "1") and r["heldout_loss"] != ""]
    assert list(zip(steps.tolist(), held.tolist())) == by_hand
    assert ch11.value_at("curriculum", 2, "heldout_loss", 1, int(steps[3])) == held[3]
    steps, scores = ch11.head_scores("plain", 1, "induction", 0)
    assert scores.shape == (len(steps), 1, ch11.SETTINGS.heads) and np.all(np.diff(steps) > 0)
    one = next(r for r in experiments.read_csv("induction_heads_scores.csv")
               if (r["variant"], r["depth"], r["seed"], r["layer"], r["head"]) == ("plain", "1", "0", "0", "2"))
    assert scores[list(steps).index(int(one["step"])), 0, 2] == float(one["induction"])
    best_steps, best = ch11.best("plain", 1, "induction", 0)
    np.testing.assert_array_equal(best, scores.max(axis=(1, 2)))
    first = ch11.first_step("curriculum", 2, 0, 0.5)
    assert best_steps is not None and first is not None
    c_steps, c_best = ch11.best("curriculum", 2, "induction", 0)
    assert c_best[list(c_steps).index(first)] > 0.5 and np.all(c_best[c_steps < first] <= 0.5)
    assert ch11.first_step("plain", 1, 0, 2.0) is None  # a score never exceeds 1
    assert ch11.position_losses("plain", 2, 0).shape == (ch11.SETTINGS.context,)


def test_character_pairs_stay_inside_files():
    split = corpus.Split(name="test", names=("a", "b"), ids=corpus.encode("abcXY"), starts=np.array([0, 3, 5]))
    previous, following = ch11.character_pairs(split)
    assert corpus.decode(previous) == "abX" and corpus.decode(following) == "bcY"  # no pair (c, X)


def test_identifiers_find_repeats_and_their_targets():
    text = "x = 1\n" * 3 + "value_name = 2\nprint(value_name)\n" + "y = 3\n" * 30
    ids = corpus.encode(text)
    split = corpus.Split(name="test", names=("f",), ids=ids, starts=np.array([0, ids.size]))
    found = ch11.Identifiers.of(split, context=64, count=4)
    assert [name for name, _, _ in found.found] == ["value_name"]
    window, q, target = found.windows[0], found.queries(0), found.induction_targets(0)
    assert corpus.decode(window[q]) == "alue_name"  # the second occurrence after its first character
    np.testing.assert_array_equal(window[q - found.distance[0]], window[q])  # the same character, first occurrence
    np.testing.assert_array_equal(target, q - found.distance[0] + 1)
    weights = np.zeros((1, 1, 1, 64, 64))
    weights[0, 0, 0, q, target] = 1.0  # a perfect induction head
    assert found.hit_rate(weights, 0, 0, "induction")[0] == 1.0
    assert found.hit_rate(weights, 0, 0, "previous")[0] == 0.0
    with pytest.raises(ValueError, match="target"):
        found.hit_rate(weights, 0, 0, "next")


def test_measure_heads_gain_is_the_copy_losses_difference():
    model = ch11.make_model(2, 0)
    held, repeated, code = ch11.eval_sets()
    held, repeated, code = held[:8], repeated[:8], code[:8]
    none = np.zeros((2, ch11.SETTINGS.heads), bool)
    out = ch11.measure_heads(model, held, repeated, code, none)
    first, second = ch11.copy_losses(model, code, ch11.SETTINGS.repeated_period)
    assert out["gain"] == pytest.approx(first - second, abs=1e-5)
    assert out["previous"].shape == out["induction"].shape == (2, ch11.SETTINGS.heads)
    np.testing.assert_allclose(out["induction"], induction.induction_score(
        induction.forward(model, repeated)[1], ch11.SETTINGS.repeated_period).mean(axis=0), atol=1e-6)
    layer_1 = none.copy()
    layer_1[1] = True
    assert ch11.measure_heads(model, held, repeated, code, layer_1, ("code",)).keys() == {"code", "code_induction", "gain"}
