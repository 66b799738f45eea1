//! Writes labelled captcha samples from the service's own renderer: what an attacker with the
//! source can make in unlimited numbers, and what `scripts/captcha-attack/` trains and tests on.
//!
//! `cargo run --release --example captcha_samples -- OUT_DIR COUNT [FIRST_SEED] [LENGTH]`
//!
//! Writes `OUT_DIR/NNNNNN.png` and `OUT_DIR/labels.csv` (`file,answer`). The answers and picture
//! seeds come from a generator seeded with `FIRST_SEED` (default 1), so a set is reproducible and
//! sets made with different seeds do not overlap.

use std::fmt::Write as _;
use std::path::PathBuf;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use vcode::captcha::render::{
    DEFAULT_HEIGHT, DEFAULT_LEN, DEFAULT_WIDTH, random_answer, render_png,
};

const USAGE: &str = "usage: captcha_samples OUT_DIR COUNT [FIRST_SEED] [LENGTH]";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(args.next().ok_or(USAGE)?);
    let count: usize = args.next().ok_or(USAGE)?.parse()?;
    let first_seed: u64 = args.next().map_or(Ok(1), |s| s.parse())?;
    let length: usize = args.next().map_or(Ok(DEFAULT_LEN), |s| s.parse())?;

    std::fs::create_dir_all(&out)?;
    let mut rng = StdRng::seed_from_u64(first_seed);
    let mut labels = String::from("file,answer\n");
    for n in 0..count {
        let answer = random_answer(&mut rng, length);
        let png = render_png(&answer, rng.random(), DEFAULT_WIDTH, DEFAULT_HEIGHT)?;
        let file = format!("{n:06}.png");
        std::fs::write(out.join(&file), png)?;
        writeln!(labels, "{file},{answer}")?;
    }
    std::fs::write(out.join("labels.csv"), labels)?;
    eprintln!("{count} samples in {}", out.display());
    Ok(())
}
