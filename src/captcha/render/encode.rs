//! PNG encoding of a finished picture, through the `png` crate.

use png::{BitDepth, ColorType, Compression, Encoder, Filter};

use super::RenderError;

/// PNG bytes beyond the compressed pixels: signature, header, chunk framing. A first guess for
/// the buffer, which grows if it must.
const PNG_OVERHEAD: usize = 256;

/// Encodes 8-bit RGB pixels, rows top to bottom, as a truecolour PNG.
///
/// The background and the inks change along x only, so a row differs from the one above it
/// only where ink is: the `Up` filter leaves runs of zeros there, which deflate shrinks to
/// almost nothing. `Fast` is the `png` crate's own PNG-tuned deflate (fdeflate).
pub(super) fn rgb_png(rgb: &[u8], width: u32, height: u32) -> Result<Vec<u8>, RenderError> {
    let mut png = Vec::with_capacity(rgb.len() / 4 + PNG_OVERHEAD);
    let mut encoder = Encoder::new(&mut png, width, height);
    encoder.set_color(ColorType::Rgb);
    encoder.set_depth(BitDepth::Eight);
    encoder.set_compression(Compression::Balanced);
    encoder.set_filter(Filter::Paeth);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(rgb)?;
    writer.finish()?;
    Ok(png)
}
