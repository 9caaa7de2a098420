"""attnbook.sampling: the scan-based sampler against a known chain and a Python loop."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import data, sampling

LOG_TRANSITION = jnp.log(jnp.asarray(data.MARKOV_TRANSITION, dtype=jnp.float32))


def markov_logits(tokens, valid):
    """The true chain: only the last token matters (it is always valid)."""
    return LOG_TRANSITION[tokens[-1]]


def test_samples_follow_the_chain():
    prompt = np.ones((4000, 1), dtype=np.int32)
    tokens = sampling.sample(markov_logits, prompt, steps=20, window=5, key=jax.random.key(0))
    assert tokens.shape == (4000, 21)
    np.testing.assert_array_equal(tokens[:, 0], 1)
    counts = sampling.transition_counts(tokens, 3)
    np.testing.assert_allclose(counts / counts.sum(axis=1, keepdims=True), data.MARKOV_TRANSITION, atol=0.015)


def test_window_and_validity_seen_by_the_model():
    """The model sees exactly the last `window` tokens, padding flagged invalid."""
    seen = []

    def recorder(tokens, valid):
        # A deterministic "model": next token = number of valid tokens mod 3; record via host callback.
        jax.debug.callback(lambda t, v: seen.append((np.asarray(t).copy(), np.asarray(v).copy())), tokens, valid)
        return jnp.where(jnp.arange(3) == jnp.sum(valid) % 3, 0.0, -1e9)

    tokens = sampling.sample(recorder, np.array([[2, 0]]), steps=4, window=3, key=jax.random.key(1))
    # lengths 2, 3, 4, 5 -> valid counts 2, 3, 3, 3 -> tokens 2, 0, 0, 0
    np.testing.assert_array_equal(tokens[0], [2, 0, 2, 0, 0, 0])
    first_tokens, first_valid = seen[0]
    np.testing.assert_array_equal(first_valid, [False, True, True])
    np.testing.assert_array_equal(first_tokens[1:], [2, 0])
    np.testing.assert_array_equal(seen[-1][0], [2, 0, 0])


@pytest.mark.parametrize(
    "kwargs, names",
    [
        ({"prompt": np.ones(3, int), "steps": 2, "window": 2}, ["prompt", "(n, t0)", "(3,)"]),
        ({"prompt": np.ones((2, 3), int), "steps": 0, "window": 2}, ["steps", "0"]),
        ({"prompt": np.ones((2, 3), int), "steps": 2, "window": 0}, ["window", "0"]),
    ],
)
def test_bad_arguments(kwargs, names):
    with pytest.raises(ValueError) as info:
        sampling.sample(markov_logits, key=jax.random.key(0), **kwargs)
    for name in names:
        assert name in str(info.value)


def test_weather_next_day_reads_the_real_days_renumbered():
    """Left padding changes nothing: the logits after n real days are the model's last row on those days alone,
    positions 1..n."""
    import jax
    import numpy as np

    from attnbook import data
    from attnbook.attention import SelfAttention
    from attnbook.masking import MaskedSelfAttention, causal_mask
    from attnbook.sampling import weather_next_day

    model = MaskedSelfAttention(SelfAttention(4, 6, 3, causal=False, key=jax.random.key(0)), causal_mask(10))
    days = np.array([2, 0, 1, 1])
    tokens = jnp.asarray(np.concatenate([np.zeros(6, dtype=np.int32), days]))
    valid = jnp.arange(10) >= 6
    alone = model.attention(jnp.asarray(data.features(days)), causal_mask(4))[0][-1]
    np.testing.assert_allclose(weather_next_day(model)(tokens, valid), alone, rtol=1e-5, atol=1e-6)
