"""How small each figure's text is on the page, and whether its colours hold for colour-blind readers,
read from the notebooks' stored PNGs.

    python -m tools.figure_fonts [notebooks...]     # every chapter of both editions by default

``plotting.setup`` makes IPython store each figure's smallest text height (in image pixels) in the
PNG's metadata (``plotting.MIN_FONT_KEY``). The page shows an image at its own width, or shrunk to the
text column when it is wider; so in CSS pixels the smallest text is

    px_on_page = px_in_png × min(1, column / png_width)

with ``column`` the width of the text column of a chapter page: ``COLUMN_PX`` in a 1280 px wide window,
``PHONE_COLUMN_PX`` on a 390 px wide phone (both measured in Chromium; tests/site/test_site_views.py checks them).
A figure whose text is below ``MIN_PX`` on the desktop or below ``PHONE_MIN_PX`` on the phone is
reported, and so is a figure without the metadata (not executed through ``plotting.setup``). A phone
shrinks a figure about half as much again as the desktop, so a figure made wider than the column
(many panels in a row, long tick labels) is the usual culprit: at most 5 in wide at 100 dpi, and
a few ticks per axis, keeps its text legible on both.

Colour (issue 24: "palettes are colour-blind safe, and no meaning is carried by colour alone"). The PNG
also records the colours of the figure's lines, markers and patches (``attnbook:colours``), its colour
maps (``attnbook:colormaps``) and the legend entries that differ from another entry by colour alone
(``attnbook:colour-only-legend``, ``none`` when every entry also differs in line style, marker or hatch).

* Every pair of a figure's colours is seen as a reader with protanopia, deuteranopia or tritanopia sees
  it: the simulation of Machado, Oliveira and Fernandes (2009, "A physiologically-based model for
  simulation of color vision deficiency", IEEE TVCG 15(6)), its matrices for severity 1.0 applied to
  linear sRGB. The two simulated colours must stay at least ``MIN_DELTA_E`` apart in CIEDE2000
  (Sharma, Wu and Dalal 2005's formulation, checked against their test data in tests/book/test_figures.py;
  the matrices and the formula are colour-science's, ``colour.blindness.matrix_cvd_Machado2009`` and
  ``colour.delta_E(..., method="CIE 2000")``, imported only when colours are compared): CIEDE2000 rather
  than the CIELAB distance ΔE*ab because it corrects CIELAB's known non-uniformity (blues, saturated
  colours), so one threshold means the same everywhere. 2.3 is a just-noticeable difference between
  two large patches side by side; a thin line or a 5-pixel marker compared with a legend needs several
  times that (small targets look less different, Carter and Silverstein 2010), hence 10: about 4 JND,
  which Okabe and Ito's palette keeps (its closest pair is 10.9 under tritanopia) and matplotlib's
  default keeps not (its orange and green are 1.3 apart under protanopia).
* Colour maps must be ones that are ordered by lightness or made for colour-vision deficiency
  (``SAFE_COLORMAPS``), so that their values read without hue.
* No legend may tell entries apart by colour alone.
"""

from __future__ import annotations

import base64
import io
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
COLUMN_PX = 663  # the text column of a chapter page at 1280 px (Quarto's default book layout)
PHONE_COLUMN_PX = 339  # the same at 390 px, a phone
MIN_PX = 9.0  # smallest legible text on the desktop, in CSS pixels
PHONE_MIN_PX = 8.0  # on a phone, read closer to the eye
KEY = "attnbook:min-font-px"  # = attnbook.plotting.MIN_FONT_KEY (not imported: no JAX needed here)
COLOURS_KEY = "attnbook:colours"  # = plotting.COLOURS_KEY
COLORMAPS_KEY = "attnbook:colormaps"  # = plotting.COLORMAPS_KEY
COLOUR_ONLY_KEY = "attnbook:colour-only-legend"  # = plotting.COLOUR_ONLY_KEY
MIN_DELTA_E = 10.0  # CIEDE2000 between any two colours of one figure, under each simulated deficiency
# Sequential maps that rise monotonically in lightness (viridis, cividis, greys) and the diverging
# red-blue map, whose two arms differ in lightness from its white centre and in the blue-yellow axis
# that protanopes and deuteranopes keep.
SAFE_COLORMAPS = {"viridis", "cividis", "Greys", "Greys_r", "gray", "gray_r", "RdBu", "RdBu_r", "magma",
                  "inferno", "plasma"}

# Machado et al. (2009), severity 1.0 (their matrices, from colour-science): the deficiency -> colour-science's name.
MACHADO = {"protanopia": "Protanomaly", "deuteranopia": "Deuteranomaly", "tritanopia": "Tritanomaly"}


def _labs(colours: list[str], deficiency: str | None = None):
    """CIELAB (D65) of each "#rrggbb", as seen with ``deficiency`` (a key of MACHADO) or normal vision: an
    array of shape (len(colours), 3). The simulation is applied to linear sRGB, clipped to its gamut."""
    import warnings

    import colour
    import numpy as np

    srgb = np.array([[int(c[k:k + 2], 16) / 255 for k in (1, 3, 5)] for c in colours], dtype=float)
    linear = colour.models.eotf_sRGB(srgb)
    if deficiency is not None:
        with warnings.catch_warnings():  # its note that tritanomaly's matrices are an approximation
            warnings.simplefilter("ignore", colour.utilities.ColourUsageWarning)
            matrix = colour.blindness.matrix_cvd_Machado2009(MACHADO[deficiency], 1.0)
        linear = np.clip(linear @ matrix.T, 0.0, 1.0)
    xyz = colour.RGB_to_XYZ(linear, "sRGB")  # linear RGB: no decoding
    return colour.XYZ_to_Lab(xyz, colour.RGB_COLOURSPACES["sRGB"].whitepoint)


def lab(colour: str, deficiency: str | None = None) -> tuple[float, float, float]:
    """CIELAB (D65) of "#rrggbb", as seen with ``deficiency`` (a key of MACHADO) or normal vision."""
    return tuple(float(v) for v in _labs([colour], deficiency)[0])


def ciede2000(lab1, lab2) -> float:
    """The CIEDE2000 colour difference (kL = kC = kH = 1), colour-science's (Sharma, Wu and Dalal 2005)."""
    import colour

    return float(colour.delta_E(lab1, lab2, method="CIE 2000"))


def closest_colours(colours: list[str]) -> tuple[float, str, str, str] | None:
    """The smallest CIEDE2000 between two of ``colours`` under any deficiency (or normal vision):
    (distance, colour, colour, vision), or None for fewer than two colours."""
    import colour
    import numpy as np

    if len(colours) < 2:
        return None
    i, j = np.triu_indices(len(colours), k=1)
    found = None
    for vision in (None, *MACHADO):
        labs = _labs(colours, vision)
        distances = colour.delta_E(labs[i], labs[j], method="CIE 2000")
        k = int(np.argmin(distances))
        if found is None or distances[k] < found[0]:
            found = (float(distances[k]), colours[i[k]], colours[j[k]], vision or "normal vision")
    return found


@dataclass(frozen=True)
class Figure:
    notebook: str
    cell: int
    label: str
    png_width: int
    png_px: float  # smallest text in image pixels; nan when the PNG has no metadata
    colours: tuple[str, ...] | None = None  # None when the PNG has no colour metadata
    colormaps: tuple[str, ...] = ()
    colour_only_legend: str | None = None  # "none", or the entries told apart by colour alone

    def colour_problem(self) -> str | None:
        """Why a colour-blind reader could misread the figure, or None."""
        if self.colours is None or self.colour_only_legend is None:
            return f"no {COLOURS_KEY} / {COLOUR_ONLY_KEY} in the PNG (re-execute the notebook)"
        problems = []
        closest = closest_colours(list(self.colours))
        if closest is not None and closest[0] < MIN_DELTA_E:
            problems.append(f"{closest[1]} and {closest[2]} are {closest[0]:.1f} apart (CIEDE2000) under "
                            f"{closest[3]}, < {MIN_DELTA_E:g}")
        unsafe = sorted(set(self.colormaps) - SAFE_COLORMAPS)
        if unsafe:
            problems.append(f"colour map(s) {', '.join(unsafe)} not in SAFE_COLORMAPS")
        if self.colour_only_legend != "none":
            problems.append(f"legend entries told apart by colour alone: {self.colour_only_legend}")
        return "; ".join(problems) or None

    @property
    def page_px(self) -> float:
        """The smallest text on the desktop page, in CSS pixels."""
        return self.png_px * min(1.0, COLUMN_PX / self.png_width)

    @property
    def phone_px(self) -> float:
        """The smallest text on a phone's page, in CSS pixels."""
        return self.png_px * min(1.0, PHONE_COLUMN_PX / self.png_width)

    def problem(self, phone: bool = False) -> str | None:
        """Why the figure's text is too small on the desktop (or, with ``phone``, on a phone), or None."""
        if math.isnan(self.png_px):
            return f"no {KEY} in the PNG (re-execute the notebook)"
        px, least, column = ((self.phone_px, PHONE_MIN_PX, PHONE_COLUMN_PX) if phone
                             else (self.page_px, MIN_PX, COLUMN_PX))
        if px < least:
            return (f"smallest text {px:.1f} px on the {'phone' if phone else 'desktop'} page (< {least:g}): "
                    f"{self.png_px:.1f} px in a {self.png_width} px wide image shown at most {column} px wide")
        return None


def figures(notebook: Path) -> list[Figure]:
    """Every PNG output of ``notebook``, with the cell's ``#| label:`` (or ``cell N``)."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    found = []
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        label = next((line.split(":", 1)[1].strip() for line in source.splitlines()
                      if line.startswith("#| label:")), f"cell {index}")
        for output in cell.get("outputs", []):
            data = output.get("data", {}).get("image/png")
            if data is None:
                continue
            image = Image.open(io.BytesIO(base64.b64decode("".join(data))))
            px = float(image.info.get(KEY, "nan"))
            colours = image.info.get(COLOURS_KEY)
            found.append(Figure(str(notebook.relative_to(ROOT)), index, label, image.width, px,
                                None if colours is None else tuple(c for c in colours.split(",") if c),
                                tuple(c for c in image.info.get(COLORMAPS_KEY, "").split(",") if c),
                                image.info.get(COLOUR_ONLY_KEY)))
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    paths = [Path(a).resolve() for a in args] or sorted(ROOT.glob("chapters/*/*.ipynb"))
    bad = 0
    for path in paths:
        for fig in figures(path):
            problem = fig.problem() or fig.problem(phone=True)
            colour = fig.colour_problem()
            bad += problem is not None or colour is not None
            status = f"✗ {problem}" if problem else "✓"
            closest = closest_colours(list(fig.colours or ()))
            print(f"{fig.notebook} {fig.label}: {fig.page_px:.1f} px, phone {fig.phone_px:.1f} px {status}; colours "
                  + (f"{closest[0]:.1f} apart" if closest else "-") + (f" ✗ {colour}" if colour else " ✓"))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
