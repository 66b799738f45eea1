//! What has been drawn (ink coverage per pixel) and how it is coloured.
//!
//! One coverage layer for glyphs and clutter alike, coloured by one colour field: a pixel's
//! colour tells how much ink it has and where it is, never which glyph or stroke put the ink
//! there, so neighbouring glyphs and the clutter crossing them share their ink.

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
    cover: Vec<u8>,
}

impl Coverage {
    pub fn new(width: usize, height: usize) -> Self {
        Self {
            width,
            cover: vec![0; width * height],
        }
    }

    #[cfg(feature = "bench-captcha-rs")]
    pub fn height(&self) -> usize {
        self.cover.len() / self.width
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

/// Bands the colour field is cut into across the picture, and coverage levels per band. One
/// palette entry per (band, level), 256 in all: a pixel's index says where it is and how much
/// ink it has, never which glyph put the ink there, and the picture encodes as one byte a pixel
/// (a third of RGB's, which is most of the encoding time).
const BANDS: usize = 32;
const LEVELS: usize = 8;
const _: () = assert!(BANDS * LEVELS <= 256, "indices must fit a byte");

/// The colours of a picture: a light background and a dark ink, both changing smoothly along
/// x, as a palette of `LEVELS` blends of the two in each of `BANDS` bands of columns.
pub(super) struct Colours {
    /// The first palette index of each column's band.
    band_start: Vec<u8>,
    /// RGB triples, `LEVELS` per band.
    palette: Vec<u8>,
}

impl Colours {
    pub fn random(rng: &mut StdRng, width: usize) -> Self {
        let (left, right) = (light(rng), light(rng));
        let stops: [[u8; 3]; INK_STOPS] = std::array::from_fn(|_| dark(rng));
        let mut palette = Vec::with_capacity(BANDS * LEVELS * 3);
        for band in 0..BANDS {
            let along = (band as f32 + 0.5) / BANDS as f32;
            let background = mix(left, right, along);
            // Which pair of ink stops the band lies between, and how far along.
            let at = along * (INK_STOPS - 1) as f32;
            let stop = (at as usize).min(INK_STOPS - 2);
            let ink = mix(stops[stop], stops[stop + 1], at - stop as f32);
            for level in 0..LEVELS {
                palette.extend(mix(background, ink, level as f32 / (LEVELS - 1) as f32));
            }
        }
        let band_start = (0..width)
            .map(|x| ((x * BANDS / width).min(BANDS - 1) * LEVELS) as u8)
            .collect();
        Self {
            band_start,
            palette,
        }
    }

    /// RGB triples for the PNG's palette.
    pub fn palette(&self) -> &[u8] {
        &self.palette
    }

    #[cfg(test)]
    pub fn colour(&self, index: u8) -> [u8; 3] {
        let at = usize::from(index) * 3;
        [self.palette[at], self.palette[at + 1], self.palette[at + 2]]
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
    /// One palette index per pixel, rows top to bottom: the pixel's band, at the level nearest
    /// its coverage.
    pub fn indices(&self) -> Vec<u8> {
        const _: () = assert!(LEVELS == 8, "the level below is cover * 7 / 255, rounded");
        let Coverage { width, cover } = &self.coverage;
        let mut indices = Vec::with_capacity(cover.len());
        for row in cover.chunks_exact(*width) {
            // Plain arithmetic rather than a lookup table, so that the loop vectorises.
            indices.extend(
                row.iter()
                    .zip(&self.colours.band_start)
                    .map(|(&cover, &start)| start + ((u16::from(cover) * 7 + 128) >> 8) as u8),
            );
        }
        indices
    }
}
