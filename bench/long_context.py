"""Chapter 9: fine-tuning at 4L, sliding windows and attention sinks, on chapter 8's task and models.

Every model starts as chapter 8's (``ch08.SETTINGS``: Markov chain of order 2 over 8 symbols, 2-layer causal
Transformer, d_model 32, 4 heads of 8 features, 300 Adam steps at L = 32 with batches of 32, seeds 0-4 vmapped in one
program, seed s trained on NumPy seed 1000 + s and initialised with ``jax.random.key(s)``). Every evaluation uses
chapter 8's 128 held-out sequences (``ch08.eval_data``), or their prefixes. Three parts:

1. **Fine-tuning at 4L** (``finetune``). The RoPE models continue training at 4L = 128 with each method at scale 4,
   ``rope`` (plain), ``pi``, ``ntk``, ``yarn`` (as bench/rope_scaling.py), for 300 Adam steps (learning rate 0.001,
   fresh optimizer state) on batches of 8 sequences of 128 tokens, as many tokens per step as in pretraining
   (32 x 32); seed s reads NumPy seed 2000 + s. Evaluated at 0, 10, 30, 100 and 300 steps. Beside them,
   ``scratch``: plain RoPE trained at 4L from its initialisation (``jax.random.key(s)``, learning rate 0.003 as in
   pretraining, NumPy seed 3000 + s, the same batches of 8 x 128), evaluated at 300 + n steps for the same n: then it
   has read as many tokens as the pretrained model after n fine-tuning steps (equal compute, counted in tokens).
2. **Sliding windows** (``window``). The RoPE and ALiBi models, trained without a window, read the 8L = 256-token
   sequences with each query restricted to its last w keys (offsets i - j < w), w = 1 ... 256; keys per query, the
   cost of attention and the size of the cache, are min(i + 1, w), averaged over the 256 queries.
3. **Attention sinks** (``sink_mass``, ``rolling_cache``). The attention weight each query puts on key 0 (and on
   keys 0-3), per model, block and head, at 8L, against 1 / (i + 1) for uniform attention; and the loss with a
   rolling cache of the last w keys, with and without the first k tokens kept (Xiao et al. 2023), positions those
   of the whole sequence. The same for ``rope_bos``: RoPE models trained (as chapter 8's, 300 steps) with a
   beginning-of-sequence token, symbol 8, before every sequence, so that position 0 always holds the same token.

Writes lib/attnbook/experiments/results/long_context_finetune.csv, long_context_window.csv, long_context_sink_mass.csv (per
query position, mean over the heads of each block), long_context_sink_heads.csv (per head, the mean over queries
i >= L), long_context_rolling_cache.csv, and long_context.json (machine, load, versions, settings, timings).
The stored run took 46 minutes on a 2-core machine shared with other jobs (load average 3 to 12, in the JSON; 13
of them pretraining, 23 fine-tuning, 2 the windows, 8 the sinks); an idle machine needs a fraction of that:

    python bench/long_context.py

Two follow-up parts, run on their own with ``--parts`` (they pretrain the same models again, seed for seed):

4. **Positions numbered inside the cache** (``renumbered``). The rolling cache of part 3 with the positions of
   StreamingLLM (Xiao et al. 2023, Section 3.2): the kept tokens are numbered 0, 1, ... inside the cache
   (``renumber=True``, ``ex.cache_offsets``), for the same models, windows and k = 1, 4 kept tokens (k = 0 is
   unchanged by renumbering, as the tests check). The run also re-evaluates part 3's k = 0 and full rows, to
   check that the models are the stored ones. Writes long_context_rolling_cache_renumbered.csv.
5. **A second fine-tuning learning rate** (``finetune_lr``). Part 1's fine-tuning of the four methods, same data
   and checkpoints, at learning rate 0.0003 (3 times lower than part 1's 0.001). Writes
   long_context_finetune_lr.csv. Both write long_context_followup.json (one part alone: long_context_<part>.json):

    python bench/long_context.py --parts renumbered finetune_lr
"""

from __future__ import annotations

import argparse
import csv
import json
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from attnbook import extrapolation as ex
from attnbook.experiments import RunInfo, ch08, source_folder, write_csv
from attnbook import positional
from attnbook.train import cross_entropy

SEEDS = [0, 1, 2, 3, 4]
OUT = source_folder()
MULTIPLE = 4
FT_STEPS = [0, 10, 30, 100, 300]
FT_BATCH = 8
FT_LEARNING_RATE = 1e-3
FT_SECOND_LEARNING_RATE = 3e-4
SCRATCH_STEPS = [100, 300] + [300 + n for n in FT_STEPS[1:]]
WINDOWS = [1, 2, 3, 4, 8, 16, 32, 64, 128, 256]
CACHE_WINDOWS = [2, 4, 8, 16]
CACHE_SINKS = [0, 1, 4]
BOS = ch08.SETTINGS.vocab_size


def methods(L: int) -> dict:
    m = MULTIPLE
    return {"rope": None, "pi": positional.PositionInterpolation(m), "ntk": positional.NTKAwareScaling(m),
            "yarn": positional.YaRNScaling(m, L)}


@eqx.filter_jit
def evaluate(models, x, y, max_offset=None, scaling=None, sinks=0, renumber=False):
    """Per-position mean loss of every stacked model: (seeds, T)."""
    def one(model):
        logits = jax.vmap(lambda t: model(t, max_offset, scaling=scaling, sinks=sinks, renumber=renumber))(x)
        return jnp.mean(cross_entropy(logits, y), axis=0)
    return eqx.filter_vmap(one)(models)


@eqx.filter_jit
def key_mass(models, x, first):
    """Attention weight on keys 0 .. first - 1, per model, block, head and query: (seeds, depth, heads, T)."""
    def one(model):
        def seq(t):
            return jnp.sum(model.attention_weights(t)[1][..., :first], axis=-1)  # (depth, heads, T)
        return jnp.mean(jax.lax.map(seq, x), axis=0)
    return eqx.filter_vmap(one)(models)


def data(seed: int, num: int, length: int, seed_base: int, steps: int):
    x, y, _ = ex.markov_data(ch08.table(), ch08.SETTINGS.order, num, length,
                             rng=np.random.default_rng(seed_base + seed))
    return x.reshape(steps, -1, length), y.reshape(steps, -1, length)


def stack(batches):
    return np.stack([b[0] for b in batches]), np.stack([b[1] for b in batches])


def with_bos(x, y):
    column = np.full(x.shape[:-1] + (1,), BOS, dtype=x.dtype)
    return np.concatenate([column, x], axis=-1), np.concatenate([x[..., :1], y], axis=-1)


def pretrain(encodings):
    """Chapter 8's models (seeds SEEDS) for each of `encodings` ("rope", "alibi", "rope_bos"), stacked."""
    s = ch08.SETTINGS.to_dict()
    trained = {e: ch08.train(e, SEEDS)[0] for e in encodings if e != "rope_bos"}
    if "rope_bos" in encodings:
        inputs, targets = stack([ch08.training_data(seed) for seed in SEEDS])
        bx, by = with_bos(inputs, targets)
        trained["rope_bos"] = ex.train("rope", SEEDS, bx, by, vocab_size=s["vocab_size"] + 1,
                                       learning_rate=s["learning_rate"], d_model=s["d_model"], depth=s["depth"],
                                       heads=s["heads"])[0]
    return trained


def fine_tune_rows(trained, x4, y4, learning_rate, excess):
    """Part 1's fine-tuning of the four methods at `learning_rate`: one row per method, seed and checkpoint."""
    L, T4 = ch08.SETTINGS.train_length, MULTIPLE * ch08.SETTINGS.train_length
    rows = []
    ft_x, ft_y = stack([data(seed, max(FT_STEPS) * FT_BATCH, T4, 2000, max(FT_STEPS)) for seed in SEEDS])
    for method, scaling in methods(L).items():
        for step, models in zip(FT_STEPS, ex.fine_tune(trained, ft_x, ft_y, checkpoints=FT_STEPS,
                                                       scaling=scaling, learning_rate=learning_rate)):
            curves = np.asarray(evaluate(models, x4, y4, None, scaling))
            rows += [dict(method=method, seed=seed, steps_at_4L=step, tokens_seen=(300 + step) * FT_BATCH * T4,
                          excess_first_L=excess(c, 0, L), excess_beyond_L=excess(c, L, T4),
                          loss_beyond_L=round(float(c[L:].mean()), 5)) for seed, c in zip(SEEDS, curves)]
        print(method, learning_rate, [r["excess_beyond_L"] for r in rows[-5 * len(SEEDS)::len(SEEDS)]], flush=True)
    return rows


def followup(parts) -> None:
    """Parts 4 (renumbered) and 5 (finetune_lr), on their own (see the module's docstring)."""
    info = RunInfo("python bench/long_context.py --parts " + " ".join(parts))
    L = ch08.SETTINGS.train_length
    T4, T8 = MULTIPLE * L, 8 * L
    x8, y8, floor8 = ch08.eval_data(8)
    floor = floor8.mean(axis=0)
    timings, checks = {}, {}

    def excess(curve, lo, hi):
        return round(float(np.mean(curve[lo:hi]) - np.mean(floor[lo:hi])), 5)

    began = time.time()
    trained = pretrain(("rope", "alibi", "rope_bos") if "renumbered" in parts else ("rope",))
    timings["pretrain"] = round(time.time() - began, 1)
    info.sample()
    print("pretrained", timings, flush=True)

    if "renumbered" in parts:
        began = time.time()
        with open(OUT / "long_context_rolling_cache.csv", encoding="utf-8", newline="") as f:
            stored = {(r["encoding"], r["seed"], r["window"], r["sinks"]): float(r["excess_beyond_L"])
                      for r in csv.DictReader(f)}
        xb, yb = with_bos(x8, y8)
        rows, differences = [], []
        for encoding in ("rope", "alibi", "rope_bos"):
            x, y = (xb, yb) if encoding == "rope_bos" else (x8, y8)
            shift = 1 if encoding == "rope_bos" else 0
            for w in CACHE_WINDOWS + ["full"]:
                for k in (CACHE_SINKS if w != "full" else [0]):
                    renumber = k > 0
                    curves = np.asarray(evaluate(trained[encoding], x, y, None if w == "full" else w, None,
                                                 k + shift if k else 0, renumber))[:, shift:]
                    new = [dict(encoding=encoding, seed=seed, window=w, sinks=k, renumbered=renumber,
                                excess_first_L=excess(c, 0, L), excess_beyond_L=excess(c, L, T8))
                           for seed, c in zip(SEEDS, curves)]
                    if renumber:
                        rows += new
                    else:  # the models are the stored ones: part 3's rows again
                        differences += [abs(r["excess_beyond_L"] - stored[(encoding, str(r["seed"]), str(w), "0")])
                                        for r in new]
            print(encoding, "renumbered", [r["excess_beyond_L"] for r in rows[-len(SEEDS)::]], flush=True)
            info.sample()
        write_csv(OUT / "long_context_rolling_cache_renumbered.csv", rows)
        checks["rolling_cache_k0_and_full_max_abs_diff_from_stored"] = round(max(differences), 5)
        timings["renumbered"] = round(time.time() - began, 1)

    if "finetune_lr" in parts:
        began = time.time()
        rows = fine_tune_rows(trained["rope"], x8[:, :T4], y8[:, :T4], FT_SECOND_LEARNING_RATE, excess)
        write_csv(OUT / "long_context_finetune_lr.csv", [dict(r, learning_rate=FT_SECOND_LEARNING_RATE) for r in rows])
        timings["finetune_lr"] = round(time.time() - began, 1)
        info.sample()

    meta = info.metadata(
        parts=list(parts),
        settings=dict(ch08.SETTINGS.to_dict(), seeds=SEEDS, multiple=MULTIPLE, cache_windows=CACHE_WINDOWS,
                      cache_sinks=CACHE_SINKS, bos_token=BOS, finetune_steps=FT_STEPS, finetune_batch=FT_BATCH,
                      finetune_learning_rate=FT_SECOND_LEARNING_RATE, finetune_data_seed="2000 + seed"),
        renumbered="positions numbered inside the cache (Xiao et al. 2023, Section 3.2): query i reads the first "
                   "k tokens and the last w; the kept tokens get positions 0, 1, ..., so the offset to key j is "
                   "i - j in the window and min(i, k + w - 1) - j for the first k (rope_bos: the BOS token and "
                   "the first k - 1 chain tokens)",
        checks=checks,
        seconds=timings,
    )
    name = "followup" if set(parts) == {"renumbered", "finetune_lr"} else parts[0]
    (OUT / f"long_context_{name}.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print("done", meta["total_seconds"], "s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", nargs="+", choices=["renumbered", "finetune_lr"],
                        help="run only these follow-up parts (default: parts 1 to 3)")
    args = parser.parse_args()
    if args.parts:
        return followup(args.parts)
    info = RunInfo("python bench/long_context.py")
    s, L = ch08.SETTINGS.to_dict(), ch08.SETTINGS.train_length
    T4 = MULTIPLE * L
    x8, y8, floor8 = ch08.eval_data(8)
    floor = floor8.mean(axis=0)
    current = ex.current_token_loss(ch08.table(), s["order"], x8).mean(axis=0)
    timings = {}

    def excess(curve, lo, hi):
        return round(float(np.mean(curve[lo:hi]) - np.mean(floor[lo:hi])), 5)

    began = time.time()
    trained = pretrain(("rope", "alibi", "rope_bos"))
    timings["pretrain"] = round(time.time() - began, 1)
    info.sample()
    print("pretrained", timings, flush=True)

    # 1. fine-tuning at 4L, and training at 4L from scratch
    began = time.time()
    x4, y4 = x8[:, :T4], y8[:, :T4]
    ft_rows = fine_tune_rows(trained["rope"], x4, y4, FT_LEARNING_RATE, excess)
    info.sample()
    sc_x, sc_y = stack([data(seed, max(SCRATCH_STEPS) * FT_BATCH, T4, 3000, max(SCRATCH_STEPS)) for seed in SEEDS])
    fresh = [ex.PositionModel("rope", vocab_size=s["vocab_size"], train_length=T4, d_model=s["d_model"],
                              depth=s["depth"], heads=s["heads"], key=jax.random.key(seed)) for seed in SEEDS]
    fresh = jax.tree.map(lambda *a: jnp.stack(a) if eqx.is_array(a[0]) else a[0], *fresh)
    for step, models in zip(SCRATCH_STEPS, ex.fine_tune(fresh, sc_x, sc_y, checkpoints=SCRATCH_STEPS,
                                                        learning_rate=s["learning_rate"])):
        curves = np.asarray(evaluate(models, x4, y4))
        ft_rows += [dict(method="scratch", seed=seed, steps_at_4L=step, tokens_seen=step * FT_BATCH * T4,
                         excess_first_L=excess(c, 0, L), excess_beyond_L=excess(c, L, T4),
                         loss_beyond_L=round(float(c[L:].mean()), 5)) for seed, c in zip(SEEDS, curves)]
    print("scratch", [r["excess_beyond_L"] for r in ft_rows[-len(SCRATCH_STEPS) * len(SEEDS)::len(SEEDS)]], flush=True)
    ft_rows += [dict(method=name, seed="", steps_at_4L="", tokens_seen="", excess_first_L=excess(c, 0, L),
                     excess_beyond_L=excess(c, L, T4), loss_beyond_L=round(float(c[L:T4].mean()), 5))
                for name, c in (("optimum", floor), ("current_token", current))]
    write_csv(OUT / "long_context_finetune.csv", ft_rows)
    timings["finetune"] = round(time.time() - began, 1)
    info.sample()

    # 2. sliding windows at 8L
    began = time.time()
    T8 = 8 * L
    window_rows = [dict(encoding=name, seed="", window="", keys_per_query="", excess_first_L=excess(c, 0, L),
                        excess_beyond_L=excess(c, L, T8)) for name, c in (("optimum", floor), ("current_token", current))]
    for encoding in ("rope", "alibi"):
        for w in WINDOWS:
            curves = np.asarray(evaluate(trained[encoding], x8, y8, w))
            keys = float(np.mean(np.minimum(np.arange(T8) + 1, w)))
            window_rows += [dict(encoding=encoding, seed=seed, window=w, keys_per_query=round(keys, 3),
                                 excess_first_L=excess(c, 0, L), excess_beyond_L=excess(c, L, T8))
                            for seed, c in zip(SEEDS, curves)]
        print(encoding, "windows", [r["excess_beyond_L"] for r in window_rows[-len(WINDOWS) * len(SEEDS)::len(SEEDS)]],
              flush=True)
    write_csv(OUT / "long_context_window.csv", window_rows)
    timings["window"] = round(time.time() - began, 1)
    info.sample()

    # 3. attention sinks: mass on the first keys, and a rolling cache with and without them
    began = time.time()
    xb, yb = with_bos(x8, y8)
    mass_rows, head_rows, cache_rows = [], [], []
    for encoding in ("rope", "alibi", "rope_bos"):
        x, y = (xb, yb) if encoding == "rope_bos" else (x8, y8)
        shift = 1 if encoding == "rope_bos" else 0  # rope_bos: sequence position 0 holds the BOS token
        for first in (1, 4):
            mass = np.asarray(key_mass(trained[encoding], x, first))  # (seeds, depth, heads, T)
            for si, seed in enumerate(SEEDS):
                for block in range(mass.shape[1]):
                    if first == 1:
                        mass_rows += [dict(encoding=encoding, seed=seed, block=block, position=i,
                                           mass_on_key_0=round(float(v), 5))
                                      for i, v in enumerate(mass[si, block].mean(axis=0))]
                    head_rows += [dict(encoding=encoding, seed=seed, block=block, head=h, first_keys=first,
                                       mean_mass_queries_from_L=round(float(mass[si, block, h, L:].mean()), 5),
                                       uniform_mass_queries_from_L=round(float(np.mean(
                                           np.minimum(first, np.arange(L, x.shape[1]) + 1)
                                           / (np.arange(L, x.shape[1]) + 1))), 5))
                                  for h in range(mass.shape[2])]
        for w in CACHE_WINDOWS:
            for k in CACHE_SINKS:
                curves = np.asarray(evaluate(trained[encoding], x, y, w, None, k + shift if k else 0))[:, shift:]
                cache_rows += [dict(encoding=encoding, seed=seed, window=w, sinks=k, excess_first_L=excess(c, 0, L),
                                    excess_beyond_L=excess(c, L, T8)) for seed, c in zip(SEEDS, curves)]
        curves = np.asarray(evaluate(trained[encoding], x, y))[:, shift:]
        cache_rows += [dict(encoding=encoding, seed=seed, window="full", sinks=0, excess_first_L=excess(c, 0, L),
                            excess_beyond_L=excess(c, L, T8)) for seed, c in zip(SEEDS, curves)]
        print(encoding, "sinks", [r["mean_mass_queries_from_L"] for r in head_rows[-8:]], flush=True)
        info.sample()
    write_csv(OUT / "long_context_sink_mass.csv", mass_rows)
    write_csv(OUT / "long_context_sink_heads.csv", head_rows)
    write_csv(OUT / "long_context_rolling_cache.csv", cache_rows)
    timings["sinks"] = round(time.time() - began, 1)

    meta = info.metadata(
        settings=dict(s, seeds=SEEDS, multiple=MULTIPLE, finetune_steps=FT_STEPS, finetune_batch=FT_BATCH,
                      finetune_learning_rate=FT_LEARNING_RATE, finetune_data_seed="2000 + seed",
                      scratch_steps=SCRATCH_STEPS, scratch_learning_rate=s["learning_rate"],
                      scratch_data_seed="3000 + seed", windows=WINDOWS, cache_windows=CACHE_WINDOWS,
                      cache_sinks=CACHE_SINKS, bos_token=BOS),
        methods={k: repr(v) for k, v in methods(L).items()},
        equal_compute="scratch after 300 + n steps of 8 x 128 tokens has read as many tokens as pretraining "
                      "(300 steps of 32 x 32) plus n fine-tuning steps",
        excess="loss minus the optimum (mean entropy of the true next-token distribution) of the same targets; "
               "first_L: positions 0 .. L-1, beyond_L: positions L .. T-1",
        rolling_cache="a query at i sees keys j with i - j < window, and the first `sinks` tokens of the chain "
                      "(rope_bos: the BOS token and the first sinks - 1 chain tokens); positions stay those of "
                      "the whole sequence (Xiao et al. re-number positions inside the cache)",
        seconds=timings,
    )
    (OUT / "long_context.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print("done", meta["total_seconds"], "s", flush=True)


if __name__ == "__main__":
    main()
