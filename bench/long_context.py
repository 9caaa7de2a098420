"""Chapter 9: fine-tuning at 4L, sliding windows and attention sinks, on chapter 8's task and models.

The runs are ``attnbook.experiments.ch09.run_long_context`` (parts 1-3) and ``ch09.run_followup`` (parts 4 and 5),
their settings ``ch09.SETTINGS``; this script is their command, as ``python -m attnbook.experiments.ch09 --write
long_context`` is. Every model starts as chapter 8's (``ch08.SETTINGS``: Markov chain of order 2 over 8 symbols, 2-layer causal
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

import sys

from attnbook.experiments import ch09

if __name__ == "__main__":
    ch09.main(["--write", "long_context", *sys.argv[1:]],
              command=" ".join(["python bench/long_context.py", *sys.argv[1:]]))
