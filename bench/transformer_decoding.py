"""Chapter 7's decoding cost: wall time of greedy decoding against output length, with and without a cache.

Three decoders of the same size (d_model 32, 4 heads, 2 layers, a source of 8 tokens, untrained weights:
the cost does not depend on what the weights say):

- ``recompute``: :func:`attnbook.transformer.greedy_decode`, the whole prefix through the decoder at every step;
- ``kv-cache``: :func:`attnbook.transformer.greedy_decode_cached` with attention, keys and values cached;
- ``aft-simple``: the same with AFT-simple as the decoder's mixer, whose self-attention state has a fixed size.

For each length the jitted decoder is compiled once, then timed: the fastest of 7 runs (3 when a run takes
more than a second), since on a shared machine other jobs only add time. The column ``state_bytes`` is what a
decoder keeps from step to step, from :func:`attnbook.transformer.cache_bytes`: for both cached decoders the
self-attention cache (or AFT-simple's three vectors per block) plus the cross-attention keys and values of the
source, projected once; 0 for ``recompute``, which keeps no keys or values and projects them again at every step.
Writes lib/attnbook/experiments/results/transformer_decoding.csv and .json (the machine, the settings). A few minutes on a 2-core machine:

    python bench/transformer_decoding.py
"""

from __future__ import annotations

import json
import os
import time

import jax
import numpy as np

from attnbook import transformer
from attnbook.experiments import RunInfo, source_folder, write_csv

SETTINGS = dict(d_model=32, heads=4, depth=2, source_length=8, repeats=7,
                lengths=[16, 32, 64, 128, 256, 512, 1024], recompute_max_length=256)


def seconds(fn) -> float:
    """The fastest of several runs, after one that compiles: on a shared machine the other jobs only ever
    add time, so the minimum is the best estimate of what the program itself needs."""
    jax.block_until_ready(fn())  # compile
    times = []
    for _ in range(SETTINGS["repeats"] if not times or times[0] < 1.0 else 3):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
        if times[0] > 1.0 and len(times) >= 3:  # slow runs (no cache, long outputs): three are enough
            break
    return float(np.min(times))


def main() -> None:
    out = source_folder() / "transformer_decoding.csv"
    info = RunInfo("python bench/transformer_decoding.py")
    source = np.random.default_rng(0).integers(0, transformer.DIGITS, SETTINGS["source_length"]).astype(np.int32)
    models = {name: transformer.EncoderDecoder(transformer.DIGITS + 1, d_model=SETTINGS["d_model"], depth=SETTINGS["depth"],
                                      heads=SETTINGS["heads"], key=jax.random.key(0), mixer=mixer)
              for name, mixer in [("attention", "attention"), ("aft-simple", "aft-simple")]}
    methods = {
        "recompute": (models["attention"], transformer.greedy_decode),
        "kv-cache": (models["attention"], transformer.greedy_decode_cached),
        "aft-simple": (models["aft-simple"], transformer.greedy_decode_cached),
    }
    rows = []
    for length in SETTINGS["lengths"]:
        for name, (model, decode) in methods.items():
            if name == "recompute" and length > SETTINGS["recompute_max_length"]:
                continue
            total = seconds(lambda: decode(model, source, length, transformer.START))
            state = transformer.cache_bytes(model, length, SETTINGS["source_length"]) if name != "recompute" else 0
            rows.append(dict(method=name, length=length, seconds=round(total, 6),
                             ms_per_token=round(1e3 * total / length, 4), state_bytes=state,
                             load_average=round(os.getloadavg()[0], 2)))
            print(rows[-1], flush=True)
    write_csv(out, rows)
    meta = info.metadata(duration_seconds=round(time.time() - info.start, 1), settings=SETTINGS)
    out.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out} and {out.with_suffix('.json').name}")


if __name__ == "__main__":
    main()
