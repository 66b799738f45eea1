//! What has been drawn (ink coverage per pixel) and how it is coloured.
//!
//! One coverage layer for glyphs and clutter alike, coloured by one ink field: a pixel's colour
//! tells how much ink it has and where it is, never which glyph or stroke put the ink there, so
//! neighbouring glyphs and the clutter crossing them share their ink.

use std::ops::RangeInclusive;

use rand::RngExt;
use rand::rngs::StdRng;

/// Background channels: light, and varying across the picture and between pictures.
const BACKGROUND: RangeInclusive<u8> = 226..=250;
/// Ink channels before the darkness cap below.
const INK: RangeInclusive<u8> = 0..=150;
/// Largest luma (Rec. 601, 0..=255) of an ink: on the darkest background that is a contrast of
/// about 6:1, above the 4.5:1 usually asked of text.
const MAX_INK_LUMA: f32 = 72.0;
/// Colour stops of the ink field, spread evenly across the picture.
const INK_STOPS: usize = 3;

/// Ink coverage of each pixel, 0 (none) to 255 (full), rows top to bottom.
pub(super) struct Coverage {
    pub width: usize,
    pub height: usize,
    cover: Vec<u8>,
}

impl Coverage {
    pub fn new(width: usize, height: usize) -> Self {
        Self {
            width,
            height,
            cover: vec![0; width * height],
        }
    }

    /// Lays `cover` (0..=1, more where a shape overlaps itself) on pixel (x, y), keeping the
    /// larger of old and new: crossings stay crisp instead of darkening.
    pub fn lay(&mut self, x: usize, y: usize, cover: f32) {
        let new = (cover.min(1.0) * 255.0 + 0.5) as u8;
        let pixel = &mut self.cover[y * self.width + x];
        *pixel = (*pixel).max(new);
    }

    #[cfg(test)]
    pub fn at(&self, x: usize, y: usize) -> u8 {
        self.cover[y * self.width + x]
    }
}

/// The background and ink colour of every column: both change smoothly along x only.
pub(super) struct Colours {
    background: Vec<[u8; 3]>,
    ink: Vec<[u8; 3]>,
}

impl Colours {
    pub fn random(rng: &mut StdRng, width: usize) -> Self {
        let (left, right) = (light(rng), light(rng));
        let stops: [[u8; 3]; INK_STOPS] = std::array::from_fn(|_| dark(rng));
        let span = (width - 1).max(1) as f32;
        let background = (0..width)
            .map(|x| mix(left, right, x as f32 / span))
            .collect();
        let ink = (0..width)
            .map(|x| {
                // Which pair of stops column x lies between, and how far along.
                let along = x as f32 / span * (INK_STOPS - 1) as f32;
                let stop = (along as usize).min(INK_STOPS - 2);
                mix(stops[stop], stops[stop + 1], along - stop as f32)
            })
            .collect();
        Self { background, ink }
    }

    #[cfg(test)]
    pub fn background(&self, x: usize) -> [u8; 3] {
        self.background[x]
    }
}

fn light(rng: &mut StdRng) -> [u8; 3] {
    std::array::from_fn(|_| rng.random_range(BACKGROUND))
}

/// A random dark colour of any hue: channels drawn freely, then scaled down to the luma cap.
fn dark(rng: &mut StdRng) -> [u8; 3] {
    let [r, g, b]: [f32; 3] = std::array::from_fn(|_| f32::from(rng.random_range(INK)));
    let luma = 0.299 * r + 0.587 * g + 0.114 * b;
    let scale = if luma > MAX_INK_LUMA {
        MAX_INK_LUMA / luma
    } else {
        1.0
    };
    [r, g, b].map(|c| (c * scale) as u8)
}

fn mix(a: [u8; 3], b: [u8; 3], t: f32) -> [u8; 3] {
    std::array::from_fn(|c| {
        let (a, b) = (f32::from(a[c]), f32::from(b[c]));
        (a + (b - a) * t + 0.5) as u8
    })
}

/// A drawn picture: where the ink is and its colours.
pub(super) struct Picture {
    pub coverage: Coverage,
    pub colours: Colours,
}

impl Picture {
    /// 8-bit RGB pixels, rows top to bottom: each pixel its column's background blended towards
    /// its column's ink by its coverage.
    pub fn rgb(&self) -> Vec<u8> {
        let Coverage { width, cover, .. } = &self.coverage;
        let mut rgb = Vec::with_capacity(cover.len() * 3);
        for row in cover.chunks_exact(*width) {
            for ((&cover, background), ink) in row
                .iter()
                .zip(&self.colours.background)
                .zip(&self.colours.ink)
            {
                let (c, rest) = (u32::from(cover), u32::from(255 - cover));
                rgb.extend((0..3).map(|i| {
                    ((u32::from(background[i]) * rest + u32::from(ink[i]) * c + 127) / 255) as u8
                }));
            }
        }
        rgb
    }
}
