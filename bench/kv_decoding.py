"""Chapter 10: decode time per token of one attention layer against context length, for MHA, GQA, MQA and MLA.

One causal self-attention layer of a scaled-down real model (d_model 512, 8 query heads of 64 features), with
its KV cache already holding ``T - 32`` tokens; a jitted ``lax.scan`` then decodes the last 32 positions one token
at a time, as chapter 7's ``greedy_decode_cached`` does (each step projects the new token, writes its row of the
cache in place, and attends over the rows written so far). Reported: the time per token, the fastest of 7 runs
(the other jobs of a shared machine only add time), and the cache's bytes per token.

- ``mha``, ``gqa-4``, ``gqa-2``, ``mqa``: ``attnbook.mha.MultiHeadSelfAttention`` with ``kv_heads`` 8, 4, 2, 1,
  stepped by the layer's own one-token step (``MultiHeadSelfAttention.step``, the protocol chapter 7's decoder uses);
- ``mqa-repeated``: the MQA layer with its one key/value head copied to all 8 heads before attending (what a
  naive implementation does): the cache is small, the memory read per step is not;
- ``mla``: ``attnbook.latent.MultiHeadLatentAttention`` with DeepSeek-V2's proportions, rank ``4 d_h = 256`` and a
  decoupled RoPE part of ``d_h / 2 = 32``, stepped in the absorbed form (``step``).

Writes lib/attnbook/experiments/results/kv_decoding.csv and .json (the machine, the load, the versions, the settings:
``attnbook.experiments.ch10.DECODING``).

    python bench/kv_decoding.py
"""

from __future__ import annotations

import json
import os
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from attnbook import kv
from attnbook.experiments import RunInfo, ch10, source_folder, write_csv
from attnbook.latent import MultiHeadLatentAttention
from attnbook.mha import MultiHeadSelfAttention

SETTINGS = ch10.DECODING.to_dict()
OUT = source_folder()


def repeated_step(mixer, x, state, t):
    """The MQA/GQA step with the key/value heads copied to every query head before attending."""
    mha = mixer.attention
    group = mha.num_heads // mha.kv_heads
    k_cache, v_cache = state
    q, k, v = mha.project(x, x, x)
    k_cache = jax.lax.dynamic_update_slice(k_cache, k, (t, 0, 0))
    v_cache = jax.lax.dynamic_update_slice(v_cache, v, (t, 0, 0))
    visible = (jnp.arange(k_cache.shape[0]) <= t)[None]
    out = mha.attend(q, jnp.repeat(k_cache, group, axis=1), jnp.repeat(v_cache, group, axis=1), visible)[0]
    return out, (k_cache, v_cache)


@eqx.filter_jit
def decode(layer, step, xs, state, first):
    """``len(xs)`` one-token steps from position ``first``, in one ``lax.scan`` (the cache updated in place)."""
    def body(state, inputs):
        x, t = inputs
        out, state = step(layer, x[None], state, t)
        return state, out[0]
    return jax.lax.scan(body, state, (xs, first + jnp.arange(xs.shape[0])))[1]


def seconds(fn) -> float:
    jax.block_until_ready(fn())  # compile
    times = []
    for _ in range(SETTINGS["repeats"]):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return float(np.min(times))


def main() -> None:
    s = SETTINGS
    info = RunInfo("python bench/kv_decoding.py")
    key = jax.random.key(0)
    layers = {f"gqa-{g}" if 1 < g < s["heads"] else ("mha" if g == s["heads"] else "mqa"):
              MultiHeadSelfAttention(s["d_model"], s["heads"], kv_heads=g, key=key) for g in (8, 4, 2, 1)}
    mla = MultiHeadLatentAttention(s["d_model"], s["heads"], s["key_dim"], s["mla_rank"], s["mla_rope_dim"], key=key)
    step = lambda layer, x, state, t: layer.step(x, state, t)  # the one decoding protocol of every layer
    methods = {name: (layer, step) for name, layer in layers.items()}
    methods["mqa-repeated"] = (layers["mqa"], repeated_step)
    methods["mla"] = (mla, step)
    rng = np.random.default_rng(0)
    xs = jnp.asarray(rng.normal(size=(s["steps"], s["d_model"])), jnp.float32)
    rows = []
    for context in s["contexts"]:
        for name, (layer, step) in methods.items():
            state = tuple(jnp.asarray(rng.normal(size=a.shape), jnp.float32) for a in layer.init_cache(context))
            first = jnp.asarray(context - s["steps"])
            total = seconds(lambda: decode(layer, step, xs, state, first))
            rows.append(dict(method=name, context=context, ms_per_token=round(1e3 * total / s["steps"], 4),
                             cache_bytes_per_token=kv.cache_bytes_per_token(layer),
                             cache_mib=round(kv.cache_bytes_per_token(layer) * context / 2**20, 3),
                             load_average=round(os.getloadavg()[0], 2)))
            print(rows[-1], flush=True)
    write_csv(OUT / "kv_decoding.csv", rows)
    meta = info.metadata(duration_seconds=round(time.time() - info.start, 1),
                         note="timings on a shared machine: the fastest of several runs; compare methods within a context",
                         settings=SETTINGS)
    (OUT / "kv_decoding.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print("wrote", OUT / "kv_decoding.csv", "and the .json")


if __name__ == "__main__":
    main()
