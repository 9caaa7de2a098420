"""Figures in the page's language: fonts, labels and heat-maps with token labels.

Every chapter starts with ``plotting.setup(LANG)``. Japanese glyphs come from the IPAex Gothic
font shipped by ``matplotlib-fontja`` (no system font needed); the weather symbols
☂ ☁ ☀ are drawn by DejaVu Sans, which matplotlib ships, so no colour-emoji font is needed.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib as mpl
import matplotlib.pyplot as plt
import matplotlib_fontja  # noqa: F401  (registers IPAexGothic with matplotlib)
import numpy as np
import jax.numpy as jnp
from jaxtyping import Array, Int, Shaped

from . import _checks

LANGUAGES = ("en", "ja")
WEATHER_SYMBOLS = ("☂", "☁", "☀")  # token 0 = rain, 1 = cloud, 2 = sun

_state = {"lang": "en"}

# The colours of lines and markers, in the order the chapters' "C0", "C1", ... take them: Okabe & Ito's
# colour-universal-design palette (Okabe and Ito, 2008, https://jfly.uni-koeln.de/color/), without its
# yellow (1.2:1 contrast on white) and with black last. Seen through protanopia, deuteranopia and
# tritanopia (Machado et al. 2009), any two of them stay at least 10.9 CIEDE2000 apart
# (tests/book/test_figures.py checks every figure's colours, tools/figure_fonts.py explains the threshold).
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#000000")
# Reference lines (an optimum, a uniform guess): a dark grey, far from every palette colour under the
# three simulations (CIEDE2000 >= 19), unlike matplotlib's "gray" (8 from the bluish green).
GREY = "#555555"


def setup(lang: str) -> None:
    """Set the language of figure text and the fonts and sizes every chapter uses.

    In a notebook it also makes a value check that stops a ``jax.jit``-compiled program print its
    message first (:func:`attnbook._checks.show_runtime_errors_first`).
    """
    if lang not in LANGUAGES:
        raise ValueError(f"lang must be one of {LANGUAGES}, got {lang!r}")
    _state["lang"] = lang
    _checks.show_runtime_errors_first()  # in a notebook: a value check's message above JAX's long error
    _record_font_sizes_in_pngs()
    # matplotlib falls back along the family list glyph by glyph: DejaVu Sans draws Latin text and
    # the weather symbols (IPAexGothic's cloud looks like a club suit), IPAexGothic the Japanese.
    family = ["DejaVu Sans", "IPAexGothic"]
    mpl.rcParams.update(
        {
            "font.family": family,
            "figure.dpi": 100,  # small PNGs keep the stored notebooks light
            "savefig.dpi": 100,
            "figure.figsize": (6.0, 3.6),
            "axes.grid": False,
            "axes.prop_cycle": mpl.cycler(color=PALETTE),
        }
    )


MIN_FONT_KEY = "attnbook:min-font-px"  # PNG text chunk: the figure's smallest text, in image pixels
COLOURS_KEY = "attnbook:colours"  # PNG text chunk: the colours of the figure's lines, markers and patches
COLORMAPS_KEY = "attnbook:colormaps"  # PNG text chunk: the colour maps of its images and colour bars
COLOUR_ONLY_KEY = "attnbook:colour-only-legend"  # legend entries told apart by colour alone, or "none"


def smallest_font_px(fig: mpl.figure.Figure, *, draw: bool = True) -> float:
    """The height in image pixels (font size in points × dpi / 72) of the smallest visible text of ``fig``.

    Tick labels, legends, titles and annotations all count; empty strings do not. ``nan`` if the
    figure has no text. ``draw=False``: the figure has been drawn since its last change.
    """
    sizes = []

    def visit(artist) -> None:  # an artist inside a hidden one (a hidden legend's labels) is not drawn
        if not artist.get_visible():
            return
        if isinstance(artist, mpl.text.Text) and artist.get_text().strip():
            sizes.append(artist.get_fontsize())
        for child in artist.get_children():
            visit(child)

    if draw:
        fig.draw_without_rendering()  # ticks and their labels are made at draw time
    visit(fig)
    return min(sizes) * fig.dpi / 72 if sizes else float("nan")


def _hex(colour) -> str | None:
    """``colour`` as "#rrggbb" (its alpha dropped), or None when it is not drawn ("none", fully transparent)."""
    if isinstance(colour, str) and colour.lower() == "none":
        return None
    rgba = mpl.colors.to_rgba(colour)
    return None if rgba[3] == 0 else mpl.colors.to_hex(rgba, keep_alpha=False)


def figure_colours(fig: mpl.figure.Figure) -> tuple[list[str], list[str]]:
    """The distinct colours that tell data apart in ``fig`` and the names of its colour maps.

    Colours: every visible line and its markers' edges, every patch drawn inside the axes (bars,
    filled areas) and every collection of one colour (scatter points, ``fill_between``); white, the
    page's background, is left out. A collection or image coloured by a colour map counts by the map's
    name instead. Text, legends, axes and their frames are not data and do not count.
    """
    colours, maps = [], []

    def add(colour) -> None:
        found = _hex(colour)
        if found is not None and found != "#ffffff" and found not in colours:
            colours.append(found)

    for ax in fig.axes:
        for line in ax.lines:
            if not line.get_visible():
                continue
            if line.get_linestyle() not in ("None", "", " ", "none") and line.get_linewidth() > 0:
                add(line.get_color())
            if line.get_marker() not in (None, "None", "none", "", " "):
                add(line.get_markeredgecolor())
        for patch in ax.patches:
            if patch.get_visible() and patch.get_fill():
                add(patch.get_facecolor())
        for collection in ax.collections:
            if not collection.get_visible():
                continue
            if collection.get_array() is not None:  # coloured by a colour map (pcolormesh, a colour bar)
                maps.append(collection.get_cmap().name)
                continue
            for colour in list(collection.get_facecolors()) + list(collection.get_edgecolors()):
                add(colour)
        for image in ax.images:
            if image.get_visible():
                maps.append(image.get_cmap().name)
    return colours, sorted(set(maps))


def _looks(handle) -> tuple:
    """What tells a legend entry apart other than its colour: line style, marker, fill, hatch."""
    if isinstance(handle, mpl.lines.Line2D):
        drawn = handle.get_linestyle() not in ("None", "", " ", "none") and handle.get_linewidth() > 0
        marker = handle.get_marker() if handle.get_marker() not in (None, "None", "none", "", " ") else None
        face = _hex(handle.get_markerfacecolor()) if marker else None
        return ("line", handle.get_linestyle() if drawn else None, round(handle.get_linewidth(), 1) if drawn else None,
                marker, handle.get_fillstyle() if marker else None, face in (None, "#ffffff") if marker else None)
    if isinstance(handle, mpl.patches.Patch):
        return ("patch", handle.get_hatch(), handle.get_linestyle())
    if isinstance(handle, mpl.collections.Collection):
        return ("collection", type(handle).__name__, handle.get_hatch(),
                tuple(p.vertices.round(2).tobytes() for p in handle.get_paths()[:1]))
    return (type(handle).__name__,)


def colour_only_legend_entries(fig: mpl.figure.Figure, *, draw: bool = True) -> list[str]:
    """Labels of legend entries that differ from another entry of their legend by colour alone.

    Entries must also differ in line style, width, marker or hatch (or the lines be labelled directly,
    with no legend), so that no meaning rests on colour alone. ``draw=False``: the figure has been drawn
    since its last change.
    """
    if draw:
        fig.draw_without_rendering()
    legends = [ax.get_legend() for ax in fig.axes] + list(fig.legends)
    found = []
    for legend in legends:
        if legend is None or not legend.get_visible():
            continue
        entries = [(_looks(h), t.get_text()) for h, t in zip(legend.legend_handles, legend.get_texts())
                   if h is not None]
        for k, (looks, text) in enumerate(entries):
            if any(looks == other for j, (other, _) in enumerate(entries) if j != k) and text not in found:
                found.append(text)
    return found


def _png(fig: mpl.figure.Figure) -> str | None:
    """The inline backend's PNG, with :data:`MIN_FONT_KEY`, :data:`COLOURS_KEY`, :data:`COLORMAPS_KEY`
    and :data:`COLOUR_ONLY_KEY` in its metadata (read by tools.figure_fonts)."""
    import base64
    import io

    from IPython.core.pylabtools import print_figure
    from PIL import Image, PngImagePlugin

    data = print_figure(fig, "png")  # draws the figure, so its ticks and legends exist for the measures below
    if data is None:  # an empty figure
        return None
    colours, maps = figure_colours(fig)
    metadata = {MIN_FONT_KEY: f"{smallest_font_px(fig, draw=False):.2f}", COLOURS_KEY: ",".join(colours),
                COLORMAPS_KEY: ",".join(maps),
                COLOUR_ONLY_KEY: " | ".join(colour_only_legend_entries(fig, draw=False)) or "none"}
    # Written into the PNG afterwards (the same pixels, saved again): measuring before the drawing would
    # draw the figure once more, which for a grid of heat-maps takes longer than the PNG itself.
    image = Image.open(io.BytesIO(data))
    info = PngImagePlugin.PngInfo()
    for key, value in {**image.text, **metadata}.items():
        info.add_text(key, value)
    out = io.BytesIO()
    image.save(out, "png", pnginfo=info, dpi=image.info["dpi"])
    return base64.b64encode(out.getvalue()).decode("ascii")


def _record_font_sizes_in_pngs() -> None:
    """In IPython, draw figures through :func:`_png`, so the stored notebook says how small its text is."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    # pyplot loads its backend at the first figure, and the inline backend then registers its own
    # PNG formatter; load it now so that ours, registered after, is the one used.
    plt.switch_backend(mpl.get_backend())
    shell.display_formatter.formatters["image/png"].for_type(mpl.figure.Figure, _png)


def language() -> str:
    """The language set by :func:`setup`."""
    return _state["lang"]


def tr(en: str, ja: str) -> str:
    """Pick the English or Japanese text for a figure, by the language set in :func:`setup`."""
    return ja if _state["lang"] == "ja" else en


def integer_ticks(ax: plt.Axes) -> None:
    """Whole-number ticks on both axes: positions, days and tokens are counted, not measured."""
    _axes("ax", ax)
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(mpl.ticker.MaxNLocator(integer=True))


def _axes(name: str, ax) -> plt.Axes:
    """``ax`` if it is a matplotlib ``Axes``, else a ``TypeError`` naming the argument."""
    if not isinstance(ax, plt.Axes):
        raise TypeError(f"{name} must be a matplotlib Axes (e.g. from plt.subplots()), got {type(ax).__name__}")
    return ax


@_checks.shaped
def weather_labels(tokens: Int[Array, " T"]) -> list[str]:
    """Weather symbols for integer tokens ``(T,)`` in ``[0, 3)``: 0 → ☂, 1 → ☁, 2 → ☀.

    A list of ints works as well as an array. Ids outside ``[0, 3)`` are a ``ValueError`` (``-1`` is
    not the last symbol), floats a ``TypeError``.
    """
    tokens = np.asarray(tokens)
    tokens = _checks.integers_in_range("tokens", tokens, 0, len(WEATHER_SYMBOLS))
    return [WEATHER_SYMBOLS[int(t)] for t in tokens]


def _ink_on(rgba) -> str:
    """Black or white, whichever contrasts more with the colour ``rgba`` (WCAG relative luminance)."""
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgba[:3]]
    luminance = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    # Contrast with black is (L + 0.05) / 0.05, with white 1.05 / (L + 0.05); they are equal at L ≈ 0.179.
    return "black" if (luminance + 0.05) / 0.05 >= 1.05 / (luminance + 0.05) else "white"


@_checks.shaped
def heatmap(
    matrix: Shaped[Array, "rows cols"],
    *,
    ax: plt.Axes | None = None,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    title: str | None = None,
    xlabel: str | None = None,
    ylabel: str | None = None,
    annotate: bool = False,
    fmt: str = ".2f",
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
    colorbar: bool = True,
) -> plt.Axes:
    """Draw a 2-D array as an image, row 0 at the top, with optional token labels.

    Used for attention weights (rows = queries, columns = keys) and positional encodings
    (rows = positions, columns = features). ``annotate`` writes each value in its cell.
    """
    matrix = np.asarray(matrix)  # booleans (masks), integers and reals; not complex numbers
    if not (matrix.dtype == np.bool_ or np.issubdtype(matrix.dtype, np.integer) or jnp.issubdtype(matrix.dtype, jnp.floating)):
        raise TypeError(f"matrix must be a boolean, integer or real array, got dtype {matrix.dtype}")
    if jnp.issubdtype(matrix.dtype, jnp.floating) and not np.issubdtype(matrix.dtype, np.floating):
        matrix = matrix.astype(np.float32)  # bfloat16 and JAX's other floats, which matplotlib does not know
    if matrix.size == 0:
        raise ValueError(f"matrix must have at least one row and one column, got shape {matrix.shape}")
    if ax is None:
        _, ax = plt.subplots()
    _axes("ax", ax)
    image = ax.imshow(matrix, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    integer_ticks(ax)  # rows and columns are tokens or features
    for labels, count, set_ticks, set_labels, axis in (
        (row_labels, matrix.shape[0], ax.set_yticks, ax.set_yticklabels, "row_labels"),
        (col_labels, matrix.shape[1], ax.set_xticks, ax.set_xticklabels, "col_labels"),
    ):
        if labels is not None:
            if len(labels) != count:
                raise ValueError(f"{axis} must have {count} entries, got {len(labels)}")
            set_ticks(range(count))
            set_labels(labels)
    if annotate:
        try:
            format(0.5, fmt)
        except (TypeError, ValueError):
            raise ValueError(f"fmt must be a format specification for numbers such as '.2f', got {fmt!r}") from None
        for (i, j), value in np.ndenumerate(matrix):
            cell = image.cmap(image.norm(value))
            ax.text(j, i, format(value, fmt), ha="center", va="center", fontsize=8, color=_ink_on(cell))
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    if title:
        ax.set_title(title)
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    return ax


def _label_width(text: str) -> float:
    """The width of ``text`` in Latin letters: a Japanese character counts 1.5 (2/3 of a line's Latin letters)."""
    return sum(1.0 if c.isascii() else 1.5 for c in text)


def row_label(text: str, width: int = 12) -> str:
    """``text`` wrapped into lines of about ``width`` Latin letters (a Japanese character counts 1.5), for the
    label of a row of small panels, so that it does not run into the next row's label.

    Lines break at spaces and after 「、」, never inside a word: ``"key_dim 1、value_dim 7"`` keeps ``value_dim``
    whole. Japanese text with neither breaks once, where the two lines come out most even, after a hiragana and
    before any other character (「学習する」 / 「位置埋め込み」); failing that, anywhere but inside a run of
    Latin letters and digits.
    """
    import re

    if " " in text or "、" in text:  # words and their separators: a space, or nothing after 、
        pieces = [(sep, word) for sep, word in re.findall(r"( ?)([^ 、]*、|[^ 、]+)", text)]
    elif _label_width(text) <= width:
        return text
    else:
        hiragana = [bool(re.match("[\u3041-\u309f]", c)) for c in text]
        longer = {i: max(_label_width(text[:i]), _label_width(text[i:])) for i in range(1, len(text))
                  if hiragana[i - 1] and not hiragana[i]}  # after a particle or an inflection: 「する」「で」
        if longer and min(longer.values()) <= width:
            i = min(longer, key=longer.get)
            return text[:i] + "\n" + text[i:]
        pieces = [("", atom) for atom in re.findall(r"[!-~]+|.", text)]  # a run of Latin letters, digits: one atom
    lines: list[str] = []
    for sep, piece in pieces:
        if lines and _label_width(lines[-1] + sep + piece) <= width:
            lines[-1] += sep + piece
        else:
            lines.append(piece)
    return "\n".join(lines)


def head_grid(maps: dict, *, head: str = "head", key: str = "key token", query: str = "query token",
              weight: str = "attention weight", per_row: int = 4):
    """Heat-maps of per-head attention weights, one ``(heads, T, T)`` array per entry of ``maps`` (its label the
    rows' label), in rows of ``per_row`` heads, on a fixed colour scale from 0 to 1 (chapter 4). ``head``, ``key``,
    ``query`` and ``weight`` are the words of the titles ("head 1"), the axes and the colour bar, in the page's
    language."""
    if not maps:
        raise ValueError("maps is empty: give at least one (heads, T, T) array")
    rows = sum(-(-len(m) // per_row) for m in maps.values())
    fig, axes = plt.subplots(rows, per_row, figsize=(4.8, 1.2 * rows + 1.0), layout="constrained",
                             sharex=True, sharey=True, squeeze=False)
    r = 0
    for name, m in maps.items():
        size = np.asarray(m).shape[-1]
        for start in range(0, len(m), per_row):
            for j, ax in enumerate(axes[r]):
                if start + j >= len(m):
                    ax.axis("off")
                    continue
                image = ax.imshow(m[start + j], vmin=0, vmax=1, cmap="viridis")
                ax.set_title(f"{head} {start + j + 1}", fontsize=10)
            if start == 0:  # one label per map, on its first row, wrapped to fit a row's height
                axes[r, 0].set_ylabel(row_label(name), fontsize=9)
            r += 1
    axes[0, 0].set_xticks(range(size), labels=range(1, size + 1))  # shared by every map
    axes[0, 0].set_yticks(range(size), labels=range(1, size + 1))
    for ax in axes.flat:
        ax.tick_params(labelsize=9)
    fig.supxlabel(key, fontsize=10)
    fig.supylabel(query, fontsize=10)
    fig.colorbar(image, ax=axes, location="top", shrink=0.6, aspect=30, label=weight)
    return fig


def rotation_circle(omega: float, *, positions: Sequence[int], turns: Sequence[tuple[int, int]],
                    ax: plt.Axes | None = None, xlabel: str | None = None, ylabel: str | None = None,
                    title: str | None = None) -> plt.Axes:
    """One (sin, cos) pair of the sinusoidal encoding on its unit circle (chapter 1).

    Position ``p`` is the point ``(sin p omega, cos p omega)``: column ``2i`` across, ``2i + 1`` up, so that
    ``p = 0`` is at the top and the point turns clockwise as ``p`` grows. Each ``(start, offset)`` of ``turns``
    draws the arc from ``start`` to ``start + offset``: the same angle ``offset * omega`` wherever it starts.
    """
    omega = _checks.positive_float("omega", omega)
    positions = [int(p) for p in positions]
    if not positions:
        raise ValueError("positions must name at least one position")
    if ax is None:
        _, ax = plt.subplots(figsize=(4.2, 4.2))
    _axes("ax", ax)
    circle = np.linspace(0.0, 2 * np.pi, 400)
    ax.plot(np.sin(circle), np.cos(circle), color=GREY, lw=0.8, ls=":")
    p = np.asarray(positions, dtype=np.float64)
    ax.plot(np.sin(p * omega), np.cos(p * omega), "o", color=PALETTE[0], ms=5, zorder=3)
    for position in positions:
        angle = position * omega
        ax.annotate(str(position), (np.sin(angle), np.cos(angle)), xytext=(1.17 * np.sin(angle), 1.17 * np.cos(angle)),
                    ha="center", va="center", fontsize=10)
    for (start, offset), colour in zip(turns, PALETTE[1:]):
        angles = np.linspace(start * omega, (start + offset) * omega, 60)
        radius = 0.78
        ax.plot(radius * np.sin(angles), radius * np.cos(angles), color=colour, lw=2.0)
        ax.annotate("", xy=(radius * np.sin(angles[-1]), radius * np.cos(angles[-1])),
                    xytext=(radius * np.sin(angles[-3]), radius * np.cos(angles[-3])),
                    arrowprops={"arrowstyle": "-|>", "color": colour, "lw": 2.0})
        for end in (start, start + offset):  # spokes from the centre to both ends of the turn
            ax.plot([0, np.sin(end * omega)], [0, np.cos(end * omega)], color=colour, lw=0.8)
        middle = angles[len(angles) // 2]
        ax.text(0.55 * np.sin(middle), 0.55 * np.cos(middle), f"{offset}ω", color=colour, ha="center",
                va="center", fontsize=10)
    ax.set_aspect("equal")
    ax.set_xlim(-1.35, 1.35)
    ax.set_ylim(-1.35, 1.35)
    ax.set_xticks([-1, 0, 1])
    ax.set_yticks([-1, 0, 1])
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return ax


def alibi_weights(weights, slopes, *, key: str = "key j", query: str = "query i",
                  relative: str = "weight ÷ the row's largest", weight: str = "attention weight",
                  uniform: str = "uniform 1/T", last_query: str | None = None):
    """ALiBi's attention weights alone (chapter 1): ``weights`` ``(heads, T, T)``, one slope per head.

    Top, the steepest head, each row divided by its largest weight (so that every row shows how fast its
    weights fall with distance); bottom, the weights of the last query in every head, beside the uniform
    ``1/T``. The words of the axes and legends are given in the page's language; ``last_query`` is the title of
    the lower panel (``None``: "query i = T - 1"). Returns the figure.
    """
    weights = np.asarray(weights, dtype=np.float64)
    slopes = np.asarray(slopes, dtype=np.float64)
    if weights.ndim != 3 or weights.shape[1] != weights.shape[2]:
        raise ValueError(f"weights must have shape (heads, T, T), got {weights.shape}")
    if slopes.shape != (weights.shape[0],):
        raise ValueError(f"slopes must have one entry per head, shape ({weights.shape[0]},), got {slopes.shape}")
    length = weights.shape[-1]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(5.0, 6.0))
    names = [f"$m = 2^{{{int(round(np.log2(m)))}}}$" for m in slopes]
    steepest = int(np.argmax(slopes))
    heatmap(weights[steepest] / weights[steepest].max(axis=-1, keepdims=True), ax=ax1, vmin=0, vmax=1,
            xlabel=key, ylabel=query, title=names[steepest])
    ax1.images[0].colorbar.set_label(relative)
    for h, marker in zip(range(len(slopes)), "osD^v<>p"):  # marker and colour both tell the heads apart
        ax2.plot(np.arange(length), weights[h, -1], marker=marker, label=names[h])
    ax2.axhline(1 / length, color=GREY, ls=":", label=uniform)
    integer_ticks(ax2)
    ax2.locator_params(axis="y", nbins=4)
    ax2.set_xlabel(key)
    ax2.set_ylabel(weight)
    ax2.set_title(last_query if last_query is not None else f"query i = {length - 1}")
    ax2.legend(fontsize=10, loc="upper left")
    fig.tight_layout()
    return fig


def encoder_decoder_diagram(labels: dict[str, str]) -> plt.Figure:
    """The pre-LN encoder-decoder of chapter 7 as boxes and arrows, read from the bottom up: each stack embeds its
    tokens and adds the positional encoding, runs its blocks of sub-layers (blue: each adds its output, computed
    from the LayerNorm of its input, to that input) and ends with a LayerNorm; the encoder's output is the memory that
    every decoder block's cross-attention reads; the decoder ends in the output layer.

    ``labels`` maps ``source``, ``target``, ``embed``, ``self``, ``causal``, ``cross``, ``ffn``, ``norm``, ``output``,
    ``memory``, ``encoder``, ``decoder``, ``repeat`` (how many blocks each stack repeats) and ``note`` to the text
    to draw, in the page's language."""
    needed = ("source", "target", "embed", "self", "causal", "cross", "ffn", "norm", "output", "memory", "encoder",
              "decoder", "repeat", "note")
    missing = [k for k in needed if k not in labels]
    if missing:
        raise ValueError(f"labels is missing {missing}")
    fig, ax = plt.subplots(figsize=(5.0, 5.0))
    ax.set_xlim(0, 10)
    ax.set_ylim(-0.2, 10.6)
    ax.axis("off")
    plain = {"boxstyle": "round,pad=0.35", "facecolor": "white", "edgecolor": GREY, "linewidth": 1.0}
    sub = {"boxstyle": "round,pad=0.35", "facecolor": "#e8f1f8", "edgecolor": PALETTE[0], "linewidth": 1.0}
    arrow = {"arrowstyle": "-|>", "color": GREY, "lw": 1.0, "shrinkA": 0, "shrinkB": 0}

    def node(x, y, text, style=None):
        ax.text(x, y, text, ha="center", va="center", fontsize=9, bbox=style, linespacing=1.25)

    def up(x, y0, y1):
        ax.annotate("", xy=(x, y1), xytext=(x, y0), arrowprops=arrow)

    step = 1.2  # between sub-layers
    stacks = {"encoder": (2.5, [labels["self"], labels["ffn"]], labels["source"]),
              "decoder": (7.5, [labels["causal"], labels["cross"], labels["ffn"]], labels["target"])}
    ends = {}
    for name, (x, sublayers, tokens) in stacks.items():
        node(x, 0.35, tokens)
        up(x, 0.85, 1.25)
        node(x, 1.75, labels["embed"], plain)
        up(x, 2.25, 2.85)
        first = 3.2
        top = first + step * (len(sublayers) - 1) + 0.6
        ax.add_patch(mpl.patches.FancyBboxPatch((x - 2.1, 2.65), 4.2, top - 2.65, boxstyle="round,pad=0.05",
                                                facecolor="none", edgecolor=GREY, linestyle="--", linewidth=1.0))
        ax.text(x - 2.05, top + 0.12, labels["repeat"], ha="left", va="bottom", fontsize=9,
                color=GREY)
        for i, text in enumerate(sublayers):
            y = first + step * i
            node(x, y, text, sub)
            if i:
                up(x, y - step + 0.3, y - 0.3)
            if text == labels["cross"]:
                ends["cross"] = (x - 1.3, y)
        y_norm = top + 0.9
        up(x, top - 0.6 + 0.3, y_norm - 0.3)
        node(x, y_norm, labels["norm"], plain)
        ends[name] = (x, y_norm)
        if name == "decoder":
            up(x, y_norm + 0.3, y_norm + 0.8)
            node(x, y_norm + 1.35, labels["output"], plain)
    for name, (x, _, _) in stacks.items():
        ax.text(x, 9.3, labels[name], ha="center", va="center", fontsize=10.5)
    ax.text(5.0, 10.2, labels["note"], ha="center", va="center", fontsize=9, color=PALETTE[0])
    # the memory: the encoder's last LayerNorm feeds the cross-attention of every decoder block
    (ex, ey), (cx, cy) = ends["encoder"], ends["cross"]
    ax.annotate("", xy=(cx, cy), xytext=(ex + 0.75, ey),
                arrowprops={**arrow, "color": PALETTE[1], "lw": 1.6, "connectionstyle": "arc3,rad=-0.25"})
    ax.text((ex + cx) / 2 + 0.5, ey + 0.15, labels["memory"], ha="center", va="bottom", fontsize=9, color="#8a5a00")
    fig.tight_layout(pad=0.2)
    return fig
