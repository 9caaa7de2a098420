"""attnbook: the thin library behind "Attention, explained, run and measured".

One module per concept, in chapter order (a module imports only modules of its own or earlier chapters, and
:mod:`attnbook.nn`, which every chapter shares):

- :mod:`attnbook.nn`: the one initialiser (``init``), ``Dense``, the feed-forward layer, the Transformer ``Block``
  (pre-/post-LN, ReLU or GELU), ``count_parameters`` (shared)
- :mod:`attnbook.positional`: sinusoidal encoding, its rotation property, RoPE (and its ``process_heads`` hook), ALiBi (ch. 1);
  RoPE stretched: position interpolation, "NTK-aware" scaling, YaRN (``scaling=``, ch. 9)
- :mod:`attnbook.attention`: scaled dot-product attention, masked softmax, single-head self-attention (ch. 2);
  memory-efficient chunked_attention, FlashAttention's algorithm with its recomputing backward pass
  (flash_attention), and the one online-softmax merge (ch. 6)
- :mod:`attnbook.baselines`: the linear model attention is compared with (ch. 2)
- :mod:`attnbook.data`: the weather processes and their Bayes-optimal accuracies (ch. 2-3)
- :mod:`attnbook.train`: ``fit``, the one training loop of the book, ``fit_seeds`` (its step over several
  models at once) and ``cross_entropy``, the one loss (ch. 2 onwards)
- :mod:`attnbook.masking`: causal and padding masks, ``MaskedSelfAttention`` (a layer under a fixed mask, ch. 3);
  the causal sliding window (ch. 9)
- :mod:`attnbook.sampling`: autoregressive sampling (ch. 3)
- :mod:`attnbook.mha`: multi-head attention in the Keras weight layout (``project``/``attend``, score ``bias``,
  ``process_heads``), per-position key bias, multi-head self-attention as a token mixer (ch. 4);
  fewer key/value heads than query heads, ``kv_heads=`` (grouped-query and multi-query attention, ch. 10)
- :mod:`attnbook.aft`: the Attention Free Transformer, all four variants, exact and stable, and its layers (ch. 5)
- :mod:`attnbook.lm`: chapter 5's next-token model, with attention or an AFT layer as its mixer (``make_mixer``) (ch. 5)
- :mod:`attnbook.cost`: wall time and XLA's temporary-memory analysis of compiled functions (ch. 6)
- :mod:`attnbook.transformer`: blocks by name, encoder-decoder with cross-attention, greedy decoding with and
  without a KV cache, the digit-reversal task (ch. 7)
- :mod:`attnbook.extrapolation`: an order-2 Markov task with a known optimum and a small causal Transformer
  taking any of six position schemes, to measure reading beyond the training length (ch. 8); RoPE scaled at
  evaluation (``scaling=``), windows with attention sinks (``max_offset=``, ``sinks=``) and ``fine_tune`` at a
  longer length (ch. 9)
- :mod:`attnbook.kv`: what a decoder caches per token (``cache_bytes_per_token``), Ainslie et al.'s mean-pooling
  of a trained layer's key/value heads (``pool_kv_heads``) (ch. 10; grouped-query and multi-query attention
  themselves are :mod:`attnbook.mha`'s ``kv_heads=``)
- :mod:`attnbook.latent`: DeepSeek-V2's multi-head latent attention with its decoupled RoPE key (ch. 10)
- :mod:`attnbook.corpus`: a fixed subset of CPython's standard-library source, split by file, read as 98
  characters with its SHA-256 checked, and random windows from one split (ch. 11)
- :mod:`attnbook.induction`: the attention-only Transformer of Elhage et al., previous-token and induction scores,
  in-context loss, head ablation and Q/K/V-composition scores (ch. 11)
- :mod:`attnbook.linear_attention`: masked linear attention in its parallel, chunked and recurrent forms: kernel
  linear attention, retention (RetNet), SSD (Mamba-2), the delta rule and its gated form (DeltaNet, Gated
  DeltaNet), RWKV-4's WKV as chapter 5's AFT-full with a decay bias, and a multi-head layer with a constant-size
  decoding state (ch. 12)
- :mod:`attnbook.plotting`: fonts, labels and heat-maps in the page's language
- :mod:`attnbook.report`: what a chapter prints, in the page's language: ``t`` (sentences through the message
  catalogue ``locale/ja.po``, keyed by the English text) and ``Table`` (results as a Markdown table on the page,
  aligned text for nbval)
- :mod:`attnbook.bugs`: the appendix of attention bugs from real projects: the smallest buggy versions, the
  correct ones and the properties that catch them, printed as a table by ``check``
- :mod:`attnbook.experiments`: the measured chapters' stored results (package data, ``experiments.RESULTS``) and
  the run metadata (``RunInfo``); ``experiments.ch08`` (chapter 8's settings, data and training, which chapters 9
  and 10 start from), ``experiments.ch09`` (RoPE scaling, fine-tuning at 4L, windows and sinks: settings and runs),
  ``experiments.ch10`` (chapter 8's model with fewer key/value heads or latent attention, associative recall) and
  ``experiments.ch11`` (attention-only models on the standard library: settings, training, checkpoints)

Bad input: the contract
-----------------------

Every public function either returns the right answer or raises an error that names the argument, the
expected and the received value; it never returns a silently wrong number. Shapes are written in the
signatures as jaxtyping annotations (``q: Float[Array, "Tq d"]``) and those annotations are what is
checked (``attnbook._checks.shaped``), so the documented and the checked shape are one thing.

Errors:

- ``TypeError``: not an array where one is expected, or the wrong dtype family (a float array for token
  ids, an integer array for queries, a non-boolean mask: an additive ``0 / -inf`` mask goes to ``bias=``),
  a Python value of the wrong type (``rng=42`` where a ``np.random.Generator`` is expected, ``key=0``
  where a ``jax.random.key`` is expected, ``2.5`` for a size).
- ``ValueError``: wrong number of axes or an axis that disagrees with another argument; a size, rate or
  probability out of its range (non-positive sizes, chunk or batch sizes larger than the data where
  they must fit, NaN or infinite learning rates, ``noise`` that would make a probability negative);
  token ids, labels and lengths outside their range (``-1`` is never read as "the last class").
- Value checks on arrays also hold under ``jax.jit`` and ``jax.vmap``: there they are compiled into the
  program (in the library's own programs as a returned error, which keeps them cacheable; in a reader's
  ``jit`` as ``equinox.error_if``) and stop it with the same message (``EquinoxRuntimeError``; under
  plain ``jax.jit`` a ``JaxRuntimeError`` that carries it at its end; in a notebook set up with
  ``plotting.setup`` the message is printed first). Their cost is one comparison and reduction over the
  checked array (token ids, lengths), never over the attention matrix.

Defined edge cases, with their result:

- **Empty sequences** (``T = 0``) where a sequence is the input: an empty output of the right shape
  (``(0, dv)``; weights ``(0, Tk)``); a query against zero keys gets a zero row.
- **Fully masked query rows** (a boolean mask with no True in a row, or a ``bias`` row of ``-inf``): zero
  weights and a zero output, with zero, finite gradients; never NaN, never uniform weights.
- ``-inf`` in ``bias`` is a mask: it excludes that key exactly as ``mask=False`` does.
- **Padding contents**: a key or value that no query may see (masked, beyond a length, or in the future
  of a causal query) may hold anything, NaN and inf included; it changes no output and no gradient.
- **Low precision**: float16 and bfloat16 inputs are computed without overflow where float32 would not
  overflow: queries are scaled by ``1/sqrt(d)`` before the product, softmax shifts by the row maximum.
  Outputs keep the input dtype; their error is that of the dtype.
- **Huge queries and keys**: when a score ``q . k / sqrt(d)`` could overflow, every attention of the book
  scales ``q`` and ``k`` down by powers of two first, so the weights are the row's argmax, one-hot (shared
  among exact ties), as the exact softmax's are; never NaN.
- **NaN or inf in a visible input** propagates, visibly, to exactly the outputs that see it (and only to
  them): a NaN in key ``j`` makes NaN the rows of the queries that may attend to ``j``.
"""

__version__ = "0.1.0"
