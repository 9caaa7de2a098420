"""Chapter 8: T5 buckets, ALiBi's causal bias, learned positions and the position models, against formulas
written out here; the Markov task and its optimum."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import attention, extrapolation as ex, masking, positional
from attnbook.experiments import ch08


def t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """``_relative_position_bucket`` of the T5 code (Mesh TensorFlow), one integer at a time."""
    ret = 0
    n = -relative_position
    if bidirectional:
        num_buckets //= 2
        ret += int(n < 0) * num_buckets
        n = abs(n)
    else:
        n = max(n, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return ret + n
    val_if_large = max_exact + int(math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    return ret + min(val_if_large, num_buckets - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets, max_distance", [(32, 128), (8, 20), (16, 64)])
def test_t5_buckets_match_the_papers_code(bidirectional, num_buckets, max_distance):
    rel = np.arange(-300, 301)
    got = positional.relative_position_bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets,
                                              max_distance=max_distance)
    want = [t5_bucket(int(r), bidirectional, num_buckets, max_distance) for r in rel]
    np.testing.assert_array_equal(got, want)
    assert got.min() >= 0 and got.max() == num_buckets - 1


def test_t5_buckets_causal_examples():
    # One bucket per offset below 16, then logarithmic; 128 and beyond share the last bucket; the future is bucket 0.
    b = positional.relative_position_bucket(np.array([0, -1, -15, -16, -100, -128, -1000, 5]), bidirectional=False)
    assert b.tolist()[:3] == [0, 1, 15] and b[3] == 16 and b[4] == 30 and b[5] == 31 and b[6] == 31 and b[7] == 0


def test_bucket_bad_input():
    with pytest.raises(TypeError, match="relative_position"):
        positional.relative_position_bucket(np.array([0.5]))
    with pytest.raises(ValueError, match="num_buckets"):
        positional.relative_position_bucket(np.array([1]), num_buckets=2)


@pytest.mark.parametrize("heads", [1, 4, 6])
def test_alibi_causal_bias_is_slope_times_j_minus_i(heads):
    T = 9
    bias = np.asarray(positional.alibi_causal_bias(T, heads))
    slopes = positional.alibi_slopes(heads)
    for h in range(heads):
        for i in range(T):
            for j in range(T):
                if j <= i:
                    assert bias[h, i, j] == pytest.approx(slopes[h] * (j - i), abs=1e-7)
                else:
                    assert bias[h, i, j] == -np.inf
    # Below the diagonal it is chapter 1's symmetric bias.
    lower = np.tril(np.ones((T, T), bool))
    np.testing.assert_allclose(bias[:, lower], np.asarray(positional.alibi_bias(T, heads))[:, lower])


def test_learned_positions_clamp_beyond_max_len():
    table = positional.LearnedPositions(4, 3, key=jax.random.key(0))
    rows = np.asarray(table(7))
    np.testing.assert_array_equal(rows[:4], np.asarray(table.table))
    for p in range(4, 7):
        np.testing.assert_array_equal(rows[p], np.asarray(table.table[3]))
    assert table(0).shape == (0, 3)


def test_relative_bias_reads_the_table_by_bucket():
    layer = positional.RelativePositionBias(3, num_buckets=8, max_distance=20, key=jax.random.key(1))
    T = 30
    bias = np.asarray(layer(T))
    table = np.asarray(layer.table)
    assert bias.shape == (3, T, T)
    for i in range(T):
        for j in range(T):
            np.testing.assert_array_equal(bias[:, i, j], table[t5_bucket(j - i, False, 8, 20)])


def _heads_by_hand(layer, x):
    """Per-head queries, keys and values from the layer's Keras-shaped kernels, with NumPy."""
    a = layer.attention
    x = np.asarray(x)
    return [(x @ np.asarray(a.w_q[:, h]) + np.asarray(a.b_q[h]), x @ np.asarray(a.w_k[:, h]) + np.asarray(a.b_k[h]),
             x @ np.asarray(a.w_v[:, h]) + np.asarray(a.b_v[h])) for h in range(a.num_heads)]


def _output_by_hand(layer, heads):
    a = layer.attention
    return sum(np.asarray(o) @ np.asarray(a.w_o[h]) for h, o in enumerate(heads)) + np.asarray(a.b_o)


def test_rope_attention_matches_a_reference():
    model = ex.PositionModel("rope", vocab_size=5, d_model=8, depth=1, heads=2, key=jax.random.key(2))
    layer = model.blocks[0].mixer
    x = jax.random.normal(jax.random.key(3), (6, 8))
    heads = [attention.scaled_dot_product_attention(positional.rope(jnp.asarray(q)), positional.rope(jnp.asarray(k)),
                                                    jnp.asarray(v), masking.causal_mask(6))[0]
             for q, k, v in _heads_by_hand(layer, x)]
    np.testing.assert_allclose(np.asarray(layer(x, process_heads=positional.rope_heads)),
                               _output_by_hand(layer, heads), atol=1e-5)


def test_bias_attention_matches_a_reference():
    model = ex.PositionModel("alibi", vocab_size=5, d_model=8, depth=1, heads=2, key=jax.random.key(4))
    layer = model.blocks[0].mixer
    x = jax.random.normal(jax.random.key(5), (5, 8))
    bias = positional.alibi_causal_bias(5, 2)
    heads = [attention.scaled_dot_product_attention(*(jnp.asarray(a) for a in qkv), masking.causal_mask(5),
                                                    bias=bias[h])[0]
             for h, qkv in enumerate(_heads_by_hand(layer, x))]
    np.testing.assert_allclose(np.asarray(layer(x, bias)), _output_by_hand(layer, heads), atol=1e-5)


@pytest.mark.parametrize("encoding", ex.ENCODINGS)
def test_models_are_causal_and_run_beyond_the_training_length(encoding):
    model = ex.PositionModel(encoding, vocab_size=5, d_model=8, depth=1, heads=2, train_length=6,
                             key=jax.random.key(6))
    tokens = jnp.asarray(np.random.default_rng(0).integers(0, 5, 20), dtype=jnp.int32)
    logits = model(tokens)
    assert logits.shape == (20, 5) and bool(jnp.all(jnp.isfinite(logits)))
    changed = model(tokens.at[12].set((tokens[12] + 1) % 5))
    np.testing.assert_array_equal(np.asarray(changed[:12]), np.asarray(logits[:12]))
    assert not np.allclose(np.asarray(changed[12:]), np.asarray(logits[12:]))


def test_model_bad_input():
    with pytest.raises(ValueError, match="encoding"):
        ex.PositionModel("relative", vocab_size=5, key=jax.random.key(0))
    with pytest.raises(ValueError, match="d_model"):
        ex.PositionModel("rope", vocab_size=5, d_model=12, heads=4, key=jax.random.key(0))
    with pytest.raises(TypeError, match="key"):
        ex.PositionModel("nope", vocab_size=5, key=0)


def test_markov_data_follows_the_table_and_its_optimum():
    rng = np.random.default_rng(0)
    table = ex.markov_table(3, 2, rng=rng)
    x, y, floor = ex.markov_data(table, 2, 4000, 12, rng=rng)
    assert x.shape == y.shape == floor.shape == (4000, 12)
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])
    np.testing.assert_allclose(floor[:, 0], np.log(3))  # the second token is still uniform
    context = x[:, 3] * 3 + x[:, 4]  # y[:, 4] is token 5, drawn after tokens 3 and 4
    entropy = -np.sum(table * np.log(table), axis=1)
    np.testing.assert_allclose(floor[:, 4], entropy[context])
    counts = np.zeros((9, 3))
    np.add.at(counts, (context, y[:, 4]), 1)
    seen = counts.sum(1) > 200
    np.testing.assert_allclose(counts[seen] / counts[seen].sum(1, keepdims=True), table[seen], atol=0.1)
    with pytest.raises(ValueError, match="table"):
        ex.markov_data(table, 3, 10, 5, rng=rng)


def test_train_vmapped_seeds_equal_separate_runs_and_learn():
    rng = np.random.default_rng(0)
    table = ex.markov_table(4, 1, concentration=0.1, rng=rng)
    x, y, _ = ex.markov_data(table, 1, 2 * 40 * 8, 8, rng=rng)
    x, y = x.reshape(2, 40, 8, 8), y.reshape(2, 40, 8, 8)
    options = dict(vocab_size=4, d_model=8, depth=1, heads=2)
    models, losses = ex.train("alibi", [0, 1], x, y, **options)
    assert losses.shape == (2, 40) and np.all(losses[:, -5:].mean(1) < losses[:, :5].mean(1))
    alone, alone_losses = ex.train("alibi", [1], x[1:], y[1:], **options)
    np.testing.assert_allclose(alone_losses[0], losses[1], rtol=1e-4)
    np.testing.assert_allclose(np.asarray(ex.select(alone, 0).head.weight), np.asarray(ex.select(models, 1).head.weight),
                               atol=1e-4)


def test_model_checks_its_tokens():
    model = ex.PositionModel("alibi", vocab_size=5, d_model=8, depth=1, heads=2, key=jax.random.key(0))
    with pytest.raises(TypeError, match="tokens"):
        model(jnp.zeros(4))
    with pytest.raises(ValueError, match="tokens"):
        model(jnp.asarray([0, 5, 1]))
    with pytest.raises(ValueError, match="tokens"):
        model(jnp.asarray([[0, 1]]))


def current_token_reference(table, vocab, order, seq):
    """The current-token-only loss of every target of ``seq`` by enumerating every sequence prefix."""
    import itertools

    out = []
    for t in range(len(seq)):
        if t < order - 1:
            out.append(math.log(vocab))
            continue
        joint = np.zeros((vocab, vocab))  # P(x_t = b, x_{t+1} = c), from all prefixes x_0 .. x_t
        for prefix in itertools.product(range(vocab), repeat=t + 1):
            p = vocab ** -min(order, t + 1)
            for s in range(order, t + 1):
                p *= table[int(np.dot(prefix[s - order:s], vocab ** np.arange(order - 1, -1, -1)))][prefix[s]]
            context = int(np.dot(prefix[t - order + 1:], vocab ** np.arange(order - 1, -1, -1)))
            joint[prefix[t]] += p * table[context]
        q = joint[seq[t]] / joint[seq[t]].sum()
        true = table[int(np.dot(seq[t - order + 1:t + 1], vocab ** np.arange(order - 1, -1, -1)))]
        out.append(float(-np.sum(true * np.log(q))))
    return np.array(out)


@pytest.mark.parametrize("order", [1, 2])
def test_current_token_loss_matches_an_enumeration(order):
    rng = np.random.default_rng(order)
    table = ex.markov_table(3, order, concentration=0.7, rng=rng)
    x, _, floor = ex.markov_data(table, order, 3, 6, rng=rng)
    got = ex.current_token_loss(table, order, x)
    for n in range(3):
        np.testing.assert_allclose(got[n], current_token_reference(table, 3, order, x[n]), rtol=1e-10)
    if order == 1:  # the current token is the whole context: the baseline is the optimum
        np.testing.assert_allclose(got, floor, rtol=1e-10)
    assert np.all(got >= floor - 1e-12)  # in expectation it cannot beat the optimum; per target it is a KL above


def test_eval_data_are_prefixes_of_the_same_sequences():
    x8, y8, f8 = ch08.eval_data(8)
    for m in (1, 2, 4):
        x, y, f = ch08.eval_data(m)
        np.testing.assert_array_equal(x, x8[:, :m * 32])
        np.testing.assert_array_equal(y, y8[:, :m * 32])
        np.testing.assert_array_equal(f, f8[:, :m * 32])


@pytest.mark.parametrize("encoding", ex.ENCODINGS)
def test_attention_weights_and_restricted_attention(encoding):
    model = ex.PositionModel(encoding, vocab_size=5, d_model=8, depth=2, heads=2, train_length=6, key=jax.random.key(3))
    tokens = jnp.asarray(np.random.default_rng(0).integers(0, 5, 12), dtype=jnp.int32)
    logits, weights = model.attention_weights(tokens)
    np.testing.assert_allclose(logits, model(tokens), atol=1e-5)  # the written-out blocks are the model's
    assert weights.shape == (2, 2, 12, 12)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert np.all(np.asarray(weights)[..., np.triu_indices(12, 1)[0], np.triu_indices(12, 1)[1]] == 0)
    np.testing.assert_allclose(model(tokens, max_offset=12), model(tokens), atol=1e-6)  # nothing to restrict
    _, restricted = model.attention_weights(tokens, max_offset=3)
    i, j = np.meshgrid(np.arange(12), np.arange(12), indexing="ij")
    assert np.all(np.asarray(restricted)[..., i - j >= 3] == 0)
    np.testing.assert_allclose(restricted.sum(-1), 1.0, atol=1e-5)
    # with a window of 3 and 2 blocks, position 11 reads tokens 7 .. 11 only
    changed = tokens.at[:7].set((tokens[:7] + 1) % 5)
    np.testing.assert_allclose(model(changed, max_offset=3)[11], model(tokens, max_offset=3)[11], atol=1e-5)
    assert not np.allclose(model(changed)[11], model(tokens)[11], atol=1e-6)


def test_far_attention_fraction_against_a_loop():
    model = ex.PositionModel("alibi", vocab_size=5, d_model=8, depth=1, heads=2, key=jax.random.key(1))
    inputs = np.random.default_rng(1).integers(0, 5, (3, 10)).astype(np.int32)
    got = ex.far_attention_fraction(model, inputs, 4, start=5)
    expected = np.zeros((1, 2))
    for n in range(3):
        w = np.asarray(model.attention_weights(jnp.asarray(inputs[n]))[1])
        for h in range(2):
            expected[0, h] += np.mean([w[0, h, i, :i - 4 + 1].sum() for i in range(5, 10)]) / 3
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    uniform = np.mean([sum(1 for j in range(i + 1) if i - j >= 4) / (i + 1) for i in range(5, 10)])
    assert ex.uniform_far_fraction(10, 4, 5) == pytest.approx(uniform)
