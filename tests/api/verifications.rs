//! Verification ids over HTTP: the attacker of issue 26 (guesses without the owner's id, from
//! many clients, never cost the owner's code), the `VCODE_VERIFY_BY` modes, the errors of a
//! verify by id, the token's `vid`, and the verification resource (status, cancel).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use vcode::client_ip::TrustedProxies;
use vcode::otp::{AbuseSettings, VerifyBy};
use vcode_wire::{
    Delivery, VerificationData, VerificationStatus, VerifyData, VerifyRequest, paths,
};

use crate::support::app::{TestApp, spawn_second_instance};
use crate::support::{Backend, random_phone, spawn_app_with};

/// An app verifying by id (the service's default and the harness's), whatever the harness says.
async fn by_id(backend: Backend, customise: impl FnOnce(&mut vcode::Settings)) -> TestApp {
    spawn_app_with(backend, |settings| {
        settings.otp.verify_by = VerifyBy::Id;
        customise(settings);
    })
    .await
}

fn wrong(code: &str) -> String {
    code.bytes()
        .map(|b| char::from(b'0' + (b - b'0' + 1) % 10))
        .collect()
}

async fn status(app: &TestApp, id: &str) -> VerificationData {
    let answer = app.get(&paths::verification(id)).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.data()
}

async fn guess_from(app: &TestApp, body: &VerifyRequest, client: &str) -> u16 {
    let request = app
        .client
        .post(app.url(paths::OTP_VERIFY))
        .header("x-forwarded-for", client)
        .json(body);
    app.request(request).await.status
}

/// Issue 26's attacker: a bot that guesses the owner's phone from many networks, without the
/// owner's id (none, made up, or ids of its own sends of the same code), never destroys the
/// owner's code: under the owner's id it still verifies.
async fn guesses_without_the_owners_id_never_cost_the_owners_code(backend: Backend) {
    let app = by_id(backend, |settings| {
        settings.otp.resend_cooldown = std::time::Duration::ZERO;
        settings.abuse = AbuseSettings {
            trusted_proxies: TrustedProxies::parse("127.0.0.0/8").unwrap(),
            ..AbuseSettings::unlimited()
        };
    })
    .await;
    let number = random_phone();
    let owner = app.send_id(&number).await;
    let code = app.last_code(&number).await;
    let guess = wrong(&code);
    for network in 0..20 {
        let client = format!("2001:db8:{network:x}::1");
        // Without an id, and with ids that lead nowhere.
        let none = VerifyRequest::new(&number, &guess);
        assert_eq!(guess_from(&app, &none, &client).await, 400);
        let made_up = VerifyRequest {
            verification_id: Some(URL_SAFE_NO_PAD.encode([network as u8; 16])),
            ..VerifyRequest::new(&number, &guess)
        };
        assert_eq!(guess_from(&app, &made_up, &client).await, 404);
        // With an id of its own: a send re-sends the owner's pending code (reuse).
        let own = app.send_id(&number).await;
        for _ in 0..5 {
            let body = VerifyRequest::with_id(&own, &guess);
            assert!([400, 429].contains(&guess_from(&app, &body, &client).await));
        }
        assert_eq!(
            status(&app, &own).await.status,
            VerificationStatus::MaxAttemptsReached
        );
    }
    assert_eq!(
        app.last_code(&number).await,
        code,
        "the same code all along"
    );
    let mine = status(&app, &owner).await;
    assert_eq!(
        (mine.status, mine.remaining_attempts),
        (VerificationStatus::Pending, 5)
    );
    let verified = app.verify_id(&owner, &code).await;
    assert_eq!(verified.status, 200, "{verified:?}");
    assert_eq!(
        status(&app, &owner).await.status,
        VerificationStatus::Approved
    );
}

async fn verify_by_id_refuses_what_does_not_match(backend: Backend) {
    let app = by_id(backend, |_| {}).await;
    let number = random_phone();
    let id = app.send_id(&number).await;
    let code = app.last_code(&number).await;
    let bare = app
        .post_json(paths::OTP_VERIFY, &VerifyRequest::new(&number, &code))
        .await;
    assert_eq!((bare.status, bare.code()), (400, 40006), "{bare:?}");
    let other_phone = VerifyRequest {
        phone: Some(random_phone()),
        ..VerifyRequest::with_id(&id, &code)
    };
    let answer = app.post_json(paths::OTP_VERIFY, &other_phone).await;
    assert_eq!((answer.status, answer.code()), (400, 40007), "{answer:?}");
    let other_purpose = VerifyRequest {
        purpose: Some("register".into()),
        ..VerifyRequest::with_id(&id, &code)
    };
    let answer = app.post_json(paths::OTP_VERIFY, &other_purpose).await;
    assert_eq!((answer.status, answer.code()), (400, 40007), "{answer:?}");
    for unknown in ["nope", "AAAAAAAAAAAAAAAAAAAAAA"] {
        let answer = app.verify_id(unknown, &code).await;
        assert_eq!((answer.status, answer.code()), (404, 40401), "{answer:?}");
        let answer = app.get(&paths::verification(unknown)).await;
        assert_eq!((answer.status, answer.code()), (404, 40401), "{answer:?}");
    }
    // None of these counted or changed anything.
    assert_eq!(status(&app, &id).await.remaining_attempts, 5);
    // The phone given and the id agree (national form too): verified, and the token says by
    // which id.
    let national = format!("138{}", &number[6..]);
    let body = VerifyRequest {
        phone: Some(national),
        ..VerifyRequest::with_id(&id, &code)
    };
    let verified = app.post_json(paths::OTP_VERIFY, &body).await;
    assert_eq!(verified.status, 200, "{verified:?}");
    let token = verified.data::<VerifyData>().token.unwrap();
    let claims: serde_json::Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(token.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(claims["vid"], id.as_str());
    assert_eq!(claims["sub"], number.as_str());
}

async fn the_resource_follows_a_verification(backend: Backend) {
    let app = by_id(backend, |settings| {
        settings.otp.resend_cooldown = std::time::Duration::ZERO;
    })
    .await;
    let number = random_phone();
    let first = app.send_id(&number).await;
    let code = app.last_code(&number).await;
    let pending = status(&app, &first).await;
    assert_eq!(pending.status, VerificationStatus::Pending);
    assert_eq!(pending.delivery, Delivery::Sent);
    assert_eq!(pending.remaining_attempts, 5);
    assert_eq!(pending.purpose, "login");
    assert!(
        pending
            .phone
            .as_deref()
            .is_some_and(|shown| shown.contains('*') && !shown.contains(&number[6..])),
        "{pending:?}"
    );
    assert_eq!(pending.expires_at - pending.created_at, 300);
    assert_eq!(app.verify_id(&first, &wrong(&code)).await.code(), 40010);
    assert_eq!(status(&app, &first).await.remaining_attempts, 4);

    // A second send answers its own id for the same code; canceling the first leaves it.
    let second = app.send_id(&number).await;
    assert_ne!(first, second);
    let canceled = app
        .post_json(&paths::verification_cancel(&first), &())
        .await;
    assert_eq!(canceled.status, 200, "{canceled:?}");
    assert_eq!(
        canceled.data::<VerificationData>().status,
        VerificationStatus::Canceled
    );
    assert_eq!(app.verify_id(&first, &code).await.code(), 41000);
    assert_eq!(app.verify_id(&second, &code).await.status, 200);
    assert_eq!(
        status(&app, &second).await.status,
        VerificationStatus::Approved
    );
    assert_eq!(
        status(&app, &first).await.status,
        VerificationStatus::Canceled
    );
    let unknown = app
        .post_json(&paths::verification_cancel("AAAAAAAAAAAAAAAAAAAAAA"), &())
        .await;
    assert_eq!((unknown.status, unknown.code()), (404, 40401));

    // Spent: five wrong codes.
    let third = app.send_id(&number).await;
    let code = app.last_code(&number).await;
    for _ in 0..4 {
        assert_eq!(app.verify_id(&third, &wrong(&code)).await.code(), 40010);
    }
    assert_eq!(app.verify_id(&third, &wrong(&code)).await.code(), 42901);
    let spent = status(&app, &third).await;
    assert_eq!(
        (spent.status, spent.remaining_attempts),
        (VerificationStatus::MaxAttemptsReached, 0)
    );
}

async fn a_verification_expires_with_its_code(backend: Backend) {
    let app = by_id(backend, |settings| {
        settings.otp.code_ttl = std::time::Duration::from_secs(1);
        settings.otp.verification_retention = std::time::Duration::from_secs(1);
    })
    .await;
    let number = random_phone();
    let id = app.send_id(&number).await;
    let code = app.last_code(&number).await;
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    assert_eq!(status(&app, &id).await.status, VerificationStatus::Expired);
    assert_eq!(app.verify_id(&id, &code).await.code(), 41000);
    // Past its retention it is forgotten: unknown, whether the store indexed its id or the id
    // says where it leads (a phone's).
    tokio::time::sleep(std::time::Duration::from_millis(1300)).await;
    assert_eq!(app.get(&paths::verification(&id)).await.status, 404);
    assert_eq!(app.verify_id(&id, &code).await.code(), 40401);
}

async fn either_takes_an_id_or_a_phone_and_phone_ignores_ids(backend: Backend) {
    for by in [VerifyBy::Either, VerifyBy::Phone] {
        let app = spawn_app_with(backend, |settings| settings.otp.verify_by = by).await;
        // By phone.
        let number = random_phone();
        app.send_id(&number).await;
        let code = app.last_code(&number).await;
        let answer = app
            .post_json(paths::OTP_VERIFY, &VerifyRequest::new(&number, &code))
            .await;
        assert_eq!(answer.status, 200, "{by:?} {answer:?}");
        // By id: either uses it; phone mode goes by the phone and its code's own attempts,
        // which the verification of the code's latest send (this id) then shows as its own.
        let number = random_phone();
        let id = app.send_id(&number).await;
        let code = app.last_code(&number).await;
        let body = VerifyRequest {
            phone: Some(number.clone()),
            ..VerifyRequest::with_id(&id, wrong(&code))
        };
        assert_eq!(app.post_json(paths::OTP_VERIFY, &body).await.code(), 40010);
        let attempts = status(&app, &id).await.remaining_attempts;
        assert_eq!(attempts, 4, "{by:?}");
        if by == VerifyBy::Phone {
            // The code counted it: four more wrong codes by phone destroy it.
            let mut codes = Vec::new();
            for _ in 0..4 {
                codes.push(app.verify(&number, &wrong(&code)).await.code());
            }
            assert_eq!(codes, [40010, 40010, 40010, 42901]);
            let spent = status(&app, &id).await;
            assert_eq!(
                (spent.status, spent.remaining_attempts),
                (VerificationStatus::MaxAttemptsReached, 0)
            );
            continue;
        }
        let answer = app.verify(&number, &code).await;
        assert_eq!(answer.status, 200, "{by:?} {answer:?}");
    }
}

async fn status_and_cancel_are_behind_their_api_keys(backend: Backend) {
    use sha2::{Digest, Sha256};
    use vcode::api_keys::{ApiKeySettings, ApiKeys, Operation};
    const KEY: &str = "vck_test-key-0123456789abcdefghijklmnopqrstu";
    let entry = format!("backend:{}", hex::encode(Sha256::digest(KEY)));
    let app = by_id(backend, |settings| {
        settings.api_key = ApiKeySettings {
            required: vec![Operation::Status, Operation::Verify],
        };
        settings.api_keys = Some(ApiKeys::parse(&entry).unwrap());
    })
    .await;
    let number = random_phone();
    let id = app.send_id(&number).await;
    let read = app.get(&paths::verification(&id)).await;
    assert_eq!((read.status, read.code()), (401, 40100));
    let cancel = app.post_json(&paths::verification_cancel(&id), &()).await;
    assert_eq!((cancel.status, cancel.code()), (401, 40100));
    let bearer = format!("Bearer {KEY}");
    let read = app
        .request(
            app.client
                .get(app.url(&paths::verification(&id)))
                .header("authorization", &bearer),
        )
        .await;
    assert_eq!(read.status, 200, "{read:?}");
    let cancel = app
        .request(
            app.client
                .post(app.url(&paths::verification_cancel(&id)))
                .header("authorization", &bearer),
        )
        .await;
    assert_eq!(
        cancel.data::<VerificationData>().status,
        VerificationStatus::Canceled
    );
}

/// A connection to the test's own Redis.
async fn test_redis(app: &TestApp) -> ::redis::aio::MultiplexedConnection {
    app.redis
        .as_ref()
        .expect("the test's Redis")
        .connection()
        .await
}

/// The keys of the test's Redis matching `pattern`, with their `MEMORY USAGE`.
async fn redis_keys(app: &TestApp, pattern: &str) -> Vec<(String, u64)> {
    let mut connection = test_redis(app).await;
    let keys: Vec<String> = ::redis::cmd("KEYS")
        .arg(pattern)
        .query_async(&mut connection)
        .await
        .unwrap();
    let mut usage = Vec::new();
    for key in keys {
        let bytes: u64 = ::redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(&key)
            .query_async(&mut connection)
            .await
            .unwrap();
        usage.push((key, bytes));
    }
    usage
}

/// A verification's fields on the test's Redis.
async fn redis_fields(app: &TestApp, key: &str) -> std::collections::HashMap<String, Vec<u8>> {
    ::redis::cmd("HGETALL")
        .arg(key)
        .query_async(&mut test_redis(app).await)
        .await
        .unwrap()
}

/// A phone's verification id says where it leads: on Redis no key indexes it, so a pending
/// verification is its code and its record, at most 300 bytes (issue 42's memory), and a
/// verify by id, the status and the cancel still find it. `VCODE_REDIS_OLDER_INSTANCES`
/// writes it as builds before 2026-12-07 read it: under its name before, bound by the code's
/// whole digest, and indexed (builds before 2026-12-06 find an id only by its index).
#[tokio::test]
async fn a_phones_id_needs_no_index_on_redis() {
    for older_instances in [false, true] {
        let app = by_id(Backend::Redis, |settings| {
            if let vcode::settings::StoreSettings::Redis(redis) = &mut settings.store {
                redis.older_instances = older_instances;
            }
        })
        .await;
        let number = random_phone();
        let id = app.send_id(&number).await;
        let indexes = redis_keys(&app, "verify_code:verification:*").await;
        assert_eq!(indexes.len(), usize::from(older_instances), "{indexes:?}");
        let pending = redis_keys(&app, &format!("verify_code:{{{number}}}:*")).await;
        assert_eq!(
            pending.len(),
            2,
            "the code and its verification: {pending:?}"
        );
        let (name, binding) = if older_instances {
            (format!("verify_code:{{{number}}}:verification:{id}"), 16)
        } else {
            (format!("verify_code:{{{number}}}:v:{id}"), 8)
        };
        assert!(
            pending.iter().any(|(key, _)| *key == name),
            "{name}: {pending:?}"
        );
        assert_eq!(redis_fields(&app, &name).await["g"].len(), binding);
        if !older_instances {
            let bytes: u64 = pending.iter().map(|(_, bytes)| bytes).sum();
            assert!(bytes <= 300, "{bytes} bytes: {pending:?}");
        }
        assert_eq!(status(&app, &id).await.status, VerificationStatus::Pending);
        let code = app.last_code(&number).await;
        let verified = app.verify_id(&id, &code).await;
        assert_eq!(verified.status, 200, "{verified:?}");
        assert_eq!(status(&app, &id).await.status, VerificationStatus::Approved);

        // A second one, canceled by its id alone.
        let other = random_phone();
        let id = app.send_id(&other).await;
        let cancel = app.post_json(&paths::verification_cancel(&id), &()).await;
        assert_eq!(
            cancel.data::<VerificationData>().status,
            VerificationStatus::Canceled,
            "{cancel:?}"
        );
    }
}

/// A rolling upgrade: an instance writing for older ones (`VCODE_REDIS_OLDER_INSTANCES`) and
/// one writing today's layout share a Redis, and each ends the other's verifications, by id
/// and by phone, with their failed attempts, the status and the cancel: a reader finds a
/// verification under either of its names.
#[tokio::test]
async fn instances_read_the_verifications_of_older_ones() {
    let either = |older_instances: bool| {
        move |settings: &mut vcode::Settings| {
            settings.otp.verify_by = VerifyBy::Either;
            if let vcode::settings::StoreSettings::Redis(redis) = &mut settings.store {
                redis.older_instances = older_instances;
            }
        }
    };
    let older = spawn_app_with(Backend::Redis, either(true)).await;
    let today = spawn_second_instance(&older, either(false)).await;
    for (writer, reader) in [(&older, &today), (&today, &older)] {
        // By id: a wrong code counts on the writer's record, the right one approves it.
        let number = random_phone();
        let id = writer.send_id(&number).await;
        let pending = status(reader, &id).await;
        assert_eq!(pending.status, VerificationStatus::Pending);
        let code = writer.last_code(&number).await;
        assert_eq!(reader.verify_id(&id, &wrong(&code)).await.code(), 40010);
        assert_eq!(
            status(writer, &id).await.remaining_attempts,
            pending.remaining_attempts - 1
        );
        let verified = reader.verify_id(&id, &code).await;
        assert_eq!(verified.status, 200, "{verified:?}");
        assert_eq!(
            status(writer, &id).await.status,
            VerificationStatus::Approved
        );

        // By phone: the code's latest send's verification ends with it.
        let number = random_phone();
        let id = writer.send_id(&number).await;
        let code = writer.last_code(&number).await;
        let verified = reader.verify(&number, &code).await;
        assert_eq!(verified.status, 200, "{verified:?}");
        assert_eq!(
            status(writer, &id).await.status,
            VerificationStatus::Approved
        );
        assert_eq!(
            status(reader, &id).await.status,
            VerificationStatus::Approved
        );

        // The cancel.
        let id = writer.send_id(&random_phone()).await;
        let cancel = reader
            .post_json(&paths::verification_cancel(&id), &())
            .await;
        assert_eq!(
            cancel.data::<VerificationData>().status,
            VerificationStatus::Canceled,
            "{cancel:?}"
        );
        assert_eq!(
            status(writer, &id).await.status,
            VerificationStatus::Canceled
        );
    }
}

on_every_store!(
    guesses_without_the_owners_id_never_cost_the_owners_code,
    verify_by_id_refuses_what_does_not_match,
    the_resource_follows_a_verification,
    a_verification_expires_with_its_code,
    either_takes_an_id_or_a_phone_and_phone_ignores_ids,
    status_and_cancel_are_behind_their_api_keys,
);
