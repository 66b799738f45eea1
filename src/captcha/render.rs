//! Image captcha renderer: turns an answer and a seed into a distorted, reproducible PNG.

use std::ops::Range;
use std::sync::LazyLock;

use ab_glyph::{Font, FontRef, OutlinedGlyph, PxScale, point};
use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use image::error::{EncodingError, ImageFormatHint};
use image::{ExtendedColorType, ImageEncoder, ImageError, ImageFormat};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Characters a captcha answer is drawn from: upper-case letters and digits without the
/// look-alikes 0/O/Q and 1/I/L (a Q whose tail a stroke crosses reads as O).
pub const ALPHABET: &[u8] = b"23456789ABCDEFGHJKMNPRSTUVWXYZ";

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
/// Widest picture: beyond this the glyphs get no bigger, only the file does.
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
    Encode(#[from] ImageError),
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
    if !(MIN_WIDTH..=MAX_WIDTH).contains(&width) || !(MIN_HEIGHT..=MAX_HEIGHT).contains(&height) {
        return Err(RenderError::Size { width, height });
    }
    let len = answer.chars().count();
    if !(MIN_LEN..=MAX_LEN).contains(&len) {
        return Err(RenderError::AnswerLength(len));
    }
    if let Some(bad) = answer
        .chars()
        .find(|&c| !c.is_ascii() || !ALPHABET.contains(&(c as u8)))
    {
        return Err(RenderError::InvalidChar(bad));
    }

    let (pixels, palette) = draw(answer, seed, width as usize, height as usize);
    encode_indexed(&pixels, width, height, &palette)
}

static FONT_BYTES: &[u8] = include_bytes!("../../assets/fonts/DejaVuSansMono-Bold.ttf");

/// Parsed once per process. The bytes are compiled in, so a parse failure is a build defect (caught
/// by every test that renders), never a run-time condition: that is why `expect` is acceptable here.
static FONT: LazyLock<FontRef<'static>> = LazyLock::new(|| {
    FontRef::try_from_slice(FONT_BYTES).expect("embedded DejaVu Sans Mono Bold must parse")
});

/// Ink colours, dark enough for a contrast ratio of at least ~7:1 on every background below, and
/// different in hue so neighbouring characters do not merge.
const INKS: [[u8; 3]; 8] = [
    [24, 52, 140], // navy
    [140, 24, 36], // crimson
    [18, 96, 44],  // forest green
    [92, 30, 124], // purple
    [120, 64, 8],  // brown
    [8, 86, 98],   // teal
    [48, 48, 60],  // slate
    [138, 24, 96], // magenta
];

/// Background channels are drawn from this range: light, and varying slightly between pictures.
const BACKGROUND: std::ops::RangeInclusive<u8> = 234..=250;

/// Coverage is quantised to this many steps per pen: enough for smooth edges, and few enough
/// colours that the picture fits a small palette, which is what keeps the PNG small and fast.
const COVER_STEPS: usize = 6;

/// Palette entries: the background, then `COVER_STEPS` shades of each character's pen.
const PALETTE_LEN: usize = 1 + MAX_LEN * COVER_STEPS;
const _: () = assert!(PALETTE_LEN <= 256, "palette indices must fit a byte");

/// Glyph size (`PxScale`) as a share of the picture height, before per-character jitter.
const HEIGHT_FILL: f32 = 0.78;
/// Glyph size as a multiple of the width each character gets (DejaVu Sans Mono's advance is about
/// 0.52 of its `PxScale`), for long answers in narrow pictures.
const WIDTH_FILL: f32 = 1.6;
/// Horizontal pitch of the characters as a share of the glyph size: the word stays together in
/// wide pictures instead of spreading out.
const PITCH: f32 = 0.62;
/// Per-character size jitter.
const SIZE_JITTER: Range<f32> = 0.86..1.06;
/// Largest tilt of one character, in radians (about 22 degrees): more starts to turn N into Z.
const MAX_TILT: f32 = 0.38;
/// Horizontal jitter of a character's centre, as a share of the pitch.
const SHIFT_JITTER: f32 = 0.12;
/// Vertical jitter of a character's centre, as a share of the glyph size.
const RISE_JITTER: f32 = 0.2;

/// Paints the captcha: returns one palette index per pixel, and the palette.
fn draw(answer: &str, seed: u64, width: usize, height: usize) -> (Vec<u8>, Vec<[u8; 3]>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let chars = answer.chars().count();
    let background: [u8; 3] = std::array::from_fn(|_| rng.random_range(BACKGROUND));
    let mut pens = Vec::with_capacity(chars);
    let mut last_ink = INKS.len();
    for _ in 0..chars {
        // Never the same ink twice in a row, so adjacent characters stay distinguishable.
        let mut ink = rng.random_range(0..INKS.len() - 1);
        if ink >= last_ink {
            ink += 1;
        }
        pens.push(INKS[ink]);
        last_ink = ink;
    }

    // Every distortion is scaled by the glyph size, so odd aspect ratios keep the same look.
    let size = (height as f32 * HEIGHT_FILL).min(width as f32 / chars as f32 * WIDTH_FILL);
    let warp = Warp::new(&mut rng, width, height, size);
    let mut canvas = Canvas::new(width, height);
    let word = draw_text(&mut canvas, &mut rng, &warp, answer, size);
    for _ in 0..rng.random_range(1..=2) {
        let pen = rng.random_range(0..chars) as u8;
        draw_wave(&mut canvas, &mut rng, pen, size, &word);
    }
    sprinkle_dots(&mut canvas, &mut rng, chars);
    (canvas.to_indices(), palette(background, &pens))
}

/// The background, then each pen's shades from faint to full: `pen * COVER_STEPS + step` is the
/// index of `pen` at coverage `step` (1..=COVER_STEPS), as `Canvas::to_indices` writes them.
fn palette(background: [u8; 3], pens: &[[u8; 3]]) -> Vec<[u8; 3]> {
    let mut palette = Vec::with_capacity(1 + pens.len() * COVER_STEPS);
    palette.push(background);
    for ink in pens {
        for step in 1..=COVER_STEPS {
            let t = step as f32 / COVER_STEPS as f32;
            palette.push(std::array::from_fn(|c| {
                let (b, i) = (f32::from(background[c]), f32::from(ink[c]));
                (b + (i - b) * t).round() as u8
            }));
        }
    }
    palette
}

/// What has been drawn so far: one byte per pixel, `step << PEN_BITS | pen`, where `step` is how
/// much ink it has (a coverage step, 0 for none) and `pen` whose ink it is (a character index).
/// Packing the step above the pen makes "keep the strongest ink" a plain, branch-free `max`.
struct Canvas {
    width: usize,
    height: usize,
    ink: Vec<u8>,
}

/// Bits for the pen (a character index, below `MAX_LEN`) in a canvas byte.
const PEN_BITS: u32 = 3;
const _: () = assert!(MAX_LEN <= 1 << PEN_BITS && COVER_STEPS < 1 << (8 - PEN_BITS));

impl Canvas {
    fn new(width: usize, height: usize) -> Self {
        Self {
            width,
            height,
            ink: vec![0; width * height],
        }
    }

    /// Keeps the strongest ink on each pixel, so crossings stay crisp instead of darkening.
    fn paint(&mut self, x: usize, y: usize, cover: f32, pen: u8) {
        // Rounds to the nearest step (coverage is never negative); the cast saturates.
        let step = ((cover * COVER_STEPS as f32 + 0.5) as u8).min(COVER_STEPS as u8);
        let pixel = &mut self.ink[y * self.width + x];
        *pixel = (*pixel).max(step << PEN_BITS | pen);
    }

    /// Each pixel's palette index: 0 for bare background, otherwise its pen's shade.
    fn to_indices(&self) -> Vec<u8> {
        self.ink
            .iter()
            .map(|&ink| match ink >> PEN_BITS {
                0 => 0,
                step => (ink & ((1 << PEN_BITS) - 1)) * COVER_STEPS as u8 + step,
            })
            .collect()
    }
}

/// A sine displacement of the text layer: the output pixel (x, y) shows the text-space point
/// (x + dx[y], y + dy[x]). It bends the baseline and shears strokes differently along the word,
/// which defeats template matching against the clean font while staying easy for people.
struct Warp {
    dx: Vec<f32>,
    dy: Vec<f32>,
    /// Largest |dx| and |dy|, for bounding boxes and margins.
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
            dx: (0..height)
                .map(|y| reach_x * (y as f32 * wave_x + phase_x).sin())
                .collect(),
            dy: (0..width)
                .map(|x| reach_y * (x as f32 * wave_y + phase_y).sin())
                .collect(),
            reach_x,
            reach_y,
        }
    }
}

/// Lays the answer out at an even pitch, centred, and draws each character with its own size,
/// tilt, offset and pen, keeping every rotated glyph (plus the warp) inside the picture. Returns
/// the horizontal extent of the word.
fn draw_text(
    canvas: &mut Canvas,
    rng: &mut StdRng,
    warp: &Warp,
    answer: &str,
    size: f32,
) -> Range<f32> {
    let (w, h) = (canvas.width as f32, canvas.height as f32);
    let (margin_x, margin_y) = (warp.reach_x + 2.0, warp.reach_y + 2.0);
    let chars = answer.chars().count() as f32;
    let pitch = ((w - 2.0 * margin_x) / chars).min(size * PITCH);
    let left = (w - pitch * chars) / 2.0;
    // One scratch tile reused by every glyph of this picture.
    let mut tile = Tile::default();
    for (i, c) in answer.chars().enumerate() {
        let scale = PxScale::from(size * rng.random_range(SIZE_JITTER));
        let glyph = FONT
            .glyph_id(c)
            .with_scale_and_position(scale, point(0.0, 0.0));
        let Some(outline) = FONT.outline_glyph(glyph) else {
            continue;
        };
        tile.rasterise(&outline);
        let (sin, cos) = rng.random_range(-MAX_TILT..MAX_TILT).sin_cos();
        let (tw, th) = (tile.width as f32, tile.height as f32);
        let half_w = (cos.abs() * tw + sin.abs() * th) / 2.0;
        let half_h = (sin.abs() * tw + cos.abs() * th) / 2.0;
        let shift = rng.random_range(-SHIFT_JITTER..SHIFT_JITTER) * pitch;
        let rise = rng.random_range(-RISE_JITTER..RISE_JITTER) * size;
        let placement = Placement {
            centre_x: fit(
                left + pitch * (i as f32 + 0.5) + shift,
                margin_x + half_w,
                w - margin_x - half_w,
            ),
            centre_y: fit(h / 2.0 + rise, margin_y + half_h, h - margin_y - half_h),
            sin,
            cos,
            half_h,
            pen: i as u8,
        };
        stamp_glyph(canvas, warp, &tile, &placement);
    }
    left..left + pitch * chars
}

/// Clamps `v` into `lo..=hi`, or centres it when the range is empty (a glyph wider than its room).
fn fit(v: f32, lo: f32, hi: f32) -> f32 {
    if lo > hi {
        (lo + hi) / 2.0
    } else {
        v.clamp(lo, hi)
    }
}

/// An upright glyph's coverage, with one texel of zero padding on every side so that sampling
/// needs no per-texel bounds checks.
#[derive(Default)]
struct Tile {
    width: usize,
    height: usize,
    cover: Vec<f32>,
}

impl Tile {
    fn rasterise(&mut self, outline: &OutlinedGlyph) {
        let bounds = outline.px_bounds();
        self.width = bounds.width() as usize + 2;
        self.height = bounds.height() as usize + 2;
        self.cover.clear();
        self.cover.resize(self.width * self.height, 0.0);
        let (cover, width) = (&mut self.cover, self.width);
        outline.draw(|x, y, c| {
            if let Some(texel) = cover.get_mut((y as usize + 1) * width + x as usize + 1) {
                *texel = c.min(1.0);
            }
        });
    }

    /// Bilinear sample at (u, v), measured from the first texel's centre. Outside the inner area
    /// the result would only blend padding, so it is zero without touching memory.
    fn sample(&self, u: f32, v: f32) -> f32 {
        if !(0.0..(self.width - 1) as f32).contains(&u)
            || !(0.0..(self.height - 1) as f32).contains(&v)
        {
            return 0.0;
        }
        // Non-negative, so truncation is floor.
        let (x0, y0) = (u as usize, v as usize);
        let (fx, fy) = (u - x0 as f32, v - y0 as f32);
        let i = y0 * self.width + x0;
        let below = i + self.width;
        let lerp = |a: f32, b: f32, t: f32| a + (b - a) * t;
        let top = lerp(self.cover[i], self.cover[i + 1], fx);
        let bottom = lerp(self.cover[below], self.cover[below + 1], fx);
        lerp(top, bottom, fy)
    }
}

/// Where and how one glyph goes, in text space.
struct Placement {
    centre_x: f32,
    centre_y: f32,
    /// Sine and cosine of the tilt; the cosine is positive because `MAX_TILT` < 90 degrees.
    sin: f32,
    cos: f32,
    /// Half height of the rotated tile's bounding box.
    half_h: f32,
    pen: u8,
}

impl Placement {
    /// Text-space x offsets from the centre at which a point whose y offset lies in `dy` can fall
    /// inside the glyph's tile, a rectangle of half extents `half_u` x `half_v` rotated by the
    /// tilt; `None` if there are none.
    fn row_span(&self, dy: Range<f32>, half_u: f32, half_v: f32) -> Option<Range<f32>> {
        let (sin, cos) = (self.sin, self.cos);
        // |cos * x + sin * y| <= half_u, for some y in dy.
        let (sin_lo, sin_hi) = (
            (sin * dy.start).min(sin * dy.end),
            (sin * dy.start).max(sin * dy.end),
        );
        let mut lo = (-half_u - sin_hi) / cos;
        let mut hi = (half_u - sin_lo) / cos;
        // |cos * y - sin * x| <= half_v, for some y in dy: sin * x lies in this range.
        let (sx_lo, sx_hi) = (cos * dy.start - half_v, cos * dy.end + half_v);
        if sin.abs() < f32::EPSILON {
            if sx_lo > 0.0 || sx_hi < 0.0 {
                return None;
            }
        } else {
            let (a, b) = (sx_lo / sin, sx_hi / sin);
            lo = lo.max(a.min(b));
            hi = hi.min(a.max(b));
        }
        (lo < hi).then_some(lo..hi)
    }
}

/// Inverse-maps the output pixels of the glyph's warped, rotated footprint into its upright tile.
/// Each row visits only the span the rotated tile can reach, so no time goes on empty corners.
fn stamp_glyph(canvas: &mut Canvas, warp: &Warp, tile: &Tile, at: &Placement) {
    let (half_u, half_v) = (
        (tile.width as f32 - 1.0) / 2.0,
        (tile.height as f32 - 1.0) / 2.0,
    );
    let reach = at.half_h + warp.reach_y + 1.0;
    let top = (at.centre_y - reach).floor().max(0.0) as usize;
    let bottom = ((at.centre_y + reach).ceil().max(0.0) as usize).min(canvas.height);
    for y in top..bottom {
        // Text-space offsets from the glyph centre: dy[x] moves ty by at most reach_y.
        let ty_row = y as f32 + 0.5 - at.centre_y;
        let tx_origin = 0.5 + warp.dx[y] - at.centre_x;
        let dy = ty_row - warp.reach_y..ty_row + warp.reach_y;
        let Some(span) = at.row_span(dy, half_u, half_v) else {
            continue;
        };
        let left = (span.start - tx_origin).floor().max(0.0) as usize;
        let right = ((span.end - tx_origin).ceil().max(0.0) as usize).min(canvas.width);
        for x in left..right {
            let tx = x as f32 + tx_origin;
            let ty = ty_row + warp.dy[x];
            let u = at.cos * tx + at.sin * ty + half_u;
            let v = at.cos * ty - at.sin * tx + half_v;
            canvas.paint(x, y, tile.sample(u, v), at.pen);
        }
    }
}

/// Draws an anti-aliased sine stroke across the word, through the text band and in one of the
/// characters' pens, so that colour or connected-component segmentation cannot simply peel it off.
fn draw_wave(canvas: &mut Canvas, rng: &mut StdRng, pen: u8, size: f32, word: &Range<f32>) {
    let tau = std::f32::consts::TAU;
    let length = word.end - word.start;
    let start = (word.start - rng.random_range(0.0..0.4) * size).max(0.0);
    let end = word.end + rng.random_range(0.0..0.4) * size;
    let mid = canvas.height as f32 / 2.0 + rng.random_range(-0.12..0.12) * size;
    let slope = rng.random_range(-0.3..0.3) * size / length;
    let amplitude = rng.random_range(0.12..0.26) * size;
    let wave = tau / (rng.random_range(0.5..1.2) * length);
    let phase = rng.random_range(0.0..tau);
    let half = size * rng.random_range(0.03..0.042);

    let centre_x = (word.start + word.end) / 2.0;
    for x in start as usize..(end as usize).min(canvas.width) {
        let xf = x as f32 + 0.5;
        let angle = xf * wave + phase;
        let centre = mid + slope * (xf - centre_x) + amplitude * angle.sin();
        // Vertical distance times cos(slope angle) is the distance to the curve's tangent line.
        let gradient = slope + amplitude * wave * angle.cos();
        let shrink = (1.0 + gradient * gradient).sqrt().recip();
        let reach = (half + 1.0) / shrink;
        let lo = (centre - reach).floor().max(0.0) as usize;
        let hi = ((centre + reach).ceil().max(0.0) as usize).min(canvas.height);
        for y in lo..hi {
            let distance = (y as f32 + 0.5 - centre).abs() * shrink;
            canvas.paint(x, y, (half + 0.5 - distance).clamp(0.0, 1.0), pen);
        }
    }
}

/// Sparse single-pixel specks in the characters' pens: they break up runs a bot could threshold
/// on, and are few enough to cost people nothing and the PNG little.
fn sprinkle_dots(canvas: &mut Canvas, rng: &mut StdRng, chars: usize) {
    let count = canvas.width * canvas.height / 150;
    for _ in 0..count {
        let x = rng.random_range(0..canvas.width);
        let y = rng.random_range(0..canvas.height);
        let pen = rng.random_range(0..chars) as u8;
        canvas.paint(x, y, rng.random_range(0.5..1.0), pen);
    }
}

/// Encodes palette indices as an 8-bit indexed-colour PNG.
///
/// `image`'s PNG encoder has no palette mode, but the scanlines of an 8-bit greyscale PNG and an
/// 8-bit indexed one are byte-for-byte the same; so the indices go through it as greyscale and the
/// header is then turned into a palette one. One byte per pixel instead of three, and few distinct
/// values, is what makes the fast deflate setting both quick and small here.
fn encode_indexed(
    pixels: &[u8],
    width: u32,
    height: u32,
    palette: &[[u8; 3]],
) -> Result<Vec<u8>, RenderError> {
    let mut png = Vec::with_capacity(PNG_CAPACITY);
    PngEncoder::new_with_quality(&mut png, CompressionType::Fast, FilterType::Sub).write_image(
        pixels,
        width,
        height,
        ExtendedColorType::L8,
    )?;
    if png.get(IHDR_TYPE) != Some(b"IHDR".as_slice()) {
        return Err(unexpected_png("IHDR is not the first chunk"));
    }
    png[COLOUR_TYPE_AT] = PALETTE_COLOUR_TYPE;
    let crc = crc32(&png[IHDR_TYPE.start..IHDR_CRC.start]);
    png[IHDR_CRC].copy_from_slice(&crc.to_be_bytes());

    // PLTE must come before the first IDAT (and after any colour-space chunk).
    let mut at = IHDR_CRC.end;
    loop {
        let Some(header) = png.get(at..at + 8) else {
            return Err(unexpected_png("no IDAT chunk"));
        };
        if &header[4..] == b"IDAT" {
            break;
        }
        let mut length = [0; 4];
        length.copy_from_slice(&header[..4]);
        at += 12 + u32::from_be_bytes(length) as usize;
    }
    png.splice(at..at, chunk(b"PLTE", palette.as_flattened()));
    Ok(png)
}

/// Starting capacity of the PNG buffer: a default-size captcha fits without regrowth.
const PNG_CAPACITY: usize = 4 * 1024;
/// Byte ranges of the IHDR chunk's type and CRC, which the PNG format puts right after the 8-byte
/// signature and the chunk's 4-byte length (its data is always 13 bytes).
const IHDR_TYPE: Range<usize> = 12..16;
const IHDR_CRC: Range<usize> = 29..33;
/// Offset of IHDR's colour-type byte (data byte 9), and the value meaning "indexed colour".
const COLOUR_TYPE_AT: usize = 25;
const PALETTE_COLOUR_TYPE: u8 = 3;

fn unexpected_png(what: &'static str) -> RenderError {
    RenderError::Encode(ImageError::Encoding(EncodingError::new(
        ImageFormatHint::Exact(ImageFormat::Png),
        what,
    )))
}

/// A complete PNG chunk: length, type, data and CRC.
fn chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut chunk = Vec::with_capacity(data.len() + 12);
    chunk.extend_from_slice(&(data.len() as u32).to_be_bytes());
    chunk.extend_from_slice(kind);
    chunk.extend_from_slice(data);
    let crc = crc32(&chunk[4..]);
    chunk.extend_from_slice(&crc.to_be_bytes());
    chunk
}

/// CRC-32 (ISO-HDLC, as PNG uses) over `bytes`; only headers go through it, so a byte-wise table
/// is plenty.
fn crc32(bytes: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0; 256];
        let mut n = 0;
        while n < 256 {
            let mut c = n as u32;
            let mut bit = 0;
            while bit < 8 {
                c = if c & 1 == 1 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
                bit += 1;
            }
            table[n] = c;
            n += 1;
        }
        table
    };
    !bytes.iter().fold(!0, |crc, &b| {
        TABLE[((crc ^ u32::from(b)) & 0xFF) as usize] ^ (crc >> 8)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

    #[test]
    fn renders_a_png_of_the_requested_size() -> TestResult {
        for (width, height) in [
            (DEFAULT_WIDTH, DEFAULT_HEIGHT),
            (MIN_WIDTH, MIN_HEIGHT),
            (MAX_WIDTH, MAX_HEIGHT),
            (MIN_WIDTH, MAX_HEIGHT),
            (MAX_WIDTH, MIN_HEIGHT),
        ] {
            for answer in ["ABCD", "7XK9P", "WMWMWM"] {
                let png = render_png(answer, 42, width, height)?;
                assert!(png.starts_with(PNG_SIGNATURE));
                // The decoder checks every chunk CRC, including the rewritten IHDR and PLTE.
                let decoded = image::load_from_memory(&png)?;
                assert_eq!((decoded.width(), decoded.height()), (width, height));
            }
        }
        Ok(())
    }

    #[test]
    fn draws_dark_ink_on_a_light_background() -> TestResult {
        let png = render_png("H3KP7", 3, DEFAULT_WIDTH, DEFAULT_HEIGHT)?;
        let rgb = image::load_from_memory(&png)?.to_rgb8();
        let luma = |p: &image::Rgb<u8>| p.0.iter().map(|&c| u32::from(c)).sum::<u32>() / 3;
        let light = rgb.pixels().filter(|p| luma(p) >= 230).count();
        let dark = rgb.pixels().filter(|p| luma(p) <= 110).count();
        let total = rgb.pixels().len();
        assert!(
            light > total / 2,
            "{light} of {total} pixels are background"
        );
        assert!(dark > total / 20, "{dark} of {total} pixels are ink");
        Ok(())
    }

    #[test]
    fn same_inputs_give_same_bytes_and_seed_changes_them() -> TestResult {
        let a = render_png("H3KP7", 7, DEFAULT_WIDTH, DEFAULT_HEIGHT)?;
        let b = render_png("H3KP7", 7, DEFAULT_WIDTH, DEFAULT_HEIGHT)?;
        let c = render_png("H3KP7", 8, DEFAULT_WIDTH, DEFAULT_HEIGHT)?;
        assert_eq!(a, b);
        assert_ne!(a, c);
        Ok(())
    }

    #[test]
    fn random_answer_uses_only_the_alphabet() {
        let mut rng = StdRng::seed_from_u64(1);
        for len in MIN_LEN..=MAX_LEN {
            for _ in 0..50 {
                let answer = random_answer(&mut rng, len);
                assert_eq!(answer.len(), len);
                assert!(answer.bytes().all(|b| ALPHABET.contains(&b)), "{answer}");
            }
        }
    }

    #[test]
    fn alphabet_has_no_look_alikes() {
        for look_alike in b"0OQ1IL" {
            assert!(
                !ALPHABET.contains(look_alike),
                "{}",
                char::from(*look_alike)
            );
        }
        assert!(
            ALPHABET
                .iter()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        );
    }

    #[test]
    fn rejects_bad_sizes_and_answers() {
        let bad_sizes = [
            (MIN_WIDTH - 1, DEFAULT_HEIGHT),
            (MAX_WIDTH + 1, DEFAULT_HEIGHT),
            (DEFAULT_WIDTH, MIN_HEIGHT - 1),
            (DEFAULT_WIDTH, MAX_HEIGHT + 1),
            (0, 0),
            (u32::MAX, u32::MAX),
        ];
        for (width, height) in bad_sizes {
            assert!(matches!(
                render_png("ABCDE", 1, width, height),
                Err(RenderError::Size { .. })
            ));
        }
        for answer in ["", "ABC", "ABCDEFG"] {
            assert!(matches!(
                render_png(answer, 1, DEFAULT_WIDTH, DEFAULT_HEIGHT),
                Err(RenderError::AnswerLength(n)) if n == answer.len()
            ));
        }
        for (answer, bad) in [("ABC0E", '0'), ("abcde", 'a'), ("ABCDÉ", 'É')] {
            assert!(matches!(
                render_png(answer, 1, DEFAULT_WIDTH, DEFAULT_HEIGHT),
                Err(RenderError::InvalidChar(c)) if c == bad
            ));
        }
    }

    #[test]
    fn default_size_pngs_average_under_8_kib() -> TestResult {
        let mut rng = StdRng::seed_from_u64(2);
        let renders: u64 = 200;
        let mut total = 0;
        for seed in 0..renders {
            let answer = random_answer(&mut rng, DEFAULT_LEN);
            total += render_png(&answer, seed, DEFAULT_WIDTH, DEFAULT_HEIGHT)?.len();
        }
        let average = total / renders as usize;
        assert!(average < 8 * 1024, "average PNG size {average} bytes");
        Ok(())
    }

    #[test]
    fn crc32_matches_png_reference() {
        // Every PNG ends with this chunk; its CRC is fixed by the format.
        assert_eq!(crc32(b"IEND"), 0xAE42_6082);
    }
}
