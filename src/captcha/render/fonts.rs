//! The fonts captchas are drawn in, compiled into the binary (see `assets/README.md`).

use std::sync::LazyLock;

use ab_glyph::FontRef;

/// A font and how thick its strokes are, so clutter can match them.
pub(super) struct CaptchaFont {
    pub font: FontRef<'static>,
    /// Width of a vertical stem as a share of the font's `PxScale` (ascent to descent), measured
    /// on the "H" of each font.
    pub stem: f32,
}

/// Parsed once per process. The bytes are compiled in, so a parse failure is a build defect (caught
/// by every test that renders), never a run-time condition: that is why `expect` is acceptable here.
pub(super) static FONTS: LazyLock<[CaptchaFont; 3]> = LazyLock::new(|| {
    let parse = |bytes: &'static [u8], stem: f32| CaptchaFont {
        font: FontRef::try_from_slice(bytes).expect("an embedded captcha font must parse"),
        stem,
    };
    [
        parse(
            include_bytes!("../../../assets/fonts/DejaVuSansMono-Bold.ttf"),
            0.124,
        ),
        parse(
            include_bytes!("../../../assets/fonts/DejaVuSerif-Bold.ttf"),
            0.161,
        ),
        parse(
            include_bytes!("../../../assets/fonts/LiberationSans-Bold.ttf"),
            0.129,
        ),
    ]
});
