//! What codes at rest cost a request: the keyed digest a send stores and a verify compares
//! (once per key in use), and the sealing and opening of a code a resend delivers again.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use vcode::domain::{Code, CodeLength};
use vcode::keyring::{Keyring, SecretKey};

/// Two keys from `openssl rand -hex 32` (a typed key is refused as not random).
const KEYS: [&str; 2] = [
    "fa039b2042c64648c530ab280bd1275e464eb9b6b44ff81733d7e49f31924411",
    "06741e6426d5a44dde5dccae0f25464a16d17f9e2d1794182a4420cae2e167d2",
];

fn key(n: usize) -> SecretKey {
    SecretKey::parse(KEYS[n - 1]).expect("a 32-byte random key")
}

fn keyring(c: &mut Criterion) {
    let current = Keyring::new(&key(1), None);
    let rotating = Keyring::new(&key(1), Some(&key(2)));
    let code = Code::generate(CodeLength::default());
    let (phone, purpose) = ("+8613800138000", "login");
    let digest = current.code_digest(phone, purpose, &code);
    let sealed = current.seal_code(&digest, &code);

    let mut group = c.benchmark_group("keyring");
    group.bench_function("digest (send)", |b| {
        b.iter(|| black_box(current.code_digest(black_box(phone), purpose, &code)))
    });
    group.bench_function("digests, one key (verify)", |b| {
        b.iter(|| black_box(current.code_digests(black_box(phone), purpose, &code)))
    });
    group.bench_function("digests, during a rotation (verify)", |b| {
        b.iter(|| black_box(rotating.code_digests(black_box(phone), purpose, &code)))
    });
    group.bench_function("seal (send, resend=reuse)", |b| {
        b.iter(|| black_box(current.seal_code(black_box(&digest), &code)))
    });
    group.bench_function("open (resend)", |b| {
        b.iter(|| black_box(current.open_code(black_box(phone), purpose, &digest, &sealed)))
    });
    group.finish();
}

criterion_group!(benches, keyring);
criterion_main!(benches);
