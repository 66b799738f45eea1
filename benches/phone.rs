//! Cost of reading a phone number: vcode's `Phone::parse` (plain digits through its own
//! compiled numbering plan; anything with separators or prefixes through the `phonenumber`
//! crate) against the crate's own parse and validity check, on numbers new every time.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use vcode::domain::{Phone, Region};

/// A different valid Chinese mobile number for each `i`.
fn number(i: u64, plus: bool) -> String {
    let sign = if plus { "+86" } else { "" };
    format!("{sign}139{:08}", i % 100_000_000)
}

fn crate_parse(input: &str, region: Option<phonenumber::country::Id>) -> Option<String> {
    let number = phonenumber::parse(region, input).ok()?;
    phonenumber::is_valid(&number)
        .then(|| format!("+{}{}", number.country().code(), number.national()))
}

fn phone(c: &mut Criterion) {
    let region = Region::default();
    let mut group = c.benchmark_group("phone");
    let mut i = 0;
    group.bench_function("vcode, E.164", |b| {
        b.iter(|| {
            i += 1;
            black_box(Phone::parse(&number(i, true), region))
        })
    });
    group.bench_function("vcode, national", |b| {
        b.iter(|| {
            i += 1;
            black_box(Phone::parse(&number(i, false), region))
        })
    });
    group.bench_function("vcode, with a trunk prefix (crate path)", |b| {
        b.iter(|| {
            i += 1;
            black_box(Phone::parse(&format!("0{}", number(i, false)), region))
        })
    });
    group.bench_function("phonenumber crate, E.164", |b| {
        b.iter(|| {
            i += 1;
            black_box(crate_parse(&number(i, true), None))
        })
    });
    group.bench_function("phonenumber crate, national", |b| {
        b.iter(|| {
            i += 1;
            black_box(crate_parse(
                &number(i, false),
                Some(phonenumber::country::Id::CN),
            ))
        })
    });
    group.finish();
}

criterion_group!(benches, phone);
criterion_main!(benches);
