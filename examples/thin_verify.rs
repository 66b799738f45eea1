//! The thinnest actix-web handlers, as references for `scripts/bench-http.sh`: `GET /constant`
//! answers a fixed body; `POST /json` parses the `otp/verify` JSON and answers the same fixed
//! body; `POST /verify` parses the same JSON as `otp/verify` and runs one
//! EVALSHA of the same verify script over one shared multiplexed Redis connection;
//! `POST /verify-per-worker` does the same over a connection of each worker thread's own, as
//! vcode's store does on one node; `POST /verify-map` parses the same JSON and takes the code
//! out of a sharded in-process map under a mutex, as the embedded store's verify does its
//! lookup (a miss answers 404, a matching code is removed). `POST /send-map` parses the
//! `otp/send` JSON and does the least a send that keeps its codes hashed must: a code from a
//! CSPRNG, its keyed digest (HMAC-SHA256 over the same fields as vcode's), a random verification
//! id, the SMS's text, and in one shard of an in-process map under a mutex the phone's cooldown
//! and hourly count checked and the pending code stored; a JSON answer with the id (429 in a
//! cooldown). Nothing else: no phone parsing, no validation, no logging, no metrics, no budgets
//! beside the phone's own, no fraud guard. `POST /send-redis` does the same with the phone's
//! cooldown, hourly count and pending code in one Redis hash, checked and written by one
//! EVALSHA over the shared multiplexed connection (`SEND_SCRIPT`). `POST /sms` takes any body
//! and answers 200: the webhook SMS gateway of the delivery-receipt rows (the sender's message
//! id is vcode's own).
//!
//! `cargo run --release --example thin_verify -- 127.0.0.1:18090 redis://127.0.0.1:6390`

use std::time::{Duration, Instant};

use actix_web::{App, HttpResponse, HttpServer, web};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use rand::RngExt;
use redis::Script;
use redis::aio::ConnectionManager;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The same allocator as the `vcode` binary, so that the ratios measure handler work only.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Deserialize)]
struct VerifyRequest {
    phone: String,
    code: String,
    purpose: Option<String>,
}

#[derive(Deserialize)]
struct SendRequest {
    phone: String,
    purpose: Option<String>,
}

/// A pending code in `/send-map`'s map: what vcode's embedded store keeps for one, at its least.
#[expect(
    dead_code,
    reason = "kept as a store keeps them; no verify here reads them back"
)]
struct PendingCode {
    digest: [u8; 16],
    verification_id: String,
    expires_at: Instant,
    resend_at: Instant,
    /// The phone's sends in the hour that began at `window_start`.
    sends_in_window: u32,
    window_start: Instant,
}

#[derive(Serialize)]
struct SendAnswer<'a> {
    code: u32,
    message: &'a str,
    data: SendData<'a>,
}

#[derive(Serialize)]
struct SendData<'a> {
    expires_in: u64,
    resend_after: u64,
    verification_id: &'a str,
}

/// `/send-redis`'s one step: the phone's hash holds its pending code's digest and id, when it
/// was last sent and its sends in the hour that began at `w`; a send inside the cooldown or
/// over the hourly count writes nothing.
/// KEYS[1] the phone's hash; ARGV digest, id, TTL ms, cooldown ms, hourly limit.
/// Returns 1 when sent, 0 in the cooldown, -1 over the hourly count.
const SEND_SCRIPT: &str = r"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local sent, count, window = unpack(redis.call('HMGET', KEYS[1], 't', 'n', 'w'))
local n, w = 1, now
if sent then
  if now < tonumber(sent) + tonumber(ARGV[4]) then return 0 end
  if now < tonumber(window) + 3600000 then
    if tonumber(count) >= tonumber(ARGV[5]) then return -1 end
    n, w = tonumber(count) + 1, tonumber(window)
  end
end
-- Numbers as text: a Lua number passed to redis.call costs Redis a '%.17g' format.
local int = function(x) return string.format('%d', x) end
redis.call('HSET', KEYS[1], 'h', ARGV[1], 'v', ARGV[2], 't', int(now), 'n', int(n), 'w', int(w))
redis.call('PEXPIRE', KEYS[1], '3600000')
return 1
";

const CODE_TTL: Duration = Duration::from_secs(300);
const RESEND_COOLDOWN: Duration = Duration::from_secs(60);
const SENDS_PER_HOUR: u32 = 5;
const HOUR: Duration = Duration::from_secs(3600);

struct Shared {
    client: redis::Client,
    connection: ConnectionManager,
    script: Script,
    send_script: Script,
    /// `/verify-map`'s pending codes, by (phone, purpose), in shards as the embedded store's.
    codes: Vec<std::sync::Mutex<std::collections::HashMap<String, String>>>,
    /// Picks a key's shard: one for every worker (a hasher per thread sent one key to
    /// different shards from different workers, and a code filled by one was missed by another).
    hasher: std::hash::RandomState,
    /// `/send-map`'s pending codes, by (phone, purpose), in shards as `codes`.
    sends: Vec<std::sync::Mutex<std::collections::HashMap<String, PendingCode>>>,
    /// The codes' digest key, its HMAC state made once (as vcode's keyring keeps it).
    code_key: Hmac<Sha256>,
}

const SHARDS: usize = 64;

thread_local! {
    /// This worker's own connection (`/verify-per-worker`); one Redis per process here.
    static OWN: std::cell::RefCell<Option<ConnectionManager>> = const { std::cell::RefCell::new(None) };
}

async fn constant() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(r#"{"code":200,"message":"ok","data":null}"#)
}

/// `POST /json`: the verify body parsed, nothing done with it: what a POST with a JSON body
/// costs before any work (the reference for the embedded store's rows).
async fn json_only(body: web::Json<VerifyRequest>) -> HttpResponse {
    std::hint::black_box(&body.phone);
    HttpResponse::Ok()
        .content_type("application/json")
        .body(r#"{"code":200,"message":"ok","data":null}"#)
}

/// `POST /verify-map`: one lookup-and-remove in a sharded map, the answer in JSON.
async fn verify_map(shared: web::Data<Shared>, body: web::Json<VerifyRequest>) -> HttpResponse {
    use std::hash::BuildHasher;
    let purpose = body.purpose.as_deref().unwrap_or("login");
    let key = format!("{}:{purpose}", body.phone);
    let shard = shared.hasher.hash_one(&key) as usize % SHARDS;
    let mut codes = shared.codes[shard].lock().unwrap();
    let matched = match codes.get(&key) {
        Some(code) if *code == body.code => codes.remove(&key).is_some(),
        _ => false,
    };
    drop(codes);
    if matched {
        HttpResponse::Ok()
            .content_type("application/json")
            .body(r#"{"code":200,"message":"ok","data":null}"#)
    } else {
        HttpResponse::NotFound()
            .content_type("application/json")
            .body(r#"{"code":41000,"message":"code expired or not found","data":null}"#)
    }
}

/// What every thin send does before its store: a code from a CSPRNG, its keyed digest (over the
/// same fields as vcode's keyring), a random verification id, the SMS's text.
fn new_code(shared: &Shared, phone: &str, purpose: &str) -> ([u8; 16], String) {
    let mut rng = rand::rng();
    let code: String = (0..6)
        .map(|_| char::from(b'0' + rng.random_range(0..10u8)))
        .collect();
    let mut mac = shared.code_key.clone();
    for field in [phone, purpose, code.as_str()] {
        mac.update(&(field.len() as u32).to_be_bytes());
        mac.update(field.as_bytes());
    }
    let mut digest = [0u8; 16];
    digest.copy_from_slice(&mac.finalize().into_bytes()[..16]);
    let verification_id = URL_SAFE_NO_PAD.encode(rng.random::<[u8; 16]>());
    // What the SMS would say (the bench's vcode sends none either: its sender only logs).
    std::hint::black_box(format!(
        "Your verification code is {code}. It expires in 5 minutes."
    ));
    (digest, verification_id)
}

fn sent(verification_id: &str) -> HttpResponse {
    let answer = serde_json::to_vec(&SendAnswer {
        code: 200,
        message: "ok",
        data: SendData {
            expires_in: CODE_TTL.as_secs(),
            resend_after: RESEND_COOLDOWN.as_secs(),
            verification_id,
        },
    })
    .expect("serialisable");
    HttpResponse::Ok()
        .content_type("application/json")
        .body(answer)
}

fn cooling_down() -> HttpResponse {
    HttpResponse::TooManyRequests()
        .content_type("application/json")
        .body(r#"{"code":42900,"message":"resend cooldown","data":null}"#)
}

fn over_quota() -> HttpResponse {
    HttpResponse::TooManyRequests()
        .content_type("application/json")
        .body(r#"{"code":42901,"message":"quota exceeded","data":null}"#)
}

/// `POST /send-map`: a new code (`new_code`); the phone's cooldown and hourly count checked and
/// the code kept in one shard, under its lock; the answer in JSON.
async fn send_map(shared: web::Data<Shared>, body: web::Json<SendRequest>) -> HttpResponse {
    use std::hash::BuildHasher;
    let purpose = body.purpose.as_deref().unwrap_or("login");
    let (digest, verification_id) = new_code(&shared, &body.phone, purpose);
    let key = format!("{}:{purpose}", body.phone);
    let shard = shared.hasher.hash_one(&key) as usize % SHARDS;
    let now = Instant::now();
    let mut sends = shared.sends[shard].lock().unwrap();
    let (sends_in_window, window_start) = match sends.get(&key) {
        Some(pending) if now < pending.resend_at => return cooling_down(),
        Some(pending) if now < pending.window_start + HOUR => {
            if pending.sends_in_window >= SENDS_PER_HOUR {
                return over_quota();
            }
            (pending.sends_in_window + 1, pending.window_start)
        }
        _ => (1, now),
    };
    let answer = sent(&verification_id);
    sends.insert(
        key,
        PendingCode {
            digest,
            verification_id,
            expires_at: now + CODE_TTL,
            resend_at: now + RESEND_COOLDOWN,
            sends_in_window,
            window_start,
        },
    );
    drop(sends);
    answer
}

/// `POST /send-redis`: a new code (`new_code`); the phone's cooldown and hourly count checked and
/// the code kept by one EVALSHA of `SEND_SCRIPT` over the shared connection; the answer in JSON.
async fn send_redis(shared: web::Data<Shared>, body: web::Json<SendRequest>) -> HttpResponse {
    let purpose = body.purpose.as_deref().unwrap_or("login");
    let (digest, verification_id) = new_code(&shared, &body.phone, purpose);
    let mut connection = shared.connection.clone();
    let outcome = shared
        .send_script
        // A name of its own: under vcode's code key, vcode's sends on the same server read
        // the thin send's phones as cooling down (3-5 % of a row's answers, cheap refusals).
        .key(format!("thin_send:{{{}}}:{purpose}", body.phone))
        .arg(&digest[..])
        .arg(&verification_id)
        .arg(CODE_TTL.as_millis() as u64)
        .arg(RESEND_COOLDOWN.as_millis() as u64)
        .arg(SENDS_PER_HOUR)
        .invoke_async::<i64>(&mut connection)
        .await;
    match outcome {
        Ok(1) => sent(&verification_id),
        Ok(0) => cooling_down(),
        Ok(_) => over_quota(),
        Err(error) => {
            eprintln!("thin_verify: {error}");
            HttpResponse::ServiceUnavailable().finish()
        }
    }
}

async fn verify(shared: web::Data<Shared>, body: web::Json<VerifyRequest>) -> HttpResponse {
    let connection = shared.connection.clone();
    run_verify(&shared, &body, connection).await
}

async fn verify_per_worker(
    shared: web::Data<Shared>,
    body: web::Json<VerifyRequest>,
) -> HttpResponse {
    let connection = match OWN.with_borrow(Clone::clone) {
        Some(connection) => connection,
        None => match ConnectionManager::new(shared.client.clone()).await {
            Ok(connection) => {
                OWN.set(Some(connection.clone()));
                connection
            }
            Err(_) => return HttpResponse::ServiceUnavailable().finish(),
        },
    };
    run_verify(&shared, &body, connection).await
}

async fn run_verify(
    shared: &Shared,
    body: &VerifyRequest,
    mut connection: ConnectionManager,
) -> HttpResponse {
    let purpose = body.purpose.as_deref().unwrap_or("login");
    let mut invocation = shared
        .script
        .key(format!("verify_code:{{{}}}:{purpose}", body.phone));
    // verify.lua's arguments as the store passes them: the phone's and the client's failure
    // logs, the attempt limit, a quota token, no failure-quota rules (the bench's vcode runs
    // with quotas off), then one 16-byte candidate digest (the code stands in for it).
    invocation
        .key(format!("verify_code:quota:{{{}}}:fails", body.phone))
        .key(format!("verify_code:{{{}}}:fails:127.0.0.1", body.phone))
        .arg(5)
        .arg(1)
        .arg(0)
        .arg("|")
        .arg(format!("verify_code:{{{}}}:", body.phone))
        .arg(format!("{:0>16}", body.code));
    match invocation
        .invoke_async::<Vec<redis::Value>>(&mut connection)
        .await
    {
        Ok(_) => HttpResponse::Ok()
            .content_type("application/json")
            .body(r#"{"code":200,"message":"ok","data":null}"#),
        Err(error) => {
            eprintln!("thin_verify: {error}");
            HttpResponse::ServiceUnavailable().finish()
        }
    }
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let bind = args.next().unwrap_or_else(|| "127.0.0.1:18090".to_owned());
    let redis_url = args
        .next()
        .unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned());
    let client = redis::Client::open(redis_url).map_err(std::io::Error::other)?;
    let connection = ConnectionManager::new(client.clone())
        .await
        .map_err(std::io::Error::other)?;
    // The preludes the store's verify script is built of (src/store/redis/mod.rs, `SCRIPTS`).
    let script = Script::new(
        &[
            include_str!("../src/store/redis/events.lua"),
            include_str!("../src/store/redis/quota.lua"),
            include_str!("../src/store/redis/verification_prelude.lua"),
            include_str!("../src/store/redis/verify.lua"),
        ]
        .concat(),
    );
    let shared = Shared {
        client,
        connection,
        script,
        send_script: Script::new(SEND_SCRIPT),
        codes: (0..SHARDS).map(|_| Default::default()).collect(),
        hasher: std::hash::RandomState::new(),
        sends: (0..SHARDS).map(|_| Default::default()).collect(),
        code_key: <Hmac<Sha256> as Mac>::new_from_slice(&rand::rng().random::<[u8; 32]>())
            .expect("HMAC takes any key length"),
    };
    // The reference must do the store's work, not answer 503 from a script that no longer
    // matches it (it did, unnoticed, from 04aa3d7 on: every Redis ratio then was void).
    let probe = VerifyRequest {
        phone: "+8613800000000".to_owned(),
        code: "000000".to_owned(),
        purpose: None,
    };
    let answer = run_verify(&shared, &probe, shared.connection.clone()).await;
    if answer.status() != actix_web::http::StatusCode::OK {
        return Err(std::io::Error::other(
            "the verify script failed: thin_verify is out of step with src/store/redis",
        ));
    }
    let probe = shared
        .send_script
        .key("verify_code:{thin-send-probe}:login")
        .arg(&[0u8; 16][..])
        .arg("probe")
        .arg(1000)
        .arg(0)
        .arg(u32::MAX)
        .invoke_async::<i64>(&mut shared.connection.clone())
        .await;
    if !matches!(probe, Ok(1)) {
        return Err(std::io::Error::other(format!(
            "the thin send script failed: {probe:?}"
        )));
    }
    let shared = web::Data::new(shared);
    HttpServer::new(move || {
        App::new()
            .app_data(shared.clone())
            .route("/constant", web::get().to(constant))
            .route("/verify", web::post().to(verify))
            .route("/verify-map", web::post().to(verify_map))
            .route("/send-map", web::post().to(send_map))
            .route("/send-redis", web::post().to(send_redis))
            .route("/json", web::post().to(json_only))
            .route("/verify-per-worker", web::post().to(verify_per_worker))
            .route("/sms", web::post().to(HttpResponse::Ok))
    })
    .bind(bind)?
    .run()
    .await
}
