"""Figures readable on the page: every figure's smallest text, as the desktop page and a phone show it
(tools.figure_fonts)."""

import pytest

from tools import figure_fonts

FIGURES = [fig for path in sorted(figure_fonts.ROOT.glob("chapters/*/*.ipynb")) for fig in figure_fonts.figures(path)]


def test_the_book_has_figures():
    assert len(FIGURES) > 20


@pytest.mark.parametrize("fig", FIGURES, ids=lambda f: f"{f.notebook}::{f.label}")
def test_smallest_text_is_readable_on_the_desktop(fig):
    assert fig.problem() is None, fig.problem()


@pytest.mark.parametrize("fig", FIGURES, ids=lambda f: f"{f.notebook}::{f.label}")
def test_smallest_text_is_readable_on_a_phone(fig):
    assert fig.problem(phone=True) is None, fig.problem(phone=True)


def test_the_rule_follows_the_image_width():
    wide = figure_fonts.Figure("nb", 0, "fig", png_width=2 * figure_fonts.COLUMN_PX, png_px=12.0)
    narrow = figure_fonts.Figure("nb", 0, "fig", png_width=figure_fonts.COLUMN_PX // 2, png_px=12.0)
    assert wide.page_px == pytest.approx(6.0) and "6.0 px" in wide.problem()
    assert narrow.page_px == 12.0 and narrow.problem() is None
    assert narrow.phone_px == pytest.approx(12.0 * min(1.0, figure_fonts.PHONE_COLUMN_PX / narrow.png_width))
    assert "phone" in wide.problem(phone=True) and wide.phone_px < wide.page_px
    assert "re-execute" in figure_fonts.Figure("nb", 0, "fig", 100, float("nan")).problem()


def test_plotting_and_the_tool_use_one_key():
    from attnbook import plotting

    assert plotting.MIN_FONT_KEY == figure_fonts.KEY


# ---------------------------------------------------------------------------------------------
# Colour: safe for colour-blind readers, and no meaning carried by colour alone (issue 24)


@pytest.mark.parametrize("fig", FIGURES, ids=lambda f: f"{f.notebook}::{f.label}")
def test_colours_hold_for_colour_blind_readers(fig):
    """Any two colours of a figure >= MIN_DELTA_E apart (CIEDE2000) under protanopia, deuteranopia and
    tritanopia (Machado et al. 2009); safe colour maps; no legend entries told apart by colour alone."""
    assert fig.colour_problem() is None, fig.colour_problem()


@pytest.mark.parametrize("lab1, lab2, expected", [  # Sharma, Wu and Dalal (2005), Table 1: pairs 1, 3, 7, 13, 34
    ((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),
    ((50.0, 2.8361, -74.02), (50.0, 0.0, -82.7485), 3.4412),
    ((50.0, 0.0, 0.0), (50.0, -1.0, 2.0), 2.3669),
    ((50.0, 2.49, -0.001), (50.0, -2.49, 0.0009), 7.1792),
    ((2.0776, 0.0795, -1.135), (0.9033, -0.0636, -0.5514), 0.9082),
])
def test_ciede2000_matches_the_published_test_data(lab1, lab2, expected):
    assert figure_fonts.ciede2000(lab1, lab2) == pytest.approx(expected, abs=1e-4)
    assert figure_fonts.ciede2000(lab2, lab1) == pytest.approx(expected, abs=1e-4)


def test_the_simulations_keep_white_and_black_and_merge_red_and_green():
    for vision in figure_fonts.MACHADO:
        assert figure_fonts.lab("#ffffff", vision) == pytest.approx((100.0, 0.0, 0.0), abs=0.01)
        assert figure_fonts.lab("#000000", vision) == pytest.approx((0.0, 0.0, 0.0), abs=0.01)
    # matplotlib's default orange and green: far apart for most readers, nearly one colour for a protanope
    normal = figure_fonts.ciede2000(figure_fonts.lab("#ff7f0e"), figure_fonts.lab("#2ca02c"))
    protan = figure_fonts.ciede2000(figure_fonts.lab("#ff7f0e", "protanopia"), figure_fonts.lab("#2ca02c", "protanopia"))
    assert normal > 40 and protan < 2


def test_the_book_palette_is_safe_and_matplotlibs_default_is_not():
    from attnbook import plotting

    closest = figure_fonts.closest_colours([*plotting.PALETTE, plotting.GREY])
    assert closest[0] >= figure_fonts.MIN_DELTA_E, closest
    tab10 = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]
    assert figure_fonts.closest_colours(tab10)[0] < figure_fonts.MIN_DELTA_E
    bad = figure_fonts.Figure("nb", 0, "fig", 600, 12.0, tuple(tab10[:3]), ("jet",), "a | b")
    problem = bad.colour_problem()
    assert "protanopia" in problem and "jet" in problem and "colour alone: a | b" in problem


def test_a_legend_told_apart_by_colour_alone_is_found():
    import matplotlib.pyplot as plt

    from attnbook import plotting

    plotting.setup("en")
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="a")
    ax.plot([0, 1], [1, 0], label="b")
    ax.plot([0, 1], [0.5, 0.5], "--", label="c")
    ax.legend()
    assert plotting.colour_only_legend_entries(fig) == ["a", "b"]
    assert plotting.figure_colours(fig) == ([plotting.PALETTE[0], plotting.PALETTE[1], plotting.PALETTE[2]], [])
    ax.lines[1].set_marker("o")
    ax.legend()
    assert plotting.colour_only_legend_entries(fig) == []
    plt.close(fig)


def test_plotting_and_the_tool_use_the_same_colour_keys():
    from attnbook import plotting

    assert (plotting.COLOURS_KEY, plotting.COLORMAPS_KEY, plotting.COLOUR_ONLY_KEY) == (
        figure_fonts.COLOURS_KEY, figure_fonts.COLORMAPS_KEY, figure_fonts.COLOUR_ONLY_KEY)
