"""Chapter 10: multi-head latent attention (DeepSeek-V2) on chapter 8's task, at the cache sizes of MQA, GQA and MHA.

The task, the settings, the seeds and each seed's data are those of ``bench/kv_heads_quality.py`` (chapter 8's
Markov task with a known optimum, 300 Adam steps, five seeds vmapped). The model is chapter 8's with every
block's attention replaced by ``attnbook.latent.MultiHeadLatentAttention`` (``attnbook.experiments.ch10.mla_position_model``):
4 heads of 8 features, a decoupled RoPE part of ``ROPE_DIM = 4`` features (the paper's ``d_h^R = d_h / 2``) and
a latent of rank ``r`` (``ch10.SETTINGS.ranks`` and ``rope_dim``). The ranks give a cache of ``r + 4`` numbers per token and layer equal to that of MQA
(r = 12: 16 numbers, 64 bytes), of GQA with 2 key/value heads (r = 28: 32 numbers) and of MHA (r = 60: 64
numbers); DeepSeek-V2's own choice ``d_c = 4 d_h`` is r = 32.

Writes lib/attnbook/experiments/results/latent_quality.csv (per rank and seed: held-out loss on chapter 8's 128 evaluation
sequences of length 32, excess over the optimum, final training loss, cache bytes per token per layer and for
the model, attention parameters per layer, the model's parameters) and lib/attnbook/experiments/results/latent_quality.json (the
machine, the load, the versions, the settings, the time per rank).

    python bench/latent_quality.py
"""

from __future__ import annotations

import json
import time

from attnbook import extrapolation as ex
from attnbook import kv, nn
from attnbook.experiments import RunInfo, ch08, ch10, source_folder, write_csv
from attnbook.experiments.ch10 import held_out

SEEDS, RANKS, ROPE_DIM = list(ch10.SETTINGS.seeds), list(ch10.SETTINGS.ranks), ch10.SETTINGS.rope_dim
OUT = source_folder()


def main() -> None:
    info = RunInfo("python bench/latent_quality.py")
    x, y, floor = ch08.eval_data(1)
    floor_mean = float(floor.mean())
    rows, timings = [], {}
    for rank in RANKS:
        began = time.time()
        models, losses = ch10.experiment_train(None, SEEDS, rank=rank, rope_dim=ROPE_DIM)
        for i, seed in enumerate(SEEDS):
            model = ex.select(models, i)
            mixer = model.blocks[0].mixer
            loss, excess = held_out(model, x, y, floor_mean)
            rows.append(dict(method="latent", rank=rank, rope_dim=ROPE_DIM, seed=seed, loss=loss, excess=excess,
                             final_train_loss=round(float(losses[i, -20:].mean()), 5),
                             cache_bytes_per_token_per_layer=kv.cache_bytes_per_token(mixer),
                             cache_bytes_per_token=kv.cache_bytes_per_token(mixer) * len(model.blocks),
                             attention_parameters_per_layer=nn.count_parameters(mixer),
                             parameters=nn.count_parameters(model)))
        timings[f"rank_{rank}"] = round(time.time() - began, 1)
        info.sample()
        print("rank", rank, timings[f"rank_{rank}"], "s", [r["excess"] for r in rows[-len(SEEDS):]], flush=True)
    write_csv(OUT / "latent_quality.csv", rows)
    meta = info.metadata(
        samples_name="after_each_run",
        settings=dict(ch08.SETTINGS.to_dict(), seeds=SEEDS, ranks=RANKS, rope_dim=ROPE_DIM, optimum=round(floor_mean, 5),
                      model="ch10.mla_position_model: chapter 8's 'nope' model with MultiHeadLatentAttention mixers "
                            "(Glorot-uniform from fold_in(key(seed), 1000 + block))"),
        seconds=timings,
    )
    (OUT / "latent_quality.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print("wrote", OUT / "latent_quality.csv", "and the .json")


if __name__ == "__main__":
    main()
