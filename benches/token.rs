//! What a verification token adds to each successful `otp/verify`: signing one JWT (claims
//! serialised, Ed25519 signature, base64url) with `TokenIssuer::issue`, against the bare
//! Ed25519 signature of the same bytes with a key parsed once (jsonwebtoken parses its PKCS#8
//! key on every call; this shows what that costs).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use ed25519_dalek::Signer;
use vcode::token::{Audience, SigningKey, TokenIssuer, TokenSettings};

fn token(c: &mut Criterion) {
    let issuer = TokenIssuer::new(
        vec![SigningKey::from_seed(&[7; 32])],
        TokenSettings {
            issuer: "https://vcode.example".to_owned(),
            ttl: Duration::from_secs(300),
        },
    );
    let audience = Audience::parse("https://shop.example/login").unwrap();
    let mut group = c.benchmark_group("token");
    group.bench_function("issue (claims, Ed25519, base64url)", |b| {
        b.iter(|| {
            black_box(
                issuer
                    .issue("+8613800138000", "login", Some(&audience))
                    .unwrap(),
            )
        })
    });
    let token = issuer
        .issue("+8613800138000", "login", Some(&audience))
        .unwrap();
    let message = token.rsplit_once('.').unwrap().0.as_bytes().to_vec();
    let dalek = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    group.bench_function("bare Ed25519 signature, key parsed once", |b| {
        b.iter(|| black_box(dalek.sign(black_box(&message))))
    });
    group.finish();
}

criterion_group!(benches, token);
criterion_main!(benches);
