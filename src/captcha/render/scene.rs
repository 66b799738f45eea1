//! The layout of one captcha: every random choice comes from one generator seeded with the
//! picture's seed, so a seed always gives the same picture.
//!
//! Each glyph gets a font, size, tilt and height of its own; the gaps between glyphs vary and
//! are often negative, so glyphs touch and overlap and no slot is fixed; a sine warp bends the
//! whole word; clutter strokes as thick as the glyphs' stems cross it.

use std::ops::Range;

use ab_glyph::{Font, Outline, Point, point};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::fonts::{CaptchaFont, FONTS};
use super::paint::{Colours, Coverage, Picture};
use super::shape::{Fill, Shape};

/// Glyph size (`PxScale`, a font's ascent-to-descent height) as a share of the picture height.
const HEIGHT_FILL: f32 = 0.74;
/// Glyph size as a multiple of the width each character gets, for long answers in narrow
/// pictures.
const WIDTH_FILL: f32 = 1.5;
/// Per-glyph size jitter.
const SIZE_JITTER: Range<f32> = 0.86..1.06;
/// Largest tilt of one glyph, in radians (about 17 degrees): more starts to turn N and 7 into
/// Z.
const MAX_TILT: f32 = 0.3;
/// Space between neighbouring glyphs' tilted ink boxes, as a share of the glyph size: mostly
/// negative, so that most neighbours touch or overlap a little.
const GAP: Range<f32> = -0.08..0.06;
/// Vertical jitter of a glyph's centre, as a share of the glyph size.
const RISE_JITTER: f32 = 0.16;

/// Draws `answer` with the randomness of `seed`. The caller has checked the answer's length and
/// characters and the size. `filler` turns each shape into coverage.
pub(super) fn draw(
    answer: &str,
    seed: u64,
    width: usize,
    height: usize,
    filler: &mut impl Fill,
) -> Picture {
    let mut rng = StdRng::seed_from_u64(seed);
    let colours = Colours::random(&mut rng, width);
    let chars = answer.chars().count();
    // Every distortion is scaled by the glyph size, so odd aspect ratios keep the same look.
    let size = (height as f32 * HEIGHT_FILL).min(width as f32 / chars as f32 * WIDTH_FILL);
    let warp = Warp::new(&mut rng, width, height, size);
    let glyphs: Vec<Glyph> = answer
        .chars()
        .map(|c| Glyph::random(&mut rng, c, size))
        .collect();

    let mut coverage = Coverage::new(width, height);
    let mut shape = Shape::new();
    let word = place_glyphs(&mut rng, &glyphs, &warp, size, width, height);
    // All glyphs as one shape, one pass over the word. Every glyph's winding is 0 or 1
    // everywhere (outer contours all turn one way in a TrueType font, counters the other), so
    // where glyphs overlap the sum is at least 1 and stays ink; holes stay holes.
    for (glyph, centre) in glyphs.iter().zip(&word.centres) {
        glyph.trace(&mut shape, *centre, &warp);
    }
    shape.fill(filler, &mut coverage);
    // As thick as the thinnest stems in the picture: thick enough that an opening which
    // drops it drops those glyphs too, and no thicker, for people's sake.
    let stroke = glyphs
        .iter()
        .map(|glyph| glyph.scale * glyph.font.font.height_unscaled() * glyph.font.stem)
        .fold(f32::MAX, f32::min);
    cross_word(&mut rng, &mut shape, &word, size, height as f32, stroke);
    shape.fill(filler, &mut coverage);
    Picture { coverage, colours }
}

/// One character as it will be drawn: its font's outline, scale and tilt, and the half extents
/// of its tilted ink box in pixels.
struct Glyph {
    font: &'static CaptchaFont,
    outline: Outline,
    /// Pixels per font unit.
    scale: f32,
    sin: f32,
    cos: f32,
    half_width: f32,
    half_height: f32,
}

impl Glyph {
    fn random(rng: &mut StdRng, c: char, size: f32) -> Self {
        let font = &FONTS[rng.random_range(0..FONTS.len())];
        // Every character of the alphabet has an outline in every font (a test checks), so
        // the empty fallback only guards against a font swapped without running the tests.
        let outline = font.font.outline(font.font.glyph_id(c)).unwrap_or(Outline {
            bounds: ab_glyph::Rect::default(),
            curves: Vec::new(),
        });
        let scale = size / font.font.height_unscaled() * rng.random_range(SIZE_JITTER);
        let (sin, cos) = rng.random_range(-MAX_TILT..MAX_TILT).sin_cos();
        let bounds = outline.bounds;
        // Font outline bounds are y-up with the top in `min`, so the height comes out negative.
        let (ink_w, ink_h) = (bounds.width() * scale, bounds.height().abs() * scale);
        Self {
            font,
            half_width: (cos * ink_w + sin.abs() * ink_h) / 2.0,
            half_height: (sin.abs() * ink_w + cos * ink_h) / 2.0,
            outline,
            scale,
            sin,
            cos,
        }
    }

    /// Adds the glyph's outline to `shape`, tilted about its ink centre, placed at `centre`
    /// and warped. The outline is transformed as vectors and rasterised once, which is sharper
    /// and cheaper than rasterising upright and resampling the bitmap.
    fn trace(&self, shape: &mut Shape, centre: Point, warp: &Warp) {
        let bounds = self.outline.bounds;
        let mid = point(
            (bounds.min.x + bounds.max.x) / 2.0,
            (bounds.min.y + bounds.max.y) / 2.0,
        );
        // Font units (y up) about the ink centre, to tilted, placed and warped pixels (y down).
        let place = |p: Point| {
            let (x, y) = ((p.x - mid.x) * self.scale, (mid.y - p.y) * self.scale);
            warp.apply(point(
                centre.x + x * self.cos - y * self.sin,
                centre.y + x * self.sin + y * self.cos,
            ))
        };
        for curve in &self.outline.curves {
            shape.curve(curve, self.scale, place);
        }
    }
}

/// Where the glyphs went.
struct Word {
    centres: Vec<Point>,
    /// Horizontal extent of the glyphs' ink boxes.
    span: Range<f32>,
}

/// Lays the glyphs out left to right with random gaps (mostly overlaps), at a random place in
/// the picture, keeping every tilted glyph (plus the warp) inside it.
fn place_glyphs(
    rng: &mut StdRng,
    glyphs: &[Glyph],
    warp: &Warp,
    size: f32,
    width: usize,
    height: usize,
) -> Word {
    let (w, h) = (width as f32, height as f32);
    let (margin_x, margin_y) = (warp.reach_x + 2.0, warp.reach_y + 2.0);
    let mut gaps: Vec<f32> = (1..glyphs.len())
        .map(|_| rng.random_range(GAP) * size)
        .collect();
    let inked: f32 = glyphs.iter().map(|g| 2.0 * g.half_width).sum();
    let room = w - 2.0 * margin_x;
    let over = inked + gaps.iter().sum::<f32>() - room;
    if over > 0.0 {
        // Too wide for the picture: every gap gives up an equal share.
        let share = over / gaps.len() as f32;
        gaps.iter_mut().for_each(|gap| *gap -= share);
    }
    let length = inked + gaps.iter().sum::<f32>();
    let slack = (room - length).max(0.0);
    let start = margin_x + rng.random_range(0.0..=slack);
    let mut x = start;
    let centres = glyphs
        .iter()
        .enumerate()
        .map(|(i, glyph)| {
            let centre_x = x + glyph.half_width;
            x = centre_x + glyph.half_width + gaps.get(i).copied().unwrap_or(0.0);
            let rise = rng.random_range(-RISE_JITTER..RISE_JITTER) * size;
            let centre_y = fit(
                h / 2.0 + rise,
                margin_y + glyph.half_height,
                h - margin_y - glyph.half_height,
            );
            point(centre_x, centre_y)
        })
        .collect();
    Word {
        centres,
        span: start..start + length,
    }
}

/// Clamps `v` into `lo..=hi`, or centres it when the range is empty (a glyph taller than its
/// room).
fn fit(v: f32, lo: f32, hi: f32) -> f32 {
    if lo > hi {
        (lo + hi) / 2.0
    } else {
        v.clamp(lo, hi)
    }
}

/// A bent stroke across the whole word and past its ends, through the middle of the glyphs
/// (where a bar reads as strike-through; along their tops or bottoms it turns F into E and 7
/// into T). It joins the glyphs into one connected blob, so connected components no longer
/// segment them, and is as thick as their stems, so an opening cannot drop it.
fn cross_word(rng: &mut StdRng, shape: &mut Shape, word: &Word, size: f32, h: f32, width: f32) {
    let band = |rng: &mut StdRng, reach: f32| h / 2.0 + rng.random_range(-reach..reach) * size;
    let start = point(
        word.span.start - rng.random_range(0.05..0.35) * size,
        band(rng, 0.12),
    );
    let end = point(
        word.span.end + rng.random_range(0.05..0.35) * size,
        band(rng, 0.12),
    );
    let bend = point((start.x + end.x) / 2.0, band(rng, 0.25));
    shape.stroke(start, bend, end, width);
}

/// A sine displacement of the text: the point (x, y) is drawn at (x + dx(y), y + dy(x)). It bends
/// the baseline and shears strokes differently along the word, which defeats template matching
/// against the clean fonts while staying easy for people. Tabulated per whole pixel and
/// interpolated, so warping an outline point costs no trigonometry.
struct Warp {
    dx: Vec<f32>,
    dy: Vec<f32>,
    /// Largest |dx| and |dy|, for margins.
    reach_x: f32,
    reach_y: f32,
}

impl Warp {
    fn new(rng: &mut StdRng, width: usize, height: usize, size: f32) -> Self {
        let tau = std::f32::consts::TAU;
        let reach_x = rng.random_range(0.025..0.06) * size;
        let reach_y = rng.random_range(0.05..0.1) * size;
        let wave_x = tau / (rng.random_range(0.8..1.4) * size);
        let wave_y = tau / (rng.random_range(2.0..3.5) * size);
        let (phase_x, phase_y) = (rng.random_range(0.0..tau), rng.random_range(0.0..tau));
        Self {
            dx: sine_table(height + 1, reach_x, wave_x, phase_x),
            dy: sine_table(width + 1, reach_y, wave_y, phase_y),
            reach_x,
            reach_y,
        }
    }

    fn apply(&self, p: Point) -> Point {
        point(p.x + lookup(&self.dx, p.y), p.y + lookup(&self.dy, p.x))
    }
}

/// `amplitude * sin(k * wave + phase)` for k in 0..len.
fn sine_table(len: usize, amplitude: f32, wave: f32, phase: f32) -> Vec<f32> {
    (0..len)
        .map(|k| amplitude * (k as f32 * wave + phase).sin())
        .collect()
}

/// Linear interpolation in a table sampled at 0, 1, 2, ... (at least two entries, which every
/// allowed picture size gives); clamped at both ends.
fn lookup(table: &[f32], at: f32) -> f32 {
    let last = table.len() - 1;
    let at = at.clamp(0.0, last as f32);
    let i = (at as usize).min(last - 1);
    let (a, b) = (table[i], table[i + 1]);
    a + (b - a) * (at - i as f32)
}
