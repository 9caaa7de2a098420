"""Exercises of chapter 4 (multi-head attention)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from attnbook.exercises._core import Exercise, Mistake, normal, register
from attnbook.mha import MultiHeadAttention, parameter_count


def _layer(rng, d_model, heads, key_dim, value_dim, d_out):
    """A layer with these sizes, random kernels and random (non-zero) biases: a check that only sees
    zero biases cannot catch a bias added in the wrong place (chapter 4, @sec-sum)."""
    layer = MultiHeadAttention(d_model, heads, key_dim, value_dim=value_dim, d_out=d_out,
                               key=jax.random.key(int(rng.integers(1 << 30))))
    biases = lambda m: [m.b_q, m.b_k, m.b_v, m.b_o]
    return eqx.tree_at(biases, layer, [jnp.asarray(rng.normal(scale=0.5, size=b.shape), dtype=jnp.float32)
                                       for b in biases(layer)])


def _attention_case(rng, d_model, heads, key_dim, value_dim, d_out, t_q, t_kv, mask=None):
    if mask is None:
        mask = rng.random((heads, t_q, t_kv)) < 0.6  # some rows fully masked in some heads, by chance
    return {"layer": _layer(rng, d_model, heads, key_dim, value_dim, d_out),
            "x_q": normal(rng, t_q, d_model), "x_kv": normal(rng, t_kv, d_model), "mask": jnp.asarray(mask)}


# Two sets of sizes: the edge case (one head, one query, one key) and one where every size differs
# from its neighbour in the formulas (value_dim != key_dim, d_out != d_model, Tq != Tk). Random cases
# reuse the second: JAX compiles each operation once per shape, so new sizes in every case would cost
# the reader's function and the reference a second or more of compilation per check.
_TINY = dict(d_model=3, heads=1, key_dim=2, value_dim=2, d_out=3, t_q=1, t_kv=1)
_MIXED = dict(d_model=4, heads=3, key_dim=2, value_dim=5, d_out=3, t_q=2, t_kv=3)


class _Cases:
    """Edge cases built when a check first reads them (they hold layers: no JAX work at import)."""

    def __init__(self, make):
        self._make, self._cases = make, None

    def __iter__(self):
        if self._cases is None:
            self._cases = self._make()
        return iter(self._cases)


def _attention_edge_cases():
    rng = np.random.default_rng(4)
    mixed = np.ones((3, 2, 3), dtype=bool)
    mixed[:, 0] = False  # query 0 sees no key in any head: zero output, no b_o
    mixed[1, 1] = False  # query 1 sees nothing in head 1 only: that head adds nothing, b_o is added
    mixed[2, 1, 0] = False
    return [_attention_case(rng, **_TINY, mask=np.ones((1, 1, 1), dtype=bool)),
            _attention_case(rng, **_TINY, mask=np.zeros((1, 1, 1), dtype=bool)),
            _attention_case(rng, **_MIXED, mask=mixed)]


@eqx.filter_jit
def _attend(layer, x_q, x_kv, mask):
    """The library's layer, compiled once per set of sizes."""
    return layer(x_q, x_kv, x_kv, mask)


def _by_hand(layer, x_q, x_kv, mask, scale="key_dim", axis=-1, split="keras", b_o="once"):
    """4.1 in float64 NumPy, with one of the common mistakes when an argument says so.

    scale: "key_dim" (right), "none" (no 1/sqrt(key_dim)), "d_model" (1/sqrt(d_model)); axis: -1 (right, over
    the keys) or -2 (the softmax over the queries); split: "keras" (right) or "transposed", the projected
    queries and keys (T, heads * key_dim) cut as (T, key_dim, heads); b_o: "once" (right: added once, not to a
    query that sees no key in any head), "per_head" (source 004's loop) or "always".
    """
    w = {name: np.asarray(getattr(layer, name), dtype=np.float64) for name in
         ["w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o"]}
    x_q, x_kv, mask = np.asarray(x_q, np.float64), np.asarray(x_kv, np.float64), np.asarray(mask)
    d_model, heads, key_dim = w["w_q"].shape

    def project(x, kernel, bias):
        if split == "keras":
            return np.einsum("td,dhk->htk", x, kernel) + bias[:, None]
        flat = x @ kernel.reshape(d_model, -1) + bias.reshape(-1)  # (T, heads * dim), head-major
        return flat.reshape(len(x), -1, heads).transpose(2, 0, 1)  # cut as (T, dim, heads): wrong

    q, k = project(x_q, w["w_q"], w["b_q"]), project(x_kv, w["w_k"], w["b_k"])
    v = np.einsum("sd,dhv->hsv", x_kv, w["w_v"]) + w["b_v"][:, None]
    divisor = {"key_dim": np.sqrt(key_dim), "none": 1.0, "d_model": np.sqrt(d_model)}[scale]
    scores = np.where(mask, np.einsum("htk,hsk->hts", q, k) / divisor, -np.inf)
    top = scores.max(axis=axis, keepdims=True)
    e = np.where(mask, np.exp(scores - np.where(np.isfinite(top), top, 0.0)), 0.0)
    total = e.sum(axis=axis, keepdims=True)
    weights = e / np.where(total > 0, total, 1.0)
    shares = np.einsum("hts,hsv,hvo->hto", weights, v, w["w_o"])  # (heads, Tq, d_out)
    sees = mask.any(axis=(0, 2))[:, None]
    if b_o == "per_head":
        return np.where(sees, (shares + w["b_o"]).sum(axis=0), 0.0), weights
    if b_o == "always":
        return shares.sum(axis=0) + w["b_o"], weights
    return np.where(sees, shares.sum(axis=0) + w["b_o"], 0.0), weights


def _heads_cut_wrong(inputs, expected, got):
    """4.1: the answer's weights are those of queries and keys cut into heads the wrong way (not the right ones)."""
    weights = np.asarray(got[1], dtype=np.float64)
    wrong = _by_hand(**inputs, split="transposed")[1]
    return (weights.shape == wrong.shape and np.allclose(weights, wrong, atol=1e-4)
            and not np.allclose(weights, np.asarray(expected[1]), atol=1e-4))


def _nan_for_hidden_rows(inputs, expected, got):
    """4.1: NaN in the answer where a query sees no key (the reference has zeros there)."""
    return any(np.isnan(np.asarray(part, dtype=np.float64)).any() for part in got) and not np.asarray(inputs["mask"]).all()


def _count_formula(d_model, heads, key_dim, value_dim, d_out, key_bias_positions, biases=True, key_bias=True,
                   output_bias=True):
    """4.2's count, or a common miscount: without any bias, without the key bias's positions, without b_o."""
    b = 1 if biases else 0
    count = 2 * (d_model + b) * heads * key_dim + (d_model + b) * heads * value_dim + (heads * value_dim + b) * d_out
    if key_bias and biases and key_bias_positions is not None:
        count += (key_bias_positions - 1) * heads * key_dim
    if biases and not output_bias:
        count -= d_out
    return count


def _count(d_model, heads, key_dim, value_dim, d_out, key_bias_positions):
    layer = MultiHeadAttention(d_model, heads, key_dim, value_dim=value_dim, d_out=d_out,
                               key_bias_positions=key_bias_positions, key=jax.random.key(0))
    return parameter_count(layer)


def _random_sizes(rng):
    d_model, heads, key_dim, value_dim, d_out = (int(n) for n in rng.integers(1, 10, size=5))
    positions = None if rng.random() < 0.5 else int(rng.integers(1, 8))
    return {"d_model": d_model, "heads": heads, "key_dim": key_dim, "value_dim": value_dim, "d_out": d_out,
            "key_bias_positions": positions}


def _sizes(d_model, heads, key_dim, value_dim, d_out, key_bias_positions=None):
    return {"d_model": d_model, "heads": heads, "key_dim": key_dim, "value_dim": value_dim, "d_out": d_out,
            "key_bias_positions": key_bias_positions}


register(
    # 4.1 (implement): multi-head attention by hand from the Keras-layout weights, for a query
    # sequence x_q (Tq, d_model), a key/value sequence x_kv (Tk, d_model) and a per-head mask
    # (heads, Tq, Tk); returns the library's (out (Tq, d_out), weights (heads, Tq, Tk)), with the
    # book's convention for queries that see nothing (zero weights; zero output if in every head).
    Exercise(
        id="4.1",
        kind="function",
        reference=_attend,
        inputs=lambda rng: _attention_case(rng, **_MIXED),
        edge_cases=_Cases(_attention_edge_cases),
        cases=4,
        mistakes=(
            Mistake("NaN where a query sees no key: the softmax of a row of -inf is 0/0; give such a row zero weights "
                    "(and the query a zero output if it sees no key in any head).",
                    "キーを 1 つも見ないクエリで NaN になっています。-inf だけの行の softmax は 0/0 です。"
                    "その行の重みはゼロにします（どのヘッドでもキーを見ないクエリの出力もゼロにします）。",
                    matches=_nan_for_hidden_rows),
            Mistake("b_o is added once per head (source 004's loop); it is added once, to the sum of the heads.",
                    "b_o をヘッドごとに足しています（元記事 004 のループ）。b_o はヘッドの和に 1 回だけ足します。",
                    answer=lambda layer, x_q, x_kv, mask: _by_hand(layer, x_q, x_kv, mask, b_o="per_head")),
            Mistake("b_o is added to a query that sees no key in any head: by the book's convention its output is zero.",
                    "どのヘッドでもキーを見ないクエリにも b_o を足しています。本書の約束では、その出力はゼロです。",
                    answer=lambda layer, x_q, x_kv, mask: _by_hand(layer, x_q, x_kv, mask, b_o="always")),
            Mistake("the 1/√key_dim is missing: divide each head's scores by √key_dim.",
                    "1/√key_dim がありません。各ヘッドのスコアを √key_dim で割ります。",
                    answer=lambda layer, x_q, x_kv, mask: _by_hand(layer, x_q, x_kv, mask, scale="none")),
            Mistake("the scores are divided by √d_model: divide them by √key_dim, the width of a head's queries and keys.",
                    "スコアを √d_model で割っています。ヘッドのクエリとキーの幅である √key_dim で割ります。",
                    answer=lambda layer, x_q, x_kv, mask: _by_hand(layer, x_q, x_kv, mask, scale="d_model")),
            Mistake("the softmax runs over the queries: each query's weights over the keys (the last axis) sum to 1.",
                    "softmax がクエリの軸にわたっています。和が 1 になるのは各クエリのキーにわたる重み（最後の軸）です。",
                    answer=lambda layer, x_q, x_kv, mask: _by_hand(layer, x_q, x_kv, mask, axis=-2)),
            Mistake("the heads are split with the wrong reshape: w_q is (d_model, heads, key_dim), so the projected "
                    "(T, heads * key_dim) splits as (T, heads, key_dim), not (T, key_dim, heads).",
                    "ヘッドへの分け方（reshape）が違います。w_q は (d_model, heads, key_dim) なので、射影した "
                    "(T, heads * key_dim) は (T, key_dim, heads) ではなく (T, heads, key_dim) に分けます。",
                    matches=_heads_cut_wrong),
        ),
    ),
    # 4.2 (derive): the parameter count of a layer with these sizes, with the per-position key bias
    # when key_bias_positions is a number T; 751 for (7, 3, 8, 8, 7, None), as in Keras' summary.
    Exercise(
        id="4.2",
        kind="function",
        reference=_count,
        inputs=_random_sizes,
        edge_cases=(_sizes(7, 3, 8, 8, 7), _sizes(7, 8, 7, 7, 7, 5), _sizes(7, 8, 1, 1, 7, 5), _sizes(2, 1, 1, 1, 2, 1)),
        atol=0,
        rtol=0,
        mistakes=(
            Mistake("the per-position key bias is missing: with key_bias_positions = T, b_k is (heads, T, key_dim), "
                    "one vector per head and key position.",
                    "位置ごとのキーバイアスが抜けています。key_bias_positions = T なら b_k は (heads, T, key_dim) で、"
                    "ヘッドとキーの位置ごとに 1 本のベクトルです。",
                    answer=lambda **sizes: _count_formula(**sizes, key_bias=False)),
            Mistake("the biases are missing: b_q, b_k, b_v and b_o are parameters too.",
                    "バイアスが抜けています。b_q、b_k、b_v、b_o もパラメータです。",
                    answer=lambda **sizes: _count_formula(**sizes, biases=False)),
            Mistake("the output bias b_o (d_out numbers) is missing.",
                    "出力のバイアス b_o（d_out 個）が抜けています。",
                    answer=lambda **sizes: _count_formula(**sizes, output_bias=False)),
        ),
    ),
    # 4.3 (predict, choice): of the ablations on 'add token 2' (key bias, 5 positions), the layer
    # with 1 head of key_dim 7 has fewer parameters (252) than 8 heads of key_dim 1 (287), and the
    # lower loss (0.022 against 0.060 in the chapter's stored table): "B".
    Exercise(
        id="4.3",
        kind="choice",
        reference=lambda: "B",
        choices=("A", "B", "C", "D"),
        mistakes=(
            Mistake("count them with your formula of 4.2: the layer with 1 head of key_dim 7 does not have more "
                    "parameters than the one with 8 heads of key_dim 1.",
                    "4.2 の式で数えてください。key_dim 7 のヘッド 1 つの層は、key_dim 1 のヘッド 8 つの層より"
                    "パラメータが多くはありません。",
                    matches=lambda choice: str(choice).strip().upper() in ("A", "C")),
            Mistake("more heads do not mean a lower loss here: read the two losses printed in the ablations again.",
                    "ここではヘッドが多いほど損失が低いわけではありません。アブレーションで表示した 2 つの損失を"
                    "読み直してください。",
                    answer="D"),
        ),
    ),
    # 4.4 (derive): the lowest expected loss of a position-blind layer on 'replace by token 2' with
    # T tokens of features uniform in [0, 1): Var(x_2 - mean) = (T - 1) / T * 1/12.
    Exercise(
        id="4.4",
        kind="function",
        reference=lambda T: (T - 1) / (12 * T),
        inputs=lambda rng: {"T": int(rng.integers(2, 50))},
        edge_cases=({"T": 2}, {"T": 5}),
        rtol=1e-6,
        atol=0,
        mistakes=(
            Mistake("that is the variance of x_2 minus the mean of the other tokens; the best a position-blind layer "
                    "can output is the mean of all T tokens, x_2 included.",
                    "それは x_2 と、ほかのトークンの平均との差の分散です。位置を見ない層が出せる最良の出力は、"
                    "x_2 も含む T 個すべてのトークンの平均です。",
                    answer=lambda T: T / (12 * (T - 1))),
            Mistake("1/12 is the loss of a constant output, 1/2; a position-blind layer can output the mean of the "
                    "tokens, which knows something about x_2.",
                    "1/12 は定数 1/2 を出力したときの損失です。位置を見ない層はトークンの平均を出力でき、"
                    "その平均は x_2 について情報を持ちます。",
                    answer=lambda T: 1 / 12),
            Mistake("the features are uniform in [0, 1): their variance is 1/12, not E[x²] = 1/3.",
                    "特徴量は [0, 1) の一様分布です。分散は E[x²] = 1/3 ではなく 1/12 です。",
                    answer=lambda T: (T - 1) / (3 * T)),
        ),
    ),
    # 4.5 (explore, number): the key-bias layer trained on 'replace by token 2', evaluated on
    # 'replace by token 4' without retraining: it still outputs token 2, so its expected loss is
    # E[(x_2 - x_4)^2] = 2 sigma^2 = 1/6 (a measured value within 5% passes too).
    Exercise(
        id="4.5",
        kind="number",
        reference=lambda: 2 / 12,
        rtol=0.05,
        atol=0,
        mistakes=(
            Mistake("the layer does not output a constant: it still copies the token it learned to copy, which is "
                    "now the wrong one.",
                    "この層は定数を出力しません。学習したとおりのトークンをコピーし続け、それが今は違うトークンです。",
                    answer=1 / 12),
            Mistake("that is the floor of a position-blind layer on 'replace by token 2'; the key-bias layer sees "
                    "positions, and its target has changed.",
                    "それは「トークン 2 で置き換える」での、位置を見ない層の下限です。キーバイアスの層は位置を見ており、"
                    "しかも目標が変わっています。",
                    answer=1 / 15),
        ),
    ),
)
