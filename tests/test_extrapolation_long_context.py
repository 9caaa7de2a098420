"""Chapter 9's rolling cache with attention sinks (``sinks=``) and fine-tuning (``ex.fine_tune``)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import extrapolation as ex
from attnbook import positional as P
from random_inputs import small_markov_data as small_data




@pytest.fixture(scope="module")
def trained():
    x, y = small_data(2 * 5 * 4, 8)
    x, y = x.reshape(2, 5, 4, 8), y.reshape(2, 5, 4, 8)
    models, _ = ex.train("rope", [0, 1], x, y, vocab_size=5, d_model=16, depth=2, heads=2)
    return models


@pytest.mark.parametrize("encoding", ["rope", "alibi", "nope"])
def test_sinks_reduce_to_the_window_and_to_full_attention(encoding):
    model = ex.PositionModel(encoding, vocab_size=5, d_model=16, depth=2, heads=2, key=jax.random.key(1))
    x, y = small_data(3, 20, seed=2)
    window = ex.loss_per_position(model, x, y, max_offset=3)
    np.testing.assert_array_equal(np.asarray(ex.loss_per_position(model, x, y, max_offset=3, sinks=0)), np.asarray(window))
    np.testing.assert_allclose(np.asarray(ex.loss_per_position(model, x, y, max_offset=3, sinks=20)),
                               np.asarray(ex.loss_per_position(model, x, y)), atol=1e-6)
    np.testing.assert_allclose(np.asarray(ex.loss_per_position(model, x, y, sinks=4)),  # no window: nothing to keep
                               np.asarray(ex.loss_per_position(model, x, y)), atol=1e-6)


def test_sinks_keep_exactly_the_first_keys():
    model = ex.PositionModel("rope", vocab_size=5, d_model=16, depth=2, heads=2, key=jax.random.key(2))
    tokens = jnp.asarray(small_data(1, 16, seed=4)[0][0])
    _, weights = model.attention_weights(tokens, max_offset=2, sinks=2)
    i, j = np.arange(16)[:, None], np.arange(16)[None, :]
    visible = (j <= i) & ((i - j < 2) | (j < 2))
    assert np.all(np.asarray(weights)[..., ~visible] == 0)
    assert np.all(np.asarray(weights)[..., visible] > 0)
    # two blocks: position 12 sees 11, 12 and the sinks 0, 1, and through them nothing else
    for changed_at, matters in ((0, True), (1, True), (5, False), (10, True)):
        other = tokens.at[changed_at].set((tokens[changed_at] + 1) % 5)
        moved = not np.allclose(np.asarray(model(other, 2, sinks=2)[12]), np.asarray(model(tokens, 2, sinks=2)[12]))
        assert moved == matters, changed_at


def test_bad_sinks():
    model = ex.PositionModel("rope", vocab_size=5, key=jax.random.key(0))
    with pytest.raises(ValueError, match="sinks"):
        model(jnp.zeros(4, int), 2, sinks=-1)
    x, y = small_data(2, 6)
    with pytest.raises(ValueError, match="sinks"):
        ex.loss_per_position(model, x, y, max_offset=2, sinks=-1)


def test_fine_tune_checkpoints_continue_one_run(trained):
    x, y = small_data(2 * 6 * 2, 16, seed=5)
    x, y = x.reshape(2, 6, 2, 16), y.reshape(2, 6, 2, 16)
    scaling = P.YaRNScaling(2, 8)
    parts = ex.fine_tune(trained, x, y, checkpoints=[0, 3, 6], scaling=scaling)  # two equal runs: one compilation
    whole = ex.fine_tune(trained, x, y, checkpoints=[6], scaling=scaling)
    assert len(parts) == 3 and len(whole) == 1
    for a, b in zip(jax.tree.leaves(parts[0]), jax.tree.leaves(trained)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))  # step 0: the models as given
    for a, b in zip(jax.tree.leaves(parts[-1]), jax.tree.leaves(whole[0])):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6)  # the Adam state carries over
    plain = ex.fine_tune(trained, x, y, checkpoints=[6])
    assert not np.allclose(np.asarray(plain[0].head.weight), np.asarray(whole[0].head.weight))


def test_fine_tune_lowers_the_loss_it_trains_on(trained):
    x, y = small_data(2 * 40 * 4, 16, seed=6)
    x, y = x.reshape(2, 40, 4, 16), y.reshape(2, 40, 4, 16)
    before, after = ex.fine_tune(trained, x, y, checkpoints=[0, 40], scaling=P.PositionInterpolation(2),
                                 learning_rate=3e-3)
    xe, ye = small_data(16, 16, seed=7)
    loss = [float(ex.loss_per_position(ex.select(m, 0), xe, ye, scaling=P.PositionInterpolation(2)).mean())
            for m in (before, after)]
    assert loss[1] < loss[0]


@pytest.mark.parametrize("checkpoints", [[], [3, 2], [0, 7]])
def test_fine_tune_bad_checkpoints(trained, checkpoints):
    x, y = small_data(2 * 6 * 2, 16)
    with pytest.raises(ValueError, match="checkpoints"):
        ex.fine_tune(trained, x.reshape(2, 6, 2, 16), y.reshape(2, 6, 2, 16), checkpoints=checkpoints)


def test_fine_tune_bad_models_and_shapes(trained):
    x, y = small_data(2 * 6 * 2, 16)
    with pytest.raises(TypeError, match="models"):
        ex.fine_tune([trained], x.reshape(2, 6, 2, 16), y.reshape(2, 6, 2, 16), checkpoints=[1])
    with pytest.raises(ValueError, match="shape"):
        ex.fine_tune(trained, x.reshape(2, 12, 16), y.reshape(2, 12, 16), checkpoints=[1])
