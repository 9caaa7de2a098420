"""Chapter 3's exercises reject a deliberately wrong answer each (see tests/book/test_exercises.py), and
the references written for speed agree with the library and with the Jacobian."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import exercises
from attnbook.attention import scaled_dot_product_attention
from attnbook.exercises import chapter3
from attnbook.masking import causal_mask, padding_mask
from test_exercises import mistakes_named, wrong_answers_rejected


def right_padded_causal_mask(lengths, T):  # real tokens first: padding_mask's layout, not the sampler's
    return np.asarray(padding_mask(jnp.asarray(lengths), T) & causal_mask(T))


def perturbation_test(nudge, tolerance):
    """An answer to 3.4: move each input row by `nudge`; output row i depends on row j if it moves by more than `tolerance`."""
    def dependence_of(f, x):
        base, T = f(x), x.shape[0]
        dependence = np.zeros((T, T), dtype=bool)
        for j in range(T):
            moved = np.array(x, dtype=np.float64)
            moved[j] += nudge
            dependence[:, j] = np.any(np.abs(f(moved) - base) > tolerance, axis=1)
        return dependence
    return dependence_of


perturb_too_little = perturbation_test(1e-9, 1e-6)  # the outputs move by less than the tolerance: wrong
perturb_with_tolerance = perturbation_test(1e-3, 1e-9)  # a correct answer, by another route


WRONG = {
    "3.1": lambda T: jnp.tri(T, k=-1, dtype=bool),  # the sources' mask: strictly below the diagonal
    "3.2": right_padded_causal_mask,  # the padding on the wrong side
    "3.3": "nan",  # bfloat16 is 16 bits like float16, but keeps float32's exponent: -1e9 stays finite
    "3.4": perturb_too_little,  # nothing seems to depend on anything
    "3.5": 0.5 ** 0.5 / (0.2 ** 0.5 + 0.3 ** 0.5 + 0.5 ** 0.5),  # P ** tau instead of P ** (1 / tau)
}


def test_wrong_answers_are_rejected():
    wrong_answers_rejected(WRONG, chapter=3)


@pytest.mark.parametrize("seed", range(20))
def test_every_allowed_dependence_is_visible_to_a_perturbation(seed):
    """No softmax of the check's models saturates: moving an input row by 1 moves every output row
    that the masks let depend on it by more than MIN_CHANGE, and a perturbation test passes."""
    exercise = exercises.get("3.4")
    rng = np.random.default_rng(seed)
    for case in [dict(c) for c in exercise.edge_cases] + [exercise.inputs(rng) for _ in range(exercise.cases)]:
        f, x = case["f"], case["x"]
        for j in range(x.shape[0]):
            moved = np.array(x)
            moved[j] += 1.0
            change = np.abs(f(moved) - f(x)).max(axis=1)
            assert np.all(change[f.dependence()[:, j]] > chapter3.AttentionStack.MIN_CHANGE), (f, j)
    assert exercises.result("3.4", perturb_with_tolerance, seed=seed).passed


def test_the_transposed_mask_is_rejected_too():
    found = exercises.result("3.2", lambda lengths, T: np.swapaxes(chapter3._left_padded_causal_mask(lengths, T), 1, 2))
    assert not found.passed


@pytest.mark.parametrize("T", [1, 3, 6])
def test_left_padded_mask_is_the_library_padding_mask_reversed(T):
    rng = np.random.default_rng(T)
    lengths = rng.integers(0, T + 1, size=4)
    library = padding_mask(jnp.asarray(lengths), T)[:, ::-1, ::-1] & causal_mask(T)
    assert np.array_equal(chapter3._left_padded_causal_mask(lengths, T), np.asarray(library))


def jax_copy(stack):
    """The same model in JAX with the library's attention, to differentiate."""
    def f(x):
        for (w_q, w_k, w_v), mask in zip(stack.weights, stack.masks):
            w_q, w_k, w_v = (jnp.asarray(w, dtype=jnp.float32) for w in (w_q, w_k, w_v))
            x = scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v, mask=jnp.asarray(mask))[0]
        return x
    return f


@pytest.mark.parametrize("kind", sorted(chapter3._MODELS))
def test_dependence_from_the_masks_is_the_jacobians(kind):
    case = chapter3._model_and_input(kind, 5, 0)
    stack, x = case["f"], jnp.asarray(case["x"], dtype=jnp.float32)
    assert np.allclose(jax_copy(stack)(x), stack(case["x"]), atol=1e-4)
    jacobian = jax.jacobian(jax_copy(stack))(x)  # (T, d, T, d); a hidden key's entries are exactly 0
    assert np.array_equal(np.asarray(jnp.any(jacobian != 0, axis=(1, 3))), stack.dependence())


def test_temperature_answer_is_what_sampling_at_that_temperature_gives():
    p = chapter3.MARKOV_TRANSITION[2]
    logits = jnp.log(jnp.asarray(p)) / 0.5
    draws = jax.random.categorical(jax.random.key(0), logits, shape=(200_000,))
    assert abs(float(jnp.mean(draws == 2)) - exercises.get("3.5").reference()) < 0.005


def padding_queries_only(lengths, T):  # the real tokens still see the padding before them
    real = np.arange(T)[None, :] >= T - np.asarray(lengths)[:, None]
    return np.tri(T, dtype=bool)[None] & real[:, :, None]


def padding_without_causal(lengths, T):
    real = np.arange(T)[None, :] >= T - np.asarray(lengths)[:, None]
    return real[:, :, None] & real[:, None, :]


def transposed_dependence(f, x):
    return perturb_with_tolerance(f, x).T


def dependence_without_itself(f, x):
    return perturb_with_tolerance(f, x) & ~np.eye(len(x), dtype=bool)


NAMED = {
    "3.1": [lambda T: jnp.tri(T, k=-1, dtype=bool),  # strictly below the diagonal: a token cannot see itself
            lambda T: np.arange(T)[None, :] >= np.arange(T)[:, None],  # transposed
            lambda T: np.arange(T)[None, :] <= np.arange(T)[:, None] + 1],  # off by one
    "3.2": [right_padded_causal_mask, padding_queries_only, padding_without_causal,
            lambda lengths, T: np.swapaxes(chapter3._left_padded_causal_mask(lengths, T), 1, 2)],
    "3.3": ["nan", "zero"],
    "3.4": [transposed_dependence, dependence_without_itself, perturb_too_little],
    "3.5": [WRONG["3.5"], 0.5],
}


def test_common_mistakes_are_named():
    mistakes_named(NAMED, chapter=3)
