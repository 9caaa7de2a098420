"""attnbook.nn: the one initialiser, Dense, FeedForward and the parameter count, against NumPy references."""

import jax
import numpy as np
import pytest

from attnbook import nn


def test_init_numpy_matches_a_seeded_numpy_generator():
    key = jax.random.key(5)
    rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel().tolist())
    np.testing.assert_allclose(nn.init(key, (3, 4), "normal", scale=0.5), 0.5 * rng.standard_normal((3, 4)), rtol=1e-6)
    rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel().tolist())
    a, b = nn.init(key, ((2, 3), (4,)), "glorot", fan_in=(2, 4), fan_out=(3, 1))
    np.testing.assert_allclose(a, rng.uniform(-np.sqrt(6 / 5), np.sqrt(6 / 5), (2, 3)), rtol=1e-6)
    np.testing.assert_allclose(b, rng.uniform(-np.sqrt(6 / 5), np.sqrt(6 / 5), (4,)), rtol=1e-6)


def test_init_jax_generator_is_jax_random_with_split_keys():
    key = jax.random.key(2)
    w, b = nn.init(key, ((3, 2), (2,)), "fan-in", fan_in=3, generator="jax")
    k1, k2 = jax.random.split(key, 2)
    np.testing.assert_allclose(w, jax.random.uniform(k1, (3, 2), minval=-1.0, maxval=1.0) / np.sqrt(3), rtol=1e-6)
    np.testing.assert_allclose(b, jax.random.uniform(k2, (2,), minval=-1.0, maxval=1.0) / np.sqrt(3), rtol=1e-6)


@pytest.mark.parametrize("args, error, match", [
    (((3,), "bogus"), ValueError, "scheme must be one of"),
    (((3,), "fan-in"), TypeError, "fan_in must be a positive integer"),
    (([3],), TypeError, "shape must be a tuple"),
])
def test_init_bad_arguments(args, error, match):
    with pytest.raises(error, match=match):
        nn.init(jax.random.key(0), *args)
    with pytest.raises(TypeError, match="key must be a JAX random key"):
        nn.init(0, (3,))


def test_dense_feed_forward_and_count_against_numpy():
    dense = nn.Dense(3, 4, key=jax.random.key(0))
    x = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    np.testing.assert_allclose(dense(x), x @ np.asarray(dense.weight) + np.asarray(dense.bias), rtol=1e-5, atol=1e-6)
    ff = nn.FeedForward(3, 6, activation="gelu", key=jax.random.key(1))
    h = np.asarray(jax.nn.gelu(x @ np.asarray(ff.hidden.weight) + np.asarray(ff.hidden.bias)))
    np.testing.assert_allclose(ff(x), h @ np.asarray(ff.project.weight) + np.asarray(ff.project.bias), rtol=1e-5, atol=1e-5)
    assert nn.count_parameters(ff) == (3 * 6 + 6) + (6 * 3 + 3)
    with pytest.raises(ValueError, match="activation must be one of"):
        nn.FeedForward(3, 6, activation="tanh", key=jax.random.key(1))
    with pytest.raises(ValueError, match="x must have d_model=3"):
        ff(np.zeros((5, 4), np.float32))


CHAPTER = {"positional": 1, "attention": 2, "baselines": 2, "data": 2, "train": 2, "masking": 3, "sampling": 3,
           "mha": 4, "aft": 5, "lm": 5, "cost": 6, "transformer": 7, "extrapolation": 8}
SHARED = {"nn", "_checks", "plotting"}


def test_modules_import_only_their_own_or_earlier_chapters_and_no_private_names():
    import ast
    import pathlib

    import attnbook

    root = pathlib.Path(attnbook.__file__).parent
    for name, chapter in CHAPTER.items():
        tree = ast.parse((root / f"{name}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                modules = [node.module] if node.module else [a.name for a in node.names]
                for module in modules:
                    assert module in SHARED or CHAPTER[module] <= chapter, f"{name} (ch. {chapter}) imports {module}"
                if node.module:
                    private = [a.name for a in node.names if a.name.startswith("_")]
                    assert not private, f"{name} imports private names {private} from {node.module}"
