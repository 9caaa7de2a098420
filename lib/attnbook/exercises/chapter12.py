"""Exercises of chapter 12 (after AFT: linear attention, decay, the delta rule and state-space duality)."""

import numpy as np

from attnbook.exercises._core import Exercise, Mistake, register


def decay_mask(log_decay):
    """The decay mask ``L[t, s] = exp(g[s+1] + ... + g[t])`` for ``s <= t`` (1 on the diagonal), 0 above it."""
    g = np.asarray(log_decay, dtype=float)
    prefix = np.concatenate([[0.0], np.cumsum(g)])  # prefix[t + 1] = g[0] + ... + g[t]
    exponent = prefix[1:, None] - prefix[None, 1:]  # [t, s] = g[s+1] + ... + g[t]
    return np.where(np.tril(np.ones((g.size, g.size), bool)), np.exp(np.where(exponent > 0, 0.0, exponent)), 0.0)


def cache_exceeds_state(heads, key_dim, value_dim):
    """The smallest context T at which attention's KV cache, T heads (key_dim + value_dim) numbers, holds more
    numbers than a linear layer's state, heads key_dim value_dim numbers (same heads and sizes)."""
    return key_dim * value_dim // (key_dim + value_dim) + 1


def _mask_inputs(rng):
    return {"log_decay": -rng.uniform(0.0, 1.0, int(rng.integers(1, 9)))}


def _mask_includes_own_step(log_decay):  # exp(g[s] + ... + g[t]): the decay of step s applied to its own key
    g = np.asarray(log_decay, dtype=float)
    return decay_mask(g) * np.exp(g)[None, :] * np.tril(np.ones((g.size, g.size)))


def _mask_not_causal(log_decay):  # the same formula above the diagonal too
    g = np.asarray(log_decay, dtype=float)
    prefix = np.cumsum(g)
    return np.exp(prefix[:, None] - prefix[None, :])


def _sizes(rng):
    return {"heads": int(rng.integers(1, 9)), "key_dim": int(rng.choice([4, 8, 16, 64, 128])),
            "value_dim": int(rng.choice([4, 8, 16, 64, 128]))}


ORTHOGONAL_KEYS = "equal"
"""12.3's answer: with orthogonal unit keys the state's prediction ``k_t S_{t-1}`` at every new key is 0, so correcting
with beta = 1 writes the same state as adding, and both read every pair right
(tests/book/test_exercises_chapter12.py computes it with the library's rules)."""

register(
    # 12.1 (implement): the decay mask from the log-decays.
    Exercise(
        id="12.1",
        kind="function",
        reference=decay_mask,
        inputs=_mask_inputs,
        edge_cases=({"log_decay": np.zeros(4)}, {"log_decay": np.full(5, np.log(0.5))}, {"log_decay": np.array([-0.3])}),
        mistakes=(
            Mistake("the decay of step s is applied to its own key: the state is multiplied by a_s before k_s "
                    "is added, so L[t, s] sums g[s+1] .. g[t], and the diagonal is 1.",
                    "ステップ s の減衰が自分のキーにもかかっています。状態に a_s をかけてから k_s を足すので、"
                    "L[t, s] は g[s+1] から g[t] までの和で、対角は 1 です。",
                    answer=_mask_includes_own_step),
            Mistake("the mask is not causal: above the diagonal (s > t) it must be 0.",
                    "因果的なマスクになっていません。対角より上（s > t）は 0 です。",
                    answer=_mask_not_causal),
        ),
    ),
    # 12.2 (derive): the context at which the KV cache outgrows the state.
    Exercise(
        id="12.2",
        kind="function",
        reference=cache_exceeds_state,
        inputs=_sizes,
        edge_cases=({"heads": 4, "key_dim": 64, "value_dim": 64}, {"heads": 2, "key_dim": 16, "value_dim": 16},
                    {"heads": 1, "key_dim": 4, "value_dim": 8}),
        rtol=0.0,
        atol=0.0,
        mistakes=(
            Mistake("the cache holds a key and a value per head and token: T (key_dim + value_dim) numbers a head, "
                    "not T key_dim.",
                    "キャッシュにはヘッドとトークンごとにキーとバリューが入ります。1 ヘッドあたり T key_dim 個ではなく "
                    "T (key_dim + value_dim) 個です。",
                    answer=lambda heads, key_dim, value_dim: value_dim + 1),
            Mistake("the cache must hold more than the state: at T = d_k d_v / (d_k + d_v) they can be equal.",
                    "キャッシュが状態より多くなる T を求めます。T = d_k d_v / (d_k + d_v) では両者が等しいことがあります。",
                    answer=lambda heads, key_dim, value_dim: -(-key_dim * value_dim // (key_dim + value_dim))),
        ),
    ),
    # 12.3 (predict): with orthogonal keys, which rule reads more pairs right, adding or correcting?
    Exercise(
        id="12.3",
        kind="choice",
        reference=lambda: ORTHOGONAL_KEYS,
        choices=("add", "correct", "equal"),
        mistakes=(
            Mistake("with orthogonal keys the state's prediction k S at a new key is 0, so correcting writes v "
                    "whole, as adding does: neither rule loses a pair.",
                    "直交するキーでは、新しいキーでの状態の予測 k S は 0 です。そのため修正する規則も v をそのまま書き込み、"
                    "足す規則と同じ状態になります。どちらの規則もペアを失いません。",
                    answer="correct"),
            Mistake("correcting loses pairs only where a new key overlaps older ones; orthogonal keys do not "
                    "overlap, so the prediction k S at a new key is 0 and correcting writes v whole.",
                    "修正する規則がペアを失うのは、新しいキーが古いキーと重なるときだけです。直交するキーは重ならないので、"
                    "新しいキーでの予測 k S は 0 になり、修正する規則も v をそのまま書き込みます。",
                    answer="add"),
        ),
    ),
)
