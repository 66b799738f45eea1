"""Solve vcode's image captchas with what an attacker who has the source can build in minutes.

Trains on labelled samples drawn by the renderer itself (examples/captcha_samples.rs) and
reports the share of fresh captchas solved whole (every character right) by three attacks:

- ink:    split the ink by colour, take connected components per colour (after an opening that
          drops single-pixel dots and thin clutter), order them left to right, classify each.
- slots:  cut the ink's horizontal extent into equal slots (positions nearly fixed), classify
          each slot.
- whole:  no segmentation: one small neural network per answer position on the whole picture.

Usage: python attack.py TRAIN_DIR TEST_DIR [--length 5]
"""

import argparse
import csv
import sys
import time
from pathlib import Path

import cv2
import numpy as np
from PIL import Image
from sklearn.neural_network import MLPClassifier

GLYPH_SIDE = 24  # classifier input: a glyph crop scaled into GLYPH_SIDE x GLYPH_SIDE
INK_COLOURS = 3  # the old renderer used three inks per picture
SEED = 7


def load(directory):
    """Pictures and their answers from a captcha_samples directory."""
    directory = Path(directory)
    with open(directory / "labels.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return [picture(directory / r["file"]) for r in rows], [r["answer"].upper() for r in rows]


class Picture:
    """A captcha as an attacker gets it: its colours, and its palette indices if it has one."""

    def __init__(self, colour, indices, palette_size):
        self.colour, self.indices, self.palette_size = colour, indices, palette_size


def picture(path):
    with Image.open(path) as image:
        if image.mode == "P":
            indices = np.array(image)
            palette_size = len(image.getpalette()) // 3
        else:
            indices, palette_size = None, None
        colour = np.array(image.convert("RGB"))
    return Picture(colour, indices, palette_size)


def darkness(image):
    """0..255 per pixel: how far it is from the background (taken from the picture's border)."""
    border = np.concatenate([image[0], image[-1], image[:, 0], image[:, -1]]).astype(np.float32)
    background = np.median(border, axis=0)
    diff = np.clip(background - image.astype(np.float32), 0, None)
    return diff.mean(axis=2), diff


def open_mask(mask, side):
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (side, side))
    return cv2.morphologyEx(mask.astype(np.uint8), cv2.MORPH_OPEN, kernel)


def fit_square(crop):
    """A crop scaled (aspect kept) and centred into GLYPH_SIDE x GLYPH_SIDE, values 0..1."""
    h, w = crop.shape
    if h == 0 or w == 0:
        return np.zeros((GLYPH_SIDE, GLYPH_SIDE), np.float32)
    scale = (GLYPH_SIDE - 2) / max(h, w)
    resized = cv2.resize(
        crop.astype(np.float32),
        (max(1, round(w * scale)), max(1, round(h * scale))),
        interpolation=cv2.INTER_AREA,
    )
    out = np.zeros((GLYPH_SIDE, GLYPH_SIDE), np.float32)
    y, x = (GLYPH_SIDE - resized.shape[0]) // 2, (GLYPH_SIDE - resized.shape[1]) // 2
    out[y : y + resized.shape[0], x : x + resized.shape[1]] = resized
    return out / max(out.max(), 1e-6)


def ink_layers(image):
    """Which ink each pixel has (-1 for none), and the pixel darkness. A picture with a small
    palette gives its inks away: the old renderer wrote background, then five shades of each
    of three inks. Otherwise the ink colours are clustered by direction away from the
    background, which every shade of one ink shares whatever its coverage."""
    dark, diff = darkness(image.colour)
    if image.indices is not None and image.palette_size <= 16:
        index = image.indices.astype(int)
        return np.where(index > 0, (index - 1) // 5, -1), dark
    ink = dark > 60
    layer = np.full(dark.shape, -1)
    if ink.sum() < INK_COLOURS:
        return layer, dark
    direction = diff[ink] / np.linalg.norm(diff[ink], axis=1, keepdims=True).clip(1e-6)
    criteria = (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 20, 1e-3)
    cv2.setRNGSeed(SEED)
    _, labels, _ = cv2.kmeans(
        direction.astype(np.float32), INK_COLOURS, None, criteria, 2, cv2.KMEANS_PP_CENTERS
    )
    layer[ink] = labels.ravel()
    return layer, dark


def column_runs(columns, gap):
    """Runs of sorted column numbers, split where more than `gap` columns are missing."""
    runs, start, last = [], None, None
    for x in columns:
        if start is None:
            start = last = x
            continue
        if x - last > gap:
            runs.append((start, last + 1))
            start = x
        last = x
    if start is not None:
        runs.append((start, last + 1))
    return runs


def segment_by_ink(image, length):
    """`length` glyph crops, one per run of columns of one ink, left to right, or None. When
    neighbours never share an ink, one ink's pixels fall apart into one run per glyph."""
    layer, dark = ink_layers(image)
    pieces = []
    for colour in range(layer.max() + 1):
        # The opening drops dots and strokes thinner than the glyphs' (the old wave).
        core = open_mask(layer == colour, 5)
        mass = core.sum(axis=0).astype(np.int64)
        for left, right in column_runs(np.nonzero(mass)[0], 2):
            if mass[left:right].sum() >= 60:
                rows = np.nonzero(core[:, left:right].any(axis=1))[0]
                top, bottom = rows.min(), rows.max() + 1
                glyph = (layer[top:bottom, left:right] == colour) * dark[top:bottom, left:right]
                pieces.append((mass[left:right].sum(), (left + right) / 2, left, right - left, glyph))
    if not pieces:
        return None
    pieces.sort(key=lambda p: -p[0])
    pieces = pieces[:length]
    # Too few: cut the widest in two until there are enough.
    while len(pieces) < length:
        widest = max(range(len(pieces)), key=lambda i: pieces[i][3])
        mass, _, x, w, glyph = pieces.pop(widest)
        if w < 4:
            return None
        half = w // 2
        pieces.append((mass / 2, x + half / 2, x, half, glyph[:, :half]))
        pieces.append((mass / 2, x + half + (w - half) / 2, x + half, w - half, glyph[:, half:]))
    pieces.sort(key=lambda p: p[1])
    return [fit_square(p[4]) for p in pieces]


def segment_by_slots(image, length):
    """The ink's horizontal extent cut into `length` equal slots, each widened by a fifth."""
    dark, _ = darkness(image.colour)
    ink = open_mask(dark > 60, 3)
    columns = np.nonzero(ink.sum(axis=0) >= 2)[0]
    if len(columns) == 0:
        return None
    left, right = columns.min(), columns.max() + 1
    pitch = (right - left) / length
    crops = []
    for i in range(length):
        x0 = int(max(0, left + (i - 0.2) * pitch))
        x1 = int(min(image.colour.shape[1], left + (i + 1.2) * pitch))
        crops.append(fit_square(dark[:, x0:x1]))
    return crops


def whole_features(image):
    dark, _ = darkness(image.colour)
    small = cv2.resize(dark, (dark.shape[1] // 2, dark.shape[0] // 2), interpolation=cv2.INTER_AREA)
    return (small / 255.0).ravel()


def glyph_dataset(images, answers, segment, length):
    xs, ys = [], []
    for image, answer in zip(images, answers):
        crops = segment(image, length)
        if crops is None:
            continue
        for crop, char in zip(crops, answer):
            xs.append(crop.ravel())
            ys.append(char)
    return np.array(xs), np.array(ys)


def classifier():
    return MLPClassifier(
        hidden_layer_sizes=(256,),
        early_stopping=True,
        max_iter=200,
        random_state=SEED,
    )


def attack_by_glyphs(name, segment, train, test, length):
    started = time.time()
    x, y = glyph_dataset(*train, segment, length)
    model = classifier().fit(x, y)
    solved = chars_right = 0
    for image, answer in zip(*test):
        crops = segment(image, length)
        if crops is None:
            continue
        guess = "".join(model.predict(np.array([c.ravel() for c in crops])))
        solved += guess == answer
        chars_right += sum(a == b for a, b in zip(guess, answer))
    report(name, solved, chars_right, len(test[1]), length, time.time() - started)


def attack_whole(train, test, length):
    started = time.time()
    x = np.array([whole_features(i) for i in train[0]])
    x_test = np.array([whole_features(i) for i in test[0]])
    guesses = [""] * len(x_test)
    for position in range(length):
        y = [a[position] for a in train[1]]
        model = classifier().fit(x, y)
        for n, char in enumerate(model.predict(x_test)):
            guesses[n] += char
    solved = sum(g == a for g, a in zip(guesses, test[1]))
    chars_right = sum(sum(p == q for p, q in zip(g, a)) for g, a in zip(guesses, test[1]))
    report("whole", solved, chars_right, len(test[1]), length, time.time() - started)


def report(name, solved, chars_right, total, length, seconds):
    print(
        f"{name:6} solved {solved}/{total} = {100 * solved / total:.1f} % "
        f"(characters {100 * chars_right / (total * length):.1f} %), {seconds:.0f} s",
        flush=True,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("train")
    parser.add_argument("test")
    parser.add_argument("--length", type=int, default=5)
    parser.add_argument("--only", choices=["ink", "slots", "whole"])
    args = parser.parse_args()
    train, test = load(args.train), load(args.test)
    print(f"{len(train[1])} training and {len(test[1])} fresh captchas", flush=True)
    attacks = {
        "ink": lambda: attack_by_glyphs("ink", segment_by_ink, train, test, args.length),
        "slots": lambda: attack_by_glyphs("slots", segment_by_slots, train, test, args.length),
        "whole": lambda: attack_whole(train, test, args.length),
    }
    for name, run in attacks.items():
        if args.only in (None, name):
            run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
