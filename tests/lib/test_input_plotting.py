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


def test_rotation_circle_bad_arguments():
    """Chapter 1's circle of one (sin, cos) pair: a frequency that is not a positive number, no positions, no Axes."""
    with pytest.raises(ValueError, match="omega"):
        plotting.rotation_circle(-0.5, positions=range(3), turns=[])
    with pytest.raises(ValueError, match="positions must name at least one position"):
        plotting.rotation_circle(0.5, positions=[], turns=[])
    with pytest.raises(TypeError, match="ax must be a matplotlib Axes"):
        plotting.rotation_circle(0.5, positions=range(3), turns=[], ax="left")


def test_rotation_circle_puts_position_p_at_sin_cos():
    """Position p is drawn at (sin p omega, cos p omega): 0 at the top, the points turning clockwise."""
    ax = plotting.rotation_circle(0.5, positions=range(4), turns=[(1, 2)])
    points = next(line for line in ax.lines if line.get_marker() == "o")
    p = np.arange(4)
    assert np.allclose(points.get_xdata(), np.sin(0.5 * p)) and np.allclose(points.get_ydata(), np.cos(0.5 * p))


def test_alibi_weights_bad_shapes():
    """Chapter 1's ALiBi figure: weights (heads, T, T) and one slope per head."""
    with pytest.raises(ValueError, match=r"weights must have shape \(heads, T, T\), got \(4, 16\)"):
        plotting.alibi_weights(np.ones((4, 16)), np.ones(4))
    with pytest.raises(ValueError, match=r"slopes must have one entry per head, shape \(4,\), got \(3,\)"):
        plotting.alibi_weights(np.ones((4, 16, 16)) / 16, np.ones(3))
    fig = plotting.alibi_weights(np.ones((2, 5, 5)) / 5, [0.5, 0.25], last_query="query 4")
    assert fig.axes[-1].get_title() == "query 4" or any(ax.get_title() == "query 4" for ax in fig.axes)
