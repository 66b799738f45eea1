//! PNG encoding of a finished picture, through the `png` crate.

use png::{BitDepth, ColorType, Compression, Encoder, Filter};

use super::RenderError;

/// PNG bytes beyond the compressed pixels: signature, header, palette, chunk framing. A first
/// guess for the buffer, which grows if it must.
const PNG_OVERHEAD: usize = 1024;

/// Encodes 8-bit palette indices, rows top to bottom, as an indexed-colour PNG.
///
/// `Fast` is the `png` crate's own PNG-tuned deflate (fdeflate); its `Balanced` zlib-style
/// deflate saves about a tenth of the bytes for ten times the time. `Paeth` costs a little
/// more than `Up` and saves about a sixth of the bytes (`cargo bench --bench captcha`).
pub(super) fn indexed_png(
    indices: &[u8],
    palette: &[u8],
    width: u32,
    height: u32,
) -> Result<Vec<u8>, RenderError> {
    let mut png = Vec::with_capacity(indices.len() / 3 + PNG_OVERHEAD);
    let mut encoder = Encoder::new(&mut png, width, height);
    encoder.set_color(ColorType::Indexed);
    encoder.set_depth(BitDepth::Eight);
    encoder.set_palette(palette);
    encoder.set_compression(Compression::Fast);
    encoder.set_filter(Filter::Up);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(indices)?;
    writer.finish()?;
    Ok(png)
}
