//! The renderer's promises: valid PNGs of the asked size within the byte budget, the same bytes
//! for the same seed, no ink per glyph or fixed slots to segment by, and shapes that cover
//! what they should.

use ab_glyph::{Font, OutlineCurve, point};
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::fonts::FONTS;
use super::paint::{Colours, Coverage, Picture};
use super::raster::Raster;
use super::shape::Shape;
use super::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

fn default_png(answer: &str, seed: u64) -> Result<Vec<u8>, RenderError> {
    render_png(answer, seed, DEFAULT_WIDTH, DEFAULT_HEIGHT)
}

fn rgb(png: &[u8]) -> Result<image::RgbImage, image::ImageError> {
    Ok(image::load_from_memory(png)?.to_rgb8())
}

/// Which pixels are mostly ink: darker than the midpoint between ink and background.
fn ink_mask(picture: &image::RgbImage) -> Vec<bool> {
    picture
        .pixels()
        .map(|p| p.0.iter().map(|&c| u32::from(c)).sum::<u32>() < 3 * 150)
        .collect()
}

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
        for answer in ["ACDE", "7XK9P", "WMWMWM"] {
            let png = render_png(answer, 42, width, height)?;
            assert!(png.starts_with(PNG_SIGNATURE));
            let decoded = image::load_from_memory(&png)?;
            assert_eq!((decoded.width(), decoded.height()), (width, height));
        }
    }
    Ok(())
}

#[test]
fn colours_follow_position_not_glyphs() -> TestResult {
    let png = default_png("H3KP7", 5)?;
    let mut colours: Vec<[u8; 3]> = rgb(&png)?.pixels().map(|p| p.0).collect();
    colours.sort_unstable();
    colours.dedup();
    // The old palette had three inks in five shades, one ink per glyph: 16 colours that told
    // the glyphs apart. Bands of a colour field across the picture make far more.
    assert!(colours.len() > 100, "{} colours", colours.len());
    Ok(())
}

#[test]
fn ink_changes_smoothly_so_neighbours_share_it() {
    let width = DEFAULT_WIDTH as usize;
    let colours = Colours::random(&mut StdRng::seed_from_u64(3), width);
    // Row 0 all ink, row 1 bare.
    let mut coverage = Coverage::new(width, 2);
    (0..width).for_each(|x| coverage.lay(x, 0, 1.0));
    let picture = Picture { coverage, colours };
    let indices = picture.indices();
    let (ink, bare) = indices.split_at(width);
    let luma =
        |[r, g, b]: [u8; 3]| (u32::from(r) * 299 + u32::from(g) * 587 + u32::from(b) * 114) / 1000;
    for x in 0..width {
        let (ink, bare) = (
            picture.colours.colour(ink[x]),
            picture.colours.colour(bare[x]),
        );
        assert!(
            luma(ink) + 120 < luma(bare),
            "column {x}: ink {ink:?} on {bare:?}"
        );
    }
    for x in 1..width {
        let (left, right) = (
            picture.colours.colour(ink[x - 1]),
            picture.colours.colour(ink[x]),
        );
        for c in 0..3 {
            // Glyphs side by side get all but the same ink.
            let step = left[c].abs_diff(right[c]);
            assert!(step <= 12, "column {x} channel {c} jumps by {step}");
        }
    }
}

#[test]
fn draws_dark_ink_on_a_light_background() -> TestResult {
    for seed in 0..20 {
        let picture = rgb(&default_png("H3KP7", seed)?)?;
        let luma = |p: &image::Rgb<u8>| p.0.iter().map(|&c| u32::from(c)).sum::<u32>() / 3;
        let light = picture.pixels().filter(|p| luma(p) >= 220).count();
        let dark = picture.pixels().filter(|p| luma(p) <= 110).count();
        let total = picture.pixels().len();
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
    let a = default_png("H3KP7", 7)?;
    assert_eq!(a, default_png("H3KP7", 7)?);
    assert_ne!(a, default_png("H3KP7", 8)?);
    assert_ne!(a, default_png("H3KP9", 7)?);
    Ok(())
}

#[test]
fn the_word_moves_between_pictures() -> TestResult {
    // Where the ink starts: with fixed slots it would barely move.
    let mut starts = Vec::new();
    for seed in 0..30 {
        let picture = rgb(&default_png("H3KP7", seed)?)?;
        let ink = ink_mask(&picture);
        let width = picture.width() as usize;
        let first = (0..width).find(|&x| ink.chunks_exact(width).filter(|row| row[x]).count() >= 3);
        starts.push(first.ok_or("a picture without ink")?);
    }
    let (min, max) = (starts.iter().min(), starts.iter().max());
    assert!(
        max.zip(min).is_some_and(|(max, min)| max - min >= 12),
        "word starts at {starts:?}"
    );
    Ok(())
}

/// Sizes of the 8-connected components of `mask`, largest first.
fn components(mask: &[bool], width: usize) -> Vec<usize> {
    let mut seen = vec![false; mask.len()];
    let mut sizes = Vec::new();
    for start in 0..mask.len() {
        if !mask[start] || seen[start] {
            continue;
        }
        let (mut stack, mut size) = (vec![start], 0);
        seen[start] = true;
        while let Some(at) = stack.pop() {
            size += 1;
            let (x, y) = ((at % width) as isize, (at / width) as isize);
            for (dx, dy) in [
                (-1, -1),
                (0, -1),
                (1, -1),
                (-1, 0),
                (1, 0),
                (-1, 1),
                (0, 1),
                (1, 1),
            ] {
                let (nx, ny) = (x + dx, y + dy);
                let next = (ny * width as isize + nx) as usize;
                if (0..width as isize).contains(&nx)
                    && ny >= 0
                    && next < mask.len()
                    && mask[next]
                    && !seen[next]
                {
                    seen[next] = true;
                    stack.push(next);
                }
            }
        }
        sizes.push(size);
    }
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    sizes
}

#[test]
fn glyphs_and_clutter_form_one_blob() -> TestResult {
    // The old picture fell apart into one component per glyph. Now the stroke across the word
    // joins them: connected components give no segmentation for free.
    let mut joined = 0;
    for seed in 0..40 {
        let picture = rgb(&default_png("H3KP7", seed)?)?;
        let ink = ink_mask(&picture);
        let sizes = components(&ink, picture.width() as usize);
        let total: usize = sizes.iter().sum();
        joined += usize::from(sizes[0] * 10 >= total * 9);
    }
    assert!(joined >= 36, "{joined} of 40 pictures are one blob");
    Ok(())
}

#[test]
fn every_default_size_png_is_under_8_kib() -> TestResult {
    let mut rng = StdRng::seed_from_u64(2);
    for seed in 0..200 {
        let answer = random_answer(&mut rng, MAX_LEN);
        let bytes = default_png(&answer, seed)?.len();
        assert!(bytes < 8 * 1024, "{answer} seed {seed}: {bytes} bytes");
    }
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
    for look_alike in b"0OQ1IL2Z5S8BT" {
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
fn every_font_draws_every_character() {
    for (n, font) in FONTS.iter().enumerate() {
        for &c in ALPHABET {
            let outline = font.font.outline(font.font.glyph_id(char::from(c)));
            assert!(
                outline.is_some_and(|o| !o.curves.is_empty()),
                "font {n} has no {}",
                char::from(c)
            );
        }
    }
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
            render_png("ACDEF", 1, width, height),
            Err(RenderError::Size { .. })
        ));
    }
    for answer in ["", "ACD", "ACDEFGH"] {
        assert!(matches!(
            default_png(answer, 1),
            Err(RenderError::AnswerLength(n)) if n == answer.len()
        ));
    }
    for (answer, bad) in [
        ("AC0EF", '0'),
        ("ACDEB", 'B'),
        ("acdef", 'a'),
        ("ACDEÉ", 'É'),
    ] {
        assert!(matches!(
            default_png(answer, 1),
            Err(RenderError::InvalidChar(c)) if c == bad
        ));
    }
}

#[test]
fn shapes_cover_partial_pixels_in_proportion() {
    let (mut coverage, mut shape) = (Coverage::new(8, 3), Shape::new());
    // A stroke along y = 1 from x = 1.5 to 4.2, 2 px wide: rows 0 and 1, half of pixel 1,
    // all of 2 and 3, a fifth of pixel 4.
    shape.stroke(point(1.5, 1.0), point(3.0, 1.0), point(4.2, 1.0), 2.0);
    shape.fill(&mut Raster::new(8, 3), &mut coverage);
    for y in 0..2 {
        let row: Vec<u8> = (0..8).map(|x| coverage.at(x, y)).collect();
        let expected = [0, 128, 255, 255, 51, 0, 0, 0];
        assert!(
            row.iter()
                .zip(expected)
                .all(|(&got, want)| got.abs_diff(want) <= 2),
            "row {y}: {row:?}"
        );
    }
    assert!((0..8).all(|x| coverage.at(x, 2) == 0));
}

#[test]
fn shapes_are_clipped_to_the_picture() {
    let (mut coverage, mut shape) = (Coverage::new(4, 2), Shape::new());
    // Far wider and taller than the picture on every side: every pixel fully covered.
    shape.stroke(point(-5.0, 1.0), point(2.0, 1.0), point(9.0, 1.0), 12.0);
    shape.fill(&mut Raster::new(4, 2), &mut coverage);
    for y in 0..2 {
        for x in 0..4 {
            assert_eq!(coverage.at(x, y), 255, "({x}, {y})");
        }
    }
}

#[test]
fn shapes_fill_a_slanted_outline_with_its_area() {
    let (mut coverage, mut shape) = (Coverage::new(20, 20), Shape::new());
    let corners = [point(2.3, 1.7), point(17.9, 4.1), point(6.1, 17.3)];
    for (i, &from) in corners.iter().enumerate() {
        let to = corners[(i + 1) % corners.len()];
        shape.curve(&OutlineCurve::Line(from, to), 1.0, |p| p);
    }
    shape.fill(&mut Raster::new(20, 20), &mut coverage);
    let area: f32 = (0..20)
        .flat_map(|y| (0..20).map(move |x| (x, y)))
        .map(|(x, y)| f32::from(coverage.at(x, y)) / 255.0)
        .sum();
    let [a, b, c] = corners;
    let exact = ((b.x - a.x) * (c.y - a.y) - (c.x - a.x) * (b.y - a.y)).abs() / 2.0;
    assert!((area - exact).abs() < 0.5, "{area} vs {exact}");
}
