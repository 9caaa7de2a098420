"""attnbook.transformer: cached = uncached decoding, no look-ahead, cross-attention = Equinox, post-LN = the paper."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import lm, transformer

VOCAB, D_MODEL, HEADS = 11, 16, 4


def randomised(model, seed, scale=0.3):
    """``model`` with every floating-point leaf drawn at random (new biases are zero, LayerNorms identity)."""
    rng = np.random.default_rng(seed)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    leaves, treedef = jax.tree.flatten(params)
    noisy = [jnp.asarray(a + rng.normal(scale=scale, size=a.shape), dtype=jnp.float32) for a in leaves]
    return eqx.combine(jax.tree.unflatten(treedef, noisy), static)


def make(seed=0, **options):
    model = transformer.EncoderDecoder(VOCAB, d_model=D_MODEL, depth=2, heads=HEADS, key=jax.random.key(seed), **options)
    return randomised(model, seed)


def tokens(seed, length):
    return jnp.asarray(np.random.default_rng(seed).integers(0, VOCAB - 1, length), dtype=jnp.int32)


@pytest.mark.parametrize("options", [{}, {"pre_norm": False}, {"mixer": "aft-simple"}, {"feed_forward": False}])
def test_cached_decoding_equals_recomputing(options):
    model = make(1, **options)
    source = tokens(2, 7)
    slow_tokens, slow_logits = transformer.greedy_decode(model, source, 9, VOCAB - 1)
    fast_tokens, fast_logits = transformer.greedy_decode_cached(model, source, 9, VOCAB - 1)
    np.testing.assert_array_equal(np.asarray(fast_tokens), np.asarray(slow_tokens))
    np.testing.assert_allclose(np.asarray(fast_logits), np.asarray(slow_logits), atol=1e-4, rtol=1e-4)
    # and both agree with one teacher-forced pass over the tokens they produced
    target_in = jnp.concatenate([jnp.asarray([VOCAB - 1]), slow_tokens[:-1]])
    np.testing.assert_allclose(np.asarray(model(source, target_in)), np.asarray(slow_logits), atol=1e-4, rtol=1e-4)


def test_cache_size():
    attention, simple = make(0), make(0, mixer="aft-simple")
    # two blocks, float32; cross-attention keys and values of the S source tokens, kept by both cached decoders
    cross = 2 * 2 * 7 * D_MODEL * 4
    # self-attention keys and values of 4 heads x 4 features per generated token
    assert transformer.cache_bytes(attention, 100, 7) == 2 * 2 * 100 * D_MODEL * 4 + cross
    assert transformer.cache_bytes(attention, 200, 7) - cross == 2 * (transformer.cache_bytes(attention, 100, 7) - cross)
    # AFT-simple: three vectors per block whatever the output length; the cross part still grows with the source
    assert transformer.cache_bytes(simple, 100, 7) == transformer.cache_bytes(simple, 10_000, 7) == 2 * 3 * D_MODEL * 4 + cross
    assert transformer.cache_bytes(simple, 100, 14) - transformer.cache_bytes(simple, 100, 7) == cross
    # what the cached decoder really carries: its initial cache plus the projected cross keys and values
    memory = attention.encode(tokens(2, 7))
    kept = jax.tree.leaves((transformer.init_cache(attention, 100),
                            [b.cross.project(memory, memory, memory)[1:] for b in attention.decoder.blocks]))
    assert transformer.cache_bytes(attention, 100, 7) == sum(a.size * a.dtype.itemsize for a in kept)


@pytest.mark.parametrize("options", [{}, {"pre_norm": False}, {"mixer": "aft-conv"}, {"residual": False}])
def test_decoder_does_not_look_ahead(options):
    model = make(3, **options)
    memory = model.encode(tokens(4, 6))
    x = model.decoder.embedding[tokens(5, 8)]
    jac = jax.jacobian(lambda x: model.decoder.apply(x, memory))(x)  # (T, d, T, d): output (t, i) by input (s, j)
    influence = np.abs(np.asarray(jac)).sum(axis=(1, 3))  # (T, T)
    future = np.triu(np.ones((8, 8), dtype=bool), k=1)  # s > t
    assert np.all(influence[future] == 0)
    assert np.all(influence[~future] > 0)  # and every past token does matter


def to_equinox(layer):
    """equinox.nn.MultiheadAttention with the weights of an attnbook.mha.MultiHeadAttention (as in chapter 4)."""
    d, h, k = layer.w_q.shape
    v, d_out = layer.w_v.shape[2], layer.w_o.shape[2]
    reference = eqx.nn.MultiheadAttention(h, d, output_size=d_out, qk_size=k, vo_size=v, use_query_bias=True,
                                          use_key_bias=True, use_value_bias=True, use_output_bias=True,
                                          key=jax.random.key(0))
    to_linear = lambda w, size: w.reshape(d, h * size).T
    return eqx.tree_at(
        lambda m: [m.query_proj.weight, m.query_proj.bias, m.key_proj.weight, m.key_proj.bias,
                   m.value_proj.weight, m.value_proj.bias, m.output_proj.weight, m.output_proj.bias],
        reference,
        [to_linear(layer.w_q, k), layer.b_q.ravel(), to_linear(layer.w_k, k), layer.b_k.ravel(),
         to_linear(layer.w_v, v), layer.b_v.ravel(), layer.w_o.reshape(h * v, d_out).T, layer.b_o])


def test_cross_attention_equals_equinox():
    block = make(6).decoder.blocks[0]
    rng = np.random.default_rng(7)
    x = jnp.asarray(rng.normal(size=(5, D_MODEL)), dtype=jnp.float32)  # decoder side: 5 queries
    memory = jnp.asarray(rng.normal(size=(9, D_MODEL)), dtype=jnp.float32)  # encoder side: 9 keys and values
    out, weights = block.cross_attend(x, memory)
    assert out.shape == (5, D_MODEL) and weights.shape == (HEADS, 5, 9)
    reference = to_equinox(block.cross)(x, memory, memory)
    np.testing.assert_allclose(np.asarray(out), np.asarray(reference), atol=1e-5)


def test_post_norm_block_is_the_papers():
    """A post-LN decoder block against Vaswani et al. (2017), section 3.1, written out in NumPy (float64):
    ``LayerNorm(x + Sublayer(x))`` around masked self-attention, cross-attention and ``max(0, xW1 + b1)W2 + b2``."""
    block = make(8, pre_norm=False).decoder.blocks[1]
    rng = np.random.default_rng(9)
    x = rng.normal(size=(6, D_MODEL))
    memory = rng.normal(size=(4, D_MODEL))
    f64 = lambda a: np.asarray(a, dtype=np.float64)

    def layer_norm(z, norm):
        mean, var = z.mean(axis=-1, keepdims=True), z.var(axis=-1, keepdims=True)
        return (z - mean) / np.sqrt(var + norm.eps) * f64(norm.weight) + f64(norm.bias)

    def attention(layer, xq, xkv, causal):
        heads = []
        for h in range(layer.num_heads):
            q = xq @ f64(layer.w_q)[:, h] + f64(layer.b_q)[h]
            k = xkv @ f64(layer.w_k)[:, h] + f64(layer.b_k)[h]
            v = xkv @ f64(layer.w_v)[:, h] + f64(layer.b_v)[h]
            scores = q @ k.T / np.sqrt(layer.key_dim)
            if causal:
                scores = np.where(np.tril(np.ones(scores.shape, dtype=bool)), scores, -np.inf)
            a = np.exp(scores - scores.max(axis=1, keepdims=True))
            heads.append(a / a.sum(axis=1, keepdims=True) @ v)
        return np.concatenate(heads, axis=1) @ f64(layer.w_o).reshape(-1, layer.d_out) + f64(layer.b_o)  # Concat W^O

    ff = block.feed_forward
    ffn = lambda z: np.maximum(0, z @ f64(ff.hidden.weight) + f64(ff.hidden.bias)) @ f64(ff.project.weight) + f64(ff.project.bias)
    n1, n2, n3 = block.norms
    h1 = layer_norm(x + attention(block.mixer.attention, x, x, causal=True), n1)
    h2 = layer_norm(h1 + attention(block.cross, h1, memory, causal=False), n2)
    expected = layer_norm(h2 + ffn(h2), n3)
    got = block(jnp.asarray(x, dtype=jnp.float32), jnp.asarray(memory, dtype=jnp.float32))
    np.testing.assert_allclose(np.asarray(got), expected, atol=1e-4)


def test_pre_norm_and_ablations_change_the_wiring():
    x = jnp.asarray(np.random.default_rng(10).normal(size=(5, D_MODEL)), dtype=jnp.float32)
    pre = make(11).encoder.blocks[0]
    n1, n2 = (jax.vmap(n) for n in pre.norms)
    h = x + pre.mixer(n1(x))
    np.testing.assert_allclose(np.asarray(pre(x)), np.asarray(h + pre.feed_forward(n2(h))), atol=1e-5)
    bare = make(11, residual=False, feed_forward=False).encoder.blocks[0]
    assert bare.feed_forward is None and len(bare.norms) == 1
    np.testing.assert_allclose(np.asarray(bare(x)), np.asarray(bare.mixer(jax.vmap(bare.norms[0])(x))), atol=1e-6)


@pytest.mark.parametrize("mixer", lm.MIXERS)
def test_every_mixer_runs(mixer):
    model = make(12, mixer=mixer, max_len=16)
    logits = model(tokens(13, 6), tokens(14, 5))
    assert logits.shape == (5, VOCAB) and bool(jnp.all(jnp.isfinite(logits)))


def test_bad_arguments():
    model = make(0)
    with pytest.raises(ValueError, match=r"source must have shape \(S,\).*\(2, 3\)"):
        model(jnp.zeros((2, 3), dtype=jnp.int32), tokens(0, 4))
    with pytest.raises(ValueError, match=r"memory must have shape \(S, d_model=16\), got \(4, 8\)"):
        model.decode(tokens(0, 4), jnp.zeros((4, 8)))
    with pytest.raises(ValueError, match=r"target_in must be integers in \[0, 11\), got 11"):
        model(tokens(0, 4), jnp.asarray([1, 11], dtype=jnp.int32))
    with pytest.raises(TypeError, match="source must be an integer array"):
        model(jnp.zeros(4), tokens(0, 4))
    with pytest.raises(ValueError, match=r"x must have shape \(T, d_model\)"):
        model.encoder.blocks[0](jnp.zeros(D_MODEL))
    with pytest.raises(ValueError, match="memory must be given exactly when"):
        model.decoder.blocks[0](jnp.zeros((3, D_MODEL)))
    with pytest.raises(ValueError, match="kind must be one of"):
        lm.make_mixer("rnn", D_MODEL, causal=True, key=jax.random.key(0))
    with pytest.raises(ValueError, match="length"):
        transformer.greedy_decode(model, tokens(0, 4), 0, 10)
    with pytest.raises(ValueError, match="start must be a token id below vocab_size=11, got 11"):
        transformer.greedy_decode_cached(model, tokens(0, 4), 3, 11)
    with pytest.raises(ValueError, match="cached decoding supports"):
        transformer.greedy_decode_cached(make(0, mixer="aft-conv"), tokens(0, 4), 3, 10)


def test_reversal_data():
    rng = np.random.default_rng(0)
    train = transformer.reversal_data(500, 3, rng)
    test = transformer.reversal_data(200, 3, rng, exclude=train[0])
    sources, targets_in, targets = test
    assert sources.shape == targets_in.shape == targets.shape == (200, 3) and sources.dtype == np.int32
    np.testing.assert_array_equal(targets, sources[:, ::-1])
    np.testing.assert_array_equal(targets_in[:, 0], transformer.START)
    np.testing.assert_array_equal(targets_in[:, 1:], targets[:, :-1])
    seen = {row.tobytes() for row in train[0]}
    assert not any(row.tobytes() in seen for row in sources)  # held out: 700 distinct strings of the 1000
    assert len({row.tobytes() for row in sources}) == 200
    with pytest.raises(TypeError, match="rng must be a NumPy random Generator"):
        transformer.reversal_data(5, 3, 0)
    with pytest.raises(ValueError, match=r"targets must have shape \(N=5, T\), got \(4, 3\); sources has shape \(5, 3\)"):
        transformer.exact_match(make(0), sources[:5], targets[:4])


def test_greedy_decode_batch_is_each_row_decoded_alone():
    """greedy_decode_batch: one program over the rows, each row as greedy_decode_cached (or, cached=False,
    greedy_decode) decodes it from START alone; bad tokens and a mixer without a step are refused."""
    model = transformer.EncoderDecoder(transformer.DIGITS + 1, d_model=D_MODEL, depth=2, heads=HEADS,
                                       key=jax.random.key(3))
    model = randomised(model, 3)
    sources = jnp.asarray(np.random.default_rng(4).integers(0, transformer.DIGITS, (5, 6)), dtype=jnp.int32)
    for cached, decode in [(True, transformer.greedy_decode_cached), (False, transformer.greedy_decode)]:
        batch_tokens, batch_logits = transformer.greedy_decode_batch(model, sources, 7, cached=cached)
        assert batch_tokens.shape == (5, 7) and batch_logits.shape == (5, 7, transformer.DIGITS + 1)
        for row, source in enumerate(sources):
            alone_tokens, alone_logits = decode(model, source, 7, transformer.START)
            np.testing.assert_array_equal(np.asarray(batch_tokens[row]), np.asarray(alone_tokens))
            np.testing.assert_allclose(np.asarray(batch_logits[row]), np.asarray(alone_logits), atol=1e-5)
    with pytest.raises(ValueError, match="sources"):
        transformer.greedy_decode_batch(model, sources.at[0, 0].set(transformer.DIGITS + 1), 7)
    full = transformer.EncoderDecoder(transformer.DIGITS + 1, d_model=D_MODEL, depth=1, heads=HEADS, mixer="aft-full",
                                      key=jax.random.key(5))
    with pytest.raises(ValueError):
        transformer.greedy_decode_batch(full, sources, 7)
    assert transformer.greedy_decode_batch(full, sources, 7, cached=False)[0].shape == (5, 7)
