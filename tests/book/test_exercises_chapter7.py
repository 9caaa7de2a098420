"""Chapter 7's exercises reject a deliberately wrong answer each (see tests/book/test_exercises.py), and their
references agree with the library's models and masks computed another way."""

import jax
import jax.numpy as jnp
import numpy as np

from attnbook import exercises
from attnbook import transformer
from attnbook.nn import count_parameters
from attnbook.exercises import chapter7
from attnbook.masking import causal_mask, padding_mask
from test_exercises import mistakes_named, wrong_answers_rejected


def unbiased_layer_norm_ffn(x, gamma, beta, w1, b1, w2, b2):
    # LayerNorm with the unbiased variance (divide by d - 1, torch.var's default): features 13% too small at d = 4
    mu = x.mean(axis=-1, keepdims=True)
    h = gamma * (x - mu) / jnp.sqrt(x.var(axis=-1, ddof=1, keepdims=True) + 1e-5) + beta
    return x + jnp.maximum(0.0, h @ w1 + b1) @ w2 + b2


def count_without_final_norms(vocab_size, d_model, depth):
    # forgets the LayerNorm that pre-LN needs after the last block of the encoder and of the decoder
    V, d, N = vocab_size, d_model, depth
    return 3 * V * d + V + N * (28 * d * d + 32 * d)


def masks_causal_only(T, S, target_length, source_length):
    # pads the source but lets the padding queries of the target attend (their rows are not all False)
    causal = np.tri(T, dtype=bool)
    return causal, np.broadcast_to(np.arange(S) < source_length, (T, S))


WRONG = {
    "7.1": unbiased_layer_norm_ffn,
    "7.2": count_without_final_norms,
    "7.3": masks_causal_only,
    "7.4": lambda n: (n ** 3, n ** 2, n * (n - 1) // 2),  # the cache's rows before step t, forgetting the new one
}


def test_wrong_answers_are_rejected():
    wrong_answers_rejected(WRONG, chapter=7)


def test_parameter_count_counts_built_models():
    for sizes in [(11, 32, 2), (11, 32, 1), (5, 6, 3)]:
        model = transformer.EncoderDecoder(sizes[0], d_model=sizes[1], depth=sizes[2], heads=2, key=jax.random.key(1))
        assert chapter7.parameter_count(*sizes) == count_parameters(model)
    assert chapter7.parameter_count(11, 32, 2) == 60587  # the chapter's model


def test_decoder_masks_are_chapter_3s_masks():
    for T, S, t, s in [(4, 5, 2, 3), (3, 3, 3, 1), (5, 2, 0, 2)]:
        self_mask, cross = chapter7.decoder_masks(T, S, t, s)
        expected = np.asarray(causal_mask(T) & padding_mask(jnp.asarray([t]), T)[0])
        assert np.array_equal(self_mask, expected)
        assert cross.shape == (T, S) and cross.sum() == t * s


def test_score_counts_by_simulating_the_decoders():
    for n in [1, 2, 5, 9]:
        recompute = sum(n * n for _ in range(n))  # every step: an (n, n) score matrix over the buffer
        cached = sum(n for _ in range(n))  # every step: one query against the whole preallocated cache
        written = sum(t + 1 for t in range(n))  # one query against rows 0..t
        assert chapter7.score_counts(n) == (recompute, cached, written)


def eps_outside_the_root(x, gamma, beta, w1, b1, w2, b2):
    # (x - mu) / (sigma + eps): also finite on a constant token, but 4% off on the check's token of variance ~1e-4
    mu = x.mean(axis=-1, keepdims=True)
    h = gamma * (x - mu) / (x.std(axis=-1, keepdims=True) + 1e-5) + beta
    return x + jnp.maximum(0.0, h @ w1 + b1) @ w2 + b2


def standardized(x, gamma, beta, w1, b1, w2, b2):
    # right, with the variance computed as E[x^2] - mu^2 (jax.nn.standardize), in float64 NumPy for the output
    h = gamma * jax.nn.standardize(x, axis=-1, epsilon=1e-5) + beta
    return np.asarray(x + jax.nn.relu(h @ w1 + b1) @ w2 + b2, dtype=np.float64)


def test_layer_norm_eps_is_checked_inside_the_root():
    assert not exercises.result("7.1", eps_outside_the_root, lang="en").passed
    assert exercises.result("7.1", standardized, lang="en").passed


def test_a_list_is_as_good_as_a_tuple():
    masks = lambda T, S, target_length, source_length: list(chapter7.decoder_masks(T, S, target_length, source_length))
    assert exercises.result("7.3", masks, lang="en").passed
    assert exercises.result("7.4", lambda n: list(chapter7.score_counts(n)), lang="en").passed
    as_ints = lambda T, S, target_length, source_length: tuple(
        m.astype(int) for m in chapter7.decoder_masks(T, S, target_length, source_length))
    assert not exercises.result("7.3", as_ints, lang="en").passed  # 0/1 arrays are not masks
    assert not exercises.result("7.4", lambda n: chapter7.score_counts(n)[:2], lang="en").passed


def no_residual(x, gamma, beta, w1, b1, w2, b2):
    h = gamma * jax.nn.standardize(x, axis=-1, epsilon=1e-5) + beta
    return jax.nn.relu(h @ w1 + b1) @ w2 + b2


def post_ln(x, gamma, beta, w1, b1, w2, b2):
    y = x + jax.nn.relu(x @ w1 + b1) @ w2 + b2
    return gamma * (y - y.mean(axis=-1, keepdims=True)) / jnp.sqrt(y.var(axis=-1, keepdims=True) + 1e-5) + beta


def norm_over_tokens(x, gamma, beta, w1, b1, w2, b2):
    h = gamma * (x - x.mean(axis=0)) / jnp.sqrt(x.var(axis=0) + 1e-5) + beta
    return x + jax.nn.relu(h @ w1 + b1) @ w2 + b2


def cross_queries_free(T, S, target_length, source_length):
    self_mask, _ = chapter7.decoder_masks(T, S, target_length, source_length)
    return self_mask, np.broadcast_to(np.arange(S) < source_length, (T, S))


def no_causal_part(T, S, target_length, source_length):
    real = np.arange(T) < target_length
    return real[:, None] & real[None, :], chapter7.decoder_masks(T, S, target_length, source_length)[1]


NAMED = {
    "7.1": [eps_outside_the_root, unbiased_layer_norm_ffn, no_residual, post_ln, norm_over_tokens],
    "7.2": [count_without_final_norms,
            lambda vocab_size, d_model, depth: chapter7.parameter_count(vocab_size, d_model, depth)
            - (10 * depth + 4) * d_model,
            lambda vocab_size, d_model, depth: chapter7.parameter_count(vocab_size, d_model, depth)
            - depth * (4 * d_model * d_model + 6 * d_model),
            lambda vocab_size, d_model, depth: chapter7.parameter_count(vocab_size, d_model, depth) - vocab_size],
    "7.3": [masks_causal_only, cross_queries_free, no_causal_part],
    "7.4": [WRONG["7.4"], lambda n: (sum(t * t for t in range(1, n + 1)), n ** 2, n * (n + 1) // 2)],
}


def test_common_mistakes_are_named():
    mistakes_named(NAMED, chapter=7)
