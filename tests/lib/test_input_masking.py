"""attnbook.masking under bad and extreme input: the contract of attnbook's docstring.

Bad sizes and lengths raise the documented type with a message naming the argument, eagerly and
under jax.jit / jax.vmap (where lengths are values: equinox.error_if stops the program with the
same message); a length of 0 (a fully padded sequence) and empty sequences are defined edge cases.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import masking
from attnbook.attention import scaled_dot_product_attention

# Under jax.jit a failed equinox.error_if surfaces as a JaxRuntimeError carrying the message; under
# equinox.filter_jit as an EquinoxRuntimeError.
RUNTIME_ERRORS = (jax.errors.JaxRuntimeError, eqx.EquinoxRuntimeError)


@pytest.mark.parametrize(
    "length, error, received",
    [(-1, ValueError, "got -1"), (2.0, TypeError, "got float 2.0"), (True, TypeError, "got bool True"),
     ("3", TypeError, "got str '3'"), (np.float64(3), TypeError, "float64")],
)
def test_causal_mask_bad_length(length, error, received):
    with pytest.raises(error, match="length must be a non-negative integer") as info:
        masking.causal_mask(length)
    assert received in str(info.value)


def test_causal_mask_accepts_numpy_integers_and_zero():
    assert masking.causal_mask(np.int64(3)).shape == (3, 3)
    assert masking.causal_mask(0).shape == (0, 0)


@pytest.mark.parametrize(
    "lengths, max_length, error, words",
    [
        (np.array([2, 5]), 4, ValueError, ["lengths must be integers in [0, max_length=4]", "got 5 at index 1"]),
        (np.array([-1, 2]), 4, ValueError, ["lengths must be integers in [0, max_length=4]", "got -1 at index 0"]),
        (np.array([1.0, 2.0]), 4, TypeError, ["lengths must be an integer array", "float64"]),
        (np.array([True]), 4, TypeError, ["lengths must be an integer array", "bool"]),
        (np.array([[2]]), 4, ValueError, ["lengths must have shape (batch,)", "(1, 1)"]),
        (np.array(2), 4, ValueError, ["lengths must have shape (batch,)", "()"]),
        ("2", 4, TypeError, ["lengths must be an array", "str"]),
        (np.array([2]), -1, ValueError, ["max_length must be a non-negative integer", "-1"]),
        (np.array([2]), 4.0, TypeError, ["max_length must be a non-negative integer", "float 4.0"]),
    ],
)
def test_padding_mask_bad_arguments(lengths, max_length, error, words):
    with pytest.raises(error) as info:
        masking.padding_mask(lengths, max_length)
    for word in words:
        assert word in str(info.value)


def test_padding_mask_lengths_are_checked_under_jit_and_vmap():
    # The example: jit used to clamp [5, -1] silently.
    with pytest.raises(RUNTIME_ERRORS, match=r"lengths must be integers in \[0, max_length=4\]"):
        jax.jit(lambda lengths: masking.padding_mask(lengths, 4))(jnp.array([5, -1])).block_until_ready()
    with pytest.raises(RUNTIME_ERRORS, match=r"lengths must be integers in \[0, max_length=4\]"):
        eqx.filter_jit(lambda lengths: masking.padding_mask(lengths, 4))(jnp.array([2, 9])).block_until_ready()
    with pytest.raises(RUNTIME_ERRORS, match=r"lengths must be integers in \[0, max_length=4\]"):
        jax.jit(jax.vmap(lambda lengths: masking.padding_mask(lengths, 4)))(jnp.array([[1], [-2]])).block_until_ready()
    # Valid lengths under jit: the same masks as eagerly.
    lengths = jnp.array([0, 2, 4])
    np.testing.assert_array_equal(jax.jit(lambda l: masking.padding_mask(l, 4))(lengths), masking.padding_mask(lengths, 4))


def test_a_fully_padded_sequence_gives_zero_rows():
    mask = masking.padding_mask(np.array([0, 3]), 3)
    assert not np.asarray(mask[0]).any() and np.asarray(mask[1]).all()
    q = jnp.asarray(np.random.default_rng(0).normal(size=(3, 4)), dtype=jnp.float32)
    out, weights = scaled_dot_product_attention(q, q, q, mask=mask[0])
    assert np.all(np.asarray(out) == 0) and np.all(np.asarray(weights) == 0)


def test_empty_batch_and_empty_sequences():
    assert masking.padding_mask(np.zeros((0,), dtype=np.int32), 3).shape == (0, 3, 3)
    assert masking.padding_mask(np.array([0, 0]), 0).shape == (2, 0, 0)
    assert masking.padding_mask([1, 2], 2).shape == (2, 2, 2)  # a list of ints is an integer array


def test_under_plain_jit_the_message_can_be_found_and_comes_first_in_a_notebook():
    """jax.jit buries a value check's message at the end of a long JaxRuntimeError; in a notebook it comes first."""
    from nbclient import NotebookClient
    from nbformat.v4 import new_code_cell, new_notebook

    from attnbook import _checks

    with pytest.raises(Exception) as caught:
        jax.block_until_ready(jax.jit(lambda n: masking.padding_mask(n, 4))(jnp.array([-1, 2])))
    assert _checks.runtime_message(caught.value) == "lengths must be integers in [0, max_length=4]"
    assert _checks.runtime_message(ValueError("lengths must be ...")) is None  # only errors of compiled checks

    nb = new_notebook(cells=[
        new_code_cell("import jax, jax.numpy as jnp\nfrom attnbook import masking, plotting\nplotting.setup('en')"),
        new_code_cell("jax.jit(lambda n: masking.padding_mask(n, 4))(jnp.array([-1, 2]))")],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True).execute()
    first = nb.cells[1].outputs[0]
    assert first.output_type == "stream" and first.text.startswith(
        "ValueError inside a compiled program: lengths must be integers in [0, max_length=4]"), first
    assert nb.cells[1].outputs[-1].output_type == "error"  # the full error still follows
