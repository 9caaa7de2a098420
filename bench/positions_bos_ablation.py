"""Chapter 8: NoPE with a beginning-of-sequence token, the ablation that Kazemnejad et al.'s construction suggests.

Kazemnejad et al. (2023) show that a causal model without positional encoding can recover absolute positions in its
first layer from a beginning-of-sequence token (attending uniformly, position t reads that token with weight
1 / (t + 1)). Chapter 8's sequences have none. Here every training and held-out sequence gets one extra token, BOS =
vocab_size, in front (``ch08.with_bos``); the model (``attnbook.extrapolation``'s NoPE model, vocabulary
vocab_size + 1, otherwise chapter 8's settings and seeds 0-4: ``ch08.train_with_bos``) is trained on BOS + L tokens
and evaluated on BOS + 8L tokens of the same held-out sequences as chapter 8. The target after BOS is the first
token (uniform); every other target and its optimum are chapter 8's.

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


def main() -> None:
    info = RunInfo("python bench/positions_bos_ablation.py")
    s, L = ch08.SETTINGS.to_dict(), ch08.SETTINGS.train_length
    bos = s["vocab_size"]  # ch08.with_bos's token
    models, _ = ch08.train_with_bos("nope", SEEDS)
    x8, y8, _ = ch08.eval_data(max(MULTIPLES))
    xb, yb = ch08.with_bos(x8, y8)
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
