"""Chapter 8: NoPE with a beginning-of-sequence token, the ablation that Kazemnejad et al.'s construction suggests.

Kazemnejad et al. (2023) show that a causal model without positional encoding can recover absolute positions in its
first layer from a beginning-of-sequence token (attending uniformly, position t reads that token with weight
1 / (t + 1)). Chapter 8's sequences have none. Here every training and held-out sequence gets one extra token, BOS =
vocab_size, in front; the model (``attnbook.extrapolation``'s NoPE model, vocabulary vocab_size + 1, otherwise
chapter 8's settings and seeds 0-4) is trained on BOS + L tokens and evaluated on BOS + 8L tokens of the same
held-out sequences as chapter 8. The target after BOS is the first token (uniform); every other target and its
optimum are chapter 8's.

Writes lib/attnbook/experiments/results/positions_bos_ablation.csv: per seed and length, the mean loss over the chain's positions
0 .. L - 1 (at L) or beyond L (at 2L, 4L, 8L), on exactly the targets of positions_extrapolation.csv; and
lib/attnbook/experiments/results/positions_bos_ablation.json (machine, date, load).

    python bench/positions_bos_ablation.py
"""

from __future__ import annotations

import json

import numpy as np

from attnbook import extrapolation as ex
from attnbook.experiments import RunInfo, ch08, source_folder, write_csv

SEEDS = [0, 1, 2, 3, 4]
MULTIPLES = [1, 2, 4, 8]
OUT = source_folder()


def with_bos(x, y, bos):
    """Prepend the token ``bos`` to every sequence; the target after it is the sequence's first token."""
    column = np.full(x.shape[:-1] + (1,), bos, dtype=x.dtype)
    return np.concatenate([column, x], axis=-1), np.concatenate([x[..., :1], y], axis=-1)


def main() -> None:
    info = RunInfo("python bench/positions_bos_ablation.py")
    s, L = ch08.SETTINGS.to_dict(), ch08.SETTINGS.train_length
    bos = s["vocab_size"]
    data = [with_bos(*ch08.training_data(seed), bos) for seed in SEEDS]
    models, _ = ex.train("nope", SEEDS, np.stack([d[0] for d in data]), np.stack([d[1] for d in data]),
                         vocab_size=s["vocab_size"] + 1, learning_rate=s["learning_rate"], d_model=s["d_model"],
                         depth=s["depth"], heads=s["heads"])
    x8, y8, _ = ch08.eval_data(max(MULTIPLES))
    xb, yb = with_bos(x8, y8, bos)
    rows = []
    for i, seed in enumerate(SEEDS):
        curve = np.asarray(ex.loss_per_position(ex.select(models, i), xb, yb))[1:]  # chain positions 0 .. 8L - 1
        for m in MULTIPLES:
            part = curve[:L] if m == 1 else curve[L:m * L]
            rows.append(dict(encoding="nope_with_bos", seed=seed, eval_length=m * L, loss=round(float(part.mean()), 5)))
        print(seed, [r["loss"] for r in rows[-len(MULTIPLES):]], flush=True)
    write_csv(OUT / "positions_bos_ablation.csv", rows)
    meta = info.metadata(settings=dict(s, seeds=SEEDS, bos_token=bos, train_inputs="BOS + L tokens"))
    (OUT / "positions_bos_ablation.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
