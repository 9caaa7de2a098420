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


# ---------------------------------------------------------------------------------------------
# Positions numbered inside the cache (StreamingLLM, Xiao et al. 2023, Section 3.2): ``renumber=True``


def _rotate(x, position, theta):
    """Rotate each adjacent pair (2m, 2m + 1) of the last axis of x by position * theta[m]."""
    angle = position * theta
    c, s = np.cos(angle), np.sin(angle)
    even, odd = x[..., 0::2], x[..., 1::2]
    return np.stack([even * c - odd * s, even * s + odd * c], axis=-1).reshape(x.shape)


def _rolling_cache_by_hand(model, tokens, window, sinks):
    """The logits of a rolling KV cache run one token at a time, positions numbered inside the cache.

    At step i each block appends token i's unrotated key and value to its cache, drops every token that is
    neither one of the first `sinks` nor one of the last `window`, numbers what is left 0, 1, ..., n - 1 and
    gives the query position n - 1; RoPE rotates by those numbers, ALiBi adds slope * (position - (n - 1)).
    """
    blocks = model.blocks
    heads, d = model.heads, blocks[0].mixer.attention.key_dim
    theta = P.frequencies(d)
    slopes = P.alibi_slopes(heads)
    caches = [[] for _ in blocks]
    out = []
    for i, token in enumerate(np.asarray(tokens)):
        x = np.asarray(model.embedding[token], dtype=np.float64)
        for b, block in enumerate(blocks):
            layer = block.mixer.attention
            h = block.norms[0](jnp.asarray(x, jnp.float32))[None]
            q, k, v = (np.asarray(a[0], dtype=np.float64) for a in layer.project(h, h, h))  # (heads, d)
            caches[b].append((i, k, v))
            caches[b] = [e for e in caches[b] if e[0] < sinks or i - e[0] < window]
            n = len(caches[b])
            keys = np.stack([e[1] for e in caches[b]])  # (n, heads, d)
            values = np.stack([e[2] for e in caches[b]])
            if model.encoding == "rope":
                q = _rotate(q, n - 1, theta)
                keys = np.stack([_rotate(keys[m], m, theta) for m in range(n)])
            scores = np.einsum("hd,nhd->hn", q, keys) / np.sqrt(d)
            if model.encoding == "alibi":
                scores = scores + slopes[:, None] * (np.arange(n) - (n - 1))[None, :]
            weights = np.exp(scores - scores.max(axis=1, keepdims=True))
            weights /= weights.sum(axis=1, keepdims=True)
            context = np.einsum("hn,nhv->hv", weights, values)
            x = x + np.einsum("hv,hvo->o", context, np.asarray(layer.w_o)) + np.asarray(layer.b_o)
            h = block.norms[1](jnp.asarray(x, jnp.float32))
            x = x + np.asarray(block.feed_forward(h[None])[0], dtype=np.float64)
        out.append(np.asarray(model.head(model.final_norm(jnp.asarray(x, jnp.float32)))))
    return np.stack(out)


@pytest.mark.parametrize("encoding", ["rope", "alibi"])
@pytest.mark.parametrize("window, sinks", [(2, 1), (3, 2), (4, 4), (1, 3), (20, 0)])
def test_renumber_is_the_rolling_cache_token_by_token(encoding, window, sinks):
    model = ex.PositionModel(encoding, vocab_size=5, d_model=16, depth=2, heads=2, key=jax.random.key(3))
    tokens = jnp.asarray(small_data(1, 14, seed=6)[0][0])
    expected = _rolling_cache_by_hand(model, tokens, window, sinks)
    np.testing.assert_allclose(np.asarray(model(tokens, window, sinks=sinks, renumber=True)), expected, atol=2e-5)
    if sinks and window < 10:  # positions of the whole sequence are something else
        assert not np.allclose(np.asarray(model(tokens, window, sinks=sinks)), expected, atol=1e-3)


@pytest.mark.parametrize("encoding", ["rope", "alibi", "nope"])
def test_renumber_with_the_whole_sequence_in_the_window_is_the_plain_model(encoding):
    model = ex.PositionModel(encoding, vocab_size=5, d_model=16, depth=2, heads=2, key=jax.random.key(4))
    x, y = small_data(3, 12, seed=7)
    plain = np.asarray(ex.loss_per_position(model, x, y))
    np.testing.assert_allclose(np.asarray(ex.loss_per_position(model, x, y, max_offset=12, renumber=True)), plain,
                               atol=1e-6)
    np.testing.assert_allclose(np.asarray(ex.loss_per_position(model, x, y, max_offset=12, sinks=3, renumber=True)),
                               plain, atol=1e-5)
    # without sinks the window's offsets are unchanged: renumbering changes nothing
    np.testing.assert_allclose(np.asarray(ex.loss_per_position(model, x, y, max_offset=3, renumber=True)),
                               np.asarray(ex.loss_per_position(model, x, y, max_offset=3)), atol=1e-6)


def test_renumber_with_scaling_and_weights():
    model = ex.PositionModel("rope", vocab_size=5, d_model=16, depth=2, heads=2, key=jax.random.key(5))
    tokens = jnp.asarray(small_data(1, 12, seed=8)[0][0])
    logits, weights = model.attention_weights(tokens, 3, sinks=2, renumber=True, scaling=P.YaRNScaling(2, 6))
    np.testing.assert_array_equal(np.asarray(logits),
                                  np.asarray(model(tokens, 3, sinks=2, renumber=True, scaling=P.YaRNScaling(2, 6))))
    i, j = np.arange(12)[:, None], np.arange(12)[None, :]
    visible = (j <= i) & ((i - j < 3) | (j < 2))
    assert np.all(np.asarray(weights)[..., ~visible] == 0)
    offsets = ex.cache_offsets(12, 3, 2)
    assert offsets[11, 0] == 4 and offsets[11, 1] == 3 and offsets[11, 10] == 1 and offsets[3, 0] == 3
    assert np.max(offsets[visible]) == 4  # k + w - 1: never more than the cache holds


def test_bad_renumber():
    model = ex.PositionModel("learned", vocab_size=5, key=jax.random.key(0))
    with pytest.raises(ValueError, match="renumber"):
        model(jnp.zeros(4, int), 2, sinks=1, renumber=True)
    with pytest.raises(ValueError, match="positions"):
        P.rope(jnp.zeros((4, 2)), positions=np.arange(3))
