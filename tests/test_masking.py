"""attnbook.masking against masks built element by element."""

import numpy as np
import pytest

from attnbook import masking


def test_causal_mask_is_lower_triangle():
    mask = np.asarray(masking.causal_mask(5))
    assert mask.dtype == bool and mask.shape == (5, 5)
    for i in range(5):
        for j in range(5):
            assert mask[i, j] == (j <= i), (i, j)


def test_padding_mask():
    lengths = np.array([1, 3, 4])
    mask = np.asarray(masking.padding_mask(lengths, 4))
    assert mask.shape == (3, 4, 4) and mask.dtype == bool
    for b, n in enumerate(lengths):
        for i in range(4):
            for j in range(4):
                assert mask[b, i, j] == (i < n and j < n)


@pytest.mark.parametrize(
    "call, names",
    [
        (lambda: masking.causal_mask(0), ["length", "0"]),
        (lambda: masking.causal_mask(3.0), ["length", "3.0"]),
        (lambda: masking.padding_mask(np.array([2, 5]), 4), ["lengths", "max_length=4", "[2, 5]"]),
        (lambda: masking.padding_mask(np.array([0, 2]), 4), ["lengths", "[0, 2]"]),
        (lambda: masking.padding_mask(np.array([[2]]), 4), ["lengths", "(batch,)", "(1, 1)"]),
        (lambda: masking.padding_mask(np.array([1.5]), 4), ["lengths", "integers"]),
        (lambda: masking.padding_mask(np.array([2]), 0), ["max_length", "0"]),
    ],
)
def test_bad_arguments(call, names):
    with pytest.raises(ValueError) as info:
        call()
    for name in names:
        assert name in str(info.value)
