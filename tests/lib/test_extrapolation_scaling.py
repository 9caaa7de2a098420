"""Chapter 9's evaluation hook: chapter 8's RoPE model read with RoPE stretched, without retraining."""

import jax
import numpy as np
import pytest

from attnbook import extrapolation as ex
from attnbook import positional as P
from random_inputs import small_markov_data as small_data

AT_ONE = [P.PositionInterpolation(1.0), P.NTKAwareScaling(1.0), P.YaRNScaling(1.0, 8)]




@pytest.fixture(scope="module")
def trained():
    """Two seeds of a small RoPE model, trained for a few steps at length 8 (one program, as chapter 8 does)."""
    x, y = small_data(2 * 5 * 4, 8)
    x, y = x.reshape(2, 5, 4, 8), y.reshape(2, 5, 4, 8)
    models, _ = ex.train("rope", [0, 1], x, y, vocab_size=5, d_model=16, depth=1, heads=2)
    return models


@pytest.mark.parametrize("scaling", AT_ONE, ids=repr)
def test_scale_one_gives_bit_identical_losses(trained, scaling):
    x, y = small_data(6, 32, seed=3)
    for i in range(2):
        model = ex.select(trained, i)
        plain = np.asarray(ex.loss_per_position(model, x, y))
        np.testing.assert_array_equal(np.asarray(ex.loss_per_position(model, x, y, scaling=scaling)), plain)
        np.testing.assert_array_equal(np.asarray(ex.loss_per_position(model, x, y, scaling=scaling, max_offset=5)),
                                      np.asarray(ex.loss_per_position(model, x, y, max_offset=5)))
        np.testing.assert_array_equal(np.asarray(model(x[0], scaling=scaling)), np.asarray(model(x[0])))
        for got, want in zip(model.attention_weights(x[0], scaling=scaling), model.attention_weights(x[0])):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("scaling", [P.PositionInterpolation(4.0), P.NTKAwareScaling(4.0), P.YaRNScaling(4.0, 8)],
                         ids=repr)
def test_a_scaling_changes_the_model_as_its_hook_says(trained, scaling):
    """The scaled model is the trained weights with ``scaled_rope_heads(scaling)`` as every block's hook."""
    x, _ = small_data(1, 32, seed=4)
    model = ex.select(trained, 0)
    got = np.asarray(model(x[0], scaling=scaling))
    assert not np.allclose(got, np.asarray(model(x[0])))
    h = model.embedding[x[0]]
    for block in model.blocks:
        h = block(h, process_heads=P.scaled_rope_heads(scaling))
    want = model.head(jax.vmap(model.final_norm)(h))
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-5, atol=1e-5)


def test_bad_input():
    x, y = small_data(2, 8)
    alibi = ex.PositionModel("alibi", vocab_size=5, d_model=8, depth=1, heads=2, key=jax.random.key(0))
    rope = ex.PositionModel("rope", vocab_size=5, d_model=8, depth=1, heads=2, key=jax.random.key(0))
    with pytest.raises(ValueError, match="scaling applies to RoPE only.*'alibi'"):
        ex.loss_per_position(alibi, x, y, scaling=P.PositionInterpolation(2.0))
    with pytest.raises(ValueError, match="scaling applies to RoPE only"):
        alibi(x[0], scaling=P.PositionInterpolation(2.0))
    with pytest.raises(TypeError, match="scaling must be None, a PositionInterpolation"):
        ex.loss_per_position(rope, x, y, scaling=2.0)
    with pytest.raises(TypeError, match="scaling"):
        rope(x[0], scaling="yarn")
    with pytest.raises(ValueError, match="scale must be >= 1"):
        ex.loss_per_position(rope, x, y, scaling=P.YaRNScaling(0.5, 8))
    with pytest.raises(ValueError, match="targets"):  # the value check still holds on the scaled path
        ex.loss_per_position(rope, x, np.full_like(y, 5), scaling=P.NTKAwareScaling(2.0))
