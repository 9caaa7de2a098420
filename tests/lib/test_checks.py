"""The checking mechanism behind the library's contract for bad input (attnbook._checks)."""

from __future__ import annotations

import os
import subprocess
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify
from jaxtyping import Array, Bool, Float, Int, Shaped

from attnbook import _checks


@_checks.shaped
def attend(
    q: Float[Array, "Tq d"],
    k: Float[Array, "Tk d"],
    v: Float[Array, "Tk dv"],
    mask: Bool[Array, "Tq Tk"] | None = None,
    bias: Float[Array, "*heads Tq Tk"] | None = None,
) -> Float[Array, "Tq dv"]:
    return q @ k.T @ v


@_checks.shaped
def pick(tokens: Int[Array, "T"], table: Shaped[Array, "T 3"]) -> Shaped[Array, "T 3"]:
    return table


Q, K, V = jnp.ones((3, 4)), jnp.ones((5, 4)), jnp.ones((5, 2))


def test_valid_arguments_pass_and_names_bind_across_arguments():
    assert attend(Q, K, V).shape == (3, 2)
    assert attend(Q, K, V, jnp.ones((3, 5), bool), jnp.zeros((2, 7, 3, 5))).shape == (3, 2)
    assert pick(jnp.arange(4), np.zeros((4, 3), np.float16)).shape == (4, 3)


@pytest.mark.parametrize(
    "args, error, message",
    [
        ((Q, jnp.ones((5, 3)), V), ValueError, r"k must have shape \(Tk, d=4\), got \(5, 3\)"),
        ((Q, K, jnp.ones((4, 2))), ValueError, r"v must have shape \(Tk=5, dv\), got \(4, 2\)"),
        ((Q[0], K, V), ValueError, r"q must have shape \(Tq, d\), got an array of shape \(4,\)"),
        ((Q, K, V, jnp.ones((3, 5))), TypeError, "mask must be a boolean array, got dtype float32"),
        ((Q, K, V, jnp.ones((3, 4), bool)), ValueError, r"mask must have shape \(Tq=3, Tk=5\)"),
        ((Q, K, V, None, jnp.ones((2, 3, 4))), ValueError, r"bias must have shape \(\*heads, Tq=3, Tk=5\)"),
        ((Q.astype(jnp.int32), K, V), TypeError, "q must be a floating-point array, got dtype int32"),
        (("q", K, V), TypeError, "q must be an array"),
    ],
)
def test_bad_arguments_name_the_argument_the_expected_and_the_received(args, error, message):
    with pytest.raises(error, match=message):
        attend(*args)


def test_fixed_sizes_and_integer_dtypes():
    with pytest.raises(ValueError, match=r"table must have shape \(T=4, 3\), got \(4, 2\)"):
        pick(jnp.arange(4), jnp.zeros((4, 2)))
    with pytest.raises(TypeError, match="tokens must be an integer array, got dtype float32"):
        pick(jnp.arange(4.0), jnp.zeros((4, 3)))


def test_shape_checks_run_under_jit_and_vmap():
    with pytest.raises(ValueError, match="k must have shape"):
        jax.jit(attend)(Q, jnp.ones((5, 3)), V)
    assert jax.vmap(attend)(Q[None], K[None], V[None]).shape == (1, 3, 2)


def test_values_are_checked_eagerly_and_under_jit():
    tokens = jnp.array([0, 3, 1])
    with pytest.raises(ValueError, match=r"tokens must be integers in \[0, 3\), got 3 at index 1"):
        _checks.integers_in_range("tokens", tokens, 0, 3)
    checked = jax.jit(lambda t: _checks.integers_in_range("tokens", t, 0, 3) + 1)
    assert checked(jnp.array([0, 2, 1])).tolist() == [1, 3, 2]
    with pytest.raises(Exception, match=r"tokens must be integers in \[0, 3\)"):
        checked(tokens).block_until_ready()
    with pytest.raises(Exception, match=r"tokens must be integers in \[0, 3\)"):
        jax.vmap(checked)(tokens[None]).block_until_ready()



def _checked_tokens(t):
    return _checks.integers_in_range("tokens", t, 0, 3) + 1


def test_values_are_checked_in_the_library_programs_without_a_host_callback():
    """_checks.jit (fit, the evaluations, decoding) returns the checks' result instead of calling back."""
    checked = _checks.jit(_checked_tokens)
    assert checked(jnp.array([0, 2, 1])).tolist() == [1, 3, 2]
    for bad in ([0, 3, 1], [-1, 0, 0]):
        with pytest.raises(eqx.EquinoxRuntimeError, match=r"tokens must be integers in \[0, 3\)"):
            checked(jnp.array(bad))
    # Inside someone else's trace, a callback again, in the enclosing program.
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"tokens must be integers in \[0, 3\)"):
        jax.jit(checked)(jnp.array([0, 3, 1])).block_until_ready()
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"tokens must be integers in \[0, 3\)"):
        jax.vmap(checked)(jnp.array([[0, 1, 1], [0, 3, 1]]))
    # Through a scan, a gradient and a vmap inside the program.
    def loss(w, t):
        t = _checks.integers_in_range("tokens", t, 0, 3)
        step = lambda c, row: (c + jnp.sum(jnp.take(w, row) ** 2), None)
        return jax.lax.scan(step, 0.0, t)[0]
    grad = _checks.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0)))
    assert grad(jnp.ones(3), jnp.zeros((2, 4, 2), int)).shape == (2, 3)
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"tokens must be integers in \[0, 3\)"):
        grad(jnp.ones(3), jnp.zeros((2, 4, 2), int).at[1, 2, 0].set(3))
    # What XLA compiles: a callback only where the check is not functionalised.
    tokens = jnp.arange(3)
    assert "callback" in jax.jit(_checked_tokens).lower(tokens).as_text()
    assert "callback" not in jax.jit(checkify.checkify(_checked_tokens)).lower(tokens).as_text()


def test_the_library_programs_enter_the_persistent_compilation_cache(tmp_path):
    """A training run leaves its program in an empty JAX_COMPILATION_CACHE_DIR (a host callback would keep it out)."""
    script = """
import jax, jax.numpy as jnp, optax
from attnbook import nn, train
model = nn.Dense(4, 3, key=jax.random.key(0))
loss = train.classification_loss(lambda m, x: m(x))
xs, ys = jnp.ones((8, 4)), jnp.arange(8) % 3
train.fit(model, loss, (xs, ys), optimizer=optax.sgd(0.1), steps=2, batch_size=4, key=jax.random.key(1))
"""
    env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": str(tmp_path), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
           "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=120)
    assert any(path.name.startswith("jit__run-") for path in tmp_path.iterdir()), sorted(p.name for p in tmp_path.iterdir())


@pytest.mark.parametrize(
    "check, value, error, message",
    [
        (_checks.positive_int, 0, ValueError, "n must be a positive integer, got 0"),
        (_checks.positive_int, 2.5, TypeError, "n must be a positive integer, got float 2.5"),
        (_checks.positive_int, True, TypeError, "n must be a positive integer"),
        (_checks.nonnegative_int, -1, ValueError, "n must be a non-negative integer, got -1"),
        (_checks.positive_float, float("nan"), ValueError, "n must be a finite positive number, got nan"),
        (_checks.positive_float, "1e-3", TypeError, "n must be a finite positive number, got str"),
        (_checks.probability, 1.5, ValueError, r"n must be a number in \[0, 1.0\], got 1.5"),
        (_checks.probability, float("nan"), ValueError, r"n must be a number in \[0, 1.0\]"),
        (_checks.numpy_rng, 42, TypeError, r"n must be a NumPy random Generator such as np.random.default_rng\(0\), got int 42"),
        (_checks.prng_key, 0, TypeError, r"n must be a JAX random key such as jax.random.key\(0\), got int 0"),
        (_checks.prng_key, jnp.zeros(2), TypeError, "n must be a JAX random key"),
    ],
)
def test_python_arguments(check, value, error, message):
    with pytest.raises(error, match=message):
        check("n", value)


def test_valid_python_arguments_are_returned():
    assert _checks.positive_int("n", np.int64(3)) == 3
    assert _checks.probability("p", 0) == 0.0
    rng = np.random.default_rng(0)
    assert _checks.numpy_rng("rng", rng) is rng
    assert _checks.prng_key("key", jax.random.key(0)).shape == ()
    assert _checks.prng_key("key", jax.random.PRNGKey(0)).shape == (2,)


def test_lists_are_checked_and_passed_on_as_arrays():
    @_checks.shaped
    def kind(x: Float[Array, "T d"]):
        return type(x)

    assert kind([[1.0, 2.0]]) is np.ndarray
    with pytest.raises(TypeError, match="x must be a floating-point array, got dtype int64"):
        kind([[1, 2]])


def test_a_layer_called_on_concrete_arrays_compiles_one_program(caplog):
    """compiled_when_eager: a notebook's call of a layer compiles the layer once, not each of its operations,
    and gives the layer's results; inside a trace, with a process_heads closing over that trace, it runs inline."""
    from attnbook import masking, mha

    layer = mha.MultiHeadAttention(d_model=6, num_heads=3, key_dim=2, key=jax.random.key(0))
    x = jnp.asarray(np.random.default_rng(0).normal(size=(7, 6)), dtype=jnp.float32)  # a shape no other test uses
    mask = masking.causal_mask(7)
    with jax.log_compiles(True), caplog.at_level("WARNING"):
        caplog.clear()
        out, weights = layer(x, x, x, mask)
        compiled = [r.getMessage() for r in caplog.records if "XLA compilation" in r.getMessage()]
    assert len(compiled) == 1 and "__call__" in compiled[0], compiled
    plain_out, plain_weights = mha.MultiHeadAttention.__call__.__wrapped__.__wrapped__(layer, x, x, x, mask)
    assert jnp.allclose(out, plain_out, atol=1e-6) and jnp.allclose(weights, plain_weights, atol=1e-6)

    @jax.jit
    def scaled(x, scale):  # the hook closes over this trace's `scale`, as chapter 11's ablations do
        return layer(x, x, x, mask, process_heads=lambda q, k, v: (q * scale, k, v))[0]

    assert jnp.allclose(scaled(x, 1.0), out, atol=1e-6) and not jnp.allclose(scaled(x, 3.0), out, atol=1e-3)
