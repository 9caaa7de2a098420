"""Appendix: attention bugs from real projects, the smallest buggy versions and the properties that catch them.

Each class of bug that public issue trackers report again and again has here

- the smallest buggy version, a few lines written as the project wrote it (the appendix prints its source);
- the correct version, the library's function or a few lines built from the library's parts;
- a *property*: a function that takes a version, runs it on fixed random inputs (seeds visible in the
  signature) and returns a :class:`Finding`, the measured deviation beside the tolerance it is judged by.

:func:`check` prints one table per property, every version on a row, ``✓`` where the property holds and ``✗``
where it fails, with the measured number. The table is language-neutral (property and function names,
numbers, symbols), so both editions print it alike. tests/lib/test_bugs.py shows every buggy version failing its
property and every correct one passing it.

A failure prints its measured number (two significant digits: it is large, far from any rounding edge); a pass
prints only that it is below the tolerance, since a number of the size of float32 rounding changes with the
CPU.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .attention import masked_softmax, scaled_dot_product_attention
from .masking import causal_mask, sliding_window_mask
from .positional import YaRNScaling, frequencies, rope

# ---------------------------------------------------------------------------------------------
# Findings and their table


@dataclasses.dataclass(frozen=True)
class Finding:
    """What a property measured on one version: ``deviation`` (NaN where the version returned NaN), judged
    against ``tolerance``. The property holds when the deviation is finite and at most the tolerance."""

    deviation: float
    tolerance: float

    @property
    def holds(self) -> bool:
        return bool(np.isfinite(self.deviation) and self.deviation <= self.tolerance)

    def __str__(self) -> str:
        if self.holds:
            return f"✓ ≤ {self.tolerance:g}"
        return f"✗ {self.deviation:.2g}"


def _deviation(got, expected) -> float:
    """Largest absolute difference; NaN if ``got`` holds a NaN where ``expected`` does not (inf for inf)."""
    got, expected = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    if np.any(np.isnan(got) & ~np.isnan(expected)):
        return math.nan
    return float(np.max(np.abs(got - expected), initial=0.0))


PHONE_COLUMNS = 37
"""The longest printed line that fits a phone's output column (tools/bookcheck.py): a table whose rows would be
longer puts each finding on a line of its own, under its version's name."""


def check(prop: Callable[..., Finding], *versions: Callable, **settings) -> None:
    """Run ``prop`` on each version and print a row per version: its name and the finding."""
    findings = [prop(version, **settings) for version in versions]
    width = max(len(v.__name__) for v in versions)
    one_line = 2 + width + 2 + max(len(str(f)) for f in findings) <= PHONE_COLUMNS
    print(prop.__name__)
    for version, finding in zip(versions, findings):
        print(f"  {version.__name__:<{width}}  {finding}" if one_line else f"  {version.__name__}\n    {finding}")


def _normal(seed: int, *shape: int) -> jax.Array:
    return jnp.asarray(np.random.default_rng(seed).normal(size=shape), dtype=jnp.float32)


# ---------------------------------------------------------------------------------------------
# 1. Inverted boolean masks (rasbt/LLMs-from-scratch #1061; PyTorch's nn.MultiheadAttention convention)


def attention_with_mha_style_mask(q, k, v):
    # nn.MultiheadAttention's convention: True = may NOT attend (the future, above the diagonal)
    hidden = jnp.triu(jnp.ones((len(q), len(k)), dtype=bool), k=1)
    return scaled_dot_product_attention(q, k, v, mask=hidden)[0]  # but here True = may attend


def causal_attention(q, k, v):
    return scaled_dot_product_attention(q, k, v, mask=causal_mask(len(q)))[0]


def future_tokens_do_not_leak(attend, *, length: int = 6, d: int = 4, seed: int = 0) -> Finding:
    """Changing the last token (its query, key and value) leaves every earlier output unchanged."""
    q, k, v = (_normal(seed + i, length, d) for i in range(3))
    nudge = _normal(seed + 3, 3, d)
    before = attend(q, k, v)
    after = attend(q.at[-1].add(nudge[0]), k.at[-1].add(nudge[1]), v.at[-1].add(nudge[2]))
    return Finding(_deviation(after[:-1], before[:-1]), 1e-6)


# ---------------------------------------------------------------------------------------------
# 2. Fully masked rows (d2l-ai/d2l-en #2423: uniform weights; -inf fills: NaN)


def softmax_filled_with_large_negative(scores, mask):
    return jax.nn.softmax(jnp.where(mask, scores, -1e6), axis=-1)  # d2l's masked_softmax fills -1e6


def softmax_filled_with_minus_inf(scores, mask):
    return jax.nn.softmax(jnp.where(mask, scores, -jnp.inf), axis=-1)


def fully_masked_rows_are_zero(softmax, *, seed: int = 0) -> Finding:
    """A query that may see no key gets zero weights (and so a zero output); the other rows are the softmax
    over the keys they may see."""
    scores = _normal(seed, 3, 4)
    mask = jnp.asarray([[True, True, False, False], [False] * 4, [True, False, True, True]])
    exp = np.where(mask, np.exp(np.asarray(scores, dtype=np.float64)), 0.0)
    expected = exp / np.maximum(exp.sum(axis=-1, keepdims=True), 1e-300)  # row 1: 0 / tiny = 0
    return Finding(_deviation(softmax(scores, mask), expected), 1e-6)


# ---------------------------------------------------------------------------------------------
# 3. Causal alignment when queries and keys differ in number (pytorch #108108, #144858; mlx #2836;
#    onnx #8054, #8068)


def top_left_causal_attention(q, k, v):
    # the mask of SDPA's is_causal=True: query i sees keys j <= i, counted from the first key
    mask = jnp.tril(jnp.ones((len(q), len(k)), dtype=bool))
    return scaled_dot_product_attention(q, k, v, mask=mask)[0]


def cached_causal_attention(q, k, v):
    """The ``Tq`` new queries are the last ``Tq`` positions of the ``Tk`` keys: the causal mask's last rows."""
    return scaled_dot_product_attention(q, k, v, mask=causal_mask(len(k))[len(k) - len(q):])[0]


def queries_after_a_cache_see_their_past(attend, *, keys: int = 5, seed: int = 0) -> Finding:
    """The last ``Tq`` queries against all ``Tk`` keys give the last ``Tq`` rows of causal attention over
    all ``Tk`` positions (``Tq = 1``: one decoded token; ``Tq = 2``: a chunk after a cache)."""
    q, k, v = (_normal(seed + i, keys, 4) for i in range(3))
    full = causal_attention(q, k, v)
    return Finding(max(_deviation(attend(q[keys - n:], k, v), full[keys - n:]) for n in (1, 2)), 1e-5)


# ---------------------------------------------------------------------------------------------
# 4. Sliding windows: which keys, and the cache trimmed to them (transformers #29623, vLLM #3385,
#    mlx-lm #390; karpathy/nanochat #452, #456)


def window_mask_one_too_wide(length, window):
    offset = jnp.arange(length)[:, None] - jnp.arange(length)[None, :]  # i - j
    return (offset >= 0) & (offset <= window)  # itself and `window` keys before: window + 1 in all


def window_semantics(window_mask, *, length: int = 8, window: int = 3) -> Finding:
    """Query ``i`` sees itself and the ``window - 1`` keys before it: ``min(i + 1, window)`` keys, the latest.
    (Measured: how many entries of the mask differ from that.)"""
    i, j = np.arange(length)[:, None], np.arange(length)[None, :]
    expected = (j <= i) & (i - j < window)
    return Finding(float(np.sum(np.asarray(window_mask(length, window)) != expected)), 0)


def decode_ignoring_the_window(q, k_seen, v_seen, window):
    # one new query (Tq = 1) against every key seen so far: no mask needed, so the window is forgotten
    return scaled_dot_product_attention(q, k_seen, v_seen)[0]


def decode_with_window_plus_one(q, k_seen, v_seen, window):
    keep = slice(-(window + 1), None)  # the window before the new token, plus the new token
    return scaled_dot_product_attention(q, k_seen[keep], v_seen[keep])[0]


def decode_with_trimmed_cache(q, k_seen, v_seen, window):
    """One decoding step with the cache trimmed to the last ``window`` keys (the new one included)."""
    return scaled_dot_product_attention(q, k_seen[-window:], v_seen[-window:])[0]


def trimmed_cache_matches_window(decode, *, length: int = 8, window: int = 3, seed: int = 0) -> Finding:
    """Decoding token by token (``decode(q_t, k[:t+1], v[:t+1], window)``) gives the outputs of the whole
    sequence under :func:`attnbook.masking.sliding_window_mask`."""
    q, k, v = (_normal(seed + i, length, 4) for i in range(3))
    full = scaled_dot_product_attention(q, k, v, mask=sliding_window_mask(length, window))[0]
    steps = jnp.concatenate([decode(q[t:t + 1], k[:t + 1], v[:t + 1], window) for t in range(length)])
    return Finding(_deviation(steps, full), 1e-5)


# ---------------------------------------------------------------------------------------------
# 5. RoPE conventions: adjacent pairs against split halves (raiyanyahya/how-to-train-your-gpt #6;
#    transformers #25199)


def rotate_half(x):
    half = x.shape[-1] // 2
    return jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)  # pairs (i, i + d/2)


def rope_rotate_half_interleaved_angles(x):
    angles = np.arange(len(x))[:, None] * frequencies(x.shape[1])[None, :]
    angles = np.repeat(angles, 2, axis=1)  # [θ0, θ0, θ1, θ1, ...]: the layout of adjacent pairs
    return x * jnp.cos(angles) + rotate_half(x) * jnp.sin(angles)  # but split-half rotation


def rope_rotate_half(x):
    angles = np.arange(len(x))[:, None] * frequencies(x.shape[1])[None, :]
    angles = np.concatenate([angles, angles], axis=1)  # [θ0, θ1, ..., θ0, θ1, ...]: split halves throughout
    return x * jnp.cos(angles) + rotate_half(x) * jnp.sin(angles)


def rope_scores_depend_on_offset_only(rope_fn, *, length: int = 8, d: int = 8, seed: int = 0) -> Finding:
    """The same query at position ``m`` and key at position ``n`` score ``rope(q)[m] . rope(k)[n]``, a function of
    ``m - n`` alone. (Measured: the largest spread of the scores that share an offset.)"""
    q, k = _normal(seed, 1, d), _normal(seed + 1, 1, d)
    scores = np.asarray(rope_fn(jnp.tile(q, (length, 1))) @ rope_fn(jnp.tile(k, (length, 1))).T, dtype=np.float64)
    spread = [np.ptp(np.diagonal(scores, offset)) for offset in range(-length + 1, length)]
    return Finding(float(max(spread)), 1e-4)


def rope_convention(rope_fn, *, length: int = 8, d: int = 8, seed: int = 0) -> Finding:
    """Feature pairs ``(2i, 2i + 1)`` of the token at position ``p`` turn by ``p ω_i``: the RoPE paper's
    layout and Meta's reference code (the pair as one complex number, multiplied by ``exp(i p ω_i)``)."""
    x = np.asarray(_normal(seed, length, d), dtype=np.float64)
    turn = np.exp(1j * np.arange(length)[:, None] * frequencies(d)[None, :])
    z = (x[:, 0::2] + 1j * x[:, 1::2]) * turn
    expected = np.stack([z.real, z.imag], axis=-1).reshape(length, d)
    return Finding(_deviation(rope_fn(jnp.asarray(x, dtype=jnp.float32)), expected), 1e-5)


def split_half_order(d: int) -> np.ndarray:
    """The feature order that turns adjacent pairs into split halves: ``rope_rotate_half(x[:, order])`` is
    ``rope(x)[:, order]``; a checkpoint converted from one layout to the other permutes its query and key
    weights by it."""
    return np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])


# ---------------------------------------------------------------------------------------------
# 6. YaRN written as a division of positions (rasbt/LLMs-from-scratch #939, #940)

YARN = dict(scale=4.0, original_length=256)
"""The YaRN setting of the check: a model trained at 256 tokens read at 4 times that."""


def yarn_as_position_division(x, scale=4.0, original_length=256):
    positions = np.minimum(np.arange(len(x)) / scale, original_length - 1)  # divide, then clamp
    angles = positions[:, None] * frequencies(x.shape[1])[None, :]
    even, odd = x[:, 0::2], x[:, 1::2]
    rotated = [even * np.cos(angles) - odd * np.sin(angles), even * np.sin(angles) + odd * np.cos(angles)]
    return jnp.stack(rotated, axis=-1).reshape(x.shape)


def yarn_rope(x):
    return rope(x, scaling=YaRNScaling(**YARN))


def yarn_keeps_the_fastest_pair(rope_fn, *, d: int = 8, length: int = 1100) -> Finding:
    """From one position to the next, the fastest pair turns by its trained angle ``ω_0 = 1`` at every
    position, also past the trained length: YaRN interpolates the slow pairs only. (Measured: the largest
    difference of that step from ``ω_0``, in radians.)"""
    x = jnp.zeros((length, d)).at[:, 0].set(1.0)  # feature 0 = 1: pair 0 shows its angle
    out = np.asarray(rope_fn(x), dtype=np.float64)
    step = np.angle(np.exp(1j * np.diff(np.arctan2(out[:, 1], out[:, 0]))))  # wrapped to (-π, π]
    return Finding(float(np.max(np.abs(step - frequencies(d)[0]))), 1e-3)


# ---------------------------------------------------------------------------------------------
# 7. Dropout on the attention weights (pytorch #33360, #42929; facebookresearch/fairseq #351; NVIDIA/apex #816)


def dropout_without_rescaling(weights, rate, key):
    keep = jax.random.bernoulli(key, 1 - rate, weights.shape)
    return jnp.where(keep, weights, 0.0)  # the kept weights are not divided by 1 - rate


def dropout_before_the_softmax(scores, mask, rate, key):
    filled = jnp.where(mask, scores, -1e9)
    keep = jax.random.bernoulli(key, 1 - rate, filled.shape)
    return jax.nn.softmax(jnp.where(keep, filled / (1 - rate), 0.0), axis=-1)  # a dropped -1e9 becomes 0


def equinox_dropout(weights, rate, key):
    return eqx.nn.Dropout(rate)(weights, key=key)


def dropout_weights_sum(dropout, *, rate: float = 0.1, draws: int = 4000, length: int = 4, seed: int = 0) -> Finding:
    """In training mode a hidden key keeps weight 0 under every dropout mask, and the weights are right on
    average: over the masks each row sums to 1 (one row may sum to more). ``dropout`` takes ``(weights, rate,
    key)``, or ``(scores, mask, rate, key)`` if it works on the scores. (Measured: the largest of the weight on
    a hidden key and the distance of the mean row sum from 1; a tolerance of 0.02 over 4000 draws.)"""
    scores, mask = _normal(seed, length, length), causal_mask(length)
    keys = jax.random.split(jax.random.key(seed), draws)
    if dropout.__code__.co_argcount == 4:
        weights = jax.vmap(lambda key: dropout(scores, mask, rate, key))(keys)
    else:
        clean = masked_softmax(scores, mask)
        weights = jax.vmap(lambda key: dropout(clean, rate, key))(keys)
    hidden = float(jnp.max(jnp.where(mask, 0.0, jnp.abs(weights))))
    mean_sum = float(jnp.max(jnp.abs(weights.sum(axis=-1).mean(axis=0) - 1.0)))
    return Finding(max(hidden, mean_sum), 0.02)


def largest_row_sum(dropout=equinox_dropout, *, rate: float = 0.1, draws: int = 4000, length: int = 4,
                    seed: int = 0) -> float:
    """The largest row sum of correct dropout over the draws of :func:`dropout_weights_sum`: above 1, as the
    threads found, and harmless (``1 / (1 - rate)`` when one row keeps every weight)."""
    weights = masked_softmax(_normal(seed, length, length), causal_mask(length))
    keys = jax.random.split(jax.random.key(seed), draws)
    return float(jax.vmap(lambda key: dropout(weights, rate, key))(keys).sum(axis=-1).max())


# ---------------------------------------------------------------------------------------------
# 8. KV cache against recomputing everything, after a prefill of several tokens (ml-explore/mlx-lm #93,
#    RobertCsordas/moeut #6, Blaizzy/mlx-vlm #1983)


def cached_rope_step_from_zero(q, k, v, cache, start):
    positions = np.arange(len(q))  # the new tokens numbered from 0, whatever the cache holds
    keys = jnp.concatenate([cache[0], rope(k, positions=positions)])
    values = jnp.concatenate([cache[1], v])
    return cached_causal_attention(rope(q, positions=positions), keys, values), (keys, values)


def cached_rope_step(q, k, v, cache, start):
    """Rotate the new rows at their positions ``start, start + 1, ...``, append them to the cache, attend."""
    positions = start + np.arange(len(q))
    keys = jnp.concatenate([cache[0], rope(k, positions=positions)])
    values = jnp.concatenate([cache[1], v])
    return cached_causal_attention(rope(q, positions=positions), keys, values), (keys, values)


def cache_matches_recompute(step, *, chunks=(4, 1, 1, 2), d: int = 4, seed: int = 0) -> Finding:
    """A prompt of several tokens, then tokens one or two at a time through a cache
    (``step(q, k, v, cache, start) -> (out, cache)``), give the outputs of causal attention with RoPE
    recomputed over the whole sequence."""
    length = sum(chunks)
    q, k, v = (_normal(seed + i, length, d) for i in range(3))
    full = causal_attention(rope(q), rope(k), v)
    cache, start, outs = (jnp.zeros((0, d)), jnp.zeros((0, d))), 0, []
    for n in chunks:
        out, cache = step(q[start:start + n], k[start:start + n], v[start:start + n], cache, start)
        outs.append(out)
        start += n
    return Finding(_deviation(jnp.concatenate(outs), full), 1e-5)


# ---------------------------------------------------------------------------------------------
# 9. Half precision: softmax overflow, and -1e9 in float16 (huggingface/transformers #17433, #17437;
#    google/flax #982; NVIDIA/apex #93)


def float16_softmax_unshifted(scores, mask):
    e = jnp.where(mask, jnp.exp(scores), 0.0)  # exp(12) = 162755 > 65504, the largest float16
    return e / e.sum(axis=-1, keepdims=True)


def float16_softmax_minus_1e9(scores, mask):
    return jax.nn.softmax(jnp.where(mask, scores, -1e9), axis=-1)  # -1e9 is -inf in float16


def half_precision_softmax(softmax, *, seed: int = 0) -> Finding:
    """float16 scores give the float32 weights to float16's precision, for scores up to 12 and for a fully
    masked row (zero weights, as the library's convention)."""
    scores = (4.0 * _normal(seed, 3, 4)).at[0, 0].set(12.0)
    mask = jnp.asarray([[True, True, True, False], [False] * 4, [True, True, False, True]])
    expected = masked_softmax(scores, mask)
    return Finding(_deviation(softmax(scores.astype(jnp.float16), mask), expected), 2e-3)
