"""Export the data of the book's interactive figures (site/widgets/) from the stored results (lib/attnbook/experiments/results/).

    python -m tools.export_widget_data            # write site/widgets/chNN-data.js for every chapter below
    python -m tools.export_widget_data --check    # exit 1 if a stored file differs from what this writes now

The widgets of chapters 4 and 6-11 show trained models and benchmarks. Their numbers are never typed into a
script: this tool reads them from lib/attnbook/experiments/results/ (the CSV and JSON files the chapters read) and writes one
script per chapter, ``site/widgets/chNN-data.js``, which sets ``window.AttnWidgetData["chNN"]``; the chapter's
widget (site/widgets/chNN.js) loads it from its own folder, so it works over file:// as over HTTP (a fetch of
a .json file would not). Only what a widget plots is exported, rounded to the precision it shows, so each
file stays a few kB. tests/book/test_export_widget_data.py checks that every stored file is what this writes now.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from attnbook import experiments

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tools" / "widget_models"  # the trained model chapter 4's widget shows (chapter 7's is a stored result)
WIDGETS = ROOT / "site" / "widgets"
RESULTS = experiments.RESULTS  # the stored results, read as the chapters read them


def read(name: str) -> list[dict[str, str]]:
    return experiments.read_csv(name, RESULTS)


def meta(name: str) -> dict:
    return experiments.read_json(name, RESULTS)


def rounded(x: float | str, digits: int) -> float:
    value = round(float(x), digits)
    return 0.0 if value == 0 else value


# ------------------------------------------------------------------------------------------------
# Chapter 10: KV cache size and quality against kv_heads


def chapter10() -> dict:
    """The two tasks of chapter 10 whose models were trained with G = kv_heads key/value heads: chapter 8's
    Markov task (bench/kv_heads_quality.py: held-out excess over the optimum, per seed, from scratch after
    300 steps) and multi-query associative recall (bench/kv_heads_recall.py: held-out accuracy on the
    recalled values, per seed, after 2000 steps), with each model's sizes (the cache formula's H, d_h, layers)
    and the baselines the chapter prints."""
    quality, q_settings = read("kv_heads_quality.csv"), meta("kv_heads_quality.json")["settings"]
    recall, r_settings = read("kv_heads_recall.csv"), meta("kv_heads_recall.json")["settings"]

    def model(s: dict) -> dict:
        return {"d_model": s["d_model"], "heads": s["heads"], "d_head": s["d_model"] // s["heads"],
                "layers": s["depth"], "seeds": s["seeds"], "steps": s["steps"]}

    markov = {**model(q_settings), "kv_heads": q_settings["kv_heads"], "metric": "excess",
              "values": {str(g): [rounded(r["excess"], 3) for r in quality
                                  if r["method"] == "from_scratch" and r["kv_heads"] == str(g)
                                  and r["steps"] == str(q_settings["steps"])] for g in q_settings["kv_heads"]},
              "baselines": {"current_token": rounded(next(r["excess"] for r in quality
                                                          if r["method"] == "current_token"), 3),
                            "optimum": 0.0}}
    recall_task = {**model(r_settings), "kv_heads": r_settings["kv_heads"], "metric": "accuracy",
                   "values": {str(g): [rounded(r["accuracy"], 3) for r in recall
                                       if r["method"] == "trained" and r["kv_heads"] == str(g)]
                              for g in r_settings["kv_heads"]},
                   "baselines": {m: rounded(next(r["accuracy"] for r in recall if r["method"] == m), 3)
                                 for m in ("bag_of_values", "uniform_over_values", "optimum")}}
    return {"sources": ["lib/attnbook/experiments/results/kv_heads_quality.csv", "lib/attnbook/experiments/results/kv_heads_quality.json",
                        "lib/attnbook/experiments/results/kv_heads_recall.csv", "lib/attnbook/experiments/results/kv_heads_recall.json"],
            "tasks": {"markov": markov, "recall": recall_task}}


# ------------------------------------------------------------------------------------------------
# Chapter 4: every head's attention from one token, in the trained key-bias layer

CH04_WEIGHTS = MODELS / "ch04_key_bias_add_token_2.eqx"
"""The layer of chapter 4's key-bias model trained on 'add token 2' (equinox.tree_serialise_leaves), written by
:func:`train_chapter4` when it is missing (``--train`` rewrites it)."""


def chapter4_layer_skeleton():
    """Chapter 4's key-bias layer before training (attnbook.experiments.ch04.layer(key_bias_positions=5))."""
    from attnbook.experiments import ch04
    return ch04.layer(key_bias_positions=5)


def chapter4_inputs():
    """Chapter 4's 1000 inputs of 5 tokens x 7 features (attnbook.experiments.ch04.inputs)."""
    from attnbook.experiments import ch04
    return ch04.inputs()


def train_chapter4() -> None:
    """Train the layer as chapter 4's notebook does (attnbook.experiments.ch04.train_on, a SelfAttentionModel without a
    position table, on the target 'add token 2') and store it with equinox.tree_serialise_leaves."""
    import equinox as eqx

    from attnbook.experiments import ch04
    from attnbook.mha import SelfAttentionModel

    xs = chapter4_inputs()
    run = ch04.train_on(SelfAttentionModel(chapter4_layer_skeleton()), xs, ch04.targets(xs)["add token 2"])
    CH04_WEIGHTS.parent.mkdir(parents=True, exist_ok=True)
    eqx.tree_serialise_leaves(CH04_WEIGHTS, run["model"].attention)


def chapter4_layer():
    import equinox as eqx
    if not CH04_WEIGHTS.exists():
        train_chapter4()
    return eqx.tree_deserialise_leaves(CH04_WEIGHTS, chapter4_layer_skeleton())


def chapter4() -> dict:
    """The attention weights of every head of the stored layer on input 0 of chapter 4's 1000 inputs:
    weights[q][h] is head h's row for query token q (5 keys), 3 decimals; and the input itself (2 decimals)."""
    import numpy as np
    x = chapter4_inputs()[0]
    _, weights = chapter4_layer()(x, x, x)  # (heads, 5 queries, 5 keys)
    weights = np.asarray(weights, dtype=np.float64)
    return {"sources": [str(CH04_WEIGHTS.relative_to(ROOT))], "input_index": 0,
            "input": [[rounded(v, 2) for v in row] for row in x],
            "weights": [[[rounded(v, 3) for v in weights[h, q]] for h in range(weights.shape[0])]
                        for q in range(weights.shape[1])]}


# ------------------------------------------------------------------------------------------------
# Chapter 7: greedy decoding with and without the cache

CH07_SOURCES = 4  # the first held-out strings the widget offers


def chapter7_data():
    """Chapter 7's training set and held-out set (attnbook.experiments.ch07.data)."""
    from attnbook.experiments import ch07
    return ch07.data()


def chapter7_model():
    """Chapter 7's trained model, the one its notebook analyses (attnbook.experiments.ch07.stored_model)."""
    from attnbook.experiments import ch07
    return ch07.stored_model()


VERIFY = False
"""Set by :func:`main` when it writes the files: then chapter 7's export also decodes without the cache and checks
that the tokens agree (compiling a second decoder costs seconds, which the stale-file test does not spend)."""


def chapter7() -> dict:
    """The first held-out strings and what the stored model decodes from them, greedily with the cache
    (transformer.greedy_decode_cached; when writing, the tool checks that greedy_decode without it gives the
    same tokens), and the sizes the widget counts with."""
    import numpy as np

    from attnbook import transformer
    model = chapter7_model()
    _, (sources, _, targets) = chapter7_data()
    sources, targets = sources[:CH07_SOURCES], targets[:CH07_SOURCES]
    decoded = []
    for source in sources:
        tokens, _ = transformer.greedy_decode_cached(model, source, sources.shape[1], transformer.START)
        if VERIFY:
            plain, _ = transformer.greedy_decode(model, source, sources.shape[1], transformer.START)
            assert np.array_equal(tokens, plain), "cached and uncached decoding disagree"
        decoded.append([int(v) for v in tokens])
    return {"sources": [str(Path(RESULTS / "transformer_model.eqx").relative_to(ROOT))], "start": transformer.START,
            "strings": [[int(v) for v in row] for row in sources], "targets": [[int(v) for v in row] for row in targets],
            "decoded": decoded, "blocks": len(model.decoder.blocks),
            "heads": int(model.decoder.blocks[0].mixer.attention.w_q.shape[1])}


# ------------------------------------------------------------------------------------------------
# Chapter 6: time and memory against T


def significant(x: float, digits: int = 3) -> float:
    return float(f"{x:.{digits}g}")


def chapter6() -> dict:
    """Chapter 6 (attnbook.experiments.ch06): per method, mode and length T, the median time per call (ms) where it
    was run, the temporary memory of XLA's analysis with every buffer visible (MiB, planned even where the run
    was skipped), and the status: "measured", "time" or "memory" (skipped over the benchmark's limit), 3
    significant digits as the chapter prints them."""
    from attnbook.experiments import ch06

    rows, settings = read("attention_cost.csv"), meta("attention_cost.json")["settings"]
    methods, modes = list(ch06.method_table()), list(ch06.MODES)
    table = {}
    for mode in modes:
        for method in methods:
            chosen = sorted((r for r in rows if r["method"] == method and r["mode"] == mode), key=lambda r: int(r["T"]))
            assert [int(r["T"]) for r in chosen] == settings["lengths"], (method, mode)
            table.setdefault(mode, {})[method] = {
                "status": [r["status"].removeprefix("skipped: ") for r in chosen],
                "ms": [significant(float(r["seconds"]) * 1e3) if r["seconds"] else None for r in chosen],
                "mib": [significant(float(r["temp_bytes"]) / 2**20) for r in chosen]}
    return {"sources": ["lib/attnbook/experiments/results/attention_cost.csv", "lib/attnbook/experiments/results/attention_cost.json"],
            "lengths": settings["lengths"], "methods": methods, "modes": modes, "d": settings["d"],
            "limits": {"seconds": settings["max_run_seconds"], "gib": settings["max_memory_gib"]}, "table": table}


# ------------------------------------------------------------------------------------------------
# Chapters 8 and 9: the loss at each position, per method and evaluation length


def per_position(name: str, methods: list[str], lengths: list[int], *, prefixes: bool = False) -> dict:
    """From a per-position CSV (method or encoding, seed, eval_length, position, loss): for each method and
    length the loss at each position, mean over the seeds (2 decimals: the curve), and the baselines'
    curves (optimum, current token: one row each). With `prefixes`, only the longest length's curves are
    kept, after checking that every shorter curve is their beginning (causal models reading prefixes of the
    same sequences, as chapter 8's: the widget cuts them)."""
    rows = read(name)
    column = "encoding" if "encoding" in rows[0] else "method"
    curves: dict[str, dict[str, list[float]]] = {}
    for method in [*methods, "optimum", "current_token"]:
        curves[method] = {}
        for length in lengths:
            chosen = [r for r in rows if r[column] == method and int(r["eval_length"]) == length]
            by_position: dict[int, list[float]] = {}
            for r in chosen:
                by_position.setdefault(int(r["position"]), []).append(float(r["loss"]))
            assert sorted(by_position) == list(range(length)), (method, length)
            curves[method][str(length)] = [rounded(sum(v) / len(v), 2) for _, v in sorted(by_position.items())]
        if prefixes:
            longest = curves[method][str(lengths[-1])]
            assert all(curves[method][str(t)] == longest[:t] for t in lengths), (method, "not prefixes")
            curves[method] = {str(lengths[-1]): longest}
    return curves


def chapter8() -> dict:
    """Chapter 8 (bench/positions_extrapolation.py): six encodings trained at L = 32, read at L, 2L, 4L and 8L;
    the per-position loss (mean over seeds) and each seed's summary loss (all positions at L, beyond L
    otherwise, as the chapter's table), 3 decimals."""
    settings = meta("positions_extrapolation.json")["settings"]
    train_length = settings["train_length"]
    summary = read("positions_extrapolation.csv")
    lengths = sorted({int(r["eval_length"]) for r in summary})
    methods = ["nope", "sinusoidal", "learned", "rope", "alibi", "t5"]

    def loss(method: str, length: int) -> list[float]:
        field = "loss_all" if length == train_length else "loss_beyond_L"
        return [rounded(r[field], 3) for r in summary if r["encoding"] == method and int(r["eval_length"]) == length]

    return {"sources": ["lib/attnbook/experiments/results/positions_per_position.csv", "lib/attnbook/experiments/results/positions_extrapolation.csv",
                        "lib/attnbook/experiments/results/positions_extrapolation.json"],
            "train_length": train_length, "lengths": lengths, "methods": methods, "seeds": settings["seeds"],
            "curves": per_position("positions_per_position.csv", methods, lengths, prefixes=True),
            "summary": {m: {str(t): loss(m, t) for t in lengths} for m in [*methods, "optimum", "current_token"]}}


def chapter9() -> dict:
    """Chapter 9 (bench/rope_scaling.py): chapter 8's RoPE models read at 2L, 4L and 8L with RoPE plain or
    stretched by s = T / L (PI, NTK-aware, YaRN with and without its temperature), beside chapter 8's ALiBi
    models, no fine-tuning; the per-position loss (mean over seeds) and each seed's excess beyond L."""
    settings = meta("rope_scaling.json")["settings"]
    rows = read("rope_scaling.csv")
    lengths = sorted({int(r["eval_length"]) for r in rows})
    methods = ["rope", "pi", "ntk", "yarn", "yarn_no_temperature", "alibi"]

    def excess(method: str, length: int) -> list[float]:
        return [rounded(r["excess_beyond_L"], 3) for r in rows if r["method"] == method and int(r["eval_length"]) == length]

    return {"sources": ["lib/attnbook/experiments/results/rope_scaling_per_position.csv", "lib/attnbook/experiments/results/rope_scaling.csv",
                        "lib/attnbook/experiments/results/rope_scaling.json"],
            "train_length": settings["train_length"], "lengths": lengths, "methods": methods,
            "scales": {str(t): t // settings["train_length"] for t in lengths},
            "curves": per_position("rope_scaling_per_position.csv", methods, lengths),
            "excess": {m: {str(t): excess(m, t) for t in lengths} for m in [*methods, "current_token"]}}


# ------------------------------------------------------------------------------------------------
# Chapter 11: the induction and previous-token scores of every head, scrubbed through training


def chapter11() -> dict:
    """Chapter 11 (bench/induction_heads.py): for every run (variant, depth, seed) and stored step, each head's
    induction score (on random sequences of period P repeated twice) and previous-token score (on held-out windows
    of T characters), layer by layer, 3 decimals; and the loss (nats) on the first and on the second copy of
    repeated held-out code, 2 decimals. With P, T and the curriculum's length, from the runs' settings, so that the
    widget computes the scores of uniform causal attention itself. Every run must hold the same steps and every
    (variant, depth, seed) must be there."""
    scores, training = read("induction_heads_scores.csv"), read("induction_heads_training.csv")
    runs = meta("induction_heads.json")["runs"].values()
    settings = {k: {json.dumps(r["settings"][k]) for r in runs} for k in
                ("repeated_period", "context", "heads", "curriculum_steps", "eval_every")}
    assert all(len(v) == 1 for v in settings.values()), settings  # one setting shared by every run
    settings = {k: json.loads(v.pop()) for k, v in settings.items()}
    heads = settings["heads"]
    keys = sorted({(r["variant"], int(r["depth"]), int(r["seed"])) for r in training})
    variants = [v for v in ("plain", "curriculum") if any(k[0] == v for k in keys)]
    depths, seeds = sorted({k[1] for k in keys}), sorted({k[2] for k in keys})
    assert set(keys) == {(v, d, s) for v in variants for d in depths for s in seeds}, "runs missing"
    steps = sorted(int(r["step"]) for r in training if (r["variant"], int(r["depth"]), int(r["seed"])) == keys[0])
    assert steps == list(range(0, steps[-1] + 1, settings["eval_every"])), steps
    table: dict[str, dict[str, list]] = {}
    for variant, depth, seed in keys:
        ident = dict(variant=variant, depth=str(depth), seed=str(seed))
        mine = lambda r: all(r[k] == v for k, v in ident.items())  # noqa: E731
        losses = {int(r["step"]): r for r in training if mine(r)}
        assert sorted(losses) == steps, (variant, depth, seed, "steps")
        heads_at = {}
        for r in scores:
            if mine(r):
                heads_at.setdefault(int(r["step"]), {})[int(r["layer"]), int(r["head"])] = r
        assert sorted(heads_at) == steps, (variant, depth, seed, "score steps")
        order = [(layer, head) for layer in range(depth) for head in range(heads)]
        assert all(sorted(heads_at[s]) == order for s in steps), (variant, depth, seed, "heads")
        table[f"{variant}-{depth}-{seed}"] = {
            name: [[rounded(heads_at[s][h][name], 3) for h in order] for s in steps]
            for name in ("induction", "previous_token")} | {
            "code_first": [rounded(losses[s]["code_repeat_loss_first"], 2) for s in steps],
            "code_second": [rounded(losses[s]["code_repeat_loss_second"], 2) for s in steps]}
    return {"sources": ["lib/attnbook/experiments/results/induction_heads_scores.csv", "lib/attnbook/experiments/results/induction_heads_training.csv",
                        "lib/attnbook/experiments/results/induction_heads.json"],
            "period": settings["repeated_period"], "context": settings["context"], "heads": heads,
            "curriculum_steps": settings["curriculum_steps"], "variants": variants, "depths": depths,
            "seeds": seeds, "steps": steps, "runs": table}


CHAPTERS: dict[str, Callable[[], dict]] = {"ch04": chapter4, "ch06": chapter6, "ch07": chapter7, "ch08": chapter8,
                                           "ch09": chapter9, "ch10": chapter10, "ch11": chapter11}


def render(chapter: str) -> str:
    """The text of site/widgets/<chapter>-data.js."""
    data = CHAPTERS[chapter]()
    sources = ", ".join(data.pop("sources"))
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return (f"// Generated by tools/export_widget_data.py from {sources}: do not edit, re-export.\n"
            f"window.AttnWidgetData = window.AttnWidgetData || {{}};\n"
            f"window.AttnWidgetData[{json.dumps(chapter)}] = {body};\n")


def path(chapter: str) -> Path:
    return WIDGETS / f"{chapter}-data.js"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare the stored files, write nothing")
    parser.add_argument("--train", action="store_true",
                        help="retrain and store the model chapter 4's widget shows before exporting")
    parser.add_argument("chapters", nargs="*", default=list(CHAPTERS), help="chNN names (default: all)")
    args = parser.parse_args(argv)
    global VERIFY
    VERIFY = not args.check
    if args.train:
        train_chapter4()
    stale = []
    for chapter in args.chapters:
        text = render(chapter)
        if args.check:
            if not path(chapter).exists() or path(chapter).read_text(encoding="utf-8") != text:
                stale.append(path(chapter).name)
        else:
            path(chapter).write_text(text, encoding="utf-8")
            print(f"{path(chapter).relative_to(ROOT)}: {len(text.encode())} bytes")
    if stale:
        print("stale, run python -m tools.export_widget_data: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
