"""Exercises of appendix B (attention bugs from real projects): find the bug in a short function, and fix it.

Each reference is the correct version of :mod:`attnbook.bugs`, and each common mistake one of its buggy versions,
so a wrong answer that makes the appendix's mistake is named as such.
"""

import jax.numpy as jnp
import numpy as np

from attnbook import bugs
from attnbook.attention import scaled_dot_product_attention
from attnbook.exercises._core import Exercise, Mistake, normal, register
from attnbook.positional import rope


def _cached(rng):
    keys = int(rng.integers(2, 7))
    queries = int(rng.integers(1, keys + 1))
    return {"q": normal(rng, queries, 3), "k": normal(rng, keys, 3), "v": normal(rng, keys, 2)}


def _unmasked(q, k, v):
    return scaled_dot_product_attention(q, k, v)[0]


def _tokens(rng):
    return {"x": normal(rng, int(rng.integers(2, 7)), 2 * int(rng.integers(1, 5)))}


register(
    # B.1 (fix): new queries after a cache, masked as SDPA's is_causal does (top-left); the fix takes the
    # causal mask's last rows.
    Exercise(
        id="B.1",
        kind="function",
        reference=bugs.cached_causal_attention,
        inputs=_cached,
        # one feature each, so that a failing case prints narrow enough for a phone
        edge_cases=tuple({"q": normal(np.random.default_rng(n), n, 1), "k": normal(np.random.default_rng(3), 3, 1),
                          "v": normal(np.random.default_rng(4), 3, 1)} for n in (1, 2)),
        mistakes=(
            Mistake("the mask is still aligned top-left, as SDPA's is_causal=True: the new queries are the last Tq "
                    "positions, so query i sees the keys j <= Tk - Tq + i.",
                    "マスクが SDPA の is_causal=True と同じく左上にそろったままです。新しいクエリは最後の Tq 個の位置なので、"
                    "クエリ i が見るのはキー j <= Tk - Tq + i です。",
                    answer=bugs.top_left_causal_attention),
            Mistake("no mask at all is right for one new query (Tq = 1), but a chunk of several new queries then "
                    "sees its own future.",
                    "マスクなしで正しいのは、新しいクエリが Tq = 1 のときだけです。新しいクエリが複数あると、"
                    "その中で未来を見てしまいます。",
                    answer=_unmasked),
        ),
    ),
    # B.2 (fix): RoPE with the angles laid out for adjacent pairs but split halves rotated; the fix rotates
    # adjacent pairs (2i, 2i + 1), the library's layout.
    Exercise(
        id="B.2",
        kind="function",
        reference=lambda x: rope(x),
        inputs=_tokens,
        edge_cases=({"x": jnp.asarray([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0]])},),
        mistakes=(
            Mistake("the angles are laid out for adjacent pairs, but rotate_half pairs feature i with i + d/2: each "
                    "frequency turns the wrong pair. Rotate the pairs (2i, 2i + 1).",
                    "角度は隣り合う組の並びなのに、rotate_half は特徴量 i と i + d/2 を組にしています。"
                    "周波数が違う組を回しています。組 (2i, 2i + 1) を回してください。",
                    answer=bugs.rope_rotate_half_interleaved_angles),
            Mistake("split halves throughout are a correct RoPE, but in the other layout: the weights here pair "
                    "adjacent features (2i, 2i + 1), as the paper does.",
                    "半分ずつの組を一貫して使う RoPE は正しいものの、並びが違います。ここでの重みは論文と同じく、"
                    "隣り合う特徴量 (2i, 2i + 1) を組にしています。",
                    answer=bugs.rope_rotate_half),
        ),
    ),
)
