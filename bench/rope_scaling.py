"""Chapter 9: chapter 8's RoPE models read at 2L, 4L and 8L with RoPE stretched, without fine-tuning.

The run is ``attnbook.experiments.ch09.run_rope_scaling`` (its settings: ``ch09.SETTINGS``); this script is its
command, as ``python -m attnbook.experiments.ch09 --write rope_scaling`` is. It trains chapter 8's RoPE and ALiBi
models exactly as bench/positions_extrapolation.py does (``ch08.SETTINGS``:
Markov chain of order 2 over 8 symbols, 2-layer causal Transformer, d_model 32, 4 heads of 8 features, 300 Adam
steps at L = 32, seeds 0-4 vmapped in one program, seed s trained on NumPy seed 1000 + s and initialised with
``jax.random.key(s)``), then evaluates each RoPE model at m L (m = 2, 4, 8) on chapter 8's held-out sequences
(every length a prefix of the same 128 sequences of 8L tokens) with:

- ``rope``: plain RoPE, as trained (chapter 8's numbers, recomputed);
- ``pi``: position interpolation with s = m (``positional.PositionInterpolation(m)``, Chen et al. 2023);
- ``ntk``: "NTK-aware" base, s = m (``positional.NTKAwareScaling(m)``, bloc97 2023);
- ``yarn``: YaRN, s = m, original length L, alpha = 1, beta = 32 (``positional.YaRNScaling(m, L)``, Peng et al. 2023);
- ``yarn_no_temperature``: YaRN's frequencies with magnitude 1 (an ablation: the ramp alone, "NTK-by-parts";
  ``ch09.YaRNWithoutTemperature``);

beside ``alibi`` (chapter 8's ALiBi models) and two baselines without seeds: ``optimum`` (the entropy of the true
next-token distribution) and ``current_token`` (the best predictor that reads only the current token, exact:
``ex.current_token_loss``). The scale is always the evaluation length over the training length, s = m, the
"static" use of each method (not the dynamic one, where s grows with the sequence read so far).

Writes
- lib/attnbook/experiments/results/rope_scaling.csv: one line per method, seed and evaluation length: mean loss over all positions
  and over positions >= L, each also as excess over the optimum of the same targets, and the final training loss;
- lib/attnbook/experiments/results/rope_scaling_summary.csv: per method and length, the excess loss beyond L over the five seeds
  (mean, min, max), beside the current-token baseline's;
- lib/attnbook/experiments/results/rope_scaling_comparisons.csv: per pair of methods and length, on how many seeds the first is below
  the second (paired by seed: the same training data and initial key), whether that holds for every seed, and the
  mean difference;
- lib/attnbook/experiments/results/rope_scaling_per_position.csv: the loss at every position, per method, seed and length;
- lib/attnbook/experiments/results/rope_scaling.json: machine, load, versions, settings, timings, the check that plain RoPE and
  ALiBi reproduce chapter 8's stored numbers (lib/attnbook/experiments/results/positions_extrapolation.csv), and per method and pair
  the largest angle read over the largest angle trained (``angle_ranges``).

The stored run took about 11 minutes on a 2-core machine shared with other jobs (load average 8 to 15; an earlier
run under load 5 to 9 took 8 minutes and gave identical CSVs); it trains
2 x 5 models of chapter 8 with chapter 8's own settings (300 steps), nothing fewer:

    python bench/rope_scaling.py
"""

import sys

from attnbook.experiments import ch09

if __name__ == "__main__":
    ch09.main(["--write", "rope_scaling", *sys.argv[1:]], command="python bench/rope_scaling.py")
