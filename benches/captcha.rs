//! Images per second of the captcha renderer (render + PNG encode), side by side with captcha-rs
//! when the `bench-captcha-rs` feature is on.

use std::hint::black_box;

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

fn bench_render(c: &mut Criterion) {
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
    group.finish();

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

criterion_group!(benches, bench_render);
criterion_main!(benches);
