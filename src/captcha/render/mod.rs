//! Image captcha renderer: turns an answer and a seed into a distorted, reproducible PNG.
//!
//! The picture is meant to cost a segmenting bot something, not to stop one (the PoW gate is
//! the answer to bots): every ink, glyph and clutter stroke shares one colour field, so colour
//! tells nothing about which glyph a pixel belongs to; glyphs come from several fonts, at
//! variable spacing, touching or overlapping; clutter strokes are as thick as the glyphs' own.
//! `scene` lays it out, `shape` and `raster` turn it into coverage, `paint` colours it and
//! `encode` writes the PNG with the `png` crate.

mod encode;
mod fonts;
mod paint;
mod raster;
mod scene;
mod shape;
#[cfg(test)]
mod tests;

use rand::{Rng, RngExt};

use crate::domain::CaptchaAnswer;

/// Characters a captcha answer is drawn from (see [`CaptchaAnswer::ALPHABET`]).
pub const ALPHABET: &[u8] = CaptchaAnswer::ALPHABET;

/// Shortest answer `render_png` accepts.
pub const MIN_LEN: usize = 4;
/// Longest answer `render_png` accepts.
pub const MAX_LEN: usize = 6;
/// Answer length the service uses unless configured otherwise.
pub const DEFAULT_LEN: usize = 5;

/// Default picture width in pixels.
pub const DEFAULT_WIDTH: u32 = 160;
/// Default picture height in pixels.
pub const DEFAULT_HEIGHT: u32 = 60;
/// Narrowest picture: six characters still get glyphs about 20 px tall.
pub const MIN_WIDTH: u32 = 120;
/// Widest picture: glyph size follows the height, so more width only adds margin and bytes.
pub const MAX_WIDTH: u32 = 400;
/// Lowest picture: glyphs are still about 20 px tall.
pub const MIN_HEIGHT: u32 = 40;
/// Highest picture.
pub const MAX_HEIGHT: u32 = 150;

/// Why a captcha could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("captcha answer must be {min}..={max} characters long, got {0}", min = MIN_LEN, max = MAX_LEN)]
    AnswerLength(usize),
    #[error("captcha answer contains {0:?}, which is not in the captcha alphabet")]
    InvalidChar(char),
    #[error(
        "captcha size {width}x{height} is outside {min_w}..={max_w} x {min_h}..={max_h}",
        min_w = MIN_WIDTH,
        max_w = MAX_WIDTH,
        min_h = MIN_HEIGHT,
        max_h = MAX_HEIGHT
    )]
    Size { width: u32, height: u32 },
    #[error("captcha PNG encoding failed")]
    Encode(#[from] png::EncodingError),
}

/// Draws a random answer of `len` characters from [`ALPHABET`] using the given RNG (callers pass a
/// CSPRNG such as `rand::rng()`). `len` is not checked here: `render_png` rejects lengths outside
/// `MIN_LEN..=MAX_LEN`.
pub fn random_answer<R: Rng + ?Sized>(rng: &mut R, len: usize) -> String {
    (0..len)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

/// Renders `answer` to a PNG. Deterministic: the same (answer, seed, width, height) gives the same
/// bytes with the same build, so the service can store only the answer and a `u64` seed and redraw
/// the same picture on every fetch.
pub fn render_png(
    answer: &str,
    seed: u64,
    width: u32,
    height: u32,
) -> Result<Vec<u8>, RenderError> {
    check(answer, width, height)?;
    let mut raster = raster::Raster::new(width as usize, height as usize);
    let picture = scene::draw(answer, seed, width as usize, height as usize, &mut raster);
    encode::indexed_png(&picture.indices(), picture.colours.palette(), width, height)
}

/// `render_png` with `ab_glyph_rasterizer` filling the shapes instead of the own rasteriser:
/// only for the captcha bench, which compares the two.
#[cfg(feature = "bench-captcha-rs")]
#[doc(hidden)]
pub fn render_png_with_crate_rasteriser(
    answer: &str,
    seed: u64,
    width: u32,
    height: u32,
) -> Result<Vec<u8>, RenderError> {
    check(answer, width, height)?;
    let mut raster = ab_glyph_rasterizer::Rasterizer::new(0, 0);
    let picture = scene::draw(answer, seed, width as usize, height as usize, &mut raster);
    encode::indexed_png(&picture.indices(), picture.colours.palette(), width, height)
}

/// Refuses sizes, lengths and characters outside the limits.
fn check(answer: &str, width: u32, height: u32) -> Result<(), RenderError> {
    if !(MIN_WIDTH..=MAX_WIDTH).contains(&width) || !(MIN_HEIGHT..=MAX_HEIGHT).contains(&height) {
        return Err(RenderError::Size { width, height });
    }
    let len = answer.chars().count();
    if !(MIN_LEN..=MAX_LEN).contains(&len) {
        return Err(RenderError::AnswerLength(len));
    }
    match answer
        .chars()
        .find(|&c| !u8::try_from(c).is_ok_and(|b| ALPHABET.contains(&b)))
    {
        Some(bad) => Err(RenderError::InvalidChar(bad)),
        None => Ok(()),
    }
}
