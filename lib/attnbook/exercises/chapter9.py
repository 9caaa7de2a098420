"""Exercises of chapter 9 (reading longer than trained)."""

import numpy as np

from attnbook import positional
from attnbook.exercises._core import Exercise, Mistake, register


def ntk_frequencies(d, scale):
    """The "NTK-aware" RoPE frequencies of a head of d features at scale s (base 10000 raised to b s^(d/(d-2)))."""
    return positional.NTKAwareScaling(scale).frequencies(d)


def rolling_mask(T, window, sinks):
    """The rolling cache with sinks as a boolean (T, T) mask: key j visible to query i when j <= i and
    either i - j < window or j < sinks."""
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    return (j <= i) & ((i - j < window) | (j < sinks))


def keys_per_query(T, window):
    """Mean over the T queries of the keys a causal window of `window` keys lets each see: min(i + 1, window)."""
    return float(np.mean(np.minimum(np.arange(T) + 1, window)))


def _ntk_variant(d, scale, exponent=None, pi=False):
    plain = positional.frequencies(d)
    if pi:
        return plain / scale
    return positional.frequencies(d, 10000.0 * scale ** (exponent if exponent is not None else d / (d - 2)))


def _mask_variant(T, window, sinks, causal_sinks=True, inclusive=False):
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    near = (i - j <= window) if inclusive else (i - j < window)
    sink = (j < sinks) & (j <= i) if causal_sinks else (j < sinks)
    return ((j <= i) & near) | sink


def _ntk_inputs(rng):
    return {"d": int(rng.choice([4, 6, 8, 16, 64, 128])), "scale": float(rng.choice([2.0, 4.0, 8.0, 3.5]))}


def _mask_inputs(rng):
    T = int(rng.integers(1, 12))
    return {"T": T, "window": int(rng.integers(1, T + 2)), "sinks": int(rng.integers(0, 4))}


def _keys_inputs(rng):
    return {"T": int(rng.integers(1, 300)), "window": int(rng.integers(1, 300))}


FINETUNE_10_STEPS_BEST = "yarn"
"""9.4's answer, read from lib/attnbook/experiments/results/long_context_finetune.csv (tests/book/test_exercises_chapter9.py reads it again)."""

register(
    # 9.1 (implement): NTK-aware frequencies, the base raised to b s^(d/(d-2)).
    Exercise(
        id="9.1",
        kind="function",
        reference=ntk_frequencies,
        inputs=_ntk_inputs,
        edge_cases=({"d": 8, "scale": 4.0}, {"d": 4, "scale": 1.0}),
        mistakes=(
            Mistake("the base is multiplied by s itself; NTK-aware scaling raises it to b s^(d/(d-2)), so that the "
                    "lowest frequency is divided by exactly s.",
                    "底に s をそのまま掛けています。「NTK-aware」スケーリングは底を b s^(d/(d-2)) にして、"
                    "最も低い周波数がちょうど s で割られるようにします。",
                    answer=lambda d, scale: _ntk_variant(d, scale, exponent=1.0)),
            Mistake("every frequency is divided by s: that is position interpolation. NTK-aware scaling keeps the "
                    "highest frequency, omega_0 = 1, as it is.",
                    "すべての周波数を s で割っています。それは位置補間です。「NTK-aware」スケーリングは最も高い周波数 "
                    "omega_0 = 1 をそのまま残します。",
                    answer=lambda d, scale: _ntk_variant(d, scale, pi=True)),
        ),
    ),
    # 9.2 (implement): the rolling cache with attention sinks, as a boolean mask.
    Exercise(
        id="9.2",
        kind="function",
        reference=rolling_mask,
        inputs=_mask_inputs,
        edge_cases=({"T": 1, "window": 1, "sinks": 0}, {"T": 6, "window": 2, "sinks": 1},
                    {"T": 5, "window": 1, "sinks": 3}),
        rtol=0.0,
        atol=0.0,
        mistakes=(
            Mistake("the first tokens are visible to queries before them: a sink j < sinks is a key only for the "
                    "queries i >= j (the mask stays causal).",
                    "最初のトークンが、それより前のクエリから見えています。シンク j < sinks がキーになるのは "
                    "i >= j のクエリだけです（マスクは因果的なままです）。",
                    answer=lambda T, window, sinks: _mask_variant(T, window, sinks, causal_sinks=False)),
            Mistake("the window holds one key too many: query i sees the keys with i - j < window, itself "
                    "included, window keys in all.",
                    "窓のキーが 1 つ多すぎます。クエリ i が見るのは i - j < window のキーで、自分自身を含めて "
                    "window 個です。",
                    answer=lambda T, window, sinks: _mask_variant(T, window, sinks, inclusive=True)),
        ),
    ),
    # 9.3 (derive): the mean number of keys per query under a causal window.
    Exercise(
        id="9.3",
        kind="function",
        reference=keys_per_query,
        inputs=_keys_inputs,
        edge_cases=({"T": 256, "window": 2}, {"T": 256, "window": 256}, {"T": 1, "window": 5}),
        mistakes=(
            Mistake("the first queries have fewer keys than the window: query i sees min(i + 1, window) keys.",
                    "最初のほうのクエリには窓より少ないキーしかありません。クエリ i が見るキーは "
                    "min(i + 1, window) 個です。",
                    matches=lambda inputs, expected, got: inputs["window"] < inputs["T"]
                    and np.isclose(float(got), min(inputs["window"], inputs["T"]))),
            Mistake("query i sees itself too: i + 1 keys without a window, min(i + 1, window) with one.",
                    "クエリ i は自分自身も見ます。窓がなければ i + 1 個、窓があれば min(i + 1, window) 個です。",
                    matches=lambda inputs, expected, got: np.isclose(
                        float(got), float(np.mean(np.minimum(np.arange(inputs["T"]), inputs["window"]))))),
        ),
    ),
    # 9.4 (predict): after 10 fine-tuning steps at 4L, which method is closest to the optimum beyond L?
    Exercise(
        id="9.4",
        kind="choice",
        reference=lambda: FINETUNE_10_STEPS_BEST,
        choices=("rope", "pi", "ntk", "yarn"),
        mistakes=(
            Mistake("plain RoPE has the most to learn: every angle beyond L is new to it, and ten steps do not "
                    "teach it those. Read the stored losses after 10 steps.",
                    "素の RoPE は学ぶことが最も多く残っています。L より先の角度はすべて初めてで、10 ステップでは"
                    "覚えきれません。10 ステップ後に保存された損失を読んでください。",
                    answer="rope"),
        ),
    ),
)
