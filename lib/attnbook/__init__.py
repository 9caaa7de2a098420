"""attnbook: the thin library behind "Attention, explained, run and measured".

One module per concept, in chapter order:

- :mod:`attnbook.positional`: sinusoidal encoding, its rotation property, RoPE, ALiBi (ch. 1)
- :mod:`attnbook.attention`: scaled dot-product attention, single-head self-attention (ch. 2);
  memory-efficient chunked_attention (ch. 6)
- :mod:`attnbook.baselines`: the linear model attention is compared with (ch. 2)
- :mod:`attnbook.data`: the weather processes and their Bayes-optimal accuracies (ch. 2-3)
- :mod:`attnbook.train`: ``fit``, the one training loop of the book (ch. 2 onwards)
- :mod:`attnbook.masking`: causal and padding masks (ch. 3)
- :mod:`attnbook.sampling`: autoregressive sampling (ch. 3)
- :mod:`attnbook.mha`: multi-head attention in the Keras weight layout, per-position key bias (ch. 4)
- :mod:`attnbook.aft`: the Attention Free Transformer, all four variants, exact and stable; AFT layers and a small next-token model (ch. 5)
- :mod:`attnbook.cost`: wall time and XLA's temporary-memory analysis of compiled functions (ch. 6)
- :mod:`attnbook.plotting`: fonts, labels and heat-maps in the page's language
"""

__version__ = "0.1.0"
