"""Exercises of chapter 7 (a Transformer, assembled)."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from attnbook import nn
from attnbook import transformer
from attnbook.exercises._core import Exercise, Mistake, normal, register
from attnbook.masking import causal_mask


@jax.jit  # one compiled program per input shape, not one per operation: the check runs it on every case
def pre_ln_feed_forward(x, gamma, beta, w1, b1, w2, b2):
    """x + FFN(LN(x)) with the library's FeedForward and Equinox's LayerNorm carrying the given weights."""
    d, hidden = w1.shape
    norm = eqx.nn.LayerNorm(d)
    norm = eqx.tree_at(lambda n: (n.weight, n.bias), norm, (gamma, beta))
    ff = nn.FeedForward(d, hidden, key=jax.random.key(0))
    ff = eqx.tree_at(lambda f: (f.hidden.weight, f.hidden.bias, f.project.weight, f.project.bias), ff,
                     (w1, b1, w2, b2))
    return x + ff(jax.vmap(norm)(x))


def _ffn_variant(x, gamma, beta, w1, b1, w2, b2, eps_inside=True, ddof=0, residual=True, post_ln=False, axis=-1):
    """7.1 in float64 NumPy, or one of its common mistakes: eps outside the square root, the unbiased variance
    (ddof=1), no residual, post-LN (LN(x + FFN(x))), or the LayerNorm over the tokens (axis=0)."""
    x, gamma, beta, w1, b1, w2, b2 = (np.asarray(a, dtype=np.float64) for a in (x, gamma, beta, w1, b1, w2, b2))

    def norm(y):
        mu = y.mean(axis=axis, keepdims=True)
        var = y.var(axis=axis, ddof=ddof, keepdims=True)
        scale = np.sqrt(var + 1e-5) if eps_inside else np.sqrt(var) + 1e-5
        return gamma * (y - mu) / scale + beta

    ffn = lambda y: np.maximum(0.0, y @ w1 + b1) @ w2 + b2
    if post_ln:
        return norm(x + ffn(x))
    return x + ffn(norm(x)) if residual else ffn(norm(x))


def _ffn_inputs(rng, T=2, d=4, hidden=6, flat_rows=False):
    # Few distinct shapes (T = 1 and 2 in all): every new shape costs JAX a compilation of each operation of the
    # reader's answer in the notebook.
    x = normal(rng, T, d)
    if flat_rows:
        # token 0: features all equal, variance 0, only eps keeps LN finite; token 1: features of size 0.01, variance
        # of the order of eps, where eps outside the square root, sigma + eps, is 4% off (centred near 0, so that
        # E[x^2] - mu^2, as jax.nn.standardize computes it, loses nothing to cancellation in float32)
        x = x.at[1].set(0.01 * x[1]).at[0].set(0.7)
    return {"x": x, "gamma": 1.0 + 0.5 * normal(rng, d), "beta": 0.5 * normal(rng, d),
            "w1": normal(rng, d, hidden), "b1": normal(rng, hidden), "w2": normal(rng, hidden, d), "b2": normal(rng, d)}


@functools.lru_cache(maxsize=None)  # the starter and the solution check the same inputs
def parameter_count(vocab_size, d_model, depth):
    """Parameters of transformer.EncoderDecoder (pre-LN, feed-forward width 4 d_model), as count_parameters counts
    them, on the model's shapes only (eval_shape: nothing is drawn or compiled)."""
    shapes = eqx.filter_eval_shape(
        lambda: transformer.EncoderDecoder(vocab_size, d_model=d_model, depth=depth, heads=1, key=jax.random.key(0)))
    return int(sum(np.prod(leaf.shape) for leaf in jax.tree.leaves(shapes)
                   if jnp.issubdtype(leaf.dtype, jnp.inexact)))


def decoder_masks(T, S, target_length, source_length):
    """(self-attention mask (T, T), cross-attention mask (T, S)) of a decoder with padded target and source:
    chapter 3's causal mask and padding mask, and the padding rule applied to the two sequences of
    cross-attention (written in NumPy: chapter 3's functions compile for every new shape)."""
    queries, keys = np.arange(T) < target_length, np.arange(S) < source_length
    self_mask = np.asarray(causal_mask(T)) & queries[:, None] & queries[None, :]
    return self_mask, queries[:, None] & keys[None, :]


def _count_variant(vocab_size, d_model, depth, final_norms=True, norms=True, cross=True, output_bias=True):
    """7.2's count from its formula, or a common miscount: without the final LayerNorms, without any LayerNorm,
    without cross-attention, without the output layer's bias."""
    V, d, N = vocab_size, d_model, depth
    attention, ffn, norm = 4 * d * d + 4 * d, 8 * d * d + 5 * d, 2 * d if norms else 0
    encoder = attention + ffn + 2 * norm
    decoder = (2 if cross else 1) * attention + ffn + (3 if cross else 2) * norm
    return 3 * V * d + (V if output_bias else 0) + N * (encoder + decoder) + (2 * norm if final_norms else 0)


def _masks_variant(T, S, target_length, source_length, pad_queries=True, causal=True, cross_queries=True):
    """7.3's masks, or a common mistake: the padding queries free in self-attention (pad_queries=False) or in
    cross-attention (cross_queries=False), or no causal part."""
    queries, keys = np.arange(T) < target_length, np.arange(S) < source_length
    self_mask = np.tri(T, dtype=bool) if causal else np.ones((T, T), dtype=bool)
    if pad_queries or not causal:  # (under the causal mask a real query sees no padded key anyway)
        self_mask = self_mask & queries[None, :] & (queries[:, None] if pad_queries else True)
    cross = keys[None, :] & (queries[:, None] if cross_queries else np.ones((T, 1), dtype=bool))
    return self_mask, cross


def _mask_inputs(rng):
    T, S = int(rng.integers(3, 6)), int(rng.integers(3, 6))
    return {"T": T, "S": S, "target_length": int(rng.integers(1, T + 1)), "source_length": int(rng.integers(1, S + 1))}


def score_counts(n):
    """Attention scores (query-key dot products) per head and decoder block to generate n tokens greedily:
    recomputing over a fixed n-token buffer, the book's cache (attends over all n rows, masked), and a cache
    that attends over the rows written so far only."""
    return (n ** 3, n ** 2, n * (n + 1) // 2)


register(
    # 7.1 (implement): one pre-LN feed-forward sub-layer, x + FFN(LN(x)), LayerNorm with eps 1e-5 inside the square
    # root (a token of variance near eps tells it from sigma + eps).
    Exercise(
        id="7.1",
        kind="function",
        reference=pre_ln_feed_forward,
        inputs=_ffn_inputs,
        edge_cases=(_ffn_inputs(np.random.default_rng(71), T=1),
                    _ffn_inputs(np.random.default_rng(72), T=2, flat_rows=True)),
        cases=3,
        rtol=1e-4,
        atol=1e-4,
        mistakes=(
            Mistake("ε is outside the square root: the LayerNorm divides by √(σ² + ε), not by σ + ε, which differs "
                    "for a token whose variance is near ε.",
                    "ε が平方根の外にあります。LayerNorm は σ + ε ではなく √(σ² + ε) で割ります。"
                    "分散が ε に近いトークンでは両者が違います。",
                    answer=lambda **a: _ffn_variant(**a, eps_inside=False)),
            Mistake("the variance is the unbiased one (divided by d - 1, torch.var's default); the LayerNorm divides "
                    "by d.",
                    "分散が不偏分散（d - 1 で割る、torch.var の既定）になっています。LayerNorm は d で割ります。",
                    answer=lambda **a: _ffn_variant(**a, ddof=1)),
            Mistake("the residual is missing: the sub-layer returns x + FFN(LN(x)).",
                    "残差接続がありません。このサブレイヤーは x + FFN(LN(x)) を返します。",
                    answer=lambda **a: _ffn_variant(**a, residual=False)),
            Mistake("that is post-LN, LN(x + FFN(x)); pre-LN normalises the sub-layer's input: x + FFN(LN(x)).",
                    "それは post-LN の LN(x + FFN(x)) です。pre-LN はサブレイヤーの入力を正規化します："
                    "x + FFN(LN(x))。",
                    answer=lambda **a: _ffn_variant(**a, post_ln=True)),
            Mistake("the LayerNorm runs over the tokens (axis 0); it normalises each token, a row, over its d features.",
                    "LayerNorm がトークンの軸（軸 0）にわたっています。正規化するのは各トークン（行）の d 個の特徴量です。",
                    answer=lambda **a: _ffn_variant(**a, axis=0)),
        ),
    ),
    # 7.2 (derive): the parameter count of the chapter's encoder-decoder as a function of its sizes.
    Exercise(
        id="7.2",
        kind="function",
        reference=parameter_count,
        inputs=lambda rng: {"vocab_size": int(rng.integers(2, 13)), "d_model": int(rng.integers(1, 7)),
                            "depth": int(rng.integers(1, 4))},
        edge_cases=({"vocab_size": 11, "d_model": 32, "depth": 2},  # the chapter's model: 60587
                    {"vocab_size": 2, "d_model": 1, "depth": 1}),
        rtol=0.0,
        atol=0.0,
        mistakes=(
            Mistake("the final LayerNorms are missing: pre-LN needs one after the last block of the encoder and one "
                    "after the last block of the decoder, 2d parameters each.",
                    "最後の LayerNorm が抜けています。pre-LN では、エンコーダーとデコーダーそれぞれの最後のブロックの後に "
                    "LayerNorm が 1 つずつ必要で、それぞれ 2d 個のパラメータを持ちます。",
                    answer=lambda **sizes: _count_variant(**sizes, final_norms=False)),
            Mistake("the LayerNorms are missing: each has a scale and a shift, 2d parameters.",
                    "LayerNorm が抜けています。それぞれスケールとシフトの 2d 個のパラメータを持ちます。",
                    answer=lambda **sizes: _count_variant(**sizes, norms=False, final_norms=False)),
            Mistake("the decoder's cross-attention (with its LayerNorm) is missing: each decoder block has two "
                    "attention layers.",
                    "デコーダーのクロスアテンション（とその LayerNorm）が抜けています。デコーダーの各ブロックには"
                    "アテンション層が 2 つあります。",
                    answer=lambda **sizes: _count_variant(**sizes, cross=False)),
            Mistake("the output layer's bias (vocab_size numbers) is missing.",
                    "出力層のバイアス（vocab_size 個）が抜けています。",
                    answer=lambda **sizes: _count_variant(**sizes, output_bias=False)),
        ),
    ),
    # 7.3 (implement): the decoder's masks for a padded target and a padded source.
    Exercise(
        id="7.3",
        kind="function",
        reference=decoder_masks,
        inputs=_mask_inputs,
        edge_cases=({"T": 3, "S": 4, "target_length": 3, "source_length": 4},  # no padding: the chapter's case
                    {"T": 4, "S": 5, "target_length": 2, "source_length": 3},
                    {"T": 1, "S": 2, "target_length": 1, "source_length": 1}),
        mistakes=(
            Mistake("a padding query of the target must attend to nothing: its rows are all False, in the "
                    "self-attention mask and in the cross-attention mask.",
                    "ターゲットのパディングのクエリは何も見てはいけません。その行は自己アテンションのマスクでも"
                    "クロスアテンションのマスクでもすべて False です。",
                    answer=lambda **a: _masks_variant(**a, pad_queries=False, cross_queries=False)),
            Mistake("in the cross-attention mask too, a padding query of the target attends to nothing: its row is all "
                    "False.",
                    "クロスアテンションのマスクでも、ターゲットのパディングのクエリは何も見ません。その行はすべて False です。",
                    answer=lambda **a: _masks_variant(**a, cross_queries=False)),
            Mistake("the causal part of the self-attention mask is missing: query i sees the keys j <= i only.",
                    "自己アテンションのマスクに因果マスクの部分がありません。クエリ i が見るのはキー j <= i だけです。",
                    answer=lambda **a: _masks_variant(**a, causal=False)),
        ),
    ),
    # 7.4 (derive): attention scores computed while decoding n tokens, without and with the KV cache.
    Exercise(
        id="7.4",
        kind="function",
        reference=score_counts,
        inputs=lambda rng: {"n": int(rng.integers(2, 1025))},
        edge_cases=({"n": 1}, {"n": 2}, {"n": 8}),
        rtol=0.0,
        atol=0.0,
        mistakes=(
            Mistake("(c) is off by one: at step t the query also scores the row it has just written, t + 1 rows in all.",
                    "（c）が 1 つずれています。ステップ t のクエリは、書いたばかりの行も含めて t + 1 行とスコアを計算します。",
                    answer=lambda n: (n ** 3, n ** 2, n * (n - 1) // 2)),
            Mistake("(a) grows its buffer: greedy_decode runs the decoder over its fixed buffer of n tokens at every "
                    "step, n × n scores per step.",
                    "（a）でバッファーが伸びています。greedy_decode は毎ステップ n トークンの固定バッファー全体で"
                    "デコーダーを実行するので、1 ステップあたり n × n 個のスコアです。",
                    answer=lambda n: (n * (n + 1) * (2 * n + 1) // 6, n ** 2, n * (n + 1) // 2)),
        ),
    ),
)
