//! Secrets at rest and in transit, one test per threat (issue 13):
//! - someone who reads the store (a dump, a backup, a replica, `MONITOR` of its writes) finds
//!   no pending code and no captcha answer: on Redis every key is walked and every value read
//!   by its type and as `DUMP` bytes; on the embedded store everything it hands back for a code,
//!   a captcha and an idempotency record is searched, and the types it hands back are
//!   destructured field by field, so a new field (a plain code, say) does not compile here
//!   unnoticed;
//! - a key rotation loses no pending code and no captcha (`VCODE_SECRET_KEY_PREVIOUS`);
//! - an instance with another key verifies nothing and delivers nothing;
//! - a gateway that redirects gets one request, and the code reaches no other host;
//! - a gateway tells vcode's requests from forged, altered and replayed ones with the recipe
//!   docs/security-at-rest.md shows (run by python3, as a gateway would).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use vcode::captcha::render::ALPHABET;
use vcode::domain::{CaptchaId, CodeLength, Purpose, VerificationId};
use vcode::idempotency::IdempotencyKey;
use vcode::keyring::{Keyring, SecretKey};
use vcode::store::{PendingCode, StoredCaptcha};
use vcode_wire::{CaptchaCreated, CaptchaVerifyRequest, SendRequest, VerifyRequest, paths};

use crate::support::app::{TestApp, webhook};
use crate::support::codes::{TEST_SECRET_KEY, keyring};
use crate::support::sms_gateway::{RECIPE, recipe_accepts, signed_webhook};
use crate::support::{
    Backend, RedisServer, SmsGateway, phone, random_phone, spawn_app_with, spawn_second_instance,
};

/// Ten digits and six characters, so that no timestamp or digest in the store holds one by
/// chance (a 6-digit code is a substring of one ms timestamp in 10^5).
const CODE_DIGITS: u8 = 10;
const ANSWER_CHARS: usize = 6;
const IDEMPOTENCY_KEY: &str = "secrets-at-rest-1";
/// The headers a gateway reads, as docs/security-at-rest.md names them.
const TIMESTAMP_HEADER: &str = "X-Vcode-Timestamp";
const SIGNATURE_HEADER: &str = "X-Vcode-Signature";

/// A second key (the one rotated to) and a third (no one's).
const KEY_B: &str = "bb54112086e743ad3b709897086ab1dfed7d187f521fc492d4c6a3db3d5dabc3";
const KEY_C: &str = "749a1502a4583099623472aa4e9019a97c971a424e968c97a78e784c3b9d2b31";

fn key(hex: &str) -> Arc<SecretKey> {
    Arc::new(SecretKey::parse(hex).expect("a valid key"))
}

/// What a test leaves pending: a code (delivered twice) and a captcha.
struct Secrets {
    number: String,
    code: String,
    /// The id the wrong guess went under.
    verification: String,
    captcha_id: String,
    answer: String,
}

async fn app_on(backend: Backend, gateway: &SmsGateway) -> TestApp {
    spawn_app_with(backend, |s| {
        // Dev mode keeps an outbox of sent codes in the store, on purpose: not here.
        s.dev_mode = false;
        s.sms = webhook(gateway.url());
        s.otp.code_length = CodeLength::new(CODE_DIGITS).expect("a valid length");
        s.otp.resend_cooldown = Duration::ZERO;
        s.captcha.length = ANSWER_CHARS;
    })
    .await
}

async fn create_captcha(app: &TestApp) -> String {
    let answer = app.post_json(paths::CAPTCHA, &Value::Null).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.data::<CaptchaCreated>().captcha_id
}

/// The answer of captcha `id` under `keyring`, from the seed the store holds.
async fn answer_under(app: &TestApp, keyring: &Keyring, id: &str) -> String {
    let id = CaptchaId::parse(id).expect("a captcha id");
    let StoredCaptcha { seed } = app
        .store
        .captchas
        .captcha(&id)
        .await
        .unwrap()
        .expect("pending captcha");
    keyring.captcha_answer(id.as_str(), seed, ALPHABET, ANSWER_CHARS)
}

async fn solve(app: &TestApp, id: &str, answer: &str) -> u16 {
    let request = CaptchaVerifyRequest::new(id, answer);
    app.post_json(paths::CAPTCHA_VERIFY, &request).await.status
}

/// A code sent twice (with an `Idempotency-Key`, so a record is kept), one wrong guess, and a
/// captcha whose picture was drawn: every kind of entry a code or an answer could leak into.
async fn leave_secrets(app: &TestApp, gateway: &SmsGateway) -> Secrets {
    let number = random_phone();
    let first = app.client.post(app.url(paths::OTP_SEND));
    let first = first.header(vcode_wire::headers::IDEMPOTENCY_KEY, IDEMPOTENCY_KEY);
    let answer = app.request(first.json(&SendRequest::new(&number))).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let verification = app.send_id(&number).await;
    let received = gateway.received();
    assert_eq!(received.len(), 2);
    let code = received[0]["code"].as_str().unwrap().to_owned();
    assert_eq!(received[1]["code"], code.as_str(), "resend=reuse");
    assert_eq!(
        app.verify_id(&verification, &another_code(&code))
            .await
            .code(),
        40010
    );
    let captcha_id = create_captcha(app).await;
    let png = app
        .client
        .get(app.url(&paths::captcha_image(&captcha_id)))
        .send()
        .await
        .unwrap();
    assert_eq!(png.status().as_u16(), 200);
    let answer = answer_under(app, keyring(), &captcha_id).await;
    Secrets {
        number,
        code,
        verification,
        captcha_id,
        answer,
    }
}

/// Every digit of `code` plus one: surely a wrong code.
fn another_code(code: &str) -> String {
    code.bytes()
        .map(|b| char::from(b'0' + (b - b'0' + 1) % 10))
        .collect()
}

/// The secrets searched for were the real ones: the code verifies, the answer solves.
async fn prove_real(app: &TestApp, secrets: &Secrets) {
    let verified = app.verify(&secrets.number, &secrets.code).await;
    assert_eq!(verified.status, 200, "{verified:?}");
    assert_eq!(solve(app, &secrets.captcha_id, &secrets.answer).await, 200);
}

/// Where in `haystack` (named by `place`) `needle` occurs, ASCII case-insensitively.
fn occurs(place: &str, haystack: &[u8], needle: &str) -> Option<String> {
    let needle = needle.to_ascii_lowercase().into_bytes();
    let haystack = haystack.to_ascii_lowercase();
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_slice())
        .then(|| place.to_owned())
}

/// Every key of `redis` and what a reader gets from it: its name, each value read by its type
/// (what `MONITOR` and a client see), and its `DUMP` (what an RDB backup or a replica holds).
async fn read_all_of(redis: &RedisServer) -> Vec<(String, Vec<u8>)> {
    let mut connection = redis.connection().await;
    let mut keys: Vec<String> = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut connection)
            .await
            .unwrap();
        keys.extend(batch);
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    keys.sort();
    keys.dedup();
    let mut read = Vec::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(&mut connection)
            .await
            .unwrap();
        let command = match kind.as_str() {
            "string" => redis::cmd("GET").arg(&key).clone(),
            "hash" => redis::cmd("HGETALL").arg(&key).clone(),
            "zset" => redis::cmd("ZRANGE")
                .arg(&key)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .clone(),
            "list" => redis::cmd("LRANGE").arg(&key).arg(0).arg(-1).clone(),
            "set" => redis::cmd("SMEMBERS").arg(&key).clone(),
            "none" => continue, // expired since the SCAN
            other => panic!("{key} is a {other}: read it here too"),
        };
        let values: Vec<Vec<u8>> = match kind.as_str() {
            "string" => vec![command.query_async(&mut connection).await.unwrap()],
            _ => command.query_async(&mut connection).await.unwrap(),
        };
        let dump: Option<Vec<u8>> = redis::cmd("DUMP")
            .arg(&key)
            .query_async(&mut connection)
            .await
            .unwrap();
        read.push((format!("the name of {key}"), key.clone().into_bytes()));
        for value in values {
            read.push((format!("a value of {key} ({kind})"), value));
        }
        read.push((format!("DUMP {key}"), dump.unwrap_or_default()));
    }
    read
}

fn found_in(read: &[(String, Vec<u8>)], needle: &str) -> Vec<String> {
    read.iter()
        .filter_map(|(place, bytes)| occurs(place, bytes, needle))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reader_of_redis_finds_no_code_and_no_captcha_answer() {
    let gateway = SmsGateway::start();
    let app = app_on(Backend::Redis, &gateway).await;
    let secrets = leave_secrets(&app, &gateway).await;
    let redis = app.redis.as_ref().expect("the test's Redis");

    let read = read_all_of(redis).await;
    let kinds = ["the name of", "(hash)", "(zset)", "DUMP"];
    for kind in kinds {
        assert!(read.iter().any(|(p, _)| p.contains(kind)), "no {kind}");
    }
    assert_eq!(found_in(&read, &secrets.code), Vec::<String>::new());
    assert_eq!(found_in(&read, &secrets.answer), Vec::<String>::new());
    // The walk sees what the store holds: the phone, in the code's key and the quota logs.
    assert!(found_in(&read, &secrets.number).len() >= 2);

    // ... and would see a code in a hash value: a canary written the way the base stored codes.
    let mut connection = redis.connection().await;
    let canary = format!("verify_code:{{{}}}:canary", secrets.number);
    let () = redis::cmd("HSET")
        .arg(&canary)
        .arg("c")
        .arg(&secrets.code)
        .query_async(&mut connection)
        .await
        .unwrap();
    let found = found_in(&read_all_of(redis).await, &secrets.code);
    assert!(
        found.iter().any(|place| place.contains("(hash)")),
        "{found:?}"
    );
    let () = redis::cmd("DEL")
        .arg(&canary)
        .query_async(&mut connection)
        .await
        .unwrap();

    prove_real(&app, &secrets).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_embedded_store_holds_no_code_and_no_captcha_answer() {
    let gateway = SmsGateway::start();
    let app = app_on(Backend::Memory, &gateway).await;
    let secrets = leave_secrets(&app, &gateway).await;
    let (phone, purpose) = (phone(&secrets.number), Purpose::default());

    // Every field of a pending code as the store holds it: no code field to fill.
    let PendingCode {
        digest,
        sealed,
        failed_attempts,
        deliveries,
    } = app
        .store
        .codes
        .pending_code(&phone, &purpose)
        .await
        .unwrap()
        .expect("pending");
    // The wrong guess went under an id: its attempts count, not the code's.
    assert_eq!((failed_attempts, deliveries), (0, 2));
    let guessed = VerificationId::parse(&secrets.verification).expect("an id");
    let guessed = app.store.codes.verification(&guessed, None).await.unwrap();
    assert_eq!(guessed.expect("kept").failed_attempts, 1);
    let sealed = sealed.expect("resend=reuse keeps a sealed copy");
    for (place, bytes) in [("digest", &digest.0[..]), ("sealed copy", &sealed.0[..])] {
        assert_eq!(occurs(place, bytes, &secrets.code), None);
    }
    // The sealed copy is this code, and opens only under the key.
    let opened = keyring().open_code(phone.key(), purpose.as_str(), &digest, &sealed);
    assert_eq!(opened.expect("opens under the key").expose(), secrets.code);
    let other = Keyring::new(&key(KEY_C), None);
    assert!(
        other
            .open_code(phone.key(), purpose.as_str(), &digest, &sealed)
            .is_none()
    );

    // A captcha is a seed; under another key the same seed gives another answer.
    let under_c = answer_under(&app, &other, &secrets.captcha_id).await;
    assert_ne!(under_c, secrets.answer);

    // The idempotency record the send left is its answer, which holds no code.
    let key = IdempotencyKey::parse(IDEMPOTENCY_KEY.as_bytes(), None).unwrap();
    let record = app
        .store
        .idempotency
        .begin_idempotent(key.as_str(), b"probe", Duration::from_secs(1))
        .await
        .unwrap()
        .expect("the send's record");
    assert!(occurs("record", &record, "expires_in").is_some());
    assert_eq!(occurs("record", &record, &secrets.code), None);

    prove_real(&app, &secrets).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_key_rotation_keeps_pending_codes_and_captchas() {
    let gateway = SmsGateway::start();
    let before = app_on(Backend::Redis, &gateway).await;
    let number = random_phone();
    assert_eq!(before.send(&number).await.status, 200);
    let code = gateway.received()[0]["code"].as_str().unwrap().to_owned();
    let captcha_id = create_captcha(&before).await;
    let answer = answer_under(&before, keyring(), &captcha_id).await;

    // VCODE_SECRET_KEY=B, VCODE_SECRET_KEY_PREVIOUS=A, on the same Redis.
    let rotated = spawn_second_instance(&before, |s| {
        s.secret_key = Some(key(KEY_B));
        s.secret_key_previous = Some(key(TEST_SECRET_KEY));
        s.sms = webhook(gateway.url());
        s.otp.code_length = CodeLength::new(CODE_DIGITS).unwrap();
        s.otp.resend_cooldown = Duration::ZERO;
        s.captcha.length = ANSWER_CHARS;
    })
    .await;
    // resend=reuse opens the copy sealed under A and delivers the same code.
    assert_eq!(rotated.send(&number).await.status, 200);
    assert_eq!(gateway.received()[1]["code"], code.as_str());
    assert_eq!(rotated.verify(&number, &code).await.status, 200);
    assert_eq!(solve(&rotated, &captcha_id, &answer).await, 200);

    // One code TTL later A is dropped: what B issued verifies under B alone.
    let another = random_phone();
    assert_eq!(rotated.send(&another).await.status, 200);
    let new_code = gateway.received()[2]["code"].as_str().unwrap().to_owned();
    let settled = spawn_second_instance(&before, |s| {
        s.secret_key = Some(key(KEY_B));
        s.otp.code_length = CodeLength::new(CODE_DIGITS).unwrap();
    })
    .await;
    assert_eq!(settled.verify(&another, &new_code).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_instance_with_another_key_verifies_and_delivers_nothing() {
    let gateway = SmsGateway::start();
    let owner = app_on(Backend::Redis, &gateway).await;
    let number = random_phone();
    assert_eq!(owner.send(&number).await.status, 200);
    let code = gateway.received()[0]["code"].as_str().unwrap().to_owned();
    let (refused, solvable) = (create_captcha(&owner).await, create_captcha(&owner).await);
    let refused_answer = answer_under(&owner, keyring(), &refused).await;
    let solvable_answer = answer_under(&owner, keyring(), &solvable).await;

    let stranger = spawn_second_instance(&owner, |s| {
        s.secret_key = Some(key(KEY_C));
        s.sms = webhook(gateway.url());
        s.otp.code_length = CodeLength::new(CODE_DIGITS).unwrap();
        s.otp.resend_cooldown = Duration::ZERO;
        s.otp.verify_by = vcode::otp::VerifyBy::Either;
        s.captcha.length = ANSWER_CHARS;
    })
    .await;
    // The owner's id says where it leads under the owner's key only: to the stranger it is
    // unknown, and by phone its digest of the right code is wrong.
    let unknown = stranger.verify(&number, &code).await;
    assert_eq!(
        (unknown.status, unknown.code()),
        (404, 40401),
        "{unknown:?}"
    );
    let by_phone = VerifyRequest {
        verification_id: None,
        ..VerifyRequest::new(&number, &code)
    };
    let wrong = stranger.post_json(paths::OTP_VERIFY, &by_phone).await;
    assert_eq!((wrong.status, wrong.code()), (400, 40010), "{wrong:?}");
    assert_eq!(solve(&stranger, &refused, &refused_answer).await, 400);
    // Its resend cannot open the sealed copy: nothing is sent.
    let resend = stranger.send(&number).await;
    assert_eq!((resend.status, resend.code()), (500, 50000), "{resend:?}");
    assert_eq!(gateway.received().len(), 1);

    // The code and the answers were right: the owner's key accepts them.
    assert_eq!(owner.verify(&number, &code).await.status, 200);
    assert_eq!(solve(&owner, &solvable, &solvable_answer).await, 200);
}

async fn a_redirecting_gateway_gets_one_request_and_no_other_host_the_code(backend: Backend) {
    let gateway = SmsGateway::start();
    let elsewhere = SmsGateway::start();
    let app = app_on(backend, &gateway).await;
    let number = random_phone();
    for (sent, status) in [301, 302, 303, 307, 308].into_iter().enumerate() {
        gateway.redirect_to(status, elsewhere.url());
        let answer = app.send(&number).await;
        assert_eq!(
            (answer.status, answer.code()),
            (502, 50200),
            "{status}: {answer:?}"
        );
        assert_eq!(gateway.hits(), sent as u64 + 1, "{status}: one request");
        assert_eq!(elsewhere.hits(), 0, "{status}: the redirect was followed");
        let pending = app
            .store
            .codes
            .pending_code(&phone(&number), &Purpose::default())
            .await
            .unwrap();
        assert!(pending.is_none(), "{status}: the code was rolled back");
    }
    gateway.succeed();
    assert_eq!(app.send(&number).await.status, 200);
    assert_eq!(elsewhere.hits(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_redirecting_gateway_on_the_embedded_store() {
    a_redirecting_gateway_gets_one_request_and_no_other_host_the_code(Backend::Memory).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_redirecting_gateway_on_redis() {
    a_redirecting_gateway_gets_one_request_and_no_other_host_the_code(Backend::Redis).await
}

const WEBHOOK_SECRET: &str = "whsec-test-0123456789abcdef0123456789abcdef";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gateway_tells_vcodes_requests_from_forged_and_replayed_ones() {
    let gateway = SmsGateway::start();
    let app = spawn_app_with(Backend::Memory, |s| {
        s.sms = signed_webhook(gateway.url(), WEBHOOK_SECRET);
    })
    .await;
    assert_eq!(app.send(&random_phone()).await.status, 200);
    let captured = gateway.requests().remove(0);
    let header = |name: &str| match captured.header(name) {
        Some(value) => value.to_owned(),
        None => panic!("no {name}: {captured:?}"),
    };
    let (timestamp, signature) = (header(TIMESTAMP_HEADER), header(SIGNATURE_HEADER));
    let signed_at: u64 = timestamp.parse().expect("Unix seconds");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    assert!(
        signed_at.abs_diff(now.unwrap().as_secs()) < 60,
        "{timestamp}"
    );
    assert!(signature.starts_with("v1=") && signature.len() == 3 + 64);
    let body = captured.body.as_slice();
    let accepts = |secret: &str, timestamp: &str, body: &[u8], now: Option<u64>| {
        recipe_accepts(secret, timestamp, &signature, body, now)
    };

    assert!(accepts(WEBHOOK_SECRET, &timestamp, body, None));
    // Four minutes later (a retry, a slow queue) it is still vcode's.
    assert!(accepts(
        WEBHOOK_SECRET,
        &timestamp,
        body,
        Some(signed_at + 240)
    ));

    let code = captured.json()["code"].as_str().unwrap().to_owned();
    let text = String::from_utf8(body.to_vec()).unwrap();
    let altered = text.replace(&code, &another_code(&code)).into_bytes();
    assert_ne!(altered, body);
    assert!(
        !accepts(WEBHOOK_SECRET, &timestamp, &altered, None),
        "altered"
    );
    let fresh = (signed_at + 1).to_string();
    assert!(!accepts(WEBHOOK_SECRET, &fresh, body, None), "re-dated");
    let late = Some(signed_at + 301);
    assert!(!accepts(WEBHOOK_SECRET, &timestamp, body, late), "replayed");
    let forger = "whsec-forged-0123456789abcdef0123456789abcdef";
    assert!(!accepts(forger, &timestamp, body, None), "forged");
}

#[test]
fn the_tested_recipe_is_the_documented_one() {
    let script = std::fs::read_to_string(RECIPE).unwrap();
    let recipe = script
        .split("# --- recipe ---\n")
        .nth(1)
        .and_then(|rest| rest.split("# --- end of recipe ---").next())
        .expect("the script marks its recipe");
    let docs = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/security-at-rest.md");
    let docs = std::fs::read_to_string(docs).unwrap();
    let documented = docs
        .split("```python\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the docs show the recipe in a python block");
    assert_eq!(documented.trim(), recipe.trim());
}
