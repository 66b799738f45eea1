//! CPU time per image of the captcha renderer (render + PNG encode), side by side with captcha-rs
//! and with the same kind of picture drawn by imageproc when the `bench-captcha-rs` feature is
//! on; and what each PNG encoder setting costs and saves on the renderer's own pictures.

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use vcode::captcha::render::{
    DEFAULT_HEIGHT, DEFAULT_LEN, DEFAULT_WIDTH, MAX_HEIGHT, MAX_LEN, MAX_WIDTH, RenderError,
    render_png,
};

/// Fixed answers of the default and the longest length; only the seed varies between images.
const ANSWER: &str = "K7MXP";
const LONGEST_ANSWER: &str = "K7MXPW";
/// How many images the one-off average PNG size is taken over.
const SIZE_SAMPLES: u64 = 200;

fn vcode_png(seed: u64) -> Result<Vec<u8>, RenderError> {
    render_png(ANSWER, seed, DEFAULT_WIDTH, DEFAULT_HEIGHT)
}

/// Average of `SIZE_SAMPLES` image sizes from `size_of(seed)`, or its first error.
fn average_len<E>(mut size_of: impl FnMut(u64) -> Result<usize, E>) -> Result<usize, E> {
    let mut total = 0;
    for seed in 0..SIZE_SAMPLES {
        total += size_of(seed)?;
    }
    Ok(total / SIZE_SAMPLES as usize)
}

fn report_size<E: std::fmt::Display>(name: &str, average: Result<usize, E>) {
    match average {
        Ok(bytes) => eprintln!("{name}: average {bytes} bytes over {SIZE_SAMPLES} images"),
        Err(e) => eprintln!("{name}: failed to render: {e}"),
    }
}

fn bench_render(c: &mut Criterion<CpuTime>) {
    report_size(
        "vcode png",
        average_len(|seed| vcode_png(seed).map(|png| png.len())),
    );
    #[cfg(feature = "bench-captcha-rs")]
    {
        report_size(
            "captcha-rs png",
            average_len(|_| captcha_rs::png().map(|png| png.len())),
        );
        report_size(
            "captcha-rs native jpeg",
            average_len(|_| Ok::<_, std::convert::Infallible>(captcha_rs::native_len())),
        );
    }

    let mut group = c.benchmark_group(format!(
        "captcha {DEFAULT_WIDTH}x{DEFAULT_HEIGHT} len {DEFAULT_LEN}"
    ));
    // One element per image, so criterion reports images per second.
    group.throughput(Throughput::Elements(1));
    group.bench_function("vcode render_png", |b| {
        let mut seed = 0;
        b.iter(|| {
            seed += 1;
            black_box(vcode_png(seed))
        });
    });
    #[cfg(feature = "bench-captcha-rs")]
    {
        group.bench_function("captcha-rs build + png", |b| {
            b.iter(|| black_box(captcha_rs::png()))
        });
        group.bench_function("captcha-rs build + native jpeg base64", |b| {
            b.iter(|| black_box(captcha_rs::native_base64()))
        });
        // A lower bound for captcha-rs whatever the encoding: drawing alone.
        group.bench_function("captcha-rs build only", |b| {
            b.iter(|| black_box(captcha_rs::build()))
        });
    }
    #[cfg(feature = "bench-captcha-rs")]
    group.bench_function("vcode render_png, ab_glyph_rasterizer fill", |b| {
        let mut seed = 0;
        b.iter(|| {
            seed += 1;
            black_box(vcode::captcha::render::render_png_with_crate_rasteriser(
                ANSWER,
                seed,
                DEFAULT_WIDTH,
                DEFAULT_HEIGHT,
            ))
        });
    });
    #[cfg(feature = "bench-captcha-rs")]
    group.bench_function("imageproc upright glyphs + rotate + polygon + png", |b| {
        let mut seed = 0;
        b.iter(|| {
            seed += 1;
            black_box(imageproc_draw::png(ANSWER, seed))
        });
    });
    group.finish();

    bench_png_settings(c);

    // The most expensive picture the service can be configured to draw.
    let mut largest = c.benchmark_group(format!("captcha {MAX_WIDTH}x{MAX_HEIGHT} len {MAX_LEN}"));
    largest.throughput(Throughput::Elements(1));
    largest.bench_function("vcode render_png", |b| {
        let mut seed = 0;
        b.iter(|| {
            seed += 1;
            black_box(render_png(LONGEST_ANSWER, seed, MAX_WIDTH, MAX_HEIGHT))
        });
    });
    largest.finish();
}

/// The `png` crate's settings on the renderer's own pictures (palette indices, 8 bits): time
/// to encode one, and the average and largest size over `SIZE_SAMPLES` of them.
fn bench_png_settings(c: &mut Criterion<CpuTime>) {
    use png::{Compression, Filter};
    let pictures: Vec<(Vec<u8>, Vec<u8>)> = (0..SIZE_SAMPLES)
        .map(|seed| indexed_pixels(&vcode_png(seed).expect("the renderer draws")))
        .collect();
    let encode = |(indices, palette): &(Vec<u8>, Vec<u8>), compression, filter| -> Vec<u8> {
        let mut png = Vec::new();
        let mut encoder = png::Encoder::new(&mut png, DEFAULT_WIDTH, DEFAULT_HEIGHT);
        encoder.set_color(png::ColorType::Indexed);
        encoder.set_palette(palette.as_slice());
        encoder.set_compression(compression);
        encoder.set_filter(filter);
        let mut writer = encoder.write_header().expect("a header");
        writer.write_image_data(indices).expect("pixels");
        writer.finish().expect("the end");
        png
    };
    let mut group = c.benchmark_group("png crate settings, 160x60 indexed");
    group.throughput(Throughput::Elements(1));
    for (compression, filter) in [
        (Compression::Fast, Filter::Sub),
        (Compression::Fast, Filter::Up),
        (Compression::Fast, Filter::Paeth),
        (Compression::Fast, Filter::Adaptive),
        (Compression::Balanced, Filter::Paeth),
    ] {
        let name = format!("{compression:?} {filter:?}");
        let sizes: Vec<usize> = pictures
            .iter()
            .map(|picture| encode(picture, compression, filter).len())
            .collect();
        eprintln!(
            "{name}: average {} bytes, largest {} over {SIZE_SAMPLES} pictures",
            sizes.iter().sum::<usize>() / sizes.len(),
            sizes.iter().max().unwrap_or(&0)
        );
        group.bench_function(name, |b| {
            let mut n = 0;
            b.iter(|| {
                n = (n + 1) % pictures.len();
                black_box(encode(&pictures[n], compression, filter))
            });
        });
    }
    group.finish();
}

/// The palette indices and the palette of an indexed PNG, as stored.
fn indexed_pixels(png: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(png));
    decoder.set_transformations(png::Transformations::IDENTITY);
    let mut reader = decoder.read_info().expect("a PNG header");
    let mut indices = vec![0; reader.output_buffer_size().expect("a small picture")];
    reader.next_frame(&mut indices).expect("pixels");
    let palette = reader
        .info()
        .palette
        .as_deref()
        .expect("a palette")
        .to_vec();
    (indices, palette)
}

/// The same kind of picture with imageproc, as far as it goes: each glyph drawn upright by
/// `draw_text_mut` (ab_glyph's own rasteriser) into a tile, the tile rotated (bilinear) and laid
/// on the picture, one stroke across as a polygon, coloured and encoded as vcode does (one ink
/// here, which only makes it cheaper). imageproc
/// has no warp of outlines and no anti-aliased thick stroke, so this is a lower bound of what it
/// would cost to draw what vcode draws.
#[cfg(feature = "bench-captcha-rs")]
mod imageproc_draw {
    use std::sync::LazyLock;

    use ab_glyph::{FontRef, PxScale};
    use image::{GrayImage, Luma};
    use imageproc::drawing::{draw_polygon_mut, draw_text_mut};
    use imageproc::geometric_transformations::{Interpolation, rotate_about_center};
    use imageproc::point::Point;

    use super::{DEFAULT_HEIGHT, DEFAULT_WIDTH};

    static FONT: LazyLock<FontRef<'static>> = LazyLock::new(|| {
        FontRef::try_from_slice(include_bytes!("../assets/fonts/DejaVuSansMono-Bold.ttf"))
            .expect("the font parses")
    });
    const TILE: u32 = 48;

    pub fn png(answer: &str, seed: u64) -> Vec<u8> {
        let mut coverage = GrayImage::new(DEFAULT_WIDTH, DEFAULT_HEIGHT);
        let mut text = [0; 4];
        for (i, c) in answer.chars().enumerate() {
            let mut tile = GrayImage::new(TILE, TILE);
            let glyph: &str = c.encode_utf8(&mut text);
            draw_text_mut(
                &mut tile,
                Luma([255]),
                10,
                2,
                PxScale::from(44.0),
                &*FONT,
                glyph,
            );
            // A tilt that changes with the seed and the position, about +-0.3 rad.
            let tilt =
                ((seed.wrapping_mul(31).wrapping_add(i as u64 * 17) % 13) as f32 - 6.0) * 0.05;
            let tilted = rotate_about_center(&tile, tilt, Interpolation::Bilinear, Luma([0]));
            let left = 8 + i as u32 * 28;
            for (x, y, pixel) in tilted.enumerate_pixels() {
                if left + x < DEFAULT_WIDTH && 6 + y < DEFAULT_HEIGHT {
                    let under = coverage.get_pixel_mut(left + x, 6 + y);
                    under.0[0] = under.0[0].max(pixel.0[0]);
                }
            }
        }
        let stroke = [
            Point::new(4, 27),
            Point::new(156, 31),
            Point::new(156, 37),
            Point::new(4, 33),
        ];
        draw_polygon_mut(&mut coverage, &stroke, Luma([255]));
        // Eight levels of one ink on one background, as a palette.
        let indices: Vec<u8> = coverage.pixels().map(|p| p.0[0] >> 5).collect();
        let palette: Vec<u8> = (0..8u32)
            .flat_map(|level| {
                [(240, 40), (236, 30), (244, 90)]
                    .map(|(background, ink)| ((background * (7 - level) + ink * level) / 7) as u8)
            })
            .collect();
        let mut png = Vec::new();
        let mut encoder = png::Encoder::new(&mut png, DEFAULT_WIDTH, DEFAULT_HEIGHT);
        encoder.set_color(png::ColorType::Indexed);
        encoder.set_palette(palette);
        encoder.set_compression(png::Compression::Fast);
        encoder.set_filter(png::Filter::Paeth);
        let mut writer = encoder.write_header().expect("a header");
        writer.write_image_data(&indices).expect("pixels");
        writer.finish().expect("the end");
        png
    }
}

/// captcha-rs at the same size and length as vcode's default.
#[cfg(feature = "bench-captcha-rs")]
mod captcha_rs {
    use captcha_rs::{Captcha, CaptchaBuilder};
    use image::ImageEncoder;
    use image::codecs::png::{CompressionType, FilterType, PngEncoder};

    use super::{DEFAULT_HEIGHT, DEFAULT_LEN, DEFAULT_WIDTH};

    pub fn build() -> Captcha {
        CaptchaBuilder::new()
            .length(DEFAULT_LEN)
            .width(DEFAULT_WIDTH)
            .height(DEFAULT_HEIGHT)
            .build()
    }

    /// Its picture as a PNG, with the cheapest `image` settings that still compress its
    /// full-colour picture well (fast deflate, Sub filter; `image`'s default adaptive filter is
    /// about a fifth slower here, and storing it uncompressed would make a 29 KB file).
    pub fn png() -> Result<Vec<u8>, image::ImageError> {
        let image = build().image;
        let mut png = Vec::with_capacity(16 * 1024);
        PngEncoder::new_with_quality(&mut png, CompressionType::Fast, FilterType::Sub)
            .write_image(
                image.as_bytes(),
                image.width(),
                image.height(),
                image.color().into(),
            )?;
        Ok(png)
    }

    /// What captcha-rs itself hands out: a `data:image/jpeg;base64,` URI at its default quality.
    pub fn native_base64() -> String {
        build().to_base64()
    }

    /// Size of the JPEG inside `native_base64` (decoded length of its padded base64 payload), to
    /// compare with a PNG body.
    pub fn native_len() -> usize {
        let uri = native_base64();
        let payload = uri.split_once(',').map_or("", |(_, data)| data);
        let padding = payload.bytes().rev().take_while(|&b| b == b'=').count();
        (payload.len() / 4 * 3).saturating_sub(padding)
    }
}

/// The CPU time the process spends (all its threads), not the wall-clock time: on a machine
/// shared with other work, waiting for a core would otherwise count as rendering time, and
/// differently for each benchmark. CPU time is also what one image costs a server.
struct CpuTime;

/// Wall time's formatter, which formats any duration in nanoseconds.
static DURATION_FORMAT: WallTime = WallTime;

impl Measurement for CpuTime {
    type Intermediate = Duration;
    type Value = Duration;

    fn start(&self) -> Duration {
        process_cpu_time()
    }
    fn end(&self, started: Duration) -> Duration {
        process_cpu_time().saturating_sub(started)
    }
    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }
    fn zero(&self) -> Duration {
        Duration::ZERO
    }
    fn to_f64(&self, value: &Duration) -> f64 {
        value.as_nanos() as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        DURATION_FORMAT.formatter()
    }
}

fn process_cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for the call to write; the clock id is a constant
    // every Linux kernel knows.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut now) };
    assert_eq!(status, 0, "the process CPU clock is readable");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(CpuTime);
    targets = bench_render
}
criterion_main!(benches);
