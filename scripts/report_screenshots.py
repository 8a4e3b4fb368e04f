"""Screenshots of every section of `xpubench report`, as headless Chromium draws the HTML page: one PNG per
section (docs/img/report-<anchor>.png), cropped to the section, 256 colours (a few hundred KB each).

    python3 scripts/report_screenshots.py RESULTS.jsonl [...] [--out docs/img] [--width 1100]

Each section is written alone into a page with the report's own CSS (html.page / html.section_html, the
code the report runs), drawn by `chromium --headless --screenshot` in a tall window, and the white below
it cut off. Needs chromium (apt-get install chromium) and Pillow. Prints each file and its size.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from xpubench import analysis
from xpubench.report.render import html
from xpubench.report.render.build import build_report

WINDOW_HEIGHT = 8000   # px: taller than any section; the white below it is cut


def browser() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if not found:
        sys.exit("report_screenshots.py: no chromium on PATH (apt-get install chromium)")
    return found


def shoot(page: Path, png: Path, width: int) -> None:
    subprocess.run([browser(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size={width},{WINDOW_HEIGHT}", f"--screenshot={png}", page.as_uri()],
                   check=True, capture_output=True, timeout=180)


def cropped(png: Path, margin: int = 12) -> Image.Image:
    """The screenshot from its first to its last non-white row (and a margin), in 256 colours."""
    image = Image.open(png).convert("RGB")
    ink = np.where((np.asarray(image) < 245).any(axis=2).any(axis=1))[0]
    top = max(0, int(ink[0]) - margin) if ink.size else 0
    bottom = min(image.height, int(ink[-1]) + margin) if ink.size else image.height
    return image.crop((0, top, image.width, bottom)).quantize(256, dither=Image.Dither.NONE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--out", default="docs/img", help="folder of the PNGs (default docs/img)")
    parser.add_argument("--width", type=int, default=1100, help="window width in CSS pixels (default 1100)")
    args = parser.parse_args(argv)
    report = build_report(analysis.load(args.files))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="xpubench-shots-") as work:
        for sec in report.sections:
            page, raw = Path(work) / f"{sec.anchor}.html", Path(work) / f"{sec.anchor}.png"
            page.write_text(html.page(sec.title, html.section_html(sec), heading=False), encoding="utf-8")
            shoot(page, raw, args.width)
            target = out / f"report-{sec.anchor}.png"
            cropped(raw).save(target, optimize=True)
            print(f"{target}  {target.stat().st_size / 1024:,.0f} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
