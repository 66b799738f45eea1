//! The gate's checks against payloads made with the crate's own solver (the HTTP tests use an
//! independent implementation).

use altcha::{Solution, SolveChallengeOptions, solve_challenge};
use base64::Engine;

use super::*;
use crate::store::MemoryStore;

const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

/// Cheap enough for a debug build: a few dozen derivations of ten iterations each.
fn easy() -> PowSettings {
    PowSettings {
        cost: 10,
        max_counter: 40,
        ..PowSettings::default()
    }
}

fn service(key: &[u8]) -> Arc<PowService> {
    counted_service(key).0
}

/// A service and the daily counters it records into.
fn counted_service(key: &[u8]) -> (Arc<PowService>, Arc<Stats>) {
    let store = Arc::new(MemoryStore::default());
    let stats = Stats::spawn(store.clone(), Duration::from_secs(3600));
    let service = PowService::new(store, easy(), key, stats.clone());
    (Arc::new(service), stats)
}

fn solve(challenge: &Challenge) -> Solution {
    solve_challenge(SolveChallengeOptions::new(challenge))
        .expect("a valid challenge")
        .expect("solved within the timeout")
}

fn encode(challenge: &Challenge, solution: &Solution) -> String {
    let json = serde_json::json!({ "challenge": challenge, "solution": solution });
    base64::engine::general_purpose::STANDARD.encode(json.to_string())
}

async fn solved(service: &Arc<PowService>) -> String {
    let challenge = service.challenge().await.unwrap();
    encode(&challenge, &solve(&challenge))
}

async fn refusal(service: &PowService, payload: Option<&str>) -> Refusal {
    match service.verify(payload).await {
        Err(PowError::Refused(refusal)) => refusal,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_solved_challenge_is_accepted_once() {
    let service = service(KEY);
    let payload = solved(&service).await;
    service.verify(Some(&payload)).await.unwrap();
    assert_eq!(
        refusal(&service, Some(&payload)).await,
        Refusal::AlreadyUsed
    );
    // Another challenge is another use.
    service.verify(Some(&solved(&service).await)).await.unwrap();
}

#[tokio::test]
async fn challenges_are_signed_deterministic_and_expire() {
    let service = service(KEY);
    let challenge = service.challenge().await.unwrap();
    let json = serde_json::to_value(&challenge).unwrap();
    let parameters = &json["parameters"];
    assert_eq!(parameters["algorithm"], "PBKDF2/SHA-256");
    assert_eq!(parameters["cost"], 10);
    assert!(parameters["keySignature"].is_string(), "{json}");
    assert_eq!(json["signature"].as_str().unwrap().len(), 64, "{json}");
    let expires_in = parameters["expiresAt"].as_i64().unwrap() - unix_now().as_secs() as i64;
    assert!((299..=300).contains(&expires_in), "{expires_in}");
    let counter = solve(&challenge).counter;
    assert!((20..=40).contains(&counter), "{counter}");
}

#[tokio::test]
async fn missing_and_malformed_payloads_are_refused() {
    let service = service(KEY);
    for missing in [None, Some(""), Some("  ")] {
        assert_eq!(refusal(&service, missing).await, Refusal::Missing);
    }
    let widget_test_mode = base64::engine::general_purpose::STANDARD
        .encode(r#"{"challenge":null,"solution":null,"test":true}"#);
    for malformed in ["not base64!", "e30=", &widget_test_mode, &"A".repeat(5000)] {
        assert_eq!(
            refusal(&service, Some(malformed)).await,
            Refusal::Malformed,
            "{malformed}"
        );
    }
}

#[tokio::test]
async fn foreign_tampered_wrong_and_expired_challenges_are_refused() {
    let service = service(KEY);
    let foreign = service_with_other_key().await;
    assert_eq!(
        refusal(&service, Some(&foreign)).await,
        Refusal::BadSignature
    );

    let challenge = service.challenge().await.unwrap();
    let solution = solve(&challenge);
    let mut cheaper = challenge.clone();
    cheaper.parameters.cost = 1;
    assert_eq!(
        refusal(&service, Some(&encode(&cheaper, &solution))).await,
        Refusal::BadSignature
    );
    let mut wrong = solution.clone();
    wrong.derived_key = "00".repeat(32);
    assert_eq!(
        refusal(&service, Some(&encode(&challenge, &wrong))).await,
        Refusal::WrongSolution
    );
    // The untouched payload still works: refusals record nothing.
    service
        .verify(Some(&encode(&challenge, &solution)))
        .await
        .unwrap();

    let expired = create_challenge(CreateChallengeOptions {
        algorithm: "PBKDF2/SHA-256".to_owned(),
        cost: 10,
        counter: Some(3),
        expires_at: Some(unix_now().as_secs() as i64 - 1),
        hmac_signature_secret: Some(service.signature_secret.clone()),
        hmac_key_signature_secret: Some(service.key_signature_secret.clone()),
        ..CreateChallengeOptions::default()
    })
    .unwrap();
    let payload = encode(&expired, &solve(&expired));
    assert_eq!(refusal(&service, Some(&payload)).await, Refusal::Expired);
}

#[tokio::test]
async fn challenges_solutions_and_refusals_are_counted() {
    let (service, stats) = counted_service(KEY);
    let payload = solved(&service).await;
    service.verify(Some(&payload)).await.unwrap();
    for _ in 0..2 {
        refusal(&service, Some(&payload)).await;
    }
    let totals = stats.report(1).await.unwrap().totals;
    assert_eq!(totals["pow_challenges"], 1);
    assert_eq!(totals["pow_solved"], 1);
    assert_eq!(totals["pow_refused"], 2);
}

async fn service_with_other_key() -> String {
    solved(&service(b"another key, another service....")).await
}

#[test]
fn secrets_differ_by_use_and_by_key() {
    let a = derive_secret(KEY, b"one");
    assert_eq!(a.len(), 64);
    assert_ne!(a, derive_secret(KEY, b"two"));
    assert_ne!(a, derive_secret(b"other", b"one"));
    assert_eq!(a, derive_secret(KEY, b"one"));
}

#[test]
fn algorithms_parse_by_their_protocol_names() {
    assert_eq!(
        PowAlgorithm::parse("PBKDF2/SHA-256"),
        Some(PowAlgorithm::Pbkdf2Sha256)
    );
    assert_eq!(PowAlgorithm::parse("sha-256"), Some(PowAlgorithm::Sha256));
    assert_eq!(PowAlgorithm::parse("SCRYPT"), None);
}
