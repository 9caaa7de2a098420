"""The library's tests: each module of attnbook against an independent reference (jax.nn, Equinox, a naive loop,
the papers' code), its bad inputs (test_input_*.py) and its properties (test_properties_*.py, Hypothesis).

They need neither the notebooks nor a browser, and run in seconds per file: `python -m pytest tests/lib`.
"""
