"""pytest set-up shared by tests/ and nbval's run over chapters/: JAX's compilation cache (tools/jax_cache.py)."""

from tools import jax_cache

jax_cache.enable()
