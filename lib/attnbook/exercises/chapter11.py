"""Exercises of chapter 11 (induction heads on real text)."""

import numpy as np

from attnbook.exercises._core import Exercise, Mistake, register


def previous_token_score(weights):
    """Mean attention to the previous position of a causal pattern ``weights (T, T)`` (row: query, column: key):
    ``mean_{i=1..T-1} A[i, i-1]``, a float."""
    w = np.asarray(weights, np.float64)
    return float(np.diagonal(w, offset=-1).mean())


def induction_score(weights, period):
    """Mean attention from the second occurrence of each token of a sequence repeated with ``period`` P to the
    token after its first occurrence: ``mean_{i=P..2P-1} A[i, i-P+1]`` of ``weights (T, T)``, ``T >= 2P``."""
    w = np.asarray(weights, np.float64)
    i = np.arange(period, 2 * period)
    return float(w[i, i - period + 1].mean())


def uniform_induction_score(period):
    """The induction score of uniform causal attention (query ``i`` gives ``1/(i+1)`` to each of its ``i+1``
    keys) on a sequence repeated with ``period`` P: ``mean_{i=P..2P-1} 1/(i+1)``."""
    return float(np.mean(1.0 / (np.arange(period, 2 * period) + 1)))


def _causal_pattern(rng, t):
    scores = rng.normal(size=(t, t)) * 2.0
    scores = np.where(np.tril(np.ones((t, t), bool)), scores, -np.inf)
    w = np.exp(scores - scores.max(axis=1, keepdims=True))
    return w / w.sum(axis=1, keepdims=True)


def _previous_inputs(rng):
    return {"weights": _causal_pattern(rng, int(rng.integers(2, 12)))}


def _induction_inputs(rng):
    period = int(rng.integers(1, 7))
    return {"weights": _causal_pattern(rng, 2 * period + int(rng.integers(0, 3))), "period": period}


def _uniform_inputs(rng):
    return {"period": int(rng.integers(1, 200))}


register(
    # 11.1 (implement): the previous-token score of one pattern.
    Exercise(
        id="11.1",
        kind="function",
        reference=previous_token_score,
        inputs=_previous_inputs,
        edge_cases=({"weights": np.eye(5, k=-1) + np.eye(5)[0:1].T @ np.eye(5)[0:1]},
                    {"weights": np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None]}),
        mistakes=(
            Mistake("the first query has no previous token: average over the T - 1 queries 1 .. T-1, not over all T.",
                    "最初のクエリには直前のトークンがありません。T 個すべてではなく、クエリ 1 から T-1 の T - 1 個で"
                    "平均します。",
                    answer=lambda weights: float(np.diagonal(np.asarray(weights), offset=-1).sum()
                                                 / np.asarray(weights).shape[0])),
            Mistake("this is the weight on the query's own position, A[i, i]: the previous token is A[i, i-1].",
                    "これはクエリ自身の位置への重み A[i, i] です。直前のトークンは A[i, i-1] です。",
                    answer=lambda weights: float(np.diagonal(np.asarray(weights))[1:].mean())),
        ),
    ),
    # 11.2 (implement): the induction score of one pattern on a repeated sequence.
    Exercise(
        id="11.2",
        kind="function",
        reference=induction_score,
        inputs=_induction_inputs,
        edge_cases=({"weights": np.tril(np.ones((6, 6))) / np.arange(1, 7)[:, None], "period": 3},
                    {"weights": np.eye(2), "period": 1}),
        mistakes=(
            Mistake("this is the weight on the first occurrence of the same token, A[i, i-P]: an induction head "
                    "attends to the token after it, A[i, i-P+1], the one it will copy.",
                    "これは同じトークンの最初の出現への重み A[i, i-P] です。帰納ヘッドが注目するのはその次の"
                    "トークン A[i, i-P+1] で、それをコピーします。",
                    answer=lambda weights, period: float(np.asarray(weights)[np.arange(period, 2 * period),
                                                                             np.arange(0, period)].mean())),
            Mistake("the queries of the second copy are i = P .. 2P-1: averaged over other rows here.",
                    "2 回目のコピーのクエリは i = P から 2P-1 です。ここでは別の行で平均しています。",
                    answer=lambda weights, period: float(np.asarray(weights)[np.arange(period - 1, 2 * period - 1),
                                                                             np.arange(0, period)].mean())),
        ),
    ),
    # 11.3 (derive): the induction score of uniform causal attention, the baseline of the chapter's figures.
    Exercise(
        id="11.3",
        kind="function",
        reference=uniform_induction_score,
        inputs=_uniform_inputs,
        edge_cases=({"period": 1}, {"period": 64}),
        mistakes=(
            Mistake("query i sees i + 1 keys (positions 0 .. i, itself included), so each gets 1/(i+1), not 1/i.",
                    "クエリ i が見るキーは自分自身を含む位置 0 から i の i + 1 個なので、"
                    "それぞれの重みは 1/i ではなく 1/(i+1) です。",
                    answer=lambda period: float(np.mean(1.0 / np.arange(period, 2 * period)))),
            Mistake("causal attention does not spread over the whole sequence: query i sees only its i + 1 keys, "
                    "not all 2P.",
                    "因果的なアテンションは系列全体には広がりません。クエリ i が見るのは i + 1 個のキーだけで、"
                    "2P 個すべてではありません。",
                    answer=lambda period: 1.0 / (2 * period)),
        ),
    ),
)
