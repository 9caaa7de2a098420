"""Bad input to attnbook.extrapolation (chapter 8): every public function names the argument, the expected and the
received value, also under jax.jit where values are checked."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import extrapolation as ex
from attnbook.experiments import ch08

KEY = jax.random.key(0)
MODEL = ex.PositionModel("rope", vocab_size=5, d_model=8, depth=1, heads=2, train_length=6, key=KEY)
TABLE = ex.markov_table(3, 2, rng=np.random.default_rng(0))
TOKENS = jnp.asarray([[0, 1, 2, 3]], dtype=jnp.int32)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: ex.markov_table(0, 2, rng=np.random.default_rng(0)), ValueError, "vocab_size must be a positive integer"),
        (lambda: ex.markov_table(3, 2, rng=1), TypeError, "rng must be a NumPy random Generator"),
        (lambda: ex.markov_table(3, 2, concentration=-1.0, rng=np.random.default_rng(0)), ValueError,
         "concentration must be a finite positive number"),
        (lambda: ex.markov_data(TABLE, 1, 4, 5, rng=np.random.default_rng(0)), ValueError,
         r"table must have vocab \*\* order = 3 rows for order=1"),
        (lambda: ex.markov_data(TABLE[0], 2, 4, 5, rng=np.random.default_rng(0)), ValueError,
         r"table must have shape \(contexts, vocab\)"),
        (lambda: ex.markov_data(TABLE.astype(np.int64), 2, 4, 5, rng=np.random.default_rng(0)), TypeError,
         "table must be a floating-point array"),
        (lambda: ex.PositionModel("relative", vocab_size=5, key=KEY), ValueError, "encoding must be one of"),
        (lambda: ex.PositionModel("rope", vocab_size=5, key=3), TypeError, "key must be a JAX random key"),
        (lambda: ex.PositionModel("rope", vocab_size=5, d_model=6, heads=2, key=KEY), ValueError,
         r"d_model must split into heads of equal \(for RoPE, even\) size"),
        (lambda: MODEL(TOKENS[0].astype(jnp.float32)), TypeError, "tokens must be an integer array, got dtype float32"),
        (lambda: MODEL(TOKENS), ValueError, r"tokens must have shape \(T,\), got an array of shape \(1, 4\)"),
        (lambda: MODEL(TOKENS[0].at[1].set(5)), ValueError, r"tokens must be integers in \[0, 5\), got 5 at index 1"),
        (lambda: ex.loss_per_position(MODEL, TOKENS, TOKENS[:, :3]), ValueError, r"targets must have shape \(N=1, T=4\)"),
        (lambda: ex.loss_per_position(MODEL, TOKENS, TOKENS.at[0, 0].set(-1)), ValueError,
         r"targets must be integers in \[0, 5\), got -1 at index \(0, 0\)"),
        (lambda: ex.loss_per_position("model", TOKENS, TOKENS), TypeError, "model must be a PositionModel, got str"),
        (lambda: ex.train("rope", [0], TOKENS, TOKENS, vocab_size=5), ValueError,
         r"inputs must have shape \(seeds, steps, batch, T\)"),
        (lambda: ex.train("rope", 3, TOKENS[None, None], TOKENS[None, None], vocab_size=5), TypeError,
         "seeds must be a sequence of integers"),
        (lambda: ex.train("rope", [-1], TOKENS[None, None], TOKENS[None, None], vocab_size=5), ValueError,
         r"seeds\[0\] must be a non-negative integer"),
        (lambda: ex.train("rope", [0], TOKENS[None, None], TOKENS[None, None], vocab_size=5, learning_rate=float("nan")),
         ValueError, "learning_rate must be a finite positive number"),
        (lambda: ex.select(MODEL, -1), ValueError, "index must be a non-negative integer"),
        (lambda: ch08.eval_data(0), ValueError, "multiple must be a positive integer"),
        (lambda: ex.current_token_loss(TABLE, 1, np.zeros((2, 3), dtype=np.int32)), ValueError,
         r"table must have vocab \*\* order = 3 rows for order=1"),
        (lambda: ex.current_token_loss(TABLE, 2, np.full((2, 3), 3, dtype=np.int32)), ValueError,
         r"inputs must be integers in \[0, 3\)"),
        (lambda: MODEL(TOKENS[0], max_offset=0), ValueError, "max_offset must be a positive integer"),
        (lambda: ex.loss_per_position(MODEL, TOKENS, TOKENS, max_offset=-2), ValueError,
         "max_offset must be a positive integer"),
        (lambda: ex.far_attention_fraction(MODEL, TOKENS, 2, start=4), ValueError, "start must be below the length 4"),
        (lambda: ex.far_attention_fraction(MODEL, TOKENS, 0, start=1), ValueError, "offset must be a positive integer"),
        (lambda: ex.far_attention_fraction("model", TOKENS, 2, start=1), TypeError, "model must be a PositionModel"),
    ],
)
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_values_are_checked_under_jit():
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"tokens must be integers in \[0, 5\)"):
        eqx.filter_jit(MODEL)(TOKENS[0].at[2].set(7))
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"targets must be integers in \[0, 5\)"):
        eqx.filter_jit(ex.loss_per_position)(MODEL, TOKENS, TOKENS.at[0, 3].set(5))
