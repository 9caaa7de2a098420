"""How small each figure's text is on the page, read from the notebooks' stored PNGs.

    python -m tools.figure_fonts [notebooks...]     # every chapter of both editions by default

``plotting.setup`` makes IPython store each figure's smallest text height (in image pixels) in the
PNG's metadata (``plotting.MIN_FONT_KEY``). The page shows an image at its own width, or shrunk to the
text column when it is wider; so in CSS pixels the smallest text is

    px_on_page = px_in_png × min(1, COLUMN_PX / png_width)

with ``COLUMN_PX`` the width of the text column of a chapter page in a 1280 px wide window (measured
in Chromium; tests/test_site.py checks it). A figure whose text is below ``MIN_PX`` on the desktop is
reported, and so is a figure without the metadata (not executed through ``plotting.setup``).
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
COLUMN_PX = 678  # the text column of a chapter page at 1280 px (Quarto's default book layout)
MIN_PX = 9.0  # smallest legible text on the desktop, in CSS pixels
KEY = "attnbook:min-font-px"  # = attnbook.plotting.MIN_FONT_KEY (not imported: no JAX needed here)


@dataclass(frozen=True)
class Figure:
    notebook: str
    cell: int
    label: str
    png_width: int
    png_px: float  # smallest text in image pixels; nan when the PNG has no metadata

    @property
    def page_px(self) -> float:
        return self.png_px * min(1.0, COLUMN_PX / self.png_width)

    def problem(self) -> str | None:
        if math.isnan(self.png_px):
            return f"no {KEY} in the PNG (re-execute the notebook)"
        if self.page_px < MIN_PX:
            return (f"smallest text {self.page_px:.1f} px on the page (< {MIN_PX:g}): {self.png_px:.1f} px in a "
                    f"{self.png_width} px wide image shown at most {COLUMN_PX} px wide")
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
            found.append(Figure(str(notebook.relative_to(ROOT)), index, label, image.width, px))
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    paths = [Path(a).resolve() for a in args] or sorted(ROOT.glob("chapters/*/*.ipynb"))
    bad = 0
    for path in paths:
        for fig in figures(path):
            problem = fig.problem()
            bad += problem is not None
            status = f"✗ {problem}" if problem else "✓"
            print(f"{fig.notebook} {fig.label}: {fig.page_px:.1f} px {status}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
