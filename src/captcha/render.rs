//! Image captcha renderer: turns an answer and a seed into a distorted, reproducible PNG.

use std::ops::{Range, RangeInclusive};
use std::sync::LazyLock;

use ab_glyph::{Font, FontRef, OutlineCurve, Point, point};
use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use image::error::{EncodingError, ImageFormatHint};
use image::{ExtendedColorType, ImageEncoder, ImageError, ImageFormat};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, RngExt, SeedableRng};

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
        .find(|&c| !u8::try_from(c).is_ok_and(|b| ALPHABET.contains(&b)))
    {
        return Err(RenderError::InvalidChar(bad));
    }

    let (canvas, palette) = draw(answer, seed, width as usize, height as usize);
    encode_png(&canvas.packed_indices(), width, height, &palette)
}

static FONT_BYTES: &[u8] = include_bytes!("../../assets/fonts/DejaVuSansMono-Bold.ttf");

/// Parsed once per process. The bytes are compiled in, so a parse failure is a build defect (caught
/// by every test that renders), never a run-time condition: that is why `expect` is acceptable here.
static FONT: LazyLock<FontRef<'static>> = LazyLock::new(|| {
    FontRef::try_from_slice(FONT_BYTES).expect("embedded DejaVu Sans Mono Bold must parse")
});

/// Ink colours: a WCAG contrast ratio of at least 7.3:1 on every background below (4.5:1 is the
/// usual bar for text), and different in hue so neighbouring characters do not merge.
const INKS: [[u8; 3]; 8] = [
    [24, 52, 140], // navy
    [140, 24, 36], // crimson
    [12, 84, 38],  // forest green
    [92, 30, 124], // purple
    [108, 56, 6],  // brown
    [6, 78, 90],   // teal
    [48, 48, 60],  // slate
    [138, 24, 96], // magenta
];

/// Background channels are drawn from this range: light, and varying slightly between pictures.
const BACKGROUND: RangeInclusive<u8> = 234..=250;

/// Inks one picture uses (neighbouring characters always differ). Three inks of `COVER_STEPS`
/// shades plus the background make 16 colours: a 4-bit palette, half the bytes of 8-bit indices
/// whether the PNG stores or compresses them.
const PENS: usize = 3;
/// Coverage is quantised to this many steps per pen: enough for smooth edges.
const COVER_STEPS: usize = 5;
/// Palette entries: the background, then `COVER_STEPS` shades of each pen.
const PALETTE_LEN: usize = 1 + PENS * COVER_STEPS;
const _: () = assert!(PALETTE_LEN <= 16, "palette indices must fit 4 bits");

/// Glyph size (`PxScale`, the font's ascent-to-descent height) as a share of the picture height.
const HEIGHT_FILL: f32 = 0.78;
/// Glyph size as a multiple of the width each character gets (DejaVu Sans Mono's advance is about
/// 0.52 of its `PxScale`), for long answers in narrow pictures.
const WIDTH_FILL: f32 = 1.6;
/// Horizontal pitch of the characters as a share of the glyph size: the word stays together in
/// wide pictures instead of spreading out.
const PITCH: f32 = 0.68;
/// Per-character size jitter.
const SIZE_JITTER: Range<f32> = 0.86..1.06;
/// Largest tilt of one character, in radians (about 22 degrees): more starts to turn N into Z.
const MAX_TILT: f32 = 0.38;
/// Horizontal jitter of a character's centre, as a share of the pitch.
const SHIFT_JITTER: f32 = 0.12;
/// Vertical jitter of a character's centre, as a share of the glyph size.
const RISE_JITTER: f32 = 0.2;
/// Longest straight piece an outline is cut into before warping, in pixels: short enough that the
/// warp visibly bends long stems, long enough to keep the piece count low.
const SEGMENT: f32 = 6.0;

/// Paints the captcha; returns the canvas and its palette.
fn draw(answer: &str, seed: u64, width: usize, height: usize) -> (Canvas, Vec<[u8; 3]>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let chars = answer.chars().count();
    let background: [u8; 3] = std::array::from_fn(|_| rng.random_range(BACKGROUND));
    let mut inks = INKS;
    let (chosen, _) = inks.partial_shuffle(&mut rng, PENS);
    let palette = palette(background, chosen);

    // Every distortion is scaled by the glyph size, so odd aspect ratios keep the same look.
    let size = (height as f32 * HEIGHT_FILL).min(width as f32 / chars as f32 * WIDTH_FILL);
    let warp = Warp::new(&mut rng, width, height, size);
    let mut canvas = Canvas::new(width, height);
    let mut raster = Raster::new(width, height);
    let word = draw_text(&mut canvas, &mut raster, &mut rng, &warp, answer, size);
    for _ in 0..rng.random_range(1..=2) {
        let pen = rng.random_range(0..PENS) as u8;
        draw_wave(&mut canvas, &mut rng, pen, size, &word);
    }
    sprinkle_dots(&mut canvas, &mut rng);
    (canvas, palette)
}

/// The background, then each pen's shades from faint to full: `pen * COVER_STEPS + step` is the
/// index of `pen` at coverage `step` (1..=COVER_STEPS), as `Canvas::packed_indices` writes them.
fn palette(background: [u8; 3], inks: &[[u8; 3]]) -> Vec<[u8; 3]> {
    let mut palette = Vec::with_capacity(PALETTE_LEN);
    palette.push(background);
    for ink in inks {
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
/// much ink it has (a coverage step, 0 for none) and `pen` whose ink it is. Packing the step above
/// the pen makes "keep the strongest ink" a plain `max` of bytes.
struct Canvas {
    width: usize,
    height: usize,
    ink: Vec<u8>,
}

/// Bits for the pen in a canvas byte.
const PEN_BITS: u32 = 2;
const _: () = assert!(PENS <= 1 << PEN_BITS && COVER_STEPS < 1 << (8 - PEN_BITS));

/// Lays `cover` (0..=1, or more where shapes overlap) of `pen` onto one canvas byte, keeping the
/// strongest ink so crossings stay crisp instead of darkening.
fn blend(pixel: &mut u8, cover: f32, pen: u8) {
    // Rounds to the nearest step (coverage is never negative). Clamping as a float and taking the
    // max as a saturating difference keeps this free of data-dependent branches, which otherwise
    // mispredict along every anti-aliased edge.
    let step = (cover * COVER_STEPS as f32 + 0.5).min(COVER_STEPS as f32) as u8;
    let ink = step << PEN_BITS | pen;
    *pixel += ink.saturating_sub(*pixel);
}

impl Canvas {
    fn new(width: usize, height: usize) -> Self {
        Self {
            width,
            height,
            ink: vec![0; width * height],
        }
    }

    fn paint(&mut self, x: usize, y: usize, cover: f32, pen: u8) {
        blend(&mut self.ink[y * self.width + x], cover, pen);
    }

    /// Palette indices (0 for bare background, otherwise the pen's shade), two pixels per byte,
    /// high nibble first, each row padded to a whole byte: 4-bit PNG scanlines.
    fn packed_indices(&self) -> Vec<u8> {
        let index: [u8; 256] = std::array::from_fn(|ink| {
            let (step, pen) = (ink >> PEN_BITS, ink & ((1 << PEN_BITS) - 1));
            match step.min(COVER_STEPS) {
                0 => 0,
                step => (pen * COVER_STEPS + step) as u8,
            }
        });
        let mut packed = Vec::with_capacity(self.width.div_ceil(2) * self.height);
        for row in self.ink.chunks_exact(self.width) {
            let pairs = row.chunks_exact(2);
            let odd = pairs.remainder();
            packed.extend(
                pairs.map(|pair| index[usize::from(pair[0])] << 4 | index[usize::from(pair[1])]),
            );
            if let [last] = odd {
                packed.push(index[usize::from(*last)] << 4);
            }
        }
        packed
    }
}

/// A sine displacement of the text: the point (x, y) is drawn at (x + dx(y), y + dy(x)). It bends
/// the baseline and shears strokes differently along the word, which defeats template matching
/// against the clean font while staying easy for people. Tabulated per whole pixel and
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

/// `amplitude * sin(k * wave + phase)` for k in 0..len. The angle advances by rotating (sin, cos)
/// one step at a time, so the table costs one `sin_cos` rather than one per entry.
fn sine_table(len: usize, amplitude: f32, wave: f32, phase: f32) -> Vec<f32> {
    let (turn_sin, turn_cos) = wave.sin_cos();
    let (mut sin, mut cos) = phase.sin_cos();
    (0..len)
        .map(|_| {
            let value = amplitude * sin;
            (sin, cos) = (
                sin * turn_cos + cos * turn_sin,
                cos * turn_cos - sin * turn_sin,
            );
            value
        })
        .collect()
}

/// Linear interpolation in a table sampled at 0, 1, 2, ... (at least two entries, which every
/// allowed picture size gives); clamped at both ends.
fn lookup(table: &[f32], at: f32) -> f32 {
    let last = table.len() - 1;
    let at = at.clamp(0.0, last as f32);
    let i = floor_index(at).min(last - 1);
    let (a, b) = (table[i], table[i + 1]);
    a + (b - a) * (at - i as f32)
}

/// Lays the answer out at an even pitch, centred, and draws each character with its own size,
/// tilt, offset and pen, keeping every tilted glyph (plus the warp) inside the picture. The
/// outline is transformed as vectors and rasterised once, which is sharper and much cheaper than
/// rasterising upright and resampling the bitmap. Returns the horizontal extent of the word.
fn draw_text(
    canvas: &mut Canvas,
    raster: &mut Raster,
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
    let units = size / FONT.height_unscaled();
    let mut pen = rng.random_range(0..PENS as u8);
    for (i, c) in answer.chars().enumerate() {
        if i > 0 {
            // Never the same pen twice in a row, so neighbouring characters stay distinguishable.
            let other = rng.random_range(0..PENS as u8 - 1);
            pen = if other >= pen { other + 1 } else { other };
        }
        let Some(outline) = FONT.outline(FONT.glyph_id(c)) else {
            continue;
        };
        let scale = units * rng.random_range(SIZE_JITTER);
        let (sin, cos) = rng.random_range(-MAX_TILT..MAX_TILT).sin_cos();
        let ink = outline.bounds;
        // Font outline bounds are y-up with the top in `min`, so the height comes out negative.
        let (ink_w, ink_h) = (ink.width() * scale, ink.height().abs() * scale);
        let half_w = (cos * ink_w + sin.abs() * ink_h) / 2.0;
        let half_h = (sin.abs() * ink_w + cos * ink_h) / 2.0;
        let shift = rng.random_range(-SHIFT_JITTER..SHIFT_JITTER) * pitch;
        let rise = rng.random_range(-RISE_JITTER..RISE_JITTER) * size;
        let centre_x = fit(
            left + pitch * (i as f32 + 0.5) + shift,
            margin_x + half_w,
            w - margin_x - half_w,
        );
        let centre_y = fit(h / 2.0 + rise, margin_y + half_h, h - margin_y - half_h);
        let (mid_x, mid_y) = ((ink.min.x + ink.max.x) / 2.0, (ink.min.y + ink.max.y) / 2.0);
        // Font units (y up) about the ink centre, to tilted, placed and warped pixels (y down).
        let place = |p: Point| {
            let (x, y) = ((p.x - mid_x) * scale, (mid_y - p.y) * scale);
            warp.apply(point(
                centre_x + x * cos - y * sin,
                centre_y + x * sin + y * cos,
            ))
        };
        for curve in &outline.curves {
            trace(raster, curve, scale, place);
        }
        raster.fill(canvas, pen);
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

/// Adds a curve given in font units to `raster` as straight pieces of at most about `SEGMENT`
/// pixels (`pixels_per_unit` apart from the warp), their ends mapped through `place`.
fn trace(
    raster: &mut Raster,
    curve: &OutlineCurve,
    pixels_per_unit: f32,
    place: impl Fn(Point) -> Point,
) {
    // The control polygon is at least as long as the curve.
    let (from, length) = match *curve {
        OutlineCurve::Line(a, b) => (a, distance(a, b)),
        OutlineCurve::Quad(a, b, c) => (a, distance(a, b) + distance(b, c)),
        OutlineCurve::Cubic(a, b, c, d) => (a, distance(a, b) + distance(b, c) + distance(c, d)),
    };
    let pieces = ceil_index(length * pixels_per_unit / SEGMENT).max(1);
    let mut start = place(from);
    for k in 1..pieces {
        let end = place(bezier(curve, k as f32 / pieces as f32));
        raster.line(start, end);
        start = end;
    }
    // The exact end point, so that consecutive curves join without a gap.
    raster.line(start, place(curve_end(curve)));
}

fn distance(a: Point, b: Point) -> f32 {
    ((b.x - a.x) * (b.x - a.x) + (b.y - a.y) * (b.y - a.y)).sqrt()
}

fn curve_end(curve: &OutlineCurve) -> Point {
    match *curve {
        OutlineCurve::Line(_, end)
        | OutlineCurve::Quad(_, _, end)
        | OutlineCurve::Cubic(_, _, _, end) => end,
    }
}

/// The point at parameter `t` (0..=1) along a line or Bézier curve (de Casteljau).
fn bezier(curve: &OutlineCurve, t: f32) -> Point {
    let lerp = |a: Point, b: Point| point(a.x + (b.x - a.x) * t, a.y + (b.y - a.y) * t);
    match *curve {
        OutlineCurve::Line(a, b) => lerp(a, b),
        OutlineCurve::Quad(a, b, c) => lerp(lerp(a, b), lerp(b, c)),
        OutlineCurve::Cubic(a, b, c, d) => {
            let (ab, bc, cd) = (lerp(a, b), lerp(b, c), lerp(c, d));
            lerp(lerp(ab, bc), lerp(bc, cd))
        }
    }
}

/// Draws an anti-aliased sine stroke across the word, through the text band and in one of the
/// pens, so that colour or connected-component segmentation cannot simply peel it off. Drawn
/// column by column from the distance to the centre line: a thin stroke touches few pixels, where
/// filling it as a polygon would sweep its whole bounding box.
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
    let first = floor_index(start);
    // sin and cos of the phase advance column by column by rotation: no trigonometry per column.
    let (turn_sin, turn_cos) = wave.sin_cos();
    let (mut sin, mut cos) = ((first as f32 + 0.5) * wave + phase).sin_cos();
    for x in first..floor_index(end).min(canvas.width) {
        let centre = mid + slope * (x as f32 + 0.5 - centre_x) + amplitude * sin;
        // Vertical distance over `stretch` (1 / cos of the slope angle) is the distance to the
        // curve's tangent line.
        let gradient = slope + amplitude * wave * cos;
        let stretch = (1.0 + gradient * gradient).sqrt();
        let shrink = stretch.recip();
        // Rows farther than this get less than half a step.
        let reach = (half + 0.5 - 0.5 / COVER_STEPS as f32) * stretch;
        let top = floor_index((centre - reach).max(0.0));
        let bottom = floor_index((centre + reach + 1.0).max(0.0)).min(canvas.height);
        for y in top..bottom {
            let distance = (y as f32 + 0.5 - centre).abs() * shrink;
            canvas.paint(x, y, (half + 0.5 - distance).max(0.0), pen);
        }
        (sin, cos) = (
            sin * turn_cos + cos * turn_sin,
            cos * turn_cos - sin * turn_sin,
        );
    }
}

/// Sparse single-pixel specks in the pens' inks: they break up runs a bot could threshold on, and
/// are few enough to cost people nothing and the PNG little.
fn sprinkle_dots(canvas: &mut Canvas, rng: &mut StdRng) {
    let count = canvas.width * canvas.height / 150;
    for _ in 0..count {
        let x = rng.random_range(0..canvas.width);
        let y = rng.random_range(0..canvas.height);
        let pen = rng.random_range(0..PENS) as u8;
        canvas.paint(x, y, rng.random_range(0.5..1.0), pen);
    }
}

/// Anti-aliased polygon filler by signed-area accumulation: every edge adds, to each cell it
/// crosses, the signed share of that row's coverage it starts there; a running sum along the row
/// then gives each pixel's coverage. The edge arithmetic follows ab_glyph_rasterizer's
/// `draw_line` (Apache-2.0, after font-rs). Kept here rather than calling ab_glyph's `draw`
/// because that allocates per glyph and divides per pixel, which was most of the render time;
/// this one spans the canvas, is reused for every shape and clears only the cells a shape touched.
struct Raster {
    width: usize,
    height: usize,
    /// `width + 2` cells per row: an edge at x = width still writes its right neighbour.
    cells: Vec<f32>,
    /// Rows and columns of the cells touched since the last fill (empty when none).
    rows: Range<usize>,
    columns: Range<usize>,
}

impl Raster {
    fn new(width: usize, height: usize) -> Self {
        Self {
            width,
            height,
            cells: vec![0.0; (width + 2) * height],
            rows: 0..0,
            columns: 0..0,
        }
    }

    /// Adds the edge from `a` to `b`, in pixels. Winding is up to the caller: a shape's edges
    /// must close, and edges going down add coverage where edges going up remove it. Parts left of
    /// the canvas count at its left edge; parts above, below or right of it are dropped.
    fn line(&mut self, a: Point, b: Point) {
        let (sign, top, bottom) = if a.y < b.y { (1.0, a, b) } else { (-1.0, b, a) };
        let (y_start, y_end) = (top.y.max(0.0), bottom.y.min(self.height as f32));
        if y_start >= y_end {
            return;
        }
        let dxdy = (bottom.x - top.x) / (bottom.y - top.y);
        let width = self.width as f32;
        let stride = self.width + 2;
        let (first_row, end_row) = (floor_index(y_start), ceil_index(y_end));
        let mut x = top.x + (y_start - top.y) * dxdy;
        for y in first_row..end_row {
            let dy = ((y + 1) as f32).min(y_end) - (y as f32).max(y_start);
            let x_next = x + dxdy * dy;
            let area = dy * sign;
            let (x0, x1) = (
                x.min(x_next).clamp(0.0, width),
                x.max(x_next).clamp(0.0, width),
            );
            let row = &mut self.cells[y * stride..(y + 1) * stride];
            let (i0, i1) = (floor_index(x0), ceil_index(x1));
            if i1 <= i0 + 1 {
                // Within one pixel: its share is set by where the edge crosses on average.
                let right = (x0 + x1) / 2.0 - i0 as f32;
                row[i0] += area * (1.0 - right);
                row[i0 + 1] += area * right;
            } else {
                // Across pixels: `share(i)` of the row lies right of the edge up to pixel i; a
                // triangle in the first and last pixel, equal slices in between.
                let per_pixel = (x1 - x0).recip();
                let into_first = x0 - i0 as f32;
                let first = 0.5 * per_pixel * (1.0 - into_first) * (1.0 - into_first);
                let into_last = x1 - (i1 - 1) as f32;
                let last = 0.5 * per_pixel * into_last * into_last;
                row[i0] += area * first;
                if i1 == i0 + 2 {
                    row[i0 + 1] += area * (1.0 - first - last);
                } else {
                    let second = per_pixel * (1.5 - into_first);
                    row[i0 + 1] += area * (second - first);
                    for cell in &mut row[i0 + 2..i1 - 1] {
                        *cell += area * per_pixel;
                    }
                    let before_last = second + (i1 - i0 - 3) as f32 * per_pixel;
                    row[i1 - 1] += area * (1.0 - before_last - last);
                }
                row[i1] += area * last;
            }
            x = x_next;
        }
        // Cells written lie between the floor of the leftmost x and one past the ceiling of the
        // rightmost.
        let left = floor_index(top.x.min(bottom.x).clamp(0.0, width));
        let right = (ceil_index(top.x.max(bottom.x).clamp(0.0, width)) + 2).min(stride);
        if self.rows.is_empty() {
            (self.rows, self.columns) = (first_row..end_row, left..right);
        } else {
            self.rows = self.rows.start.min(first_row)..self.rows.end.max(end_row);
            self.columns = self.columns.start.min(left)..self.columns.end.max(right);
        }
    }

    /// Turns the edges added since the last fill into coverage, lays it onto the canvas with
    /// `pen`, and clears the cells for the next shape.
    fn fill(&mut self, canvas: &mut Canvas, pen: u8) {
        let (rows, columns) = (
            std::mem::replace(&mut self.rows, 0..0),
            std::mem::replace(&mut self.columns, 0..0),
        );
        let stride = self.width + 2;
        let visible = columns.start.min(self.width)..columns.end.min(self.width);
        for y in rows {
            let cells = &mut self.cells[y * stride..(y + 1) * stride];
            let pixels = &mut canvas.ink[y * self.width..(y + 1) * self.width];
            let mut cover = 0.0;
            for (cell, pixel) in cells[visible.clone()]
                .iter()
                .zip(&mut pixels[visible.clone()])
            {
                cover += cell;
                blend(pixel, cover.abs(), pen);
            }
            cells[columns.clone()].fill(0.0);
        }
    }
}

/// `ceil(v) as usize` for non-negative `v` below 2^32, without a libm call on baseline x86-64
/// (going through `u32` is also a shorter conversion than straight to `usize`).
fn ceil_index(v: f32) -> usize {
    let floor = v as u32;
    (floor + u32::from(v > floor as f32)) as usize
}

/// `floor(v) as usize` for non-negative `v` below 2^32.
fn floor_index(v: f32) -> usize {
    v as u32 as usize
}

/// Encodes 4-bit palette indices (`Canvas::packed_indices`) as an indexed-colour PNG.
///
/// `image`'s PNG encoder has no palette mode, but the scanlines of a 4-bit indexed PNG `width`
/// pixels wide are byte-for-byte those of an 8-bit greyscale PNG `ceil(width / 2)` pixels wide
/// (filters work on whole bytes for both). So the packed indices go through it as greyscale and
/// the header is then rewritten: real width, bit depth 4, indexed colour, plus a palette chunk.
fn encode_png(
    packed: &[u8],
    width: u32,
    height: u32,
    palette: &[[u8; 3]],
) -> Result<Vec<u8>, RenderError> {
    // Deflate's fixed set-up costs more than a small picture's whole render, and a small
    // picture stored uncompressed is still within the size budget; bigger ones are compressed.
    let compression = if packed.len() <= STORE_UP_TO {
        CompressionType::Uncompressed
    } else {
        CompressionType::Fast
    };
    let mut png = Vec::with_capacity(packed.len() + PNG_OVERHEAD);
    PngEncoder::new_with_quality(&mut png, compression, FilterType::Sub).write_image(
        packed,
        width.div_ceil(2),
        height,
        ExtendedColorType::L8,
    )?;
    if png.len() < IHDR_CRC.end || png[IHDR_TYPE] != *b"IHDR" {
        return Err(unexpected_png("IHDR is not the first chunk"));
    }
    png[IHDR_WIDTH].copy_from_slice(&width.to_be_bytes());
    png[IHDR_BIT_DEPTH] = 4;
    png[IHDR_COLOUR_TYPE] = INDEXED_COLOUR;
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

/// Largest packed picture that is stored rather than compressed (the default 160x60 packs to
/// 4.8 KB).
const STORE_UP_TO: usize = 6 * 1024;
/// PNG bytes beyond the pixels: signature, chunk headers, palette, filter bytes of up to
/// `MAX_HEIGHT` rows, deflate block headers. Enough that a stored picture's buffer never regrows.
const PNG_OVERHEAD: usize = 512;
/// Where the IHDR chunk's fields sit: the PNG format puts it right after the 8-byte signature,
/// as a 4-byte length, the type, 13 bytes of data and a CRC.
const IHDR_TYPE: Range<usize> = 12..16;
const IHDR_WIDTH: Range<usize> = 16..20;
const IHDR_BIT_DEPTH: usize = 24;
const IHDR_COLOUR_TYPE: usize = 25;
const IHDR_CRC: Range<usize> = 29..33;
const INDEXED_COLOUR: u8 = 3;

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

/// CRC-32 (ISO-HDLC, as PNG uses) over `bytes`; only the rewritten header and the palette go
/// through it, so a byte-wise table is plenty.
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
        let sizes = [
            (DEFAULT_WIDTH, DEFAULT_HEIGHT),
            (MIN_WIDTH, MIN_HEIGHT),
            (MAX_WIDTH, MAX_HEIGHT),
            (MIN_WIDTH, MAX_HEIGHT),
            (MAX_WIDTH, MIN_HEIGHT),
            (MIN_WIDTH + 1, MIN_HEIGHT + 1),
        ];
        for (width, height) in sizes {
            for answer in ["ABCD", "7XK9P", "WMWMWM"] {
                let png = render_png(answer, 42, width, height)?;
                assert!(png.starts_with(PNG_SIGNATURE));
                // The decoder checks every chunk's CRC, the rewritten IHDR and the PLTE included.
                let decoded = image::load_from_memory(&png)?;
                assert_eq!((decoded.width(), decoded.height()), (width, height));
            }
        }
        Ok(())
    }

    #[test]
    fn writes_a_4_bit_palette_png() -> TestResult {
        let png = render_png("H3KP7", 5, DEFAULT_WIDTH, DEFAULT_HEIGHT)?;
        assert_eq!(png[IHDR_BIT_DEPTH], 4);
        assert_eq!(png[IHDR_COLOUR_TYPE], INDEXED_COLOUR);
        assert_eq!(&png[IHDR_CRC.end + 4..IHDR_CRC.end + 8], b"PLTE");
        Ok(())
    }

    #[test]
    fn draws_dark_ink_on_a_light_background() -> TestResult {
        for seed in 0..20 {
            let png = render_png("H3KP7", seed, DEFAULT_WIDTH, DEFAULT_HEIGHT)?;
            let rgb = image::load_from_memory(&png)?.to_rgb8();
            let luma = |p: &image::Rgb<u8>| p.0.iter().map(|&c| u32::from(c)).sum::<u32>() / 3;
            let light = rgb.pixels().filter(|p| luma(p) >= 230).count();
            let dark = rgb.pixels().filter(|p| luma(p) <= 110).count();
            let total = rgb.pixels().len();
            assert!(
                light > total / 2,
                "{light} of {total} pixels are background"
            );
            assert!(dark > total / 12, "{dark} of {total} pixels are ink");
        }
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

    /// Coverage steps of row `y` of `canvas`, pen bits dropped.
    fn steps(canvas: &Canvas, y: usize) -> Vec<u8> {
        canvas.ink[y * canvas.width..(y + 1) * canvas.width]
            .iter()
            .map(|ink| ink >> PEN_BITS)
            .collect()
    }

    /// Adds the closed polygon through `points` to `raster`.
    fn polygon(raster: &mut Raster, points: &[(f32, f32)]) {
        for (i, &(x, y)) in points.iter().enumerate() {
            let (nx, ny) = points[(i + 1) % points.len()];
            raster.line(point(x, y), point(nx, ny));
        }
    }

    #[test]
    fn raster_covers_partial_pixels_in_proportion() {
        let (mut canvas, mut raster) = (Canvas::new(8, 3), Raster::new(8, 3));
        // Half of pixel 1, all of 2 and 3, a fifth of pixel 4; rows 0 and 1 fully.
        polygon(
            &mut raster,
            &[(1.5, 0.0), (4.2, 0.0), (4.2, 2.0), (1.5, 2.0)],
        );
        raster.fill(&mut canvas, 1);
        let five = COVER_STEPS as u8;
        for y in 0..2 {
            // 0.5 of a pixel is 2.5 steps, which rounds up.
            assert_eq!(steps(&canvas, y), [0, 3, five, five, 1, 0, 0, 0]);
        }
        assert_eq!(steps(&canvas, 2), [0; 8]);
        assert!(canvas.ink.iter().all(|ink| ink & 0b11 == 1 || *ink == 0));
        assert!(raster.cells.iter().all(|&cell| cell == 0.0), "fill clears");
    }

    #[test]
    fn raster_clips_to_the_canvas() {
        let (mut canvas, mut raster) = (Canvas::new(4, 2), Raster::new(4, 2));
        // A square from far left and above to far right and below: every pixel fully covered.
        polygon(
            &mut raster,
            &[(-5.0, -5.0), (9.0, -5.0), (9.0, 7.0), (-5.0, 7.0)],
        );
        raster.fill(&mut canvas, 0);
        let full = (COVER_STEPS as u8) << PEN_BITS;
        assert!(
            canvas.ink.iter().all(|&ink| ink == full),
            "{:?}",
            canvas.ink
        );
    }

    #[test]
    fn raster_fills_a_slanted_shape_with_its_area() {
        let (mut canvas, mut raster) = (Canvas::new(20, 20), Raster::new(20, 20));
        // A triangle with sloping edges.
        polygon(&mut raster, &[(2.3, 1.7), (17.9, 4.1), (6.1, 17.3)]);
        raster.fill(&mut canvas, 2);
        let area: f32 = canvas
            .ink
            .iter()
            .map(|ink| f32::from(ink >> PEN_BITS) / COVER_STEPS as f32)
            .sum();
        let ((ax, ay), (bx, by), (cx, cy)) = ((2.3_f32, 1.7_f32), (17.9, 4.1), (6.1, 17.3));
        let exact = ((bx - ax) * (cy - ay) - (cx - ax) * (by - ay)).abs() / 2.0;
        // Each edge pixel may be off by half a step; there are about 45 of them.
        assert!((area - exact).abs() < 3.0, "{area} vs {exact}");
    }

    #[test]
    fn crc32_matches_png_reference() {
        // Every PNG ends with this chunk; its CRC is fixed by the format.
        assert_eq!(crc32(b"IEND"), 0xAE42_6082);
    }
}
