"""Exercises of chapter 6 (the cost of attention)."""

import math

import numpy as np

from attnbook.exercises._core import Exercise, Mistake, register


def _summary(q, k, v, allowed):
    """One chunk's (m, l, a) per query, as in the chapter's Eq. online: m = the largest allowed score
    (-inf where the query sees no key of the chunk), l = sum exp(s - m), a = sum exp(s - m) v."""
    scores = (q @ k.T) / np.sqrt(q.shape[1])
    m = np.where(allowed, scores, -np.inf).max(axis=1)
    e = np.where(allowed, np.exp(scores - np.where(np.isfinite(m), m, 0.0)[:, None]), 0.0)
    return m.astype(np.float32), e.sum(axis=1).astype(np.float32), (e @ v).astype(np.float32)


def _merge_inputs(rng):
    """Two chunks of keys (3 and 2 keys) for 4 queries; each query sees a key of a chunk with
    probability 0.7, so some see none of one chunk, or of both."""
    q, d, dv = 4, 3, 2
    queries = rng.normal(size=(q, d))
    parts = {}
    for i, n in ((1, 3), (2, 2)):
        k, v = rng.normal(size=(n, d)), rng.normal(size=(n, dv))
        m, l, a = _summary(queries, k, v, rng.random((q, n)) < 0.7)
        parts.update({f"m{i}": m, f"l{i}": l, f"a{i}": a})
    return parts


def _part(m, l, a):
    return np.asarray(m, np.float32), np.asarray(l, np.float32), np.asarray(a, np.float32)


def _merge_edge_cases():
    empty = _part([-np.inf], [0.0], [[0.0, 0.0]])
    one = _part([0.5], [1.7], [[0.3, -1.2]])
    far_above = _part([100.5], [1.2], [[2.0, 1.0]])  # the old sums shrink by exp(-100): negligible
    cases = []
    for (m1, l1, a1), (m2, l2, a2) in [(one, empty), (empty, one), (empty, empty), (one, far_above)]:
        cases.append({"m1": m1, "l1": l1, "a1": a1, "m2": m2, "l2": l2, "a2": a2})
    return tuple(cases)


def merge(m1, l1, a1, m2, l2, a2):
    """The reference: Eq. online for a whole second chunk; a query that sees no key of either chunk
    keeps m = -inf, l = 0, a = 0 (never NaN)."""
    m1, l1, a1, m2, l2, a2 = (np.asarray(x, np.float32) for x in (m1, l1, a1, m2, l2, a2))
    m = np.maximum(m1, m2)
    shift = np.where(np.isfinite(m), m, np.float32(0.0))
    s1, s2 = np.exp(m1 - shift), np.exp(m2 - shift)  # exp(-inf) = 0 for an empty chunk
    return m, l1 * s1 + l2 * s2, a1 * s1[:, None] + a2 * s2[:, None]


def _merge_variant(m1, l1, a1, m2, l2, a2, rescale_a=True, inverted=False):
    """6.1's common mistakes: a not rescaled (rescale_a=False); the factors exp(m - m_i) instead of exp(m_i - m),
    which overflow float32 when the maxima are far apart (inverted)."""
    m1, l1, a1, m2, l2, a2 = (np.asarray(x, np.float32) for x in (m1, l1, a1, m2, l2, a2))  # float32: its overflow
    m = np.maximum(m1, m2)
    shift = np.where(np.isfinite(m), m, np.float32(0.0))
    with np.errstate(all="ignore"):
        s1, s2 = (np.exp(shift - m1), np.exp(shift - m2)) if inverted else (np.exp(m1 - shift), np.exp(m2 - shift))
        s1, s2 = np.where(np.isfinite(m1), s1, 0.0), np.where(np.isfinite(m2), s2, 0.0)
    a = a1 * s1[:, None] + a2 * s2[:, None] if rescale_a else a1 + a2
    return m, l1 * s1 + l2 * s2, a


def _nan_for_empty(inputs, expected, got):
    """6.1: NaN in the answer for a query that sees no key of either chunk (m = -inf twice)."""
    empty = ~np.isfinite(np.asarray(inputs["m1"])) & ~np.isfinite(np.asarray(inputs["m2"]))
    return empty.any() and any(np.isnan(np.asarray(part, dtype=np.float64)).any() for part in got)


def weights_mib(T, heads, bytes_per_number):
    """MiB (2**20 bytes) of `heads` matrices of T x T attention weights."""
    return T * T * heads * bytes_per_number / 2**20


# Chunked attention's forward temporary memory at the two largest lengths, bytes, from the stored
# benchmark (lib/attnbook/experiments/results/attention_cost.csv; tests/book/test_exercises_chapter6.py checks the copy).
CHUNKED_FORWARD_TEMP_BYTES = {65536: 26092224, 131072: 42869696}


def _largest_lengths_slope():
    (t1, b1), (t2, b2) = sorted(CHUNKED_FORWARD_TEMP_BYTES.items())
    return math.log(b2 / b1) / math.log(t2 / t1)


register(
    # 6.1 (implement): merge the (m, l, a) summaries of two chunks of keys, Eq. online, with -inf for
    # a query that sees no key of a chunk.
    Exercise(
        id="6.1",
        kind="function",
        reference=merge,
        inputs=_merge_inputs,
        edge_cases=_merge_edge_cases(),
        rtol=1e-5,
        atol=1e-6,
        mistakes=(
            Mistake("NaN for a query that sees no key of either chunk: m1 - m is -inf - (-inf) there; shift by 0 "
                    "where m = -inf, so that the query keeps (-inf, 0, 0).",
                    "どちらのチャンクのキーも見ないクエリで NaN になっています。そこでは m1 - m が -inf - (-inf) です。"
                    "m = -inf のところは 0 でずらし、クエリが (-inf, 0, 0) のままになるようにします。",
                    matches=_nan_for_empty),
            Mistake("a is not rescaled: like l, each chunk's a is shifted by the chunk's own maximum, so multiply it "
                    "by exp(m_i - m) before adding.",
                    "a を合わせ直していません。l と同じく各チャンクの a もそのチャンクの最大値でずらしてあるので、"
                    "足す前に exp(m_i - m) を掛けます。",
                    answer=lambda **parts: _merge_variant(**parts, rescale_a=False)),
            Mistake("the factors are inverted: a chunk shifted by m_i moves to the shift m = max(m1, m2) with "
                    "exp(m_i - m), which is at most 1, not exp(m - m_i).",
                    "係数が逆です。m_i でずらしたチャンクを m = max(m1, m2) でずらし直す係数は exp(m_i - m) で、"
                    "1 以下です。exp(m - m_i) ではありません。",
                    answer=lambda **parts: _merge_variant(**parts, inverted=True)),
        ),
    ),
    # 6.2 (derive): the MiB of `heads` T x T matrices of weights with `bytes_per_number` bytes each.
    Exercise(
        id="6.2",
        kind="function",
        reference=weights_mib,
        inputs=lambda rng: {"T": int(rng.choice([1000, 4096, 16384, 131072])), "heads": int(rng.choice([1, 8, 32])),
                            "bytes_per_number": int(rng.choice([2, 4]))},
        edge_cases=({"T": 1, "heads": 1, "bytes_per_number": 4},),
        rtol=1e-9,
        atol=0.0,
        mistakes=(
            Mistake("those are MB (10^6 bytes); a MiB is 2^20 = 1048576 bytes.",
                    "それは MB（10^6 バイト）です。MiB は 2^20 = 1048576 バイトです。",
                    answer=lambda T, heads, bytes_per_number: T * T * heads * bytes_per_number / 1e6),
            Mistake("one matrix per head: multiply by heads.",
                    "ヘッドごとに 1 つの行列があります。heads を掛けます。",
                    answer=lambda T, heads, bytes_per_number: T * T * bytes_per_number / 2**20),
            Mistake("those are KiB (2^10 bytes); a MiB is 2^20 bytes.",
                    "それは KiB（2^10 バイト）です。MiB は 2^20 バイトです。",
                    answer=lambda T, heads, bytes_per_number: T * T * heads * bytes_per_number / 2**10),
        ),
    ),
    # 6.3 (predict): the log-log slope of chunked attention's forward temporary memory between the two
    # largest lengths, 65536 and 131072 (stored results): 0.72, not the fitted 0.3.
    Exercise(
        id="6.3",
        kind="number",
        reference=_largest_lengths_slope,
        rtol=0.0,
        atol=0.01,
        mistakes=(
            Mistake("that is the slope fitted from 2048 to 131072; the question asks for the line through the two "
                    "largest lengths alone.",
                    "それは 2048 から 131072 までで当てはめた傾きです。問われているのは、最大の 2 つの長さだけを通る"
                    "直線です。",
                    answer=0.3),
            Mistake("that is the ratio of the bytes; the slope is log(b2 / b1) / log(T2 / T1).",
                    "それはバイト数の比です。傾きは log(b2 / b1) / log(T2 / T1) です。",
                    answer=lambda: CHUNKED_FORWARD_TEMP_BYTES[131072] / CHUNKED_FORWARD_TEMP_BYTES[65536]),
        ),
    ),
    # 6.4 (explore): full attention's temporary memory at T = 4096 when d goes from 64 to 128:
    # A about the same, B about twice, C about four times. The T x T scores do not depend on d.
    Exercise(
        id="6.4",
        kind="choice",
        reference=lambda: "A",
        choices=("A", "B", "C"),
        mistakes=(
            Mistake("the time grows with d, but does the memory? Q, K and V double with d; compare their size with "
                    "that of the T × T scores, which do not depend on d.",
                    "時間は d とともに増えますが、メモリはどうでしょう。Q、K、V は d とともに 2 倍になります。"
                    "その大きさを、d によらない T × T のスコアの大きさと比べてください。",
                    matches=lambda choice: str(choice).strip().upper() in ("B", "C")),
        ),
    ),
)
