"""Figures readable on the page: every figure's smallest text, as the desktop page shows it (tools.figure_fonts)."""

import pytest

from tools import figure_fonts

FIGURES = [fig for path in sorted(figure_fonts.ROOT.glob("chapters/*/*.ipynb")) for fig in figure_fonts.figures(path)]


def test_the_book_has_figures():
    assert len(FIGURES) > 20


@pytest.mark.parametrize("fig", FIGURES, ids=lambda f: f"{f.notebook}::{f.label}")
def test_smallest_text_is_readable_on_the_desktop(fig):
    assert fig.problem() is None, fig.problem()


def test_the_rule_follows_the_image_width():
    wide = figure_fonts.Figure("nb", 0, "fig", png_width=2 * figure_fonts.COLUMN_PX, png_px=12.0)
    narrow = figure_fonts.Figure("nb", 0, "fig", png_width=figure_fonts.COLUMN_PX // 2, png_px=12.0)
    assert wide.page_px == pytest.approx(6.0) and "6.0 px" in wide.problem()
    assert narrow.page_px == 12.0 and narrow.problem() is None
    assert "re-execute" in figure_fonts.Figure("nb", 0, "fig", 100, float("nan")).problem()


def test_plotting_and_the_tool_use_one_key():
    from attnbook import plotting

    assert plotting.MIN_FONT_KEY == figure_fonts.KEY
