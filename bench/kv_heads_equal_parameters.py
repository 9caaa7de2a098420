"""Chapter 10: grouped-query attention at equal parameter count, on chapter 8's Markov task.

``bench/kv_heads_quality.py`` compares 4, 2 and 1 key/value heads at equal width, so that the grouped models have
fewer parameters (25992, 23880, 22824). Here the freed key/value parameters go back to the feed-forward layers,
as Llama 2 does (``attnbook.experiments.ch10.equal_parameter_model``: width 144 for 2 key/value heads, 152 for 1, against 128;
25960 and 25944 parameters). Everything else is ``bench/kv_heads_quality.py``'s run: chapter 8's settings, seeds 0
to 4 with their own data, 300 Adam steps, five seeds vmapped, the held-out loss on chapter 8's 128 evaluation
sequences.

Writes lib/attnbook/experiments/results/kv_heads_equal_parameters.csv (per kv_heads and seed: held-out loss, excess over the optimum,
feed-forward width, cache bytes per token per layer, the model's parameters) and the .json (machine, load,
versions, settings, time per run).

    python bench/kv_heads_equal_parameters.py
"""

from __future__ import annotations

import json
import time

from attnbook import extrapolation as ex
from attnbook import kv, nn
from attnbook.experiments import RunInfo, ch08, ch10, source_folder, write_csv
from attnbook.experiments.ch10 import held_out

SEEDS, UPTRAIN_TO = list(ch10.SETTINGS.seeds), list(ch10.SETTINGS.uptrain_to)
OUT = source_folder()


def main() -> None:
    info = RunInfo("python bench/kv_heads_equal_parameters.py")
    x, y, floor = ch08.eval_data(1)
    floor_mean = float(floor.mean())
    rows, timings = [], {}
    for groups in UPTRAIN_TO:
        began = time.time()
        models, _ = ch10.experiment_train(groups, SEEDS, equal_parameters=True)
        for i, seed in enumerate(SEEDS):
            model = ex.select(models, i)
            loss, excess = held_out(model, x, y, floor_mean)
            rows.append(dict(method="equal_parameters", kv_heads=groups, seed=seed, loss=loss, excess=excess,
                             ff_width=model.blocks[0].feed_forward.hidden.weight.shape[1],
                             cache_bytes_per_token_per_layer=kv.cache_bytes_per_token(model.blocks[0].mixer),
                             parameters=nn.count_parameters(model)))
        timings[f"kv_heads_{groups}"] = round(time.time() - began, 1)
        info.sample()
        print("kv_heads", groups, timings[f"kv_heads_{groups}"], "s", [r["excess"] for r in rows[-len(SEEDS):]],
              flush=True)
    write_csv(OUT / "kv_heads_equal_parameters.csv", rows)
    meta = info.metadata(samples_name="after_each_run",
                         settings=dict(ch08.SETTINGS.to_dict(), seeds=SEEDS, kv_heads=UPTRAIN_TO,
                                       ff_width={g: ch10.equal_parameter_width(g) for g in UPTRAIN_TO},
                                       model="ch10.equal_parameter_model: ch10.gqa_position_model with wider "
                                             "feed-forward layers from fold_in(key(seed), 2000 + block)"),
                         seconds=timings)
    (OUT / "kv_heads_equal_parameters.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print("wrote", OUT / "kv_heads_equal_parameters.csv", "and the .json")


if __name__ == "__main__":
    main()
