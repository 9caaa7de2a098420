"""Exercises of chapter 7 (a Transformer, assembled)."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from attnbook import nn
from attnbook import transformer
from attnbook.exercises._core import Exercise, normal, register
from attnbook.masking import causal_mask


def pre_ln_feed_forward(x, gamma, beta, w1, b1, w2, b2):
    """x + FFN(LN(x)) with the library's FeedForward and Equinox's LayerNorm carrying the given weights."""
    d, hidden = w1.shape
    norm = eqx.nn.LayerNorm(d)
    norm = eqx.tree_at(lambda n: (n.weight, n.bias), norm, (gamma, beta))
    ff = nn.FeedForward(d, hidden, key=jax.random.key(0))
    ff = eqx.tree_at(lambda f: (f.hidden.weight, f.hidden.bias, f.project.weight, f.project.bias), ff,
                     (w1, b1, w2, b2))
    return x + ff(jax.vmap(norm)(x))


def _ffn_inputs(rng, T=3, d=4, hidden=6, flat_rows=False):
    # Few distinct shapes: every new shape costs JAX a compilation in the notebook.
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
    ),
)
