"""Chapter 8: six position encodings, five seeds each, evaluated at 1, 2, 4 and 8 times the training length.

The task and the model are ``attnbook.extrapolation``'s (``SETTINGS``): next-token prediction on a Markov
chain of order 2 over 8 symbols, a 2-layer causal Transformer (d_model 32, 4 heads) trained for 300 Adam
steps on sequences of length L = 32, one program per encoding with the five seeds vmapped. Each seed has
its own training data (NumPy seed 1000 + seed) and initial weights (``jax.random.key(seed)``); the held-out
sequences are the same for every model, and every length is a prefix of the same 128 sequences of 8L tokens.

Writes
- lib/attnbook/experiments/results/positions_extrapolation.csv: one line per encoding, seed and evaluation length, with the
  mean loss over all positions, over positions beyond L, and the final training loss (last 20 steps);
  Two baselines are stored as encodings too: ``optimum`` (the mean entropy of the true next-token
  distribution) and ``current_token`` (the best predictor that reads only the current token, exact from the
  chain's table: ``ex.current_token_loss``);
- lib/attnbook/experiments/results/positions_per_position.csv: the mean loss at every position, per encoding, seed and length,
  and the two baselines;
- lib/attnbook/experiments/results/positions_diagnostics.csv: measurements at 8L that explain the failures: every model's loss
  beyond L with its attention restricted to offsets below L, the fraction of attention mass that positions
  >= L give to offsets >= L (and that of uniform attention), and three interventions on the T5 bias table
  (copy bucket 21 into 22-31; set 21-31 to the mean of buckets 3-20; mask offsets >= 31), with the trained
  biases of buckets 21 and 3-20 (mean over heads);
- lib/attnbook/experiments/results/positions_extrapolation.json: the machine, the load average, the settings, the time per encoding.

Chapter 8 reads them and re-trains one seed live. The stored run took 19 minutes on a 2-core machine shared with
other jobs (load average 6 to 10); an idle machine needs a fraction of that:

    python bench/positions_extrapolation.py
"""

from __future__ import annotations

import json
import time

import equinox as eqx
import numpy as np

from attnbook import extrapolation as ex
from attnbook.experiments import RunInfo, ch08, source_folder, write_csv

SEEDS = [0, 1, 2, 3, 4]
MULTIPLES = [1, 2, 4, 8]
OUT = source_folder()


def t5_interventions(model, x, y, L):
    """Loss beyond L at each length (from the 8L curve) after each change to the T5 bias table."""
    table = model.relative.table  # (buckets, heads)
    copy21 = table.at[22:].set(table[21])
    mean3_20 = table.at[21:].set(table[3:21].mean(axis=0))
    curves = {"t5_copy_bucket_21_into_22_31": ex.loss_per_position(eqx.tree_at(lambda m: m.relative.table, model, copy21), x, y),
              "t5_buckets_21_31_set_to_mean_of_3_20": ex.loss_per_position(eqx.tree_at(lambda m: m.relative.table, model, mean3_20), x, y),
              "t5_offsets_31_and_more_masked": ex.loss_per_position(model, x, y, max_offset=31)}
    head_mean = np.asarray(table).mean(axis=1)
    return curves, {"t5_bias_bucket_21_head_mean": float(head_mean[21]),
                    "t5_bias_buckets_3_20_head_mean": float(head_mean[3:21].mean())}


def main() -> None:
    info = RunInfo(None)
    L = ch08.SETTINGS.train_length
    x8, y8, floor8 = ch08.eval_data(max(MULTIPLES))
    current8 = ex.current_token_loss(ch08.table(), ch08.SETTINGS.order, x8)
    evals = {m: (x8[:, :m * L], y8[:, :m * L]) for m in MULTIPLES}  # every length: prefixes of the same sequences
    summary, per_position, diagnostics, timings = [], [], [], {}
    for name, values in (("optimum", floor8), ("current_token", current8)):
        for m in MULTIPLES:
            v = values[:, :m * L]
            per_position += [dict(encoding=name, seed="", eval_length=m * L, position=t, loss=round(float(c), 5))
                             for t, c in enumerate(v.mean(axis=0))]
            summary.append(dict(encoding=name, seed="", eval_length=m * L, loss_all=round(float(v.mean()), 5),
                                loss_beyond_L=round(float(v[:, L:].mean()), 5) if m > 1 else "", final_train_loss=""))
    diagnostics.append(dict(encoding="uniform_attention", seed="", diagnostic=f"far_attention_mass_offsets_{L}_up",
                            eval_length=max(MULTIPLES) * L,
                            value=round(ex.uniform_far_fraction(max(MULTIPLES) * L, L, L), 5)))
    for encoding in ex.ENCODINGS:
        began = time.time()
        models, losses = ch08.train(encoding, SEEDS)
        for i, seed in enumerate(SEEDS):
            model = ex.select(models, i)
            for m, (x, y) in evals.items():
                curve = np.asarray(ex.loss_per_position(model, x, y))
                per_position += [dict(encoding=encoding, seed=seed, eval_length=m * L, position=t, loss=round(float(v), 5))
                                 for t, v in enumerate(curve)]
                summary.append(dict(encoding=encoding, seed=seed, eval_length=m * L, loss_all=round(float(curve.mean()), 5),
                                    loss_beyond_L=round(float(curve[L:].mean()), 5) if m > 1 else "",
                                    final_train_loss=round(float(losses[i, -20:].mean()), 5)))
            # diagnostics at 8L: the model is causal, so the 8L curve's first m L positions are the m L curve
            curves = {f"restricted_to_offsets_below_{L}": ex.loss_per_position(model, x8, y8, max_offset=L)}
            values = {}
            if encoding == "t5":
                more, values = t5_interventions(model, x8, y8, L)
                curves.update(more)
            for name, c in curves.items():
                c = np.asarray(c)
                diagnostics += [dict(encoding=encoding, seed=seed, diagnostic=name, eval_length=m * L,
                                     value=round(float(c[L:m * L].mean()), 5)) for m in MULTIPLES[1:]]
            far = np.mean([ex.far_attention_fraction(model, x8[j:j + 32], L, start=L) for j in range(0, len(x8), 32)],
                          axis=0)  # (depth, heads)
            values[f"far_attention_mass_offsets_{L}_up"] = float(far.mean())
            values.update({f"far_attention_mass_offsets_{L}_up_block_{b}": float(far[b].mean()) for b in range(len(far))})
            diagnostics += [dict(encoding=encoding, seed=seed, diagnostic=k, eval_length=max(MULTIPLES) * L,
                                 value=round(v, 5)) for k, v in values.items()]
        timings[encoding] = round(time.time() - began, 1)
        info.sample()
        print(encoding, timings[encoding], "s", [r["loss_beyond_L"] for r in summary[-len(MULTIPLES) * len(SEEDS):]],
              flush=True)
    write_csv(OUT / "positions_extrapolation.csv", summary)
    write_csv(OUT / "positions_per_position.csv", per_position)
    write_csv(OUT / "positions_diagnostics.csv", diagnostics)
    meta = info.metadata(
        samples_name="after_each_encoding",
        settings=dict(ch08.SETTINGS.to_dict(), seeds=SEEDS, eval_multiples=MULTIPLES),
        eval_sequences="every length is a prefix of the same 8L sequences (ch08.eval_data)",
        current_token="exact: ex.current_token_loss, the chain's conditional of the next token given the current one",
        seconds_per_encoding=timings,
    )
    (OUT / "positions_extrapolation.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print("wrote", OUT / "positions_extrapolation.csv", "and the per-position table and .json")


if __name__ == "__main__":
    main()
