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
