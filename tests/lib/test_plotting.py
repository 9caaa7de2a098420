"""attnbook.plotting: languages, weather labels, heat-map labels."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib import font_manager

from attnbook import plotting


def test_setup_and_translation():
    plotting.setup("ja")
    assert plotting.tr("position", "位置") == "位置"
    plotting.setup("en")
    assert plotting.tr("position", "位置") == "position"
    with pytest.raises(ValueError, match="lang.*'fr'"):
        plotting.setup("fr")


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_fonts_cover_japanese_and_weather_symbols(lang):
    """Every glyph the figures use is present in the first font of the family list that has it."""
    from matplotlib.ft2font import FT2Font

    plotting.setup(lang)
    fonts = [FT2Font(font_manager.findfont(font_manager.FontProperties(family=f), fallback_to_default=False))
             for f in matplotlib.rcParams["font.family"]]
    for char in "位置アテンション☂☁☀→":
        assert any(ord(char) in font.get_charmap() for font in fonts), char


def test_weather_labels_and_heatmap():
    assert plotting.weather_labels([0, 1, 2, 2]) == ["☂", "☁", "☀", "☀"]
    plotting.setup("en")
    ax = plotting.heatmap(np.eye(3), row_labels=["a", "b", "c"], col_labels=["x", "y", "z"], annotate=True)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "c"]
    with pytest.raises(ValueError, match="col_labels.*3.*2"):
        plotting.heatmap(np.eye(3), col_labels=["x", "y"])
    plt.close("all")


def _contrast(ink, cell) -> float:
    """WCAG contrast ratio of two colours, written here from the definition."""
    def luminance(rgb):
        return sum(w * (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4)
                   for w, c in zip((0.2126, 0.7152, 0.0722), rgb[:3]))
    light, dark = sorted((luminance(matplotlib.colors.to_rgb(ink)), luminance(cell)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


@pytest.mark.parametrize("cmap", ["viridis", "Blues", "magma", "RdBu"])
@pytest.mark.parametrize("limits", [(None, None), (0.0, 2.0), (-1.0, 0.5)])
def test_annotations_contrast_with_their_cells(cmap, limits):
    """Each number is black or white, whichever reads better on its cell, whatever vmin and vmax."""
    plotting.setup("en")
    matrix = np.linspace(0.0, 1.0, 12).reshape(3, 4)
    ax = plotting.heatmap(matrix, annotate=True, cmap=cmap, vmin=limits[0], vmax=limits[1], colorbar=False)
    image = ax.get_images()[0]
    for text, value in zip(ax.texts, matrix.ravel()):
        cell = image.cmap(image.norm(value))
        ratio = _contrast(text.get_color(), cell)
        other = _contrast("white" if text.get_color() == "black" else "black", cell)
        assert ratio >= other and ratio >= 4.5, (cmap, limits, value, text.get_color(), ratio)
    plt.close("all")


def test_smallest_font_counts_every_visible_text():
    plotting.setup("en")
    fig, ax = plt.subplots(dpi=100)
    ax.set_title("title", fontsize=14)
    ax.plot([0, 1], label="a line")
    ax.legend(fontsize=7)
    ax.tick_params(labelsize=10)
    assert plotting.smallest_font_px(fig) == pytest.approx(7 * 100 / 72)
    ax.get_legend().set_visible(False)
    assert plotting.smallest_font_px(fig) == pytest.approx(10 * 100 / 72)
    plt.close("all")


def test_encoder_decoder_diagram_draws_every_label_and_rejects_missing_ones():
    plotting.setup("en")
    keys = ("source", "target", "embed", "self", "causal", "cross", "ffn", "norm", "output", "memory", "encoder",
            "decoder", "repeat", "note")
    labels = {k: f"<{k}>" for k in keys}
    fig = plotting.encoder_decoder_diagram(labels)
    drawn = [text.get_text() for text in fig.axes[0].texts]
    assert all(labels[k] in drawn for k in keys) and drawn.count("<repeat>") == 2  # one per stack
    assert drawn.count("<ffn>") == 2 and drawn.count("<norm>") == 2  # both stacks end in their LayerNorm
    assert plotting.smallest_font_px(fig) >= 12
    plt.close(fig)
    with pytest.raises(ValueError, match="memory"):
        plotting.encoder_decoder_diagram({k: v for k, v in labels.items() if k != "memory"})
