"""Chapter 10: attnbook.kv. Cache bytes per token against the arrays a decoder keeps, chapter 7's cached decoding
with shared key/value heads, and the uptraining conversion (mean-pooling key/value heads, Ainslie et al. 2023)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import extrapolation as ex
from attnbook import kv, nn, transformer
from attnbook.experiments import ch10
from attnbook.latent import MultiHeadLatentAttention
from attnbook.mha import MultiHeadAttention, MultiHeadSelfAttention
from random_inputs import randomised, tokens



@pytest.mark.parametrize("heads, groups, key_dim, value_dim", [(8, 8, 4, 4), (8, 4, 4, 4), (8, 2, 4, 6), (8, 1, 4, 4)])
def test_cache_bytes_per_token_is_the_projected_keys_and_values(heads, groups, key_dim, value_dim):
    layer = MultiHeadAttention(16, heads, key_dim, value_dim=value_dim, kv_heads=groups, key=jax.random.key(0))
    x = tokens(0, 10, 16)
    _, k, v = layer.project(x, x, x)
    assert kv.cache_bytes_per_token(layer) == (k.nbytes + v.nbytes) // 10
    assert kv.cache_bytes_per_token(layer) == groups * (key_dim + value_dim) * 4
    assert kv.cache_bytes_per_token(layer, itemsize=2) == groups * (key_dim + value_dim) * 2
    mha = MultiHeadAttention(16, heads, key_dim, value_dim=value_dim, key=jax.random.key(0))
    assert kv.cache_bytes_per_token(mha) == kv.cache_bytes_per_token(layer) * heads // groups


def test_cache_bytes_per_token_of_self_attention_and_latent_attention():
    layer = MultiHeadSelfAttention(32, 4, kv_heads=2, key=jax.random.key(0))
    assert kv.cache_bytes_per_token(layer) == 2 * 2 * 8 * 4
    mla = MultiHeadLatentAttention(32, 4, 8, 12, 4, key=jax.random.key(0))
    c, k_r = mla.latent(tokens(1, 7, 32))
    assert kv.cache_bytes_per_token(mla) == (c.nbytes + k_r.nbytes) // 7 == (12 + 4) * 4
    c_cache, r_cache = mla.init_cache(5)
    assert (c_cache.nbytes + r_cache.nbytes) // 5 == kv.cache_bytes_per_token(mla)
    with pytest.raises(TypeError, match="layer must be a MultiHeadAttention.*got Dense"):
        kv.cache_bytes_per_token(__import__("attnbook.nn", fromlist=["Dense"]).Dense(2, 2, key=jax.random.key(0)))
    with pytest.raises(ValueError, match="itemsize"):
        kv.cache_bytes_per_token(layer, itemsize=0)


def small_translator(seed=0, heads=4):
    return transformer.EncoderDecoder(transformer.DIGITS + 1, d_model=16, depth=2, heads=heads,
                                      key=jax.random.key(seed))


@pytest.mark.parametrize("groups", [2, 1])
def test_chapter_7_cached_decoding_with_shared_key_value_heads(groups):
    model = randomised(small_translator(), 3)
    grouped = kv.pool_kv_heads(model, groups)
    for block in grouped.decoder.blocks:
        assert block.mixer.attention.kv_heads == groups and block.cross.kv_heads == groups
    cache = transformer.init_cache(grouped, 6)
    assert all(k.shape == (6, groups, 4) and v.shape == (6, groups, 4) for k, v in cache)
    # chapter 7's count shrinks by heads / kv_heads: self-attention cache and cross-attention keys and values
    assert transformer.cache_bytes(grouped, 6, 5) * (4 // groups) == transformer.cache_bytes(model, 6, 5)
    assert transformer.cache_bytes(grouped, 6, 5) == 2 * 2 * (6 + 5) * groups * 4 * 4
    source = jnp.asarray([3, 1, 4, 1, 5], dtype=jnp.int32)
    tokens_plain, logits_plain = transformer.greedy_decode(grouped, source, 6, transformer.START)
    tokens_cached, logits_cached = transformer.greedy_decode_cached(grouped, source, 6, transformer.START)
    np.testing.assert_array_equal(tokens_plain, tokens_cached)
    np.testing.assert_allclose(logits_plain, logits_cached, atol=2e-5, rtol=2e-5)


def naive_pool(w, groups, method):
    """Mean (or first) of each group's heads along axis -2 of w (..., heads, features), by a loop."""
    w = np.asarray(w, dtype=np.float64)
    heads = w.shape[-2]
    size = heads // groups
    out = []
    for g in range(groups):
        members = [w[..., g * size + i, :] for i in range(size)]
        out.append(sum(members) / size if method == "mean" else members[0])
    return np.stack(out, axis=-2)


@pytest.mark.parametrize("method", ["mean", "first"])
@pytest.mark.parametrize("groups", [6, 3, 2, 1])
def test_pooled_weights_are_the_mean_of_each_groups_heads(groups, method):
    layer = randomised(MultiHeadAttention(7, 6, 4, value_dim=5, key=jax.random.key(0)), 1)
    pooled = kv.pool_kv_heads(layer, groups, method=method)
    assert pooled.kv_heads == groups and pooled.num_heads == 6
    for name in ("w_k", "w_v", "b_k", "b_v"):
        np.testing.assert_allclose(getattr(pooled, name), naive_pool(getattr(layer, name), groups, method),
                                   rtol=1e-6, atol=1e-6)
    for name in ("w_q", "b_q", "w_o", "b_o"):  # queries and the output projection are untouched
        np.testing.assert_array_equal(getattr(pooled, name), getattr(layer, name))


def test_pooling_to_the_same_number_of_heads_is_the_identity():
    layer = randomised(MultiHeadAttention(7, 4, 3, key=jax.random.key(0)), 2)
    same = kv.pool_kv_heads(layer, 4)
    for a, b in zip(jax.tree.leaves(layer), jax.tree.leaves(same)):
        np.testing.assert_array_equal(a, b)
    x = tokens(2, 5, 7)
    np.testing.assert_array_equal(layer(x, x, x)[0], same(x, x, x)[0])


def test_pooling_heads_that_are_already_equal_changes_no_output():
    """If the heads of each group have the same key/value weights, MHA already is GQA: pooling is exact."""
    layer = randomised(MultiHeadAttention(7, 4, 3, key=jax.random.key(0)), 3)
    tied = eqx.tree_at(lambda m: (m.w_k, m.b_k, m.w_v, m.b_v), layer,
                       tuple(jnp.repeat(getattr(layer, n)[..., ::2, :], 2, axis=-2) for n in ("w_k", "b_k", "w_v", "b_v")))
    pooled = kv.pool_kv_heads(tied, 2)
    x = tokens(3, 6, 7)
    np.testing.assert_allclose(pooled(x, x, x)[0], tied(x, x, x)[0], rtol=1e-5, atol=1e-5)


def test_pooling_a_model_converts_every_layer_and_works_under_jit():
    model = ex.PositionModel("rope", vocab_size=8, d_model=16, depth=2, heads=4, key=jax.random.key(0))
    pooled = kv.pool_kv_heads(model, 2)
    assert [b.mixer.kv_heads for b in pooled.blocks] == [2, 2]
    jitted = eqx.filter_jit(lambda m: kv.pool_kv_heads(m, 2))(model)
    for a, b in zip(jax.tree.leaves(pooled), jax.tree.leaves(jitted)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    t = jnp.asarray([1, 2, 3, 4, 5, 6], dtype=jnp.int32)
    assert pooled(t).shape == (6, 8) and np.all(np.isfinite(pooled(t)))
    twice = kv.pool_kv_heads(pooled, 1)  # 4 -> 2 -> 1 is 4 -> 1 for the mean
    once = kv.pool_kv_heads(model, 1)
    for a, b in zip(jax.tree.leaves(twice), jax.tree.leaves(once)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_gqa_position_model_with_all_heads_is_chapter_8s_model():
    for seed in (0, 1):
        model = ch10.gqa_position_model(4, seed=seed)
        ref = ex.PositionModel("rope", key=jax.random.key(seed), vocab_size=8, d_model=32, depth=2, heads=4,
                               train_length=32)
        for a, b in zip(jax.tree.leaves(model), jax.tree.leaves(ref)):
            np.testing.assert_array_equal(a, b)
    mqa = ch10.gqa_position_model(1, seed=1)  # each group keeps its first head's initial key/value weights
    assert [b.mixer.kv_heads for b in mqa.blocks] == [1, 1]
    np.testing.assert_array_equal(mqa.blocks[0].mixer.attention.w_k[:, 0], ref.blocks[0].mixer.attention.w_k[:, 0])
    np.testing.assert_array_equal(mqa.blocks[1].mixer.attention.w_q, ref.blocks[1].mixer.attention.w_q)


def test_mla_position_model():
    model = ch10.mla_position_model(12, rope_dim=4, seed=0)
    ref = ex.PositionModel("rope", key=jax.random.key(0), vocab_size=8, d_model=32, depth=2, heads=4,
                           train_length=32)
    assert model.encoding == "nope" and model.heads == 4
    assert all(isinstance(b.mixer, MultiHeadLatentAttention) and b.mixer.rank == 12 for b in model.blocks)
    np.testing.assert_array_equal(model.embedding, ref.embedding)  # everything but the mixers is chapter 8's
    np.testing.assert_array_equal(model.blocks[1].feed_forward.hidden.weight, ref.blocks[1].feed_forward.hidden.weight)
    assert kv.cache_bytes_per_token(model.blocks[0].mixer) == (12 + 4) * 4
    assert kv.cache_bytes_per_token(ch10.gqa_position_model(1, seed=0).blocks[0].mixer) == 2 * 8 * 4  # the same
    t = jnp.asarray([1, 2, 3, 4, 5, 6, 7, 0], dtype=jnp.int32)
    logits = model(t)
    assert logits.shape == (8, 8) and np.all(np.isfinite(logits))
    # causal: changing the last token changes no earlier logit
    np.testing.assert_allclose(model(t.at[-1].set(2))[:-1], logits[:-1], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="exactly one of kv_heads"):
        ch10.experiment_train(2, [0], rank=12)


@pytest.mark.parametrize("groups", [4, 2, 1])
def test_equal_parameter_model_gives_the_freed_parameters_back(groups):
    """GQA's key/value parameters go back to the feed-forward layers: within one hidden unit per block of MHA's."""
    mha_count = nn.count_parameters(ch10.gqa_position_model(4, seed=0))
    model = ch10.equal_parameter_model(groups, seed=0)
    d_model = model.embedding.shape[1]
    assert abs(nn.count_parameters(model) - mha_count) <= len(model.blocks) * (2 * d_model + 1) // 2
    assert model.blocks[0].feed_forward.hidden.weight.shape[1] == ch10.equal_parameter_width(groups)
    assert kv.cache_bytes_per_token(model.blocks[0].mixer) == 2 * groups * (d_model // 4) * 4


def test_associative_recall_asks_every_key_for_its_value():
    x, y, mask = ch10.associative_recall(50, rng=np.random.default_rng(0), keys=16, values=16, pairs=4)
    assert x.shape == y.shape == mask.shape == (50, 16)
    assert np.array_equal(mask[0], np.tile([1.0, 0.0], 8) * (np.arange(16) >= 8))
    for seq, target, m in zip(x, y, mask):
        pairs = dict(zip(seq[0:8:2], seq[1:8:2]))
        assert len(pairs) == 4 and all(k < 16 <= v < 32 for k, v in pairs.items())  # distinct keys, values
        asked = seq[8::2]
        assert sorted(asked) == sorted(pairs)  # every key asked once
        assert [target[p] for p in np.flatnonzero(m)] == [pairs[k] for k in asked]
    assert np.array_equal(y[:, :-1], x[:, 1:])
