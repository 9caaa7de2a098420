"""attnbook.kv under bad input: the conversion and the experiment's model name their argument."""

import jax
import pytest

from attnbook import kv
from attnbook.experiments import ch10
from attnbook.mha import MultiHeadAttention


@pytest.mark.parametrize(
    "kv_heads, kind, match",
    [
        (0, ValueError, "kv_heads must be a positive integer, got 0"),
        (-1, ValueError, "kv_heads must be a positive integer, got -1"),
        (True, TypeError, "kv_heads must be a positive integer, got bool"),
        (2.0, TypeError, "kv_heads must be a positive integer, got float"),
        (4, ValueError, r"the layer's kv_heads must be divisible by kv_heads .*=6, kv_heads=4"),
        (12, ValueError, r"divisible by kv_heads .*=6, kv_heads=12"),
    ],
)
def test_bad_kv_heads(kv_heads, kind, match):
    layer = MultiHeadAttention(12, 6, 2, key=jax.random.key(0))
    with pytest.raises(kind, match=match):
        kv.pool_kv_heads(layer, kv_heads)


def test_pooling_cannot_add_heads():
    layer = MultiHeadAttention(12, 6, 2, kv_heads=2, key=jax.random.key(0))
    with pytest.raises(ValueError, match=r"the layer's kv_heads must be divisible by kv_heads .*=2, kv_heads=6"):
        kv.pool_kv_heads(layer, 6)


def test_bad_method_and_model():
    layer = MultiHeadAttention(12, 6, 2, key=jax.random.key(0))
    with pytest.raises(ValueError, match=r"method must be one of \('mean', 'first'\), got 'max'"):
        kv.pool_kv_heads(layer, 3, method="max")
    with pytest.raises(TypeError, match="model must be an Equinox module"):
        kv.pool_kv_heads({"w": 1}, 3)
    from attnbook.nn import Dense
    with pytest.raises(ValueError, match="model holds no MultiHeadAttention layer"):
        kv.pool_kv_heads(Dense(2, 2, key=jax.random.key(0)), 1)


def test_bad_experiment_arguments():
    with pytest.raises(ValueError, match=r"heads must be divisible by kv_heads .*heads=4, kv_heads=3"):
        ch10.gqa_position_model(3, seed=0)
    with pytest.raises(TypeError, match="seed"):
        ch10.gqa_position_model(2, seed=1.5)
    with pytest.raises(TypeError, match="seeds must be a sequence"):
        ch10.experiment_train(2, 3)
