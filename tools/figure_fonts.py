"""How small each figure's text is on the page, and whether its colours hold for colour-blind readers,
read from the notebooks' stored PNGs.

    python -m tools.figure_fonts [notebooks...]     # every chapter of both editions by default

``plotting.setup`` makes IPython store each figure's smallest text height (in image pixels) in the
PNG's metadata (``plotting.MIN_FONT_KEY``). The page shows an image at its own width, or shrunk to the
text column when it is wider; so in CSS pixels the smallest text is

    px_on_page = px_in_png × min(1, column / png_width)

with ``column`` the width of the text column of a chapter page: ``COLUMN_PX`` in a 1280 px wide window,
``PHONE_COLUMN_PX`` on a 390 px wide phone (both measured in Chromium; tests/site/test_site.py checks them).
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
  (Sharma, Wu and Dalal 2005's formulation, checked here against their test data): CIEDE2000 rather
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

# Machado et al. (2009), severity 1.0: linear sRGB -> linear sRGB as the deficiency sees it.
MACHADO = {
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216),
                   (-0.003882, -0.048116, 1.051998)),
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413),
                     (-0.011820, 0.042940, 0.968881)),
    "tritanopia": ((1.255528, -0.076749, -0.178779), (-0.078411, 0.930809, 0.147602),
                   (0.004733, 0.691367, 0.303900)),
}


def _linear(channel: float) -> float:
    return channel / 12.92 if channel <= 0.04045 else ((channel + 0.055) / 1.055) ** 2.4


def lab(colour: str, deficiency: str | None = None) -> tuple[float, float, float]:
    """CIELAB (D65) of "#rrggbb", as seen with ``deficiency`` (a key of MACHADO) or normal vision."""
    rgb = [_linear(int(colour[k:k + 2], 16) / 255) for k in (1, 3, 5)]
    if deficiency is not None:
        rgb = [min(1.0, max(0.0, sum(m * c for m, c in zip(row, rgb)))) for row in MACHADO[deficiency]]
    xyz = [sum(m * c for m, c in zip(row, rgb)) for row in (
        (0.4124564, 0.3575761, 0.1804375), (0.2126729, 0.7151522, 0.0721750), (0.0193339, 0.1191920, 0.9503041))]
    f = [t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29
         for t in (xyz[0] / 0.95047, xyz[1] / 1.0, xyz[2] / 1.08883)]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def ciede2000(lab1: tuple[float, float, float], lab2: tuple[float, float, float]) -> float:
    """The CIEDE2000 colour difference (kL = kC = kH = 1), as Sharma, Wu and Dalal (2005) write it."""
    (l1, a1, b1), (l2, a2, b2) = lab1, lab2
    c_mean = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(c_mean ** 7 / (c_mean ** 7 + 25 ** 7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = math.hypot(a1p, b1), math.hypot(a2p, b2)
    h1p = math.degrees(math.atan2(b1, a1p)) % 360 if c1p else 0.0
    h2p = math.degrees(math.atan2(b2, a2p)) % 360 if c2p else 0.0
    dh = 0.0 if c1p * c2p == 0 else (h2p - h1p + 180) % 360 - 180
    d_l, d_c = l2 - l1, c2p - c1p
    d_h = 2 * math.sqrt(c1p * c2p) * math.sin(math.radians(dh / 2))
    l_mean, cp_mean = (l1 + l2) / 2, (c1p + c2p) / 2
    if c1p * c2p == 0:
        h_mean = h1p + h2p
    elif abs(h1p - h2p) <= 180:
        h_mean = (h1p + h2p) / 2
    else:
        h_mean = (h1p + h2p + 360) / 2 if h1p + h2p < 360 else (h1p + h2p - 360) / 2
    t = (1 - 0.17 * math.cos(math.radians(h_mean - 30)) + 0.24 * math.cos(math.radians(2 * h_mean))
         + 0.32 * math.cos(math.radians(3 * h_mean + 6)) - 0.20 * math.cos(math.radians(4 * h_mean - 63)))
    d_theta = 30 * math.exp(-(((h_mean - 275) / 25) ** 2))
    r_c = 2 * math.sqrt(cp_mean ** 7 / (cp_mean ** 7 + 25 ** 7))
    s_l = 1 + 0.015 * (l_mean - 50) ** 2 / math.sqrt(20 + (l_mean - 50) ** 2)
    s_c, s_h = 1 + 0.045 * cp_mean, 1 + 0.015 * cp_mean * t
    r_t = -math.sin(math.radians(2 * d_theta)) * r_c
    return math.sqrt((d_l / s_l) ** 2 + (d_c / s_c) ** 2 + (d_h / s_h) ** 2 + r_t * (d_c / s_c) * (d_h / s_h))


def closest_colours(colours: list[str]) -> tuple[float, str, str, str] | None:
    """The smallest CIEDE2000 between two of ``colours`` under any deficiency (or normal vision):
    (distance, colour, colour, vision), or None for fewer than two colours."""
    found = None
    for vision in (None, *MACHADO):
        labs = [lab(c, vision) for c in colours]
        for i in range(len(colours)):
            for j in range(i + 1, len(colours)):
                d = ciede2000(labs[i], labs[j])
                if found is None or d < found[0]:
                    found = (d, colours[i], colours[j], vision or "normal vision")
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
