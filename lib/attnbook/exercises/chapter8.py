"""Exercises of chapter 8 (positions, measured)."""

import numpy as np

from attnbook import positional
from attnbook.exercises._core import Exercise, Mistake, register


def t5_bucket(distance):
    """T5's causal bucket (32 buckets, max_distance 128) of each offset n = i - j >= 0."""
    return positional.relative_position_bucket(-np.asarray(distance), bidirectional=False)


def untrained_fraction(T, L):
    """Fraction of the causal (query i, key j <= i) pairs of a T-token sequence whose T5 bucket no pair of
    an L-token sequence reaches (so that training at length L never gave it a gradient)."""
    trained = set(t5_bucket(np.arange(L)).tolist())
    i, j = np.tril_indices(T)
    return float(np.mean([b not in trained for b in t5_bucket(i - j).tolist()]))


def _alibi_variant(T, heads, first_slope_one=False, sign=1.0, future=None):
    """8.1's common mistakes: slopes 2^(-8h/H) from h = 0 (the first one 1), the offset i - j instead of j - i
    (sign=-1), or the future filled with `future` (0, or the same formula) instead of -inf."""
    h = np.arange(heads) if first_slope_one else np.arange(1, heads + 1)
    slopes = 2.0 ** (-8.0 * h / heads)
    offset = np.arange(T)[None, :] - np.arange(T)[:, None]  # j - i
    bias = sign * slopes[:, None, None] * offset[None]
    if future is None:
        bias = np.where(offset[None] <= 0, bias, -np.inf)
    elif future == 0:
        bias = np.where(offset[None] <= 0, bias, 0.0)
    return bias.astype(np.float32)


def _bucket_variant(distance, rounded=False, capped=True, max_exact=16, num_buckets=32):
    """8.2's common mistakes: the logarithmic part rounded, not capped at 31, or the exact half of the
    bidirectional code (max_exact = 8, 16 buckets)."""
    n = np.asarray(distance).astype(np.int64)
    log = np.log(np.maximum(n, 1) / max_exact) / np.log(128 / max_exact) * (num_buckets - max_exact)
    far = max_exact + (np.round(log) if rounded else np.floor(log)).astype(np.int64)
    if capped:
        far = np.minimum(far, num_buckets - 1)
    return np.where(n < max_exact, n, far)


def _fraction_variant(T, L, by="pairs"):
    """8.3's common mistakes: the fraction of offsets 0..T-1 rather than of pairs (by="offsets"), of the causal
    pairs farther apart than any pair of length L (by="distance"), or of all T x T pairs (by="square")."""
    trained = set(t5_bucket(np.arange(L)).tolist())
    if by == "offsets":
        return float(np.mean([b not in trained for b in t5_bucket(np.arange(T)).tolist()]))
    i, j = np.tril_indices(T)
    if by == "distance":
        return float(np.mean(i - j >= L))
    untrained = sum(b not in trained for b in t5_bucket(i - j).tolist())
    return untrained / (T * T)


def _alibi_inputs(rng):
    return {"T": int(rng.integers(2, 7)), "heads": int(rng.choice([1, 2, 4, 8]))}


def _untrained_inputs(rng):
    L = int(rng.integers(1, 41))
    return {"T": int(rng.integers(L, 8 * L + 1)), "L": L}


register(
    # 8.1 (implement): ALiBi's causal bias m_h (j - i), -inf above the diagonal, slopes 2^(-8(h+1)/H).
    Exercise(
        id="8.1",
        kind="function",
        reference=lambda T, heads: positional.alibi_causal_bias(T, heads),
        inputs=_alibi_inputs,
        edge_cases=({"T": 1, "heads": 1}, {"T": 3, "heads": 4}),
        mistakes=(
            Mistake("the slopes start one head too early: m_h = 2^(-8(h+1)/H) for h = 0, ..., H - 1, so the first "
                    "slope is 2^(-8/H), not 1.",
                    "傾きが 1 ヘッド分早く始まっています。h = 0, ..., H - 1 について m_h = 2^(-8(h+1)/H) なので、"
                    "最初の傾きは 1 ではなく 2^(-8/H) です。",
                    answer=lambda T, heads: _alibi_variant(T, heads, first_slope_one=True)),
            Mistake("the sign is flipped: the bias m_h (j - i) is negative for a key in the past (j < i), so distant "
                    "keys are penalised.",
                    "符号が逆です。バイアス m_h (j - i) は過去のキー（j < i）で負になり、遠いキーほど不利になります。",
                    answer=lambda T, heads: _alibi_variant(T, heads, sign=-1.0)),
            Mistake("the future is not masked: keys j > i get -inf.",
                    "未来がマスクされていません。キー j > i には -inf を入れます。",
                    matches=lambda inputs, expected, got: bool(np.all(np.isfinite(np.asarray(got, dtype=np.float64))))
                    and inputs["T"] > 1),
        ),
    ),
    # 8.2 (implement): T5's relative bucket of a distance (causal, 32 buckets, max_distance 128).
    Exercise(
        id="8.2",
        kind="function",
        reference=t5_bucket,
        inputs=lambda rng: {"distance": rng.integers(0, 300, size=6)},
        edge_cases=({"distance": np.arange(0, 18)},
                    {"distance": np.array([31, 32, 34, 35, 100, 127, 128, 129, 1000])}),
        rtol=0.0,
        atol=0.0,
        mistakes=(
            Mistake("the logarithmic part is rounded; the T5 code truncates it (floor, or int of a positive number).",
                    "対数の部分を丸めています。T5 のコードは切り捨てます（floor、正の数なら int）。",
                    answer=lambda distance: _bucket_variant(distance, rounded=True)),
            Mistake("the bucket is not capped: every offset from max_distance = 128 on shares the last bucket, 31.",
                    "バケットに上限がありません。max_distance = 128 以上のずれはすべて最後のバケット 31 を共有します。",
                    answer=lambda distance: _bucket_variant(distance, capped=False)),
            Mistake("those are the buckets of the bidirectional code, which halves the 32 buckets; the causal code "
                    "keeps all 32, so the offsets below 16 have a bucket each.",
                    "それは 32 個のバケットを半分にする双方向のコードのバケットです。因果的なコードは 32 個すべてを"
                    "使うので、16 未満のずれはそれぞれ自分のバケットを持ちます。",
                    answer=lambda distance: _bucket_variant(distance, max_exact=8, num_buckets=16)),
        ),
    ),
    # 8.3 (derive): the fraction of a T-token sequence's causal pairs in T5 buckets never trained at L.
    Exercise(
        id="8.3",
        kind="function",
        reference=untrained_fraction,
        inputs=_untrained_inputs,
        edge_cases=({"T": 32, "L": 32}, {"T": 256, "L": 32}, {"T": 1, "L": 1}),
        mistakes=(
            Mistake("that is a fraction of the offsets 0, ..., T - 1; count (query, key) pairs: an offset n occurs in "
                    "T - n of them, so far offsets weigh less.",
                    "それはずれ 0, ..., T - 1 の割合です。（クエリ, キー）の組を数えます。ずれ n は T - n 組に現れるので、"
                    "遠いずれほど重みが小さくなります。",
                    answer=lambda T, L: _fraction_variant(T, L, by="offsets")),
            Mistake("a pair farther apart than any pair of length L can still share a trained bucket: beyond 16 the "
                    "buckets are logarithmic, so compare buckets, not distances.",
                    "長さ L のどの組よりも離れた組でも、訓練されたバケットに入ることがあります。16 より先のバケットは"
                    "対数的なので、距離ではなくバケットを比べます。",
                    answer=lambda T, L: _fraction_variant(T, L, by="distance")),
            Mistake("the denominator counts all T × T pairs; the causal pairs (j <= i) number T (T + 1) / 2.",
                    "分母が T × T 個すべての組を数えています。因果的な組（j <= i）は T (T + 1) / 2 個です。",
                    answer=lambda T, L: _fraction_variant(T, L, by="square")),
        ),
    ),
    # 8.4 (predict): at 4L, beyond L, is T5's bias or NoPE lower? (From the stored results, seeds 0-4: T5,
    # 1.48 against 1.54, every seed; tests/book/test_exercises_chapter8.py reads them again.)
    Exercise(
        id="8.4",
        kind="choice",
        reference=lambda: "t5",
        choices=("t5", "nope"),
        mistakes=(
            Mistake("4L is not 8L: NoPE wins at 8L with every seed, but at 4L fewer pairs fall in buckets never "
                    "trained (exercise 8.3). Read the stored losses at 4L.",
                    "4L は 8L ではありません。8L ではどのシードでも NoPE が勝ちますが、4L では一度も訓練されていない"
                    "バケットに入る組が少なくなります（演習 8.3）。4L で保存された損失を読んでください。",
                    answer="nope"),
        ),
    ),
    # 8.5 (explore): the first position >= L where the sinusoidal model's mean stored loss exceeds ln 8.
    Exercise(
        id="8.5",
        kind="number",
        reference=lambda: 42,
        rtol=0.0,
        atol=0.0,
        mistakes=(
            Mistake("the position must be at least L = 32: search from L on (np.argmax over every position finds the "
                    "first positions, which have little context and a high loss too).",
                    "位置は L = 32 以上です。L から探します（すべての位置で np.argmax を使うと、文脈が少なく損失も高い"
                    "最初のほうの位置が見つかります）。",
                    matches=lambda value: 0 <= value < 32),
        ),
    ),
)
