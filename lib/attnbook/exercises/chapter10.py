"""Exercises of chapter 10 (smaller caches: multi-query, grouped-query and latent attention)."""

import numpy as np

from attnbook.exercises._core import Exercise, Mistake, register


def kv_cache_bytes(tokens, layers, kv_heads, d_head, itemsize):
    """Bytes of a KV cache of ``tokens`` tokens: a key and a value of ``d_head`` numbers per key/value head,
    token and layer, ``itemsize`` bytes a number."""
    return 2 * tokens * layers * kv_heads * d_head * itemsize


def pool_heads(w, kv_heads):
    """Ainslie et al.'s mean-pooling of a key (or value) projection ``w (d_model, heads, d_head)`` into
    ``kv_heads`` groups of consecutive heads: ``(d_model, kv_heads, d_head)``."""
    w = np.asarray(w)
    d_model, heads, d_head = w.shape
    return w.reshape(d_model, kv_heads, heads // kv_heads, d_head).mean(axis=2)


def latent_rank(kv_heads, d_head, rope_dim):
    """The rank r of a latent-attention layer whose cache, r + rope_dim numbers per token, equals that of
    grouped-query attention with ``kv_heads`` heads of ``d_head`` features, 2 kv_heads d_head numbers."""
    return 2 * kv_heads * d_head - rope_dim


def _cache_inputs(rng):
    return {"tokens": int(rng.integers(1, 10000)), "layers": int(rng.integers(1, 100)),
            "kv_heads": int(rng.choice([1, 2, 4, 8])), "d_head": int(rng.choice([4, 8, 64, 128])),
            "itemsize": int(rng.choice([1, 2, 4]))}


def _pool_inputs(rng):
    heads = int(rng.choice([2, 4, 8]))
    kv_heads = int(rng.choice([g for g in (1, 2, 4, 8) if heads % g == 0 and g < heads]))
    return {"w": rng.normal(size=(int(rng.integers(2, 6)), heads, int(rng.integers(1, 5)))), "kv_heads": kv_heads}


def _pool_interleaved(w, kv_heads):  # heads h, h + G, h + 2G, ... pooled together
    w = np.asarray(w)
    d_model, heads, d_head = w.shape
    return w.reshape(d_model, heads // kv_heads, kv_heads, d_head).mean(axis=1)


def _rank_inputs(rng):
    return {"kv_heads": int(rng.choice([1, 2, 4, 8])), "d_head": int(rng.choice([8, 64, 128])),
            "rope_dim": int(rng.choice([2, 4, 32, 64]))}


UPTRAINED_LOWER_AT_30 = "uptrained"
"""10.4's answer, read from lib/attnbook/experiments/results/kv_heads_uptraining_grid.csv: the held-out excess of G = 1 after 30 steps,
mean over the seeds (tests/book/test_exercises_chapter10.py reads it again)."""

register(
    # 10.1 (implement): the bytes of a KV cache.
    Exercise(
        id="10.1",
        kind="function",
        reference=kv_cache_bytes,
        inputs=_cache_inputs,
        edge_cases=({"tokens": 4096, "layers": 80, "kv_heads": 8, "d_head": 128, "itemsize": 2},
                    {"tokens": 1, "layers": 1, "kv_heads": 1, "d_head": 8, "itemsize": 4}),
        rtol=0.0,
        atol=0.0,
        mistakes=(
            Mistake("only the keys are counted: the cache holds a key and a value for every key/value head.",
                    "キーだけを数えています。キャッシュにはキー・バリューヘッドごとにキーとバリューの両方が入ります。",
                    answer=lambda tokens, layers, kv_heads, d_head, itemsize:
                    tokens * layers * kv_heads * d_head * itemsize),
            Mistake("the numbers are counted, not the bytes: multiply by itemsize (2 for float16, 4 for float32).",
                    "個数を数えていて、バイト数になっていません。itemsize（float16 なら 2、float32 なら 4）を掛けます。",
                    answer=lambda tokens, layers, kv_heads, d_head, itemsize:
                    2 * tokens * layers * kv_heads * d_head),
        ),
    ),
    # 10.2 (implement): mean-pooling the key/value heads of each group.
    Exercise(
        id="10.2",
        kind="function",
        reference=pool_heads,
        inputs=_pool_inputs,
        edge_cases=({"w": np.arange(24.0).reshape(2, 4, 3), "kv_heads": 2},
                    {"w": np.arange(24.0).reshape(2, 4, 3), "kv_heads": 1}),
        mistakes=(
            Mistake("the heads of a group are not consecutive here: query head h reads key/value head "
                    "h // (heads / G), so group g pools heads g s .. g s + s - 1, with s = heads / G.",
                    "ここではグループのヘッドが連続していません。クエリヘッド h が読むのはキー・バリューヘッド "
                    "h // (heads / G) なので、グループ g は s = heads / G としてヘッド g s から g s + s - 1 を"
                    "まとめます。",
                    answer=_pool_interleaved),
            Mistake("the first head of each group is kept: Ainslie et al. take the mean of the group's heads.",
                    "各グループの最初のヘッドを残しています。Ainslie らはグループのヘッドの平均を取ります。",
                    answer=lambda w, kv_heads: np.asarray(w)[:, ::np.asarray(w).shape[1] // kv_heads]),
        ),
    ),
    # 10.3 (derive): the latent rank with the cache of GQA.
    Exercise(
        id="10.3",
        kind="function",
        reference=latent_rank,
        inputs=_rank_inputs,
        edge_cases=({"kv_heads": 1, "d_head": 8, "rope_dim": 4}, {"kv_heads": 4, "d_head": 8, "rope_dim": 4}),
        rtol=0.0,
        atol=0.0,
        mistakes=(
            Mistake("the decoupled RoPE key is cached too: the latent gets 2 G d_h minus rope_dim numbers.",
                    "分離した RoPE のキーもキャッシュされます。潜在ベクトルに残るのは 2 G d_h から rope_dim を"
                    "引いた数です。",
                    answer=lambda kv_heads, d_head, rope_dim: 2 * kv_heads * d_head),
            Mistake("GQA caches a key and a value per key/value head: 2 G d_h numbers, not G d_h.",
                    "GQA はキー・バリューヘッドごとにキーとバリューをキャッシュします。G d_h 個ではなく 2 G d_h 個です。",
                    answer=lambda kv_heads, d_head, rope_dim: kv_heads * d_head - rope_dim),
        ),
    ),
    # 10.4 (predict): after 30 steps, uptrained MQA or MQA from scratch?
    Exercise(
        id="10.4",
        kind="choice",
        reference=lambda: UPTRAINED_LOWER_AT_30,
        choices=("uptrained", "scratch"),
        mistakes=(
            Mistake("a model that starts from a trained one has less to learn: compare the stored losses of "
                    "both methods after 30 steps with the held function of the chapter, seed by seed.",
                    "学習済みのモデルから始めれば、学ぶことは少なくて済みます。30 ステップ後に保存された 2 つの"
                    "方法の損失を、章の held 関数でシードごとに比べてください。",
                    answer="scratch"),
        ),
    ),
)
