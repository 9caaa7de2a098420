"""Chapter 10: attnbook.latent, multi-head latent attention (DeepSeek-V2, arXiv 2405.04434).

Against a NumPy transcription of the reference implementation's forward pass (Hugging Face
``modeling_deepseek.py``, ``DeepseekV2Attention.forward`` with ``q_lora_rank=None`` as in DeepSeek-V2-Lite),
the absorbed form against the naive one, decoding with the latent cache against the full pass, and the
numerical reason why RoPE is decoupled."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import kv, positional
from attnbook.latent import MultiHeadLatentAttention, parameter_count, rotate


def randomised(layer, seed, scale=0.5):
    rng = np.random.default_rng(seed)
    leaves, treedef = jax.tree.flatten(layer)
    return jax.tree.unflatten(treedef, [jnp.asarray(rng.normal(scale=scale, size=a.shape), dtype=jnp.float32)
                                        for a in leaves])


def tokens(seed, t, d):
    return jnp.asarray(np.random.default_rng(100 + seed).normal(size=(t, d)), dtype=jnp.float32)


def make(d_model=16, heads=4, key_dim=6, rank=10, rope_dim=4, seed=0, **kw):
    return randomised(MultiHeadLatentAttention(d_model, heads, key_dim, rank, rope_dim, key=jax.random.key(seed), **kw),
                      seed, scale=0.3)


def reference_forward(layer, x):
    """A float64 NumPy transcription of ``DeepseekV2Attention.forward`` (Hugging Face ``modeling_deepseek.py``),
    batch 1, no cache, causal mask, ``q_lora_rank=None`` (``q_proj``), no attention bias, no RoPE scaling.

    Its weights are torch ``Linear`` weights ``(out, in)``: ``q_proj (heads * (nope + rope), d)``,
    ``kv_a_proj_with_mqa (rank + rope, d)``, ``kv_b_proj (heads * (nope + v), rank)``, ``o_proj (d, heads * v)``.
    One difference, on purpose: the reference normalises the latent with an RMSNorm (``kv_a_layernorm``) before
    ``kv_b_proj``; the paper's equations do not, so the norm here is the identity.
    """
    h, nope, rope, v_dim, rank = layer.heads, layer.key_dim, layer.rope_dim, layer.value_dim, layer.rank
    f = lambda a: np.asarray(a, dtype=np.float64)
    q_proj = np.concatenate([f(layer.w_q), f(layer.w_qr)], axis=2).reshape(-1, h * (nope + rope)).T
    kv_a_proj_with_mqa = np.concatenate([f(layer.w_dkv), f(layer.w_kr)], axis=1).T
    kv_b_proj = np.concatenate([f(layer.w_uk), f(layer.w_uv)], axis=2).reshape(rank, -1).T
    o_proj = f(layer.w_o).reshape(h * v_dim, -1).T
    kv_a_layernorm = lambda a: a  # the paper's equations: no norm

    hidden_states = f(x)
    q_len = hidden_states.shape[0]
    q = (hidden_states @ q_proj.T).reshape(q_len, h, nope + rope).transpose(1, 0, 2)  # (h, T, q_head_dim)
    q_nope, q_pe = q[..., :nope], q[..., nope:]
    compressed_kv = hidden_states @ kv_a_proj_with_mqa.T
    compressed_kv, k_pe = compressed_kv[:, :rank], compressed_kv[:, rank:]
    k_pe = k_pe.reshape(q_len, 1, rope).transpose(1, 0, 2)  # (1, T, rope): one key for every head
    kv_ = (kv_a_layernorm(compressed_kv) @ kv_b_proj.T).reshape(q_len, h, nope + v_dim).transpose(1, 0, 2)
    k_nope, value_states = kv_[..., :nope], kv_[..., nope:]

    # DeepseekV2RotaryEmbedding + apply_rotary_pos_emb: the interleaved pairs are permuted into halves, then
    # rotate_half; position_ids = arange(T), base 10000.
    inv_freq = 1.0 / (10000 ** (np.arange(0, rope, 2) / rope))
    freqs = np.outer(np.arange(q_len), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos, sin = np.cos(emb), np.sin(emb)

    def rotate_half(a):
        return np.concatenate([-a[..., rope // 2:], a[..., :rope // 2]], axis=-1)

    def apply_rotary_pos_emb(a):
        b, s, d = a.shape
        a = a.reshape(b, s, d // 2, 2).transpose(0, 1, 3, 2).reshape(b, s, d)
        return a * cos + rotate_half(a) * sin

    q_pe, k_pe = apply_rotary_pos_emb(q_pe), apply_rotary_pos_emb(k_pe)
    query_states = np.concatenate([q_nope, q_pe], axis=-1)
    key_states = np.concatenate([k_nope, np.broadcast_to(k_pe, (h, q_len, rope))], axis=-1)
    softmax_scale = (nope + rope) ** (-0.5)
    attn_weights = query_states @ key_states.transpose(0, 2, 1) * softmax_scale
    attn_weights = attn_weights + np.where(np.tril(np.ones((q_len, q_len), bool)), 0.0, -np.inf)
    attn_weights = np.exp(attn_weights - attn_weights.max(-1, keepdims=True))
    attn_weights /= attn_weights.sum(-1, keepdims=True)
    attn_output = (attn_weights @ value_states).transpose(1, 0, 2).reshape(q_len, h * v_dim)
    return attn_output @ o_proj.T


def test_rotate_is_chapter_1s_rope():
    x = tokens(0, 9, 6)
    np.testing.assert_allclose(rotate(x, jnp.arange(9)), positional.rope(x), rtol=1e-6, atol=1e-6)
    three = tokens(1, 9, 4 * 6).reshape(9, 4, 6)  # per head: the same rotation for every head
    np.testing.assert_allclose(rotate(three, jnp.arange(9))[:, 2], positional.rope(three[:, 2]), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(rotate(x, jnp.arange(9) + 5)[:4], positional.rope(jnp.concatenate([x[:1]] * 5 + [x]))[5:9],
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kw", [{}, {"rope_dim": 0}, {"value_dim": 3, "d_out": 5}, {"heads": 1, "rank": 2}])
def test_matches_the_reference_implementation(kw):
    layer = make(**kw)
    x = tokens(2, 12, 16)
    np.testing.assert_allclose(layer(x), reference_forward(layer, x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("rope_dim", [0, 4])  # 0: no RoPE at all; 4: the paper's decoupled RoPE
def test_absorbed_form_equals_the_naive_form(rope_dim):
    layer = make(rope_dim=rope_dim, seed=1)
    x = tokens(3, 12, 16)
    np.testing.assert_allclose(layer.absorbed(x), layer(x), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(layer.scores(x, absorbed=True), layer.scores(x), rtol=1e-4, atol=1e-5)


def test_rope_on_the_up_projected_keys_breaks_the_absorption():
    """With RoPE on the content keys, q_t . R_{j-t} W^UK c_j has a matrix that moves with the key's position:
    the absorbed form (one W^UK folded into the query) no longer gives the scores. The error is as large as the
    scores themselves, except at query and key position 0, where the rotation is the identity."""
    layer = make(seed=2)
    x = tokens(4, 16, 16)
    naive = np.asarray(layer.scores(x, rope_on_content=True))
    absorbed = np.asarray(layer.scores(x, absorbed=True, rope_on_content=True))
    causal = np.tril(np.ones((16, 16), bool))
    gap = np.abs(naive - absorbed)[:, causal]
    relative = gap.mean() / np.abs(naive[:, causal]).mean()
    assert relative > 0.3, relative  # large: the absorbed scores are wrong
    np.testing.assert_allclose(naive[:, 0, 0], absorbed[:, 0, 0], rtol=1e-5, atol=1e-6)  # position 0: no rotation
    decoupled = np.abs(np.asarray(layer.scores(x)) - np.asarray(layer.scores(x, absorbed=True)))[:, causal]
    assert decoupled.mean() / np.abs(naive[:, causal]).mean() < 1e-5  # decoupled RoPE: exact up to rounding


def test_decoding_with_the_latent_cache_equals_the_full_pass():
    layer = make(seed=3)
    x = tokens(5, 10, 16)
    full = layer(x)
    cache = layer.init_cache(10)
    step = eqx.filter_jit(lambda layer, x, cache, t: layer.step(x, cache, t))
    rows = []
    for t in range(10):
        out, cache = step(layer, x[t:t + 1], cache, jnp.asarray(t))  # one compiled step for every t
        rows.append(out[0])
    np.testing.assert_allclose(jnp.stack(rows), full, rtol=1e-4, atol=1e-5)
    c, k_r = layer.latent(x)
    np.testing.assert_allclose(cache[0], c, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(cache[1], k_r, rtol=1e-6, atol=1e-6)
    assert (cache[0].nbytes + cache[1].nbytes) // 10 == kv.cache_bytes_per_token(layer) == (10 + 4) * 4


def test_bias_and_non_causal():
    layer = make(seed=4, causal=False)
    x = tokens(6, 7, 16)
    bias = jnp.asarray(np.random.default_rng(0).normal(size=(4, 7, 7)), jnp.float32)
    out = layer(x, bias)
    assert out.shape == (7, 16) and np.all(np.isfinite(out))
    assert not np.allclose(out, layer(x))
    # a bias of -inf above the diagonal is the causal layer
    causal = make(seed=4)
    mask_bias = jnp.where(jnp.tril(jnp.ones((7, 7), bool)), 0.0, -jnp.inf)
    np.testing.assert_allclose(layer(x, mask_bias), causal(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("d_model, heads, key_dim, rank, rope_dim, value_dim, d_out",
                         [(16, 4, 6, 10, 4, 6, 16), (32, 4, 8, 16, 4, 8, 32), (8, 2, 3, 5, 0, 7, 3)])
def test_parameter_count_formula(d_model, heads, key_dim, rank, rope_dim, value_dim, d_out):
    layer = MultiHeadLatentAttention(d_model, heads, key_dim, rank, rope_dim, value_dim=value_dim, d_out=d_out,
                                     key=jax.random.key(0))
    assert parameter_count(layer) == (d_model * (rank + heads * (key_dim + rope_dim) + rope_dim)
                                      + rank * heads * (key_dim + value_dim) + heads * value_dim * d_out)
    assert (layer.heads, layer.key_dim, layer.rank, layer.rope_dim, layer.value_dim, layer.d_model) == (
        heads, key_dim, rank, rope_dim, value_dim, d_model)


def test_scale_is_one_over_sqrt_of_key_dim_plus_rope_dim():
    layer = make(seed=5)
    x = tokens(7, 5, 16)
    c, k_r = layer.latent(x)
    q_c, q_r = layer.queries(x)
    k_c = jnp.einsum("sr,rhk->shk", c, layer.w_uk)
    by_hand = (np.einsum("thk,shk->hts", q_c, k_c) + np.einsum("thr,sr->hts", q_r, k_r)) / math.sqrt(6 + 4)
    np.testing.assert_allclose(layer.scores(x), by_hand, rtol=1e-5, atol=1e-6)
