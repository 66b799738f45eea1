"""Lays the first 20 pictures of a captcha_samples directory out on one sheet, each with its
answer under it, at twice their size: docs/captcha-samples.png, to judge readability by eye.

Usage: python contact_sheet.py SAMPLES_DIR OUT.png
"""

import csv
import sys
from pathlib import Path

from PIL import Image, ImageDraw

COLUMNS, ROWS, PAD, LABEL, ZOOM = 4, 5, 8, 14, 2


def main(samples, out):
    samples = Path(samples)
    with open(samples / "labels.csv", newline="") as f:
        rows = list(csv.DictReader(f))[: COLUMNS * ROWS]
    pictures = [Image.open(samples / r["file"]).convert("RGB") for r in rows]
    width, height = pictures[0].size
    sheet = Image.new(
        "RGB",
        (COLUMNS * (width + PAD) + PAD, ROWS * (height + LABEL + PAD) + PAD),
        "white",
    )
    draw = ImageDraw.Draw(sheet)
    for n, (picture, row) in enumerate(zip(pictures, rows)):
        x = PAD + (n % COLUMNS) * (width + PAD)
        y = PAD + (n // COLUMNS) * (height + LABEL + PAD)
        sheet.paste(picture, (x, y))
        draw.text((x, y + height + 1), row["answer"], fill=(90, 90, 90))
    sheet = sheet.resize((sheet.width * ZOOM, sheet.height * ZOOM), Image.NEAREST)
    sheet.save(out, optimize=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
