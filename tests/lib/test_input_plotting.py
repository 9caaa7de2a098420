"""attnbook.plotting under bad input: each error names its argument (issue 10)."""

import matplotlib

matplotlib.use("Agg")

import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import pytest

from attnbook import plotting


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize(
    "tokens, kind, match",
    [
        ([0, -1], ValueError, r"tokens must be integers in \[0, 3\), got -1 at index 1"),  # not ☀
        (np.array([3, 0]), ValueError, r"tokens must be integers in \[0, 3\), got 3 at index 0"),
        (jnp.array([0, 5]), ValueError, r"tokens must be integers in \[0, 3\), got 5"),
        ([0.0, 1.0], TypeError, "tokens must be an integer array, got dtype float64"),
        (np.array([[0, 1]]), ValueError, r"tokens must have shape \(T,\), got an array of shape \(1, 2\)"),
        (2, ValueError, r"tokens must have shape \(T,\), got an array of shape \(\)"),
        ("012", TypeError, "tokens must be an array"),
    ],
)
def test_weather_labels_bad_tokens(tokens, kind, match):
    with pytest.raises(kind, match=match):
        plotting.weather_labels(tokens)


def test_weather_labels_valid():
    assert plotting.weather_labels(np.array([2, 1, 0], dtype=np.uint8)) == ["☀", "☁", "☂"]
    assert plotting.weather_labels(jnp.zeros(0, dtype=jnp.int32)) == []


@pytest.mark.parametrize(
    "kwargs, kind, match",
    [
        ({"matrix": np.zeros(3)}, ValueError, r"matrix must have shape \(rows, cols\), got an array of shape \(3,\)"),
        ({"matrix": np.zeros((2, 2, 2))}, ValueError, r"matrix must have shape \(rows, cols\)"),
        ({"matrix": np.zeros((0, 3))}, ValueError, r"matrix must have at least one row and one column.*\(0, 3\)"),
        ({"matrix": np.eye(2, dtype=complex)}, TypeError, "matrix must be a boolean, integer or real array.*complex128"),
        ({"matrix": "eye"}, TypeError, "matrix must be an array"),
        ({"matrix": np.eye(2), "ax": "left"}, TypeError, r"ax must be a matplotlib Axes.*got str"),
        ({"matrix": np.eye(3), "row_labels": ["a", "b"]}, ValueError, "row_labels must have 3 entries, got 2"),
        ({"matrix": np.eye(3), "col_labels": ["a"]}, ValueError, "col_labels must have 3 entries, got 1"),
        ({"matrix": np.eye(2), "annotate": True, "fmt": "%.2f"}, ValueError, "fmt must be a format specification.*'%.2f'"),
    ],
)
def test_heatmap_bad_arguments(kwargs, kind, match):
    with pytest.raises(kind, match=match):
        plotting.heatmap(**kwargs)


def test_heatmap_valid_dtypes():
    for matrix in (np.eye(2) > 0, np.eye(2, dtype=int), jnp.eye(2, dtype=jnp.bfloat16), [[0.5, 1.0], [1.0, 0.5]],
                   np.array([[np.nan, 1.0], [0.0, 1.0]])):  # masks, counts, JAX arrays, lists, NaN cells left blank
        assert isinstance(plotting.heatmap(matrix, annotate=True), plt.Axes)


def test_setup_and_ticks_bad_arguments():
    with pytest.raises(ValueError, match="lang must be one of.*'de'"):
        plotting.setup("de")
    with pytest.raises(TypeError, match=r"ax must be a matplotlib Axes.*got NoneType"):
        plotting.integer_ticks(None)
