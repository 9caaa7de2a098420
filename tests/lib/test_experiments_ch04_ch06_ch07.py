"""The homes of chapters 4, 6 and 7's experiments (attnbook.experiments.ch04, .ch06, .ch07): the settings of chapters 6
and 7 are what their stored results record, their runs write what the chapters read, and chapter 4's gives the
chapter's inputs, targets and layer."""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import pytest

from attnbook import experiments, report, transformer
from attnbook.experiments import ch06, ch07
from attnbook.nn import count_parameters


def test_chapter6_settings_are_what_the_stored_benchmark_records():
    meta = experiments.read_json("attention_cost.json")
    s = ch06.SETTINGS
    assert s.to_dict() == meta["settings"]
    rows = experiments.read_csv("attention_cost.csv")
    assert sorted({int(r["T"]) for r in rows}) == s.lengths
    assert list(dict.fromkeys(r["method"] for r in rows)) == list(ch06.method_table())
    assert list(dict.fromkeys(r["mode"] for r in rows)) == list(ch06.MODES)
    assert {int(r["d"]) for r in rows} == {s.d}
    chunks = experiments.read_csv("attention_cost_chunks.csv")
    assert list(dict.fromkeys((int(r["query_chunk"]), int(r["key_chunk"])) for r in chunks)) == list(s.chunk_sweep)
    assert {int(r["T"]) for r in chunks} == {s.chunk_sweep_length}
    paired = meta["paired_attention_vs_jax_nn"]
    assert list(dict.fromkeys(p["T"] for p in paired)) == list(s.paired_lengths)
    assert {p["rounds"] for p in paired} == {s.paired_rounds}
    assert {c["T"] for c in meta["rss_check"]} == {s.rss_length}
    # every skipped run is over the limit the settings state, and no run is skipped for the budget
    for r in rows:
        if r["status"] == "skipped: memory":
            assert (int(r["temp_bytes"]) + int(r["argument_bytes"]) + int(r["output_bytes"])) / 2**30 > s.max_memory_gib
    assert {r["status"] for r in rows} <= {"measured", "skipped: time", "skipped: memory"}


def test_chapter6_a_changed_setting_no_longer_matches():
    stored = experiments.read_json("attention_cost.json")["settings"]
    for change in [{"d": 128}, {"max_length": 65536}, {"aft_local_window": 16}, {"max_memory_gib": 8.0}]:
        assert dataclasses.replace(ch06.SETTINGS, **change).to_dict() != stored, change


def test_chapter6_reads_numbers_as_floats_and_runs_not_made_as_none():
    rows = ch06.read_rows(experiments.RESULTS / "attention_cost.csv")
    assert len(rows) == len(experiments.read_csv("attention_cost.csv"))
    skipped = [r for r in rows if r["status"] != "measured"]
    assert skipped and all(r["seconds"] is None and isinstance(r["temp_bytes"], float) for r in skipped)
    assert all(isinstance(r["seconds"], float) for r in rows if r["status"] == "measured")


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="the cross-check reads Linux's /proc")
def test_chapter6_cross_check_runs_each_call_in_a_fresh_process():
    checks = ch06.rss_check(128)  # python -m attnbook.experiments.ch06 --rss-worker ..., four times
    assert [(c["method"], c["all_buffers"]) for c in checks] == [(c["method"], c["all_buffers"]) for c in
                                                                  experiments.read_json("attention_cost.json")["rss_check"]]
    assert all(c["T"] == 128 and c["peak_rss_growth_bytes"] >= 0 and c["analysed_temp_bytes"] >= 0 for c in checks)


def test_chapter7_settings_are_what_the_stored_runs_record():
    meta = experiments.read_json("transformer_ablations.json")
    assert ch07.SETTINGS.to_dict() == meta["settings"]
    rows = {name: dict(options=o, learning_rate=lr, warmup=w) for name, (o, lr, w) in ch07.ABLATIONS.items()}
    assert rows == meta["rows"] and list(rows) == list(meta["rows"])
    runs = experiments.read_csv("transformer_ablations.csv")
    assert [(r["row"], int(r["seed"])) for r in runs] == [(n, s) for n in ch07.ABLATIONS for s in ch07.SETTINGS.seeds]
    for r in runs:
        _, lr, warmup = ch07.ABLATIONS[r["row"]]
        assert (float(r["learning_rate"]), int(r["warmup"])) == (lr, warmup)
    assert ch07.SEED in ch07.SETTINGS.seeds
    assert experiments.read_json("transformer_decoding.json")["settings"] == ch07.DECODING.to_dict()
    timings = experiments.read_csv("transformer_decoding.csv")
    d = ch07.DECODING
    for method in ("recompute", "kv-cache", "aft-simple"):
        lengths = [int(r["length"]) for r in timings if r["method"] == method]
        assert lengths == [t for t in d.lengths if method != "recompute" or t <= d.recompute_max_length], method


def test_chapter7_a_changed_setting_no_longer_matches():
    stored = experiments.read_json("transformer_ablations.json")["settings"]
    for change in [{"steps": 601}, {"seeds": (0, 1)}, {"learning_rate": 1e-3}, {"data_seed": 1}]:
        assert dataclasses.replace(ch07.SETTINGS, **change).to_dict() != stored, change


def test_chapter7_models_have_the_stored_runs_parameter_counts():
    stored = {r["row"]: int(r["parameters"]) for r in experiments.read_csv("transformer_ablations.csv")}
    for name, (options, _, _) in ch07.ABLATIONS.items():
        assert count_parameters(ch07.model(0, **options)) == stored[name], name


def test_chapter7_data_hold_out_strings_never_trained_on():
    (sources, targets_in, targets), (test_sources, _, test_targets) = ch07.data()
    s = ch07.SETTINGS
    assert sources.shape == targets.shape == (s.train_size, s.length) and test_sources.shape == (s.test_size, s.length)
    assert not {row.tobytes() for row in sources} & {row.tobytes() for row in test_sources}
    assert (targets == sources[:, ::-1]).all() and (test_targets == test_sources[:, ::-1]).all()


TINY = dataclasses.replace(ch07.SETTINGS, train_size=64, test_size=16, steps=2, batch_size=8, seeds=(0, 1))


def test_chapter7_minibatch_is_the_one_train_fit_reads_at_that_step():
    s = TINY
    train_set, _ = ch07.data(s)
    model = ch07.model(0, s)
    _, history = ch07.train(model, train_set, 0, s=s)
    first = ch07.minibatch(train_set, 0, 0, s)
    assert [a.shape for a in first] == [(s.batch_size, s.length)] * 3
    assert np.isclose(float(transformer.sequence_loss(model, *first)), history.train_loss[0], rtol=1e-5)
    second = ch07.minibatch(train_set, 0, 1, s)
    assert not np.array_equal(first[0], second[0])  # another minibatch, as the run's second step reads
    assert not np.array_equal(first[0], ch07.minibatch(train_set, 1, 0, s)[0])  # seed 1: another order
    for step in (-1, s.steps, 1.0, True):
        with pytest.raises(ValueError, match="step"):
            ch07.minibatch(train_set, 0, step, s)


def test_chapter7_stored_ablations_are_typed_rows_in_the_order_of_the_table():
    rows = ch07.stored_ablations()
    assert list(rows) == list(ch07.ABLATIONS)
    lines = experiments.read_csv("transformer_ablations.csv")
    for name, row in rows.items():
        assert row.name == name and row.seeds == ch07.SETTINGS.seeds
        assert all(isinstance(r.parameters, int) and isinstance(r.exact_match, float) for r in row.runs)
        stored = [r for r in lines if r["row"] == name]
        assert row.exact_match == tuple(float(r["exact_match"]) for r in stored)
        assert row.parameters == int(stored[0]["parameters"])
        assert np.isclose(row.mean_loss, np.mean([float(r["final_loss"]) for r in stored]))
    assert rows["no residual connections"].mean_exact_match == 0.0


def test_chapter7_stored_ablations_refuse_a_row_the_table_does_not_name(tmp_path):
    lines = experiments.read_csv("transformer_ablations.csv")
    lines[0]["row"] = "no such row"
    experiments.write_csv(tmp_path / "transformer_ablations.csv", lines)
    with pytest.raises(ValueError, match="no such row"):
        ch07.stored_ablations(tmp_path)


def test_chapter7_sharded_ablations_merge_into_what_the_chapter_reads(tmp_path, monkeypatch):
    monkeypatch.setattr(ch07, "ABLATIONS", {"1 layer": ch07.ABLATIONS["1 layer"]})
    partial, out = tmp_path / "partial", tmp_path / "transformer_ablations.csv"
    for shard in ("0/2", "1/2"):
        ch07.run_ablations(None, shard=shard, partial=partial, s=TINY)
    assert not out.exists()
    merged = ch07.run_ablations(out, partial=partial, merge=True, s=TINY)
    assert [(r["row"], r["seed"]) for r in merged] == [("1 layer", 0), ("1 layer", 1)]
    runs = experiments.read_csv(out.name, tmp_path)
    assert {"row", "seed", "warmup", "parameters", "learning_rate", "final_loss", "exact_match"} <= set(runs[0])
    meta = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert meta["settings"] == TINY.to_dict() and list(meta["rows"]) == ["1 layer"]


def test_chapter7_decoding_run_writes_what_the_chapter_reads(tmp_path):
    d = dataclasses.replace(ch07.DECODING, lengths=(4, 8), repeats=1, recompute_max_length=4)
    rows = ch07.run_decoding(tmp_path / "transformer_decoding.csv", d)
    assert [(r["method"], r["length"]) for r in rows] == [("recompute", 4), ("kv-cache", 4), ("aft-simple", 4),
                                                          ("kv-cache", 8), ("aft-simple", 8)]
    assert experiments.read_json("transformer_decoding.json", tmp_path)["settings"] == d.to_dict()


@pytest.mark.parametrize("main, argv", [(ch06.main, []), (ch07.main, ["ablations"]), (ch07.main, ["decoding"]),
                                        (ch07.main, ["ablations", "--shard", "0/2"])])
def test_a_run_overwrites_the_stored_results_only_when_told(main, argv, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    err = capsys.readouterr().err
    assert "--write" in err or "--partial" in err


def test_chapter4_home_gives_the_chapters_inputs_targets_and_layer():
    from attnbook.experiments import ch04
    from attnbook.mha import parameter_count

    xs = ch04.inputs()
    s = ch04.SETTINGS
    assert xs.shape == (s.examples, s.tokens, s.features) and xs.dtype == "float32" and 0 <= xs.min() < xs.max() < 1
    targets = ch04.targets(xs)
    assert list(targets) == ["own sum", "add token 2", "replace by token 2"]
    assert all(y.shape == xs.shape for y in targets.values())
    assert (targets["replace by token 2"][:, 3] == xs[:, 1]).all()  # the article's token 2 is index 1
    assert parameter_count(ch04.layer(key_bias_positions=5)) == 1967  # as chapter 4 asserts
    assert ch04.layer(d_model=14).w_q.shape == (14, s.heads, s.key_dim)
    assert ch04.optimizer() is ch04.optimizer()  # created once: runs of one model structure share their program


def test_chapter4_stored_runs_are_every_run_of_the_chapter_with_its_settings():
    from attnbook.experiments import ch04
    from attnbook.mha import parameter_count

    assert ch04.stored_settings() == ch04.SETTINGS.to_dict()
    runs = ch04.stored_runs()
    assert list(runs) == ch04.jobs()  # every variant on every target, the three ablations, the marked token 2
    assert len(runs) == 5 * 3 + 3 + 1 and all(0 < run["loss"] < 1 for run in runs.values())
    assert {key: run["parameters"] for key, run in runs.items()} == {
        (variant, target): parameter_count(ch04.model(variant).attention) for variant, target in ch04.jobs()}
    meta = experiments.read_json("mha_runs.json")
    assert meta["command"] == "python -m attnbook.experiments.ch04 --write" and meta["machine"]["cores"] >= 1


def test_chapter4_variants_inputs_and_one_short_run():
    import numpy as np

    from attnbook.experiments import ch04

    s = ch04.Settings(examples=64, steps=2)
    xs = ch04.inputs(s)
    given = ch04.encoded_inputs(xs)
    assert given["none"] is xs and given["added"].shape == xs.shape and given["concatenated"].shape == (64, 5, 14)
    assert (ch04.marked(xs)[:, 1, 0] == xs[:, 1, 0] + 1).all() and (ch04.marked(xs)[:, 0] == xs[:, 0]).all()
    assert not np.asarray(ch04.model("learned embedding").positions).any()  # the table starts at zero
    assert ch04.model("standard").positions is None and ch04.model(ch04.MARKED[0]).positions is None
    row = ch04.run("sinusoidal, concatenated", "own sum", s)
    assert row["parameters"] == 2919 and np.isfinite(row["loss"]) and row["variant"] == "sinusoidal, concatenated"
    with pytest.raises(SystemExit):
        ch04.main([])  # neither --write nor --out: nothing is overwritten


def test_chapter6_readers_series_fits_and_crossovers():
    rows = [{"method": m, "mode": "forward", "T": float(T), "seconds": s, "temp_bytes": b}
            for m, scale in [("attention", 1.0), ("aft-simple", 0.5)]
            for T, s, b in [(1024, scale * 1024.0**2, 10.0), (2048, scale * 2048.0**2, 20.0),
                            (4096, None if m == "attention" else scale * 4096.0**2, 30.0 if m == "attention" else 5.0)]]
    ts, seconds = ch06.series(rows, "attention", "forward", "seconds")  # a length not run is left out
    assert list(ts) == [1024, 2048] and list(seconds) == [1024.0**2, 2048.0**2]
    assert ch06.value_at(rows, "attention", "forward", 4096, "seconds") is None
    slope, _, fitted = ch06.power_fit(*ch06.series(rows, "aft-simple", "forward", "seconds"))
    assert slope == pytest.approx(2.0) and list(fitted) == [1024, 2048, 4096]  # fewer than 3 from 2048: the last 3
    extrapolated, measured = ch06.time_at(rows, "attention", "forward", 8192)
    assert not measured and extrapolated == pytest.approx(8192.0**2)
    assert ch06.time_at(rows, "attention", "forward", 1024) == (1024.0**2, True)
    assert ch06.time_at(rows, "attention", "forward", 8192, exponent=2) == (2048.0**2 * 16, False)  # from T = 2048
    assert ch06.time_at(rows, "attention", "forward", 2048, exponent=3) == (2048.0**2, True)  # measured: as stored
    assert ch06.better_from(rows, "aft-simple", "forward", "seconds") == (1024, 2048)
    assert ch06.better_from(rows, "aft-simple", "forward", "temp_bytes") == (4096, 4096)  # 5 < 30, not 20 < 20


def test_chapter6_sizes_and_times_as_printed():
    assert report.binary_size(2**26) == "64 MiB" and report.binary_size(330) == "0.322 KiB"
    assert report.binary_size(8.01 * 2**40) == "8.01 TiB"
    assert ch06.readable_seconds(204.0) == "3.4 min" and ch06.readable_seconds(0.0042) == "4 ms"
    assert ch06.readable_seconds(7200.0, ("時間", "分", "秒")) == "2.0 時間"


def test_chapter6_same_function_tells_outputs_and_gradients_apart():
    import jax.numpy as jnp
    import numpy as np

    from attnbook.attention import chunked_attention, scaled_dot_product_attention

    rng = np.random.default_rng(0)
    q, k, v = (jnp.asarray(rng.standard_normal((20, 8), dtype=np.float32)) for _ in range(3))
    full = lambda q, k, v: scaled_dot_product_attention(q, k, v)[0]  # noqa: E731
    assert ch06.same_function(lambda q, k, v: chunked_attention(q, k, v, query_chunk=8, key_chunk=6), full,
                              q, k, v) == (True, True)
    assert ch06.same_function(lambda q, k, v: full(q, k, v) + 1e-3 * jnp.sin(1e3 * q), full, q, k, v) == (False, False)
    # the same outputs but other gradients: stop_gradient through the values
    import jax
    assert ch06.same_function(lambda q, k, v: full(q, k, jax.lax.stop_gradient(v)), full, q, k, v) == (True, False)


def test_chapter6_tile_flops_count_the_tiles_flash_attention_computes():
    from attnbook import cost

    for t in (1024, 2048, 4096):
        for backward in (False, True):
            assert ch06.tile_flops(t, 64, 1024, False, backward) == cost.attention_flops(t, t, 64, backward=backward)
    # causal, blocks of 1024: 1 of 1, 3 of 4 and 10 of 16 tiles at T = 1024, 2048 and 4096
    for t, share in [(1024, 1.0), (2048, 3 / 4), (4096, 10 / 16)]:
        assert ch06.tile_flops(t, 64, 1024, True, False) == share * cost.attention_flops(t, t, 64)
        assert ch06.tile_flops(t, 64, 1024, True, True) == 3 * ch06.tile_flops(t, 64, 1024, True, False)
    # blocks of one query and one key: exactly the causal pairs; a length that is no multiple of the block
    assert ch06.tile_flops(1000, 64, 1, True, False) == cost.attention_flops(1000, 1000, 64, causal=True)
    assert ch06.tile_flops(1000, 64, 96, False, False) == cost.attention_flops(1000, 1000, 64)


def test_chapter6_flop_count_in_the_flash_attention_benchmarks_convention():
    """``recomputed_scores`` gives the count of ``flops`` in Dao-AILab/flash-attention's
    benchmarks/benchmark_flash_attention.py: f = 4 batch seqlen^2 nheads headdim (halved when causal), backward
    2.5 f, forward and backward 3.5 f (retyped here for one batch and one head)."""
    from attnbook import cost

    def flash_benchmark_flops(seqlen, headdim, mode):
        f = 4 * seqlen**2 * headdim
        return f if mode == "fwd" else (2.5 * f if mode == "bwd" else 3.5 * f)

    for t, d in [(1024, 64), (4096, 128)]:
        assert cost.attention_flops(t, t, d) == flash_benchmark_flops(t, d, "fwd")
        both = cost.attention_flops(t, t, d, backward=True, recomputed_scores=True)
        assert both == flash_benchmark_flops(t, d, "fwd_bwd") == 14 * t * t * d
        assert both - cost.attention_flops(t, t, d) == flash_benchmark_flops(t, d, "bwd")
        assert cost.attention_flops(t, t, d, backward=True) == 12 * t * t * d  # the function's own count


def _matmul_flops(jaxpr, times=1):
    """Two FLOPs per multiply-add of every dot_general in a jaxpr, scans counted length times, nested jaxprs
    (checkpoint, custom_vjp, scan, map) included."""
    import numpy as np

    total = 0
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            (contract, _), _ = eqn.params["dimension_numbers"]
            lhs = eqn.invars[0].aval.shape
            total += times * 2 * int(np.prod(eqn.outvars[0].aval.shape)) * int(np.prod([lhs[i] for i in contract]))
        inner = times * (eqn.params.get("length", 1) if eqn.primitive.name == "scan" else 1)
        for value in eqn.params.values():
            for sub in value if isinstance(value, (list, tuple)) else [value]:
                sub = sub if hasattr(sub, "eqns") else getattr(sub, "jaxpr", None)
                if sub is not None and hasattr(sub, "eqns"):
                    total += _matmul_flops(sub, inner)
    return total


def test_chapter6_backward_flops_of_the_library_match_attention_flops():
    """The matrix products in the jaxprs of the gradient: full attention 12 T^2 d, FlashAttention's custom VJP
    14 T^2 d (recomputed scores), chunked attention's nested checkpoints 18 T^2 d (a re-run forward, then the
    scores again): what attention_flops counts with recomputed_scores and recomputed_forward."""
    import jax
    import jax.numpy as jnp
    from attnbook import cost
    from attnbook.attention import chunked_attention, flash_attention, scaled_dot_product_attention

    t, d, block = 512, 16, 128
    spec = jax.ShapeDtypeStruct((t, d), jnp.float32)
    methods = {
        "full": (lambda q, k, v: scaled_dot_product_attention(q, k, v)[0], {}),
        "flash": (lambda q, k, v: flash_attention(q, k, v, query_block=block, key_block=block),
                  {"recomputed_scores": True}),
        "chunked": (lambda q, k, v: chunked_attention(q, k, v, query_chunk=block, key_chunk=block),
                    {"recomputed_scores": True, "recomputed_forward": True}),
    }
    for name, (f, extra) in methods.items():
        grad = jax.grad(lambda q, k, v: (f(q, k, v) ** 2).sum(), argnums=(0, 1, 2))
        assert _matmul_flops(jax.make_jaxpr(f)(spec, spec, spec).jaxpr) == cost.attention_flops(t, t, d), name
        counted = _matmul_flops(jax.make_jaxpr(grad)(spec, spec, spec).jaxpr)
        assert counted == cost.attention_flops(t, t, d, backward=True, **extra), name
    assert cost.attention_flops(t, t, d, backward=True, recomputed_scores=True, recomputed_forward=True) == 18 * t * t * d


def test_chapter6_page_faults_stored_and_measured_alike(monkeypatch):
    """The stored measurement is what page_faults returns, and a fresh one (T = 1024 only, a few calls) counts
    the faults the same way: every call takes its T x T matrix fresh, about one fault per 4 KiB page of it."""
    stored = ch06.read_page_faults()
    assert [r["T"] for r in stored["rows"]] == list(ch06.FAULT_LENGTHS)
    for r in stored["rows"]:
        assert set(r) == {"T", "d", "repeats", "matrix_bytes", "minor_faults_per_call", "page_bytes",
                          "system_seconds_per_call", "wall_seconds_per_call"}
        assert r["matrix_bytes"] == 4 * r["T"] ** 2
    (row,) = ch06.page_faults(lengths=(1024,), repeats=3)
    assert row["matrix_bytes"] == 4 * 2**20 and row["minor_faults_per_call"] >= 0


def test_chapter6_gpu_side_from_its_sourced_figures():
    """Each number of the chapter's GPU-side cell against its formula worked by hand (bfloat16, 2 bytes)."""
    g = ch06.gpu_side(**ch06.H100)
    assert g["balance"] == pytest.approx(989 / 3.35) and round(g["balance"]) == 295
    for d in (64, 128):
        t = 131072
        # standard attention: 4 T^2 d FLOPs over (4 T^2 + 4 T d) numbers of 2 bytes, about d / 2
        assert g["unfused"][d][0] == pytest.approx(4 * t * t * d / (2 * (4 * t * t + 4 * t * d)))
        assert g["unfused"][d][0] == pytest.approx(d / 2, rel=1e-3)
        assert g["unfused"][d][1] == pytest.approx(3.35e12 * g["unfused"][d][0])
        # tiled: K and V read once per block of 128 queries: intensity about the block size in bfloat16
        assert g["tiled"][d][0] == pytest.approx(128, rel=1e-3)
        # FA3 section 3.2: 512 times more matmul FLOPs than exponentials at d = 128, 256 times less throughput: ~50%
        assert g["exp_share"][d] == pytest.approx((989 / 3.9) / (4 * d))
        assert g["decode"][d] == pytest.approx(1, rel=1e-4)
    assert g["exp_share"][128] == pytest.approx(0.5, abs=0.01) and g["exp_share"][64] == pytest.approx(1, abs=0.02)
    assert g["unfused"][64][1] / 989e12 == pytest.approx(0.108, abs=0.001)  # about 11% of the peak
    assert g["fa3_needs"] == pytest.approx(648 / 3.35) and round(g["fa3_needs"]) == 193  # FA-3 Fig. 5(c), d = 128
    for t, ratio in g["attention_over_dense"].items():
        assert ratio == pytest.approx(t / (6 * 2048))
    assert g["lse_bytes"] == 512 * 2**10 and g["activation_bytes"] == 2 * 2**30  # at T = 131072, d_model 2048
    assert g["mlp_activation_bytes"] == 4 * 2**30  # 8 d_model numbers per token: twice attention's
    # one head's forward at T = 131072, d = 128 at FA-3's d = 128 rate: 4 T^2 d / 648e12, about 13.6 ms
    assert 4 * 131072**2 * 128 / ch06.H100["fa3_forward_flops"] == pytest.approx(13.57e-3, rel=1e-3)
    with pytest.raises(ValueError, match="block must be a positive integer"):
        ch06.gpu_side(**ch06.H100, block=0)


def test_chapter6_stored_flash_benchmark_is_what_its_settings_say():
    rows, meta = ch06.read_flash()
    s = ch06.FLASH
    assert meta["settings"] == s.to_dict()
    assert meta["machine"]["xla_flags"] == s.xla_flags and meta["cores_allowed"] == [s.core]
    assert {"before", "after"} <= set(meta["load_average_1min"]) and "jax" in meta["versions"]
    assert list(dict.fromkeys(r["method"] for r in rows)) == list(ch06.FLASH_METHODS)
    assert sorted({int(r["T"]) for r in rows}) == list(s.lengths)
    assert {r["causal"] for r in rows} == {False, True} and {r["mode"] for r in rows} == set(ch06.MODES)
    assert len(rows) == len(s.lengths) * 2 * len(ch06.MODES) * len(ch06.FLASH_METHODS)
    for r in rows:
        assert r["tile_flops"] == ch06.tile_flops(int(r["T"]), s.d, s.block, r["causal"], r["mode"] != "forward")
        assert 0 < r["seconds_min"] <= r["seconds_median"] and r["cpu_seconds_min"] > 0 and r["rounds"] == s.rounds


def test_chapter6_flash_table_rates_and_ratios():
    rows = [{"method": m, "mode": "forward", "causal": c, "T": 1024.0, "tile_flops": 2e9 if c else 4e9,
             "cpu_seconds_min": seconds * (0.5 if c else 1.0)}
            for c in (False, True) for m, seconds in zip(ch06.FLASH_METHODS, (0.4, 0.8, 0.2, 0.1))]
    table = ch06.flash_table(rows, "forward")
    assert [row[:3] for row in table] == [(1024, False, 4.0), (1024, True, 2.0)]
    assert table[0][3:] == pytest.approx((10.0, 5.0, 20.0, 40.0, 4.0, 8.0, 2.0))
    assert table[1][3:] == pytest.approx((10.0, 5.0, 20.0, 40.0, 4.0, 8.0, 2.0))
    assert ch06.flash_table(rows, "forward+backward") == []


def test_chapter6_flash_worker_writes_what_the_reader_reads(tmp_path):
    s = dataclasses.replace(ch06.FLASH, lengths=(64,), block=32, rounds=2)
    ch06.flash_worker(tmp_path / "attention_cost_flash.csv", s)
    rows, meta = ch06.read_flash(tmp_path)
    assert meta["settings"] == s.to_dict() and len(rows) == 2 * len(ch06.MODES) * len(ch06.FLASH_METHODS)
    assert len(ch06.flash_table(rows, "forward")) == 2
