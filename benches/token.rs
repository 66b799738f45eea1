//! What a verification token adds to each successful `otp/verify`: `TokenIssuer::issue`
//! (claims serialised, Ed25519 signature with the key parsed once, base64url), against the same
//! token through `jsonwebtoken::encode` (which parses its PKCS#8 key and derives the public key
//! on every call) and against the bare Ed25519 signature of the same bytes.

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
    let token = issuer
        .issue("+8613800138000", "login", Some(&audience))
        .unwrap();
    let mut group = c.benchmark_group("token");
    group.bench_function("issue (vcode: key parsed once)", |b| {
        b.iter(|| {
            black_box(
                issuer
                    .issue("+8613800138000", "login", Some(&audience))
                    .unwrap(),
            )
        })
    });
    let claims = serde_json::from_slice(
        &base64::Engine::decode(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            token.split('.').nth(1).unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    group.bench_function("jsonwebtoken::encode (key parsed per call)", |b| {
        b.iter(|| black_box(issuer.issue_with_jsonwebtoken(black_box(&claims))))
    });
    let message = token.rsplit_once('.').unwrap().0.as_bytes().to_vec();
    let dalek = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    group.bench_function("bare Ed25519 signature", |b| {
        b.iter(|| black_box(dalek.sign(black_box(&message))))
    });
    group.finish();
}

criterion_group!(benches, token);
criterion_main!(benches);
