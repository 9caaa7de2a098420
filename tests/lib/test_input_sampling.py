"""attnbook.sampling under bad input: each error names its argument, also under jax.jit (issue 10)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import sampling

KEY = jax.random.key(0)
# eqx.filter_jit: EquinoxRuntimeError; plain jax.jit: the callback's error as a ValueError (or JaxRuntimeError).
RUNTIME_ERRORS = (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError, ValueError)


def uniform_logits(tokens, valid):
    return jnp.zeros(3)


@pytest.mark.parametrize(
    "prompt, kind, match",
    [
        (np.array([[0.0, 1.0]]), TypeError, "prompt must be an integer array, got dtype float64"),
        ([[0, 1.5]], TypeError, "prompt must be an integer array"),
        (np.array([[True, False]]), TypeError, "prompt must be an integer array, got dtype bool"),
        (np.array([[0, 3]]), ValueError, r"prompt must be integers in \[0, 3\), got 3 at index \(0, 1\)"),
        (np.array([[-1, 0]]), ValueError, r"prompt must be integers in \[0, 3\), got -1"),
        (np.array([[2**40]]), ValueError, r"prompt must be integers in \[0, 3\)"),  # not wrapped to int32
        (np.ones(3, int), ValueError, r"prompt must have shape \(n, t0\), got an array of shape \(3,\)"),
        (np.ones((2, 0), int), ValueError, r"prompt must hold at least one token.*\(2, 0\)"),
        ("0 1", TypeError, "prompt must be an array"),
    ],
)
def test_bad_prompt(prompt, kind, match):
    with pytest.raises(kind, match=match):
        sampling.sample(uniform_logits, prompt, steps=2, window=2, key=KEY)


@pytest.mark.parametrize("jit", [jax.jit, eqx.filter_jit])
def test_prompt_values_checked_under_jit(jit):
    run = jit(lambda prompt: sampling.sample(uniform_logits, prompt, steps=2, window=2, key=KEY))
    assert run(jnp.array([[0, 2]])).shape == (1, 4)
    for bad in (jnp.array([[0, 3]]), jnp.array([[-1, 0]])):
        with pytest.raises(RUNTIME_ERRORS, match=r"prompt must be integers in \[0, 3\)"):
            jax.block_until_ready(run(bad))


@pytest.mark.parametrize(
    "kwargs, kind, match",
    [
        ({"logits_fn": None}, TypeError, "logits_fn must be a function"),
        ({"logits_fn": lambda t, v: jnp.zeros((2, 3))}, ValueError, r"logits_fn must return float logits of shape \(classes,\)"),
        ({"logits_fn": lambda t, v: jnp.zeros(3, dtype=jnp.int32)}, ValueError, "logits_fn must return float logits"),
        ({"steps": 0}, ValueError, "steps.*0"),
        ({"steps": 2.0}, TypeError, "steps.*2.0"),
        ({"window": -1}, ValueError, "window.*-1"),
        ({"key": 0}, TypeError, "key must be a JAX random key.*int 0"),
    ],
)
def test_bad_arguments(kwargs, kind, match):
    args = {"logits_fn": uniform_logits, "prompt": np.zeros((2, 1), int), "steps": 2, "window": 2, "key": KEY, **kwargs}
    with pytest.raises(kind, match=match):
        sampling.sample(**args)


@pytest.mark.parametrize("bad", [jnp.array([jnp.nan, 0.0, 0.0]), jnp.full(3, -jnp.inf)])
def test_unusable_logits_stop_sampling(bad):
    """NaN logits or no possible token: categorical would silently draw token 0."""
    def model(tokens, valid):  # fine at first, broken once the sequence has 3 tokens
        return jnp.where(jnp.sum(valid) >= 3, bad, jnp.zeros(3))

    with pytest.raises(RUNTIME_ERRORS, match="logits_fn's output must be logits without NaN"):
        jax.block_until_ready(sampling.sample(model, np.zeros((2, 1), int), steps=4, window=4, key=KEY))
    possible = lambda tokens, valid: jnp.array([-jnp.inf, 0.0, -jnp.inf])  # -inf: an impossible token, fine
    np.testing.assert_array_equal(sampling.sample(possible, np.zeros((2, 1), int), steps=3, window=2, key=KEY)[:, 1:], 1)


def test_edge_cases():
    assert sampling.sample(uniform_logits, np.zeros((0, 2), int), steps=3, window=2, key=KEY).shape == (0, 5)
    tokens = sampling.sample(uniform_logits, [[0, 1]], steps=3, window=2, key=KEY)  # nested lists are arrays
    assert tokens.shape == (1, 5) and tokens.dtype == jnp.int32


@pytest.mark.parametrize(
    "tokens, num_classes, kind, match",
    [
        (np.array([[0, 1, -1]]), 3, ValueError, r"tokens must be integers in \[0, 3\), got -1 at index \(0, 2\)"),
        (np.array([[0, 3]]), 3, ValueError, r"tokens must be integers in \[0, 3\), got 3"),
        (np.array([[0.0, 1.0]]), 3, TypeError, "tokens must be an integer array, got dtype float64"),
        (np.array([0, 1, 2]), 3, ValueError, r"tokens must have shape \(n, T\)"),
        (np.array([[0, 1]]), 0, ValueError, "num_classes.*0"),
        (np.array([[0, 1]]), 3.0, TypeError, "num_classes.*3.0"),
    ],
)
def test_transition_counts_bad_input(tokens, num_classes, kind, match):
    with pytest.raises(kind, match=match):
        sampling.transition_counts(tokens, num_classes)


def test_transition_counts_edge_cases():
    np.testing.assert_array_equal(sampling.transition_counts([[0, 1, 1]], 2), [[0, 1], [0, 1]])
    np.testing.assert_array_equal(sampling.transition_counts(np.zeros((3, 1), int), 2), np.zeros((2, 2)))  # T = 1
    np.testing.assert_array_equal(sampling.transition_counts(np.zeros((0, 4), int), 2), np.zeros((2, 2)))
