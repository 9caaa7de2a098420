"""Chapter 11: 1- and 2-layer attention-only models trained on Python's standard library, measured as they learn.

The run is ``attnbook.experiments.ch11`` (its settings: ``ch11.SETTINGS``, the functions below are its own); this
script is its command, as ``python -m attnbook.experiments.ch11`` is. The data is ``attnbook.corpus`` (CPython 3.11.7's top-level standard-library modules as 98 characters, split by
file); the model is ``attnbook.induction.AttentionOnlyLM`` (pre-LN, d_model 64, 4 heads of 16, RoPE, context 128
characters). Adam with a linear warm-up over the first 100 steps to a constant learning rate 3e-3, gradients
clipped to norm 1, 32 windows of 129 characters per step, 1500 steps.

**Seeds.** Seed ``s`` draws the initial weights from ``jax.random.key(s)`` and the batch of step ``n`` from
``jax.random.fold_in(jax.random.key(1000 + s), n)``: at one seed both depths start from the same embedding and
see the same batches in the same order.

**Two variants**, each its own run:

- ``plain``: windows of the training files as they are (real text only);
- ``curriculum``: for the first ``curriculum_steps`` (600) steps, random periodic sequences instead
  (``induction.periodic_random_tokens``: each row repeats its first ``P`` printable characters, ``P`` uniform in
  8..60 per row, so only induction predicts them, and no fixed offset does); from then on, plain windows as above.

(Pilots that led to these two, with their logs: ``bench/pilots/induction_heads/``.)

Every ``eval_every`` (100) steps, step 0 included, the script measures on fixed evaluation sets (the same for
every run):

- the training loss (mean of the steps since the last evaluation) and the held-out loss (256 plain windows of 128
  characters from the held-out files), with the loss per position there and the in-context loss L(120) - L(12)
  (``induction.in_context_loss``);
- on 64 sequences of 64 uniform random printable characters repeated twice (``induction.repeated_random_tokens``
  with ``low=induction.PRINTABLE``): the loss on the first and on the second copy, and every head's induction
  score (``induction.induction_score``);
- on the first 64 held-out windows as their first 64 characters twice (real code repeated): the loss on the first
  and on the second copy;
- every head's previous-token score on the held-out windows (``induction.previous_token_score``);
- for the 2-layer model, the K-composition of each layer-0 head into each layer-1 head (``induction.composition_scores``).

Checkpoints (``equinox.tree_serialise_leaves``): at the steps of ``checkpoints`` for seed 0 and at the last step
for every seed. Load one with ``ch11.load_model(variant, depth, seed, step)``.

Writes (each table keyed by variant, depth and seed; a run replaces its own rows and keeps the others, under a
file lock, so several runs may write at once):
- lib/attnbook/experiments/results/induction_heads/{variant}_L{depth}_s{seed}_step{step:05d}.eqx: the checkpoints;
- lib/attnbook/experiments/results/induction_heads_training.csv: one line per run and evaluation step, the losses above;
- lib/attnbook/experiments/results/induction_heads_scores.csv: one line per run, step, layer and head, its two scores;
- lib/attnbook/experiments/results/induction_heads_composition.csv: one line per 2-layer run, step and (layer-0, layer-1) head pair;
- lib/attnbook/experiments/results/induction_heads_per_position.csv: the held-out loss per position at every checkpoint;
- lib/attnbook/experiments/results/induction_heads.json: one record per command (machine, load, versions, settings, CPU seconds).

The stored runs (2026-11-26, AMD EPYC Zen 3), two processes at once on the 2-core machine, each pinned to one core
and to one XLA thread (``taskset -c 0|1``, ``XLA_FLAGS="--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=1"``), started at nice 5 and reniced to -5 after ten minutes, when other work loaded
the machine (load average 3 to 8); about 310 s of CPU per 2-layer run and 175 s per 1-layer run
(``induction_heads.json``):

    nice -n 5 python bench/induction_heads.py --variant curriculum --seeds 0 1 2
    nice -n 5 python bench/induction_heads.py --variant plain --seeds 0 1 2
    python bench/induction_heads.py --steps 20 --out /tmp/x   # a quick trial elsewhere
"""

from attnbook.experiments import ch11

if __name__ == "__main__":
    ch11.main(program="python bench/induction_heads.py")
