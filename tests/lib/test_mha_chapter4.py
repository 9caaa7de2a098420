"""Chapter 4's helpers in attnbook.mha: the Equinox twin, the self-attention model, its training and evaluation."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from attnbook.mha import (MultiHeadAttention, SelfAttentionModel, all_weights, evaluate, fit_and_evaluate,
                          format_loss, mse, to_equinox)


def test_to_equinox_agrees_with_the_layer_with_biases():
    layer = MultiHeadAttention(7, 3, 8, value_dim=5, d_out=4, key=jax.random.key(0))
    rng = np.random.default_rng(0)
    layer = jax.tree.map(lambda a: a + jnp.asarray(rng.normal(scale=0.5, size=a.shape), a.dtype), layer)
    xq, xkv = (jnp.asarray(rng.random(shape), jnp.float32) for shape in [(4, 7), (6, 7)])
    np.testing.assert_allclose(to_equinox(layer)(xq, xkv, xkv), layer(xq, xkv, xkv)[0], atol=1e-5)


def test_to_equinox_refuses_layers_without_a_twin():
    with pytest.raises(ValueError, match="twin"):
        to_equinox(MultiHeadAttention(7, 2, 4, key_bias_positions=5, key=jax.random.key(0)))
    with pytest.raises(TypeError):
        to_equinox("layer")


def test_model_adds_positions_and_evaluate_matches_mse():
    layer = MultiHeadAttention(3, 2, 2, key=jax.random.key(1))
    positions = jnp.arange(12.0).reshape(4, 3) / 10
    xs = jnp.asarray(np.random.default_rng(1).random((5, 4, 3)), jnp.float32)
    ys = xs[:, ::-1]
    model = SelfAttentionModel(layer, positions)
    np.testing.assert_allclose(model(xs[0])[0], layer(xs[0] + positions, xs[0] + positions, xs[0] + positions)[0])
    loss, maps = evaluate(model, xs, ys)
    np.testing.assert_allclose(loss, mse(model, xs, ys), rtol=1e-6)
    np.testing.assert_allclose(maps, all_weights(model, xs).mean(axis=0), rtol=1e-6)
    assert maps.shape == (2, 4, 4)


def test_fit_and_evaluate_lowers_the_loss():
    xs = jnp.asarray(np.random.default_rng(2).random((64, 4, 3)), jnp.float32)
    ys = jnp.broadcast_to(xs[:, [1]], xs.shape)
    model = SelfAttentionModel(MultiHeadAttention(3, 2, 3, key_bias_positions=4, key=jax.random.key(0)))
    before = float(mse(model, xs, ys))
    run = fit_and_evaluate(model, xs, ys, optimizer=optax.adam(1e-2), steps=200, batch_size=16, key=jax.random.key(1))
    assert run["loss"] < before / 2 and run["maps"].shape == (2, 4, 4)


def test_format_loss():
    assert [format_loss(v) for v in [0.0020, 0.0681, 2.3e-6]] == ["0.0020", "0.068", "2e-06"]


def test_head_grid_draws_one_map_per_head():
    import matplotlib

    matplotlib.use("Agg")
    from attnbook.plotting import head_grid

    maps = np.full((5, 3, 3), 1 / 3)
    fig = head_grid({"a": maps, "b": maps[:1]}, head="head", per_row=4)
    assert len([ax for ax in fig.axes if ax.images]) == 6  # 5 + 1 maps; the colour bar has no image
    assert fig.axes[0].get_title() == "head 1"
    with pytest.raises(ValueError, match="empty"):
        head_grid({})


def test_head_grid_labels_each_map_once_and_wraps_long_labels():
    """A map of 8 heads takes two rows; its label goes on the first only, wrapped, so that labels do not collide."""
    import matplotlib

    matplotlib.use("Agg")
    from attnbook.plotting import head_grid, row_label

    assert row_label("key_dim 1, value_dim 7") == "key_dim 1,\nvalue_dim 7"
    assert row_label("short") == "short"
    assert row_label("トークン 2 で置き換える") == "トークン 2\nで置き換える"
    # never inside a word: the Japanese label of chapter 4's third map once came out as "key_dim\n1、value_\ndim 7"
    assert row_label("key_dim 1、value_dim 7") == "key_dim 1、\nvalue_dim 7"
    assert row_label("a_long_identifier_name") == "a_long_identifier_name"
    # Japanese without spaces: once, after a hiragana, where the lines come out most even
    assert row_label("学習する位置埋め込み") == "学習する\n位置埋め込み"
    assert row_label("トークン2で置き換える") == "トークン2で\n置き換える"
    maps = np.full((8, 3, 3), 1 / 3)
    fig = head_grid({"replace by token 2": maps}, per_row=4)
    labels = [ax.get_ylabel() for ax in fig.axes if ax.images]
    assert labels.count("replace by\ntoken 2") == 1 and labels.count("") == 7


def test_source_004_loop_counts_the_output_bias_once_per_head():
    """The correction in the Errata (sec-errata-output-bias): adding b_o inside the loop over heads, as source 004
    does, gives the library's output plus (heads - 1) b_o, and agrees with it only when b_o = 0."""
    heads = 3
    layer = MultiHeadAttention(7, heads, 8, key=jax.random.key(0))
    rng = np.random.default_rng(0)
    layer = jax.tree.map(lambda a: a + jnp.asarray(rng.normal(scale=0.5, size=a.shape), a.dtype), layer)
    x = jnp.asarray(rng.random((5, 7)), jnp.float32)
    out, weights = layer(x, x, x)
    v = jnp.einsum("sd,dhv->hsv", x, layer.w_v) + layer.b_v[:, None]
    source_style = sum(weights[h] @ v[h] @ layer.w_o[h] + layer.b_o for h in range(heads))
    np.testing.assert_allclose(source_style - out, np.broadcast_to((heads - 1) * layer.b_o, out.shape), atol=1e-5)
    assert np.abs(source_style - out).max() > 0.1  # visible as soon as the bias is not zero
