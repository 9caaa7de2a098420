"""attnbook.induction: the attention-only model (transformer.Stack's option), its scores, ablations and composition.

Each score is checked against a naive loop or a hand-built case whose answer is known; the K-composition score
against a transcription of TransformerLens's reference (``utils.composition_scores`` with
``HookedTransformer.all_composition_scores``: left = OV, right = QK.T for mode "K").
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import corpus, induction, transformer
from attnbook.nn import count_parameters
from attnbook.transformer import Stack
from test_transformer import randomised  # every floating-point leaf perturbed (tests/ is on pytest's path)

VOCAB, D, HEADS = 13, 16, 4


def make(depth=2, seed=0, encoding="rope"):
    return randomised(induction.AttentionOnlyLM(VOCAB, d_model=D, depth=depth, heads=HEADS, encoding=encoding,
                                                key=jax.random.key(seed)), seed)


def tokens(seed, n, t):
    return jnp.asarray(np.random.default_rng(seed).integers(0, VOCAB, (n, t)), dtype=jnp.int32)


# ---------------------------------------------------------------------------------------------
# The model


def test_stack_cross_option_off_is_the_old_decoder():
    """``cross`` left out (None) builds exactly the old decoder (cross=True) and encoder (cross=False)."""
    for decoder in (True, False):
        a = Stack(VOCAB, D, 2, decoder=decoder, heads=HEADS, key=jax.random.key(1))
        b = Stack(VOCAB, D, 2, decoder=decoder, cross=decoder, heads=HEADS, key=jax.random.key(1))
        assert jax.tree.structure(a) == jax.tree.structure(b)
        assert all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))
        assert all((blk.cross is not None) == decoder for blk in a.blocks)
    model = transformer.EncoderDecoder(VOCAB, d_model=D, depth=2, heads=HEADS, key=jax.random.key(2))
    assert all(blk.cross is not None for blk in model.decoder.blocks)
    assert all(blk.cross is None for blk in model.encoder.blocks)
    with pytest.raises(TypeError, match="cross"):
        Stack(VOCAB, D, 2, decoder=True, cross="no", key=jax.random.key(1))


@pytest.mark.parametrize("depth", [1, 2])
def test_attention_only_shapes_and_parts(depth):
    model = induction.AttentionOnlyLM(d_model=32, depth=depth, heads=4, key=jax.random.key(0))
    assert model.vocab_size == corpus.VOCAB_SIZE and model.depth == depth and model.heads == 4 and model.head_dim == 8
    for block in model.body.blocks:
        assert block.feed_forward is None and block.cross is None and block.pre_norm and len(block.norms) == 1
        assert block.mixer.causal
    x = jnp.arange(128, dtype=jnp.int32) % corpus.VOCAB_SIZE
    assert model(x).shape == (128, corpus.VOCAB_SIZE)
    logits, weights, z = induction.forward(model, x[None])
    assert logits.shape == (1, 128, corpus.VOCAB_SIZE) and weights.shape == (1, depth, 4, 128, 128)
    assert z.shape == (1, depth, 128, 4, 8)
    # Parameters: embedding, per layer 4 (d, d) kernels + 4 biases of d + one LayerNorm (2d), final LN, read-out.
    d, v = 32, corpus.VOCAB_SIZE
    assert count_parameters(model) == v * d + depth * (4 * d * d + 4 * d + 2 * d) + 2 * d + d * v + v


def naive_logits(model, x):
    """The model written out for one sequence ``x (T,)`` in NumPy loops: embedding (plus the sinusoids), per layer
    a pre-LN LayerNorm, per head and query a softmax over the keys at or before it (queries and keys rotated by
    their positions under RoPE: pair (2i, 2i+1) of position p turned by the angle p * 10000^(-2i/d)), the heads'
    outputs projected and added to the residual stream; a final LayerNorm and the read-out."""
    f = lambda a: np.asarray(a, np.float64)
    emb = f(model.body.embedding)
    t, d = len(x), emb.shape[1]
    h = emb[np.asarray(x)]
    pos = np.arange(t)
    if model.encoding == "sinusoidal":
        angle = pos[:, None] * 10000.0 ** (-2 * (np.arange(d) // 2) / d)
        h = h + np.where(np.arange(d) % 2 == 0, np.sin(angle), np.cos(angle))

    def norm(ln, v):
        z = (v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + ln.eps)
        return z * f(ln.weight) + f(ln.bias)

    def rotate(v):  # (T, dk)
        out = v.copy()
        dk = v.shape[1]
        for i in range(dk // 2):
            a = pos * 10000.0 ** (-2 * i / dk)
            out[:, 2 * i] = v[:, 2 * i] * np.cos(a) - v[:, 2 * i + 1] * np.sin(a)
            out[:, 2 * i + 1] = v[:, 2 * i] * np.sin(a) + v[:, 2 * i + 1] * np.cos(a)
        return out

    for block in model.body.blocks:
        att = block.mixer.attention
        u = norm(block.norms[0], h)
        out = np.zeros_like(h) + f(att.b_o)
        for head in range(model.heads):
            q = u @ f(att.w_q)[:, head] + f(att.b_q)[head]
            k = u @ f(att.w_k)[:, head] + f(att.b_k)[head]
            v = u @ f(att.w_v)[:, head] + f(att.b_v)[head]
            if model.encoding == "rope":
                q, k = rotate(q), rotate(k)
            for i in range(t):
                s = k[:i + 1] @ q[i] / np.sqrt(q.shape[1])
                a = np.exp(s - s.max())
                out[i] += (a / a.sum()) @ v[:i + 1] @ f(att.w_o)[head]
        h = h + out
    h = norm(model.body.final_norm, h)
    return h @ f(model.head.weight) + f(model.head.bias)


@pytest.mark.parametrize("encoding", induction.ENCODINGS)
def test_the_model_against_a_naive_loop(encoding):
    model = make(encoding=encoding)
    x = tokens(3, 1, 12)[0]
    np.testing.assert_allclose(model(x), naive_logits(model, x), atol=2e-4)
    if encoding == "sinusoidal":  # chapter 7's decoder body, as it is, gives the same logits
        np.testing.assert_allclose(model(x), model.head(model.body(x)), atol=1e-5)


@pytest.mark.parametrize("encoding", induction.ENCODINGS)
def test_forward_equals_the_model_and_is_causal(encoding):
    model = make(encoding=encoding)
    x = tokens(0, 3, 20)
    logits, weights, _ = induction.forward(model, x)
    assert np.allclose(logits, jax.vmap(model)(x), atol=1e-5)
    # Causal: no weight above the diagonal, every row sums to 1, and a later token changes no earlier logit.
    assert np.all(np.triu(np.asarray(weights), 1) == 0) and np.allclose(weights.sum(-1), 1, atol=1e-5)
    y = x.at[:, 12].set((x[:, 12] + 1) % VOCAB)
    other = induction.forward(model, y)[0]
    assert np.array_equal(np.asarray(other[:, :12]), np.asarray(logits[:, :12]))
    assert not np.allclose(other[:, 12:], logits[:, 12:])


# ---------------------------------------------------------------------------------------------
# Scores of attention patterns


def causal_softmax(seed, n, t):
    rng = np.random.default_rng(seed)
    scores = np.where(np.tril(np.ones((t, t), bool)), rng.normal(size=(n, t, t)) * 2, -np.inf)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    return w / w.sum(-1, keepdims=True)


def test_previous_token_score_hand_built_and_naive():
    t = 10
    previous = np.eye(t, k=-1)
    previous[0, 0] = 1.0  # the first query has no previous token; it attends to itself
    assert np.isclose(induction.previous_token_score(previous), 1.0)
    assert np.isclose(induction.previous_token_score(np.eye(t)), 0.0)  # attends to itself only
    uniform = np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None]
    assert np.isclose(induction.previous_token_score(uniform), np.mean([1 / (i + 1) for i in range(1, t)]))
    w = causal_softmax(0, 3, t)
    naive = [np.mean([w[n, i, i - 1] for i in range(1, t)]) for n in range(3)]
    assert np.allclose(induction.previous_token_score(w), naive)


def test_induction_score_hand_built_and_naive():
    p = 6
    w = np.zeros((2 * p, 2 * p))
    w[:p, 0] = 1.0  # the first copy: anything (here, the first token)
    for i in range(p, 2 * p):
        w[i, i - p + 1] = 1.0  # the token after the first occurrence of token i
    assert np.isclose(induction.induction_score(w, p), 1.0)
    assert np.isclose(induction.induction_score(np.eye(2 * p), p), 0.0)
    # Attending to the first occurrence itself (a "duplicate-token" head) is not induction.
    dup = np.eye(2 * p)
    dup[p:] = np.eye(2 * p)[:p]
    assert np.isclose(induction.induction_score(dup, p), 0.0)
    r = causal_softmax(1, 4, 2 * p)
    naive = [np.mean([r[n, i, i - p + 1] for i in range(p, 2 * p)]) for n in range(4)]
    assert np.allclose(induction.induction_score(r, p), naive)
    with pytest.raises(ValueError, match="T >= 14"):
        induction.induction_score(r, 7)


def test_repeated_random_tokens():
    x = np.asarray(induction.repeated_random_tokens(jax.random.key(0), 5, 9, 11))
    assert x.shape == (5, 18) and x.dtype == np.int32 and x.min() >= 0 and x.max() < 11
    assert np.array_equal(x[:, :9], x[:, 9:])
    y = np.asarray(induction.repeated_random_tokens(jax.random.key(0), 50, 9, 11, low=3))
    assert y.min() >= 3 and y.max() < 11 and len(np.unique(y)) == 8
    with pytest.raises(ValueError, match="low must be below"):
        induction.repeated_random_tokens(jax.random.key(0), 5, 9, 11, low=11)


def test_periodic_random_tokens():
    """Each row repeats its first P tokens, P in [shortest, longest] and varying between rows; a naive loop finds
    each row's smallest period."""
    x = np.asarray(induction.periodic_random_tokens(jax.random.key(1), 200, 40, 5, 9, 30, low=3))
    assert x.shape == (200, 40) and x.dtype == np.int32 and x.min() >= 3 and x.max() < 30
    periods = []
    for row in x:
        period = next(p for p in range(1, 41) if all(row[t] == row[t - p] for t in range(p, 40)))
        periods.append(period)
    assert set(periods) == {5, 6, 7, 8, 9}  # (a row of period 6 could have period 2 or 3: odds 27**-3 at this seed)
    with pytest.raises(ValueError, match="shortest must be at most longest"):
        induction.periodic_random_tokens(jax.random.key(0), 2, 10, 6, 5)
    with pytest.raises(ValueError, match="low must be below"):
        induction.periodic_random_tokens(jax.random.key(0), 2, 10, 2, 5, 11, low=11)


def test_scores_of_hand_built_patterns_of_a_two_layer_model():
    """Patterns shaped as the model's ``(N, depth, heads, T, T)``: layer 0 head 0 attends to the previous token,
    layer 1 head 0 is an induction head, the other heads attend uniformly: each scores as it should."""
    p, heads = 7, 4
    w = np.zeros((1, 2, heads, 2 * p, 2 * p))
    w[0, 0, 0] = np.eye(2 * p, k=-1)
    w[0, 0, 0, 0, 0] = 1.0
    w[0, 1, 0, :p, 0] = 1.0
    w[0, 1, 0, np.arange(p, 2 * p), np.arange(1, p + 1)] = 1.0
    w[:, :, 1:] = np.tril(np.ones((2 * p, 2 * p))) / np.arange(1, 2 * p + 1)[:, None]
    prev = np.asarray(induction.previous_token_score(w))[0]
    ind = np.asarray(induction.induction_score(w, p))[0]
    assert prev.shape == ind.shape == (2, heads)
    assert np.isclose(prev[0, 0], 1.0) and np.isclose(ind[1, 0], 1.0)
    assert np.isclose(ind[0, 0], 0.0) and prev[1, 0] < 0.2
    assert np.all(prev[:, 1:] < 0.5) and np.all(ind[:, 1:] < 0.2)


# ---------------------------------------------------------------------------------------------
# Losses and ablations


def test_loss_per_position_against_a_naive_loop_and_in_context_loss():
    model = make()
    x, y = tokens(1, 4, 15), tokens(2, 4, 15)
    naive = np.zeros(15)
    for n in range(4):
        logp = jax.nn.log_softmax(model(x[n]))
        naive += [-float(logp[t, y[n, t]]) for t in range(15)]
    assert np.allclose(induction.loss_per_position(model, x, y), naive / 4, atol=1e-5)
    curve = np.arange(130.0)
    assert float(induction.in_context_loss(curve)) == 108.0  # L(120) - L(12)
    assert float(induction.in_context_loss(curve, 3, 5)) == 2.0
    assert float(induction.in_context_loss(curve, 10, 100, width=8)) == 90.0  # mean(100..107) - mean(10..17)
    with pytest.raises(ValueError, match="early \\+ width <= late and late \\+ width <= T = 100"):
        induction.in_context_loss(curve[:100])
    with pytest.raises(ValueError, match="early \\+ width <= late"):
        induction.in_context_loss(curve, 10, 14, width=5)


def _without_head(model, layer, head, constant=None):
    """The model with head (layer, head)'s output replaced by ``constant`` by editing weights: W_O[head] = 0 and,
    for a constant output c, the output bias b_O += c W_O[head]."""
    mha = model.body.blocks[layer].mixer.attention
    w_o = mha.w_o.at[head].set(0.0)
    b_o = mha.b_o if constant is None else mha.b_o + constant @ mha.w_o[head]
    return eqx.tree_at(lambda m: (m.body.blocks[layer].mixer.attention.w_o, m.body.blocks[layer].mixer.attention.b_o),
                       model, (w_o, b_o))


@pytest.mark.parametrize("layer,head", [(0, 1), (1, 3)])
def test_zero_and_mean_ablation_equal_edited_weights(layer, head):
    model = make()
    x = tokens(3, 5, 12)
    ablated = np.zeros((2, HEADS), bool)
    ablated[layer, head] = True
    logits, _, z = induction.forward(model, x, ablated)
    assert np.allclose(logits, jax.vmap(_without_head(model, layer, head))(x), atol=1e-4)
    assert np.all(np.asarray(z[:, layer, :, head]) == 0)
    # Mean ablation: the mean output over the reference sequences and positions, by a naive loop.
    ref = tokens(4, 6, 12)
    _, weights, _ = induction.forward(model, ref)
    zs = np.asarray(induction.forward(model, ref)[2])
    naive = np.mean([zs[n, layer, t, head] for n in range(6) for t in range(12)], axis=0)
    mean = np.asarray(induction.mean_head_outputs(model, ref))
    assert np.allclose(mean[layer, head], naive, atol=1e-6)
    logits, _, z = induction.forward(model, x, ablated, mean)
    assert np.allclose(logits, jax.vmap(_without_head(model, layer, head, mean[layer, head]))(x), atol=1e-4)
    assert np.allclose(z[:, layer, :, head], mean[layer, head], atol=1e-5)
    # The ablation tables hold these numbers.
    y = tokens(5, 5, 12)
    table = induction.ablation_losses(model, x, y, "mean", reference=ref)
    direct = induction.loss_per_position(_without_head(model, layer, head, mean[layer, head]), x, y).mean()
    assert np.isclose(table[layer, head], float(direct), atol=1e-4)


def test_ablation_induction_scores_of_a_layer_zero_head_change_layer_one_only():
    model = make()
    rep = induction.repeated_random_tokens(jax.random.key(1), 4, 8, VOCAB)
    table = induction.ablation_induction_scores(model, rep, 8)
    assert table.shape == (2, HEADS, 2, HEADS)
    clean = np.asarray(induction.induction_score(induction.attention_weights(model, rep), 8).mean(0))
    # Ablating a layer-1 head cannot change any head's pattern (layer 1's queries and keys come before its output).
    assert np.allclose(table[1], clean[None], atol=1e-6)
    # Ablating a layer-0 head leaves layer 0's patterns and changes layer 1's.
    assert np.allclose(table[0][:, 0], clean[0][None], atol=1e-6)
    assert not np.allclose(table[0][:, 1], clean[1][None], atol=1e-4)


# ---------------------------------------------------------------------------------------------
# Composition


def tl_composition_scores(left, right):
    """TransformerLens ``utils.composition_scores`` on full matrices, transcribed (torch -> numpy):
    ``comp_norms / r_norms / l_norms`` with ``comp_norms = ||left @ right||_F``."""
    r_norms = np.linalg.norm(right, axis=(-2, -1))
    l_norms = np.linalg.norm(left, axis=(-2, -1))
    comp_norms = np.linalg.norm(left @ right, axis=(-2, -1))
    return comp_norms / r_norms / l_norms


def test_composition_score_hand_built():
    e = np.eye(5)
    one = np.outer(e[0], e[0])
    assert np.isclose(induction.composition_score(one, one), 1.0)  # writes e0, reads e0
    assert np.isclose(induction.composition_score(one, np.outer(e[1], e[1])), 0.0)  # writes e0, reads e1 only
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(3, 5, 5)), rng.normal(size=(3, 5, 5))
    assert np.allclose(induction.composition_score(a, b), tl_composition_scores(a, b))
    assert np.all(induction.composition_score(a, b) <= 1.0)
    with pytest.raises(ValueError, match="must chain"):
        induction.composition_score(np.ones((5, 4)), np.ones((5, 4)))


def test_k_composition_matches_transformer_lens_reference():
    model = make()
    qk, ov = induction.qk_ov(model)
    # Per head, with the LayerNorm gain folded into the reading side: W_QK = diag(g) W_Q (diag(g) W_K)^T.
    for layer, block in enumerate(model.body.blocks):
        mha, g = block.mixer.attention, np.asarray(block.norms[0].weight)
        for h in range(HEADS):
            w_q, w_k = g[:, None] * np.asarray(mha.w_q[:, h]), g[:, None] * np.asarray(mha.w_k[:, h])
            w_v, w_o = g[:, None] * np.asarray(mha.w_v[:, h]), np.asarray(mha.w_o[h])
            assert np.allclose(qk[layer, h], w_q @ w_k.T, atol=1e-5)
            assert np.allclose(ov[layer, h], w_v @ w_o, atol=1e-5)
    for mode, right in (("Q", qk), ("K", np.swapaxes(qk, -1, -2)), ("V", ov)):  # all_composition_scores
        scores = induction.composition_scores(model, mode)
        for h0 in range(HEADS):
            for h1 in range(HEADS):
                assert np.isclose(scores[0, h0, 1, h1], tl_composition_scores(ov[0, h0], right[1, h1]))
        assert np.all(scores[1] == 0) and np.all(scores[0, :, 0] == 0)  # only earlier into later layers
    # The K score in Elhage et al.'s column-vector form, ||W_QK^T W_OV|| with their W = our W^T, is the same number.
    k = induction.composition_scores(model, "K")
    col_qk, col_ov = qk[1, 2].T, ov[0, 1].T
    elhage = np.linalg.norm(col_qk.T @ col_ov) / (np.linalg.norm(col_qk) * np.linalg.norm(col_ov))
    assert np.isclose(k[0, 1, 1, 2], elhage)


# ---------------------------------------------------------------------------------------------
# Bad input


def test_bad_inputs_raise_clear_errors():
    model = make()
    x = tokens(0, 2, 8)
    with pytest.raises(TypeError, match="model must be an AttentionOnlyLM"):
        induction.forward(transformer.EncoderDecoder(VOCAB, key=jax.random.key(0)), x)
    with pytest.raises(ValueError, match=r"ablated must be a boolean array of shape \(depth, heads\) = \(2, 4\)"):
        induction.forward(model, x, np.zeros((2, 3), bool))
    with pytest.raises(ValueError, match="replacement must have shape"):
        induction.forward(model, x, np.zeros((2, 4), bool), np.zeros((2, 4, 3)))
    with pytest.raises(ValueError, match="replacement needs ablated"):
        induction.forward(model, x, None, np.zeros((2, 4, 4)))
    with pytest.raises(ValueError, match=r"inputs must be integers in \[0, 13\)"):
        induction.forward(model, x.at[0, 0].set(13))
    with pytest.raises(ValueError, match=r"inputs must have"):
        induction.forward(model, x[0])
    with pytest.raises(ValueError, match="mode must be one of"):
        induction.ablation_losses(model, x, x, "half")
    with pytest.raises(ValueError, match="mode must be 'Q', 'K' or 'V'"):
        induction.composition_scores(model, "O")
    with pytest.raises(ValueError, match="targets must have the shape of inputs"):
        induction.loss_per_position(model, x, x[:, :5])
    with pytest.raises(ValueError, match=r"weights must have shape \(\.\.\., T, T\)"):
        induction.previous_token_score(np.ones((3, 4)))
