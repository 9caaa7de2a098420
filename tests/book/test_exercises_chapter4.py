"""Chapter 4's exercises reject a deliberately wrong answer each (see tests/book/test_exercises.py), and
their references agree with independent computations and with the chapter's stored results."""

import json
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import exercises
from attnbook.exercises import chapter4
from attnbook.mha import MultiHeadAttention, parameter_count
from test_exercises import mistakes_named, wrong_answers_rejected

ROOT = Path(__file__).resolve().parents[2]


def heads_by_hand(layer, x_q, x_kv, mask):
    """Multi-head attention in NumPy (float64), the book's conventions for queries that see nothing."""
    w = {name: np.asarray(getattr(layer, name), dtype=np.float64) for name in ["w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o"]}
    mask = np.asarray(mask)
    q = np.einsum("td,dhk->htk", x_q, w["w_q"]) + w["b_q"][:, None]
    k = np.einsum("sd,dhk->hsk", x_kv, w["w_k"]) + w["b_k"][:, None]
    v = np.einsum("sd,dhv->hsv", x_kv, w["w_v"]) + w["b_v"][:, None]
    scores = np.where(mask, np.einsum("htk,hsk->hts", q, k) / np.sqrt(q.shape[-1]), -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    e = np.where(mask, np.exp(scores - np.where(np.isfinite(top), top, 0.0)), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    weights = e / np.where(total > 0, total, 1.0)
    shares = np.einsum("hts,hsv,hvo->hto", weights, v, w["w_o"])  # (heads, Tq, d_out)
    return shares, weights, w["b_o"], mask.any(axis=(0, 2))


def bias_per_head(layer, x_q, x_kv, mask):  # source 004's loop: b_o added once per head
    shares, weights, b_o, sees = heads_by_hand(layer, x_q, x_kv, mask)
    return np.where(sees[:, None], (shares + b_o).sum(axis=0), 0.0), weights


def standard_count(d_model, heads, key_dim, value_dim, d_out, key_bias_positions):  # forgets the key bias
    return 2 * (d_model + 1) * heads * key_dim + (d_model + 1) * heads * value_dim + (heads * value_dim + 1) * d_out


WRONG = {
    "4.1": bias_per_head,
    "4.2": standard_count,
    "4.3": "D",  # "more heads, more parameters, and 8 heads must do better"
    "4.4": lambda T: T / (12 * (T - 1)),  # the variance of x_2 minus the mean of the *other* tokens
    "4.5": 1 / 12,  # the variance of one token, as if the layer predicted a constant
}


def test_wrong_answers_are_rejected():
    wrong_answers_rejected(WRONG, chapter=4)


def test_the_right_hand_written_layer_passes():
    def by_hand(layer, x_q, x_kv, mask):
        shares, weights, b_o, sees = heads_by_hand(layer, x_q, x_kv, mask)
        return np.where(sees[:, None], shares.sum(axis=0) + b_o, 0.0), weights
    assert exercises.result("4.1", by_hand).passed


@pytest.mark.parametrize("sizes", [(7, 3, 8, 8, 7, None), (7, 8, 7, 7, 7, 5), (14, 8, 7, 7, 7, None), (3, 2, 4, 1, 5, 6)])
def test_parameter_count_is_the_docstring_formula(sizes):
    d_model, heads, key_dim, value_dim, d_out, positions = sizes
    formula = standard_count(*sizes) + ((positions or 1) - 1) * heads * key_dim
    assert exercises.get("4.2").reference(*sizes) == formula


def stored_stdout(lang, source_start):
    """The stored text of the chapter's code cell whose source begins with source_start."""
    nb = json.loads((ROOT / "chapters" / lang / "04-multi-head-attention.ipynb").read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).startswith(source_start))
    return "".join("".join(o.get("text", "")) if o["output_type"] == "stream" else "".join(o["data"]["text/plain"])
                   for o in cell["outputs"] if o["output_type"] in ("stream", "execute_result"))


def test_ablation_answer_follows_from_the_counts_and_the_stored_losses():
    text = stored_stdout("en", "smaller = {")  # the ablation table
    one_head = float(re.search(r"^1 head\s+([\d.]+)", text, re.M)[1])  # the ablation table's loss column
    key_dim_1 = float(re.search(r"^key_dim 1\s+([\d.]+)", text, re.M)[1])
    count = lambda **kw: parameter_count(MultiHeadAttention(7, d_out=7, key_bias_positions=5, key=jax.random.key(0), **kw))
    fewer = count(num_heads=1, key_dim=7) < count(num_heads=8, key_dim=1)
    lower = one_head < key_dim_1
    answer = {(True, True): "B", (False, True): "A", (False, False): "C", (True, False): "D"}[fewer, lower]
    assert answer == exercises.get("4.3").reference()


def test_floor_is_what_the_mean_of_the_tokens_reaches():
    xs = np.random.default_rng(0).random((40_000, 8, 7))
    mse = np.mean((xs.mean(axis=1) - xs[:, 1]) ** 2)
    assert abs(mse - exercises.get("4.4").reference(8)) < 0.001


def test_new_target_loss_is_that_of_predicting_the_wrong_token():
    xs = np.random.default_rng(1).random((40_000, 5, 7))
    assert abs(np.mean((xs[:, 1] - xs[:, 3]) ** 2) - exercises.get("4.5").reference()) < 0.002


def softmax_with_nan(layer, x_q, x_kv, mask):
    """jax.nn.softmax over -inf: NaN for a query that sees no key in a head."""
    q = jnp.einsum("td,dhk->htk", x_q, layer.w_q) + layer.b_q[:, None]
    k = jnp.einsum("sd,dhk->hsk", x_kv, layer.w_k) + layer.b_k[:, None]
    v = jnp.einsum("sd,dhv->hsv", x_kv, layer.w_v) + layer.b_v[:, None]
    weights = jax.nn.softmax(jnp.where(mask, q @ jnp.swapaxes(k, 1, 2) / jnp.sqrt(q.shape[-1]), -jnp.inf), axis=-1)
    return jnp.einsum("hts,hsv,hvo->to", weights, v, layer.w_o) + layer.b_o, weights


def heads_reshaped_wrong(layer, x_q, x_kv, mask):
    """Projects with the flattened kernels, then cuts (T, heads * key_dim) as (T, key_dim, heads)."""
    d_model, heads, key_dim = layer.w_q.shape
    cut = lambda x, w, b: (x @ w.reshape(d_model, -1) + b.reshape(-1)).reshape(len(x), -1, heads).transpose(2, 0, 1)
    q, k = cut(x_q, layer.w_q, layer.b_q), cut(x_kv, layer.w_k, layer.b_k)
    v = jnp.einsum("sd,dhv->hsv", x_kv, layer.w_v) + layer.b_v[:, None]
    scores = jnp.where(mask, q @ jnp.swapaxes(k, 1, 2) / jnp.sqrt(key_dim), -jnp.inf)
    top = jnp.max(scores, axis=-1, keepdims=True)
    e = jnp.where(mask, jnp.exp(scores - jnp.where(jnp.isfinite(top), top, 0.0)), 0.0)
    weights = e / jnp.maximum(e.sum(axis=-1, keepdims=True), 1e-30)
    sees = mask.any(axis=(0, 2))[:, None]
    return jnp.where(sees, jnp.einsum("hts,hsv,hvo->to", weights, v, layer.w_o) + layer.b_o, 0.0), weights


def variant(**options):
    return lambda layer, x_q, x_kv, mask: chapter4._by_hand(layer, x_q, x_kv, mask, **options)


NAMED = {
    "4.1": [softmax_with_nan, bias_per_head, variant(b_o="always"), variant(scale="none"), variant(scale="d_model"),
            variant(axis=-2), heads_reshaped_wrong],
    "4.2": [standard_count,
            lambda d_model, heads, key_dim, value_dim, d_out, key_bias_positions:
                d_model * heads * (2 * key_dim + value_dim) + heads * value_dim * d_out,
            lambda d_model, heads, key_dim, value_dim, d_out, key_bias_positions:
                exercises.get("4.2").reference(d_model, heads, key_dim, value_dim, d_out, key_bias_positions) - d_out],
    "4.3": ["A", "D"],
    "4.4": [WRONG["4.4"], lambda T: 1 / 12, lambda T: (T - 1) / (3 * T)],
    "4.5": [1 / 12, 1 / 15],
}


def test_common_mistakes_are_named():
    mistakes_named(NAMED, chapter=4)
