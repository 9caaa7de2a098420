"""attnbook: the thin library behind "Attention, explained, run and measured".

One module per concept, in chapter order:

- :mod:`attnbook.positional`: sinusoidal encoding, its rotation property, RoPE, ALiBi (ch. 1)
- :mod:`attnbook.attention`: scaled dot-product attention (ch. 2)
- :mod:`attnbook.masking`: causal and padding masks (ch. 3)
- :mod:`attnbook.plotting`: fonts, labels and heat-maps in the page's language
"""

__version__ = "0.1.0"
