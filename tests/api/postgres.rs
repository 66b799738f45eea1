//! What only the PostgreSQL store has to show (its HTTP behaviour and the conformance suite run
//! through `on_every_store!`): migrations safe under concurrent start-up, the documented table
//! layout with no code in it, the batched sweep, an outage answered 503 within the bound and
//! healed by itself, acknowledged state surviving `kill -9`, and TLS with a private CA.

use std::time::{Duration, Instant};

use futures::future::join_all;
use vcode::store::postgres::PostgresSettings;
use vcode::store::{Budgets, PostgresStore};
use vcode::{Application, settings::StoreSettings};
use vcode_wire::paths;

use crate::support::app::{postgres_settings, test_settings};
use crate::support::redis_tls::Authority;
use crate::support::{PostgresServer, TestApp, eventually, random_phone};

/// A migrated store on a fresh database of the shared server (the conformance suite's).
pub fn open_store() -> PostgresStore {
    tokio::task::block_in_place(|| {
        tokio::runtime::Handle::current().block_on(async {
            let url = PostgresServer::shared().fresh_database().await;
            let store = PostgresStore::connect(&PostgresSettings {
                statement_timeout: Duration::from_millis(2000),
                ..PostgresSettings::new(url)
            })
            .expect("valid settings");
            store.migrate().await.expect("the schema applies");
            store
        })
    })
}

/// The app on `url`, with the bound the outage tests assert.
async fn app_on(url: &str, statement_timeout: Duration) -> TestApp {
    crate::support::spawn_app_with(crate::support::Backend::Memory, |settings| {
        settings.store = StoreSettings::Postgres(PostgresSettings {
            statement_timeout,
            connect_timeout: Duration::from_millis(500),
            ..PostgresSettings::new(url)
        });
    })
    .await
}

async fn database_on(server: &PostgresServer) -> String {
    server.fresh_database().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_instances_starting_at_once_apply_the_schema_once() {
    let url = PostgresServer::shared().fresh_database().await;
    let starts = (0..8).map(|_| {
        let url = url.clone();
        tokio::spawn(async move {
            let store = PostgresStore::connect(&PostgresSettings::new(url)).unwrap();
            store.migrate().await
        })
    });
    for started in join_all(starts).await {
        started.expect("task").expect("every instance starts");
    }
    let server = PostgresServer::shared();
    let name = url.rsplit('/').next().unwrap();
    let client = server.client(name).await;
    let versions: Vec<i32> = client
        .query("SELECT version FROM vcode_migrations ORDER BY version", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(
        versions,
        (1..=17).collect::<Vec<i32>>(),
        "each migration once"
    );
    // A later start finds nothing to do.
    let store = PostgresStore::connect(&PostgresSettings::new(url)).unwrap();
    store.migrate().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pending_code_is_one_row_of_digest_and_no_code() {
    let url = PostgresServer::shared().fresh_database().await;
    let app = crate::support::spawn_app_with(crate::support::Backend::Memory, |s| {
        s.store = postgres_settings(&url);
    })
    .await;
    let number = random_phone();
    assert_eq!(app.send(&number).await.status, 200);
    let code = app.last_code(&number).await;
    let client = PostgresServer::shared()
        .client(url.rsplit('/').next().unwrap())
        .await;
    let row = client
        .query_one(
            "SELECT purpose, digest, sealed, failed_attempts, deliveries,
                    expires_at_ms - sent_at_ms
             FROM vcode_codes WHERE phone = $1",
            &[&number],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "login");
    let digest: Vec<u8> = row.get(1);
    assert_eq!(digest.len(), 16);
    let sealed: Option<Vec<u8>> = row.get(2);
    let sealed = sealed.expect("the default resend policy keeps the sealed code");
    assert!(
        !sealed
            .windows(code.len())
            .any(|window| window == code.as_bytes()),
        "the code is in the sealed copy"
    );
    assert_eq!(row.get::<_, i32>(3), 0);
    assert_eq!(row.get::<_, i32>(4), 1);
    assert_eq!(row.get::<_, i64>(5), 300_000, "the default TTL");
    // The send's quota events are rows of their own.
    let events: i64 = client
        .query_one(
            "SELECT count(*) FROM vcode_quota_events WHERE log = $1",
            &[&format!("sends:{number}")],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(events, 1);
    assert_eq!(app.verify(&number, &code).await.status, 200);
    let left: i64 = client
        .query_one(
            "SELECT count(*) FROM vcode_codes WHERE phone = $1",
            &[&number],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "a verified code leaves no row");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sweep_deletes_expired_rows_in_batches_and_keeps_live_ones() {
    use vcode::domain::{CaptchaId, CodeDigest, Purpose};
    use vcode::store::{CaptchaStore, CodeCandidate, CodeStore, IssueParams, ResendPolicy};
    let store = open_store();
    let short = IssueParams {
        retention: Duration::ZERO,
        ttl: Duration::from_millis(50),
        cooldown: Duration::ZERO,
        policy: ResendPolicy::Reuse,
        destination_quota: Vec::new(),
        names_latest_send: true,
    };
    let long = IssueParams {
        ttl: Duration::from_secs(300),
        ..short.clone()
    };
    // More than one batch (1000) of expired codes, and a few live ones, 50 at a time.
    let indices: Vec<usize> = (0..2100).collect();
    for chunk in indices.chunks(50) {
        join_all(chunk.iter().map(|i| {
            let params = if i % 100 == 0 { &long } else { &short };
            let store = &store;
            async move {
                let candidate = CodeCandidate {
                    digest: CodeDigest([1; 16]),
                    sealed: None,
                    verification: vcode::domain::VerificationId::generate(),
                    send_log: None,
                };
                let phone = crate::support::phone(&random_phone());
                store
                    .issue_code(
                        &phone,
                        &Purpose::default(),
                        candidate,
                        params,
                        Budgets::none(),
                    )
                    .await
                    .unwrap();
            }
        }))
        .await;
    }
    let captcha = CaptchaId::generate();
    store
        .put_captcha(
            &captcha,
            &vcode::store::StoredCaptcha { seed: 7 },
            Duration::from_millis(50),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Codes (2079 expired; random phones may collide, hence at least) and their sends'
    // verifications (2079, kept no longer than their codes here), no quota events (no rules),
    // the captcha.
    let removed = store.sweep().await.unwrap();
    assert!((4079..=4159).contains(&removed), "{removed}");
    assert_eq!(store.sweep().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopped_database_answers_503_within_the_bound_and_service_resumes() {
    let server = PostgresServer::start_durable();
    let url = database_on(&server).await;
    let app = app_on(&url, Duration::from_millis(500)).await;
    let number = random_phone();
    assert_eq!(app.send(&number).await.status, 200);

    server.kill();
    // The statement timeout plus slack for a loaded machine.
    let bound = Duration::from_millis(500 + 700);
    for _ in 0..2 {
        for path in ["send", "verify", "readyz"] {
            let started = Instant::now();
            let answer = match path {
                "send" => app.send(&random_phone()).await,
                "verify" => app.verify(&number, "123456").await,
                _ => app.get(paths::READYZ).await,
            };
            let elapsed = started.elapsed();
            assert_eq!(
                (answer.status, answer.code()),
                (503, 50300),
                "{path}: {answer:?}"
            );
            assert!(elapsed < bound, "{path} answered after {elapsed:?}");
        }
    }
    assert_eq!(app.get(paths::HEALTHZ).await.status, 200);

    server.restart();
    let resumed = eventually(Duration::from_secs(15), || async {
        app.send(&random_phone()).await.status == 200
    })
    .await;
    assert!(resumed, "service did not resume after PostgreSQL came back");
    assert_eq!(app.get(paths::READYZ).await.status, 200);
    // The code sent before the outage is still there, and verifies once.
    let code = app.last_code(&number).await;
    assert_eq!(app.verify(&number, &code).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_state_survives_kill_9() {
    let server = PostgresServer::start_durable();
    let url = database_on(&server).await;
    let app = app_on(&url, Duration::from_millis(2000)).await;
    let (used, kept) = (random_phone(), random_phone());
    assert_eq!(app.send(&used).await.status, 200);
    assert_eq!(app.send(&kept).await.status, 200);
    let used_code = app.last_code(&used).await;
    let kept_code = app.last_code(&kept).await;
    assert_eq!(app.verify(&used, &used_code).await.status, 200);

    // A crash right after the acknowledgements: no shutdown, no checkpoint.
    server.kill();
    server.restart();
    let back = eventually(Duration::from_secs(15), || async {
        app.get(paths::READYZ).await.status == 200
    })
    .await;
    assert!(back, "PostgreSQL did not come back");

    let again = app.verify(&used, &used_code).await;
    assert_eq!(
        (again.status, again.code()),
        (410, 41000),
        "a consumed code came back: {again:?}"
    );
    assert_eq!(
        app.verify(&kept, &kept_code).await.status,
        200,
        "a sent code was lost"
    );
}

async fn tls_server(identity_ca: &Authority) -> PostgresServer {
    let identity = identity_ca.identity(&["127.0.0.1"]);
    PostgresServer::start_with(
        false,
        &[
            "ssl=on",
            "ssl_cert_file=server.crt",
            "ssl_key_file=server.key",
        ],
        &[
            ("server.crt", identity.certificate_pem()),
            ("server.key", identity.key_pem()),
        ],
    )
}

async fn tls_app(server: &PostgresServer, ca: &Authority) -> (TestApp, impl Drop) {
    let ca_file = ca.file();
    let plain_url = database_on(server).await;
    let url = format!("{plain_url}?sslmode=require");
    let mut settings = test_settings();
    settings.store = StoreSettings::Postgres(PostgresSettings {
        ca_file: Some(ca_file.path().to_owned()),
        ..PostgresSettings::new(url)
    });
    let app = crate::support::spawn_app_with(crate::support::Backend::Memory, |s| {
        s.store = settings.store.clone();
    })
    .await;
    (app, ca_file)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_private_ca_lets_vcode_use_postgres_over_tls() {
    let authority = Authority::new("vcode test CA");
    let server = tls_server(&authority).await;
    let (app, _ca_file) = tls_app(&server, &authority).await;
    let number = random_phone();
    assert_eq!(app.send(&number).await.status, 200);
    let code = app.last_code(&number).await;
    assert_eq!(app.verify(&number, &code).await.status, 200);
    // The server saw TLS connections from vcode.
    let client = server.client("postgres").await;
    let tls: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid)
             WHERE ssl AND application_name = 'vcode'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(tls >= 1, "no TLS connection from vcode");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_certificate_from_another_ca_is_refused() {
    let trusted = Authority::new("vcode test CA");
    let rogue = Authority::new("someone else's CA");
    let server = tls_server(&rogue).await;
    let (app, _ca_file) = tls_app(&server, &trusted).await;
    let answer = app.send(&random_phone()).await;
    assert_eq!((answer.status, answer.code()), (503, 50300), "{answer:?}");
    assert_eq!(app.get(paths::READYZ).await.status, 503);
}

#[tokio::test]
async fn the_build_refuses_a_ca_file_without_tls() {
    let authority = Authority::new("vcode test CA");
    let ca_file = authority.file();
    let mut settings = test_settings();
    settings.store = StoreSettings::Postgres(PostgresSettings {
        ca_file: Some(ca_file.path().to_owned()),
        ..PostgresSettings::new("postgres://vcode@127.0.0.1:1/db")
    });
    let error = Application::build(settings).await.err().expect("refused");
    assert!(
        format!("{error:#}").contains("sslmode=require"),
        "{error:#}"
    );
}

/// The fraud guard's sends in flight at once on one instance each count in a shard of their
/// own (none waits for another's commit on a shard's rows), whatever their tokens say; each
/// admission hands back the mark it counted, and the send's release and conversion find it
/// there.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sends_in_flight_at_once_on_one_instance_count_in_shards_of_their_own() {
    use vcode::fraud::policy::{BUCKET_MS, WINDOW_MINUTES, Window};
    use vcode::store::{Admission, FraudSend, FraudStore};

    let url = PostgresServer::shared().fresh_database().await;
    let settings = PostgresSettings {
        statement_timeout: Duration::from_secs(10),
        ..PostgresSettings::new(url.clone())
    };
    let in_flight = settings.pool_size;
    assert_eq!(in_flight, 16, "as many connections as shards");
    let store = std::sync::Arc::new(PostgresStore::connect(&settings).unwrap());
    store.migrate().await.unwrap();
    let client = PostgresServer::shared()
        .client(url.rsplit('/').next().unwrap())
        .await;
    // Every send's count waits behind this lock: all of them are in flight at once.
    client
        .batch_execute("BEGIN; LOCK TABLE vcode_fraud_counts IN EXCLUSIVE MODE")
        .await
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let window = Window::at(now, Duration::from_secs(60), WINDOW_MINUTES);
    let attribution = |i: usize| format!("+4474000{i:05}:login");
    fn send(attribution: &str, now_ms: u64) -> FraudSend<'_> {
        FraudSend {
            prefix: "44740",
            country: "GB",
            attribution,
            // One token for all: on their own bits, all sixteen would count in shard 0.
            token: 0xfeed_0000,
            now_ms,
        }
    }
    let sends: Vec<_> = (0..in_flight)
        .map(|i| {
            let store = store.clone();
            let attribution = attribution(i);
            tokio::spawn(async move {
                let admission = store
                    .admit_send(
                        &send(&attribution, now),
                        &window,
                        true,
                        Duration::from_secs(900),
                    )
                    .await
                    .unwrap();
                let Admission::Admitted { mark, .. } = admission else {
                    panic!("refused: {admission:?}");
                };
                mark
            })
        })
        .collect();
    let waiting = eventually(Duration::from_secs(5), || async {
        let waiting: i64 = client
            .query_one(
                "SELECT count(*) FROM pg_locks
                 WHERE relation = 'vcode_fraud_counts'::regclass AND NOT granted",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        waiting == in_flight as i64
    })
    .await;
    assert!(waiting, "every send waits on the lock");
    client.batch_execute("COMMIT").await.unwrap();
    let mut marks = Vec::new();
    for counted in join_all(sends).await {
        marks.push(counted.unwrap());
    }
    let mut shards: Vec<u64> = marks.iter().map(|mark| mark.token & 15).collect();
    shards.sort_unstable();
    assert_eq!(shards, (0..16).collect::<Vec<u64>>(), "{marks:?}");
    for mark in &marks {
        assert_eq!(
            mark.token & !15,
            0xfeed_0000,
            "only the shard's bits change"
        );
        assert_eq!(mark.minute, now / BUCKET_MS);
    }

    // Half given back, half converted: each in the shard it was counted in.
    for (i, mark) in marks.iter().enumerate() {
        let attribution = attribution(i);
        if i % 2 == 0 {
            store
                .release_send(&send(&attribution, now), *mark, None, false)
                .await
                .unwrap();
        } else {
            let converted = store
                .count_conversion(&attribution, "44740", "GB", now / BUCKET_MS - 10)
                .await
                .unwrap();
            assert_eq!(converted, Some(mark.minute));
        }
    }
    let rows = client
        .query(
            "SELECT shard, sends, conversions FROM vcode_fraud_counts
             WHERE scope = 'p:44740' ORDER BY shard",
            &[],
        )
        .await
        .unwrap();
    let counts: Vec<(i16, i64, i64)> = rows
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect();
    let expected: Vec<(i16, i64, i64)> = marks
        .iter()
        .enumerate()
        .map(|(i, mark)| {
            let kept = i64::from(i % 2 == 1);
            ((mark.token & 15) as i16, kept, kept)
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(counts, expected);
    let attributions: i64 = client
        .query_one("SELECT count(*) FROM vcode_fraud_attributions", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(attributions, 0, "released and converted: none left");
}

/// An undelivered receipt takes the fraud counts' rows in the order a send's step takes them
/// (prefix, country, service): a receipt arriving while a send of the same minute and shard
/// holds its prefix's row waits for it holding nothing, so the send goes on to the service's
/// row. (One UPDATE over the three scopes took the service's row first: a deadlock, broken by
/// failing one of the two.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_undelivered_receipt_takes_the_fraud_counts_in_the_send_s_order() {
    let url = PostgresServer::shared().fresh_database().await;
    let store = PostgresStore::connect(&PostgresSettings::new(url.clone())).unwrap();
    store.migrate().await.unwrap();
    let name = url.rsplit('/').next().unwrap();
    let server = PostgresServer::shared();
    let (mut send, receipt, observer) = (
        server.client(name).await,
        server.client(name).await,
        server.client(name).await,
    );
    // Minute 100, shard 1 (the token 1's), two sends counted in each scope.
    send.batch_execute(
        "INSERT INTO vcode_fraud_counts
           (scope, minute, shard, sends, conversions, refused, expires_at_ms)
         VALUES ('p:44770', 100, 1, 2, 0, 0, 9000000000000),
                ('c:GB', 100, 1, 2, 0, 0, 9000000000000),
                ('*', 100, 1, 2, 0, 0, 9000000000000)",
    )
    .await
    .unwrap();
    let step = send.transaction().await.unwrap();
    let count = "UPDATE vcode_fraud_counts SET sends = sends + 1
                 WHERE scope = $1 AND minute = 100 AND shard = 1";
    step.execute(count, &[&"p:44770"]).await.unwrap();
    let receipt_pid: i32 = receipt
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let undelivered = tokio::spawn(async move {
        receipt
            .execute("SELECT vcode_fraud_undelivered('44770', 'GB', 100, 1)", &[])
            .await
    });
    // Until the receipt waits on a lock (the prefix's row, held by the step).
    let waiting = eventually(Duration::from_secs(10), || async {
        observer
            .query_opt(
                "SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'",
                &[&receipt_pid],
            )
            .await
            .unwrap()
            .is_some()
    })
    .await;
    assert!(waiting, "the receipt never waited on the step's row");
    step.execute(count, &[&"c:GB"]).await.expect("no deadlock");
    step.execute(count, &[&"*"]).await.expect("no deadlock");
    step.commit().await.unwrap();
    undelivered
        .await
        .unwrap()
        .expect("the receipt goes through after the step");
    let rows = observer
        .query(
            "SELECT scope, sends, undelivered FROM vcode_fraud_counts
             WHERE minute = 100 ORDER BY scope",
            &[],
        )
        .await
        .unwrap();
    let counts: Vec<(String, i64, i64)> = rows
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect();
    assert_eq!(
        counts,
        [("*", 2, 1), ("c:GB", 2, 1), ("p:44770", 2, 1)]
            .map(|(scope, sends, undelivered)| (scope.to_owned(), sends, undelivered))
            .to_vec()
    );
}

/// The functions (name and whole definition), triggers (and whether each is enabled), columns
/// and indexes of the database at `url`: what an upgraded database and a new one must agree on.
async fn schema_code(url: &str) -> [Vec<(String, String)>; 4] {
    let name = url.rsplit('/').next().unwrap();
    let client = PostgresServer::shared().client(name).await;
    let pairs = async |sql: &str| -> Vec<(String, String)> {
        let rows = client.query(sql, &[]).await.unwrap();
        rows.iter().map(|row| (row.get(0), row.get(1))).collect()
    };
    [
        pairs(
            "SELECT p.proname::text, pg_get_functiondef(p.oid) FROM pg_proc p
             WHERE p.proname LIKE 'vcode\\_%' AND p.pronamespace = current_schema()::regnamespace
             ORDER BY 1, 2",
        )
        .await,
        pairs(
            "SELECT tgname::text, tgenabled::text FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1",
        )
        .await,
        pairs(
            "SELECT table_name::text || '.' || column_name::text,
                    data_type::text || ' ' || is_nullable::text || ' ' || coalesce(column_default, '')
             FROM information_schema.columns WHERE table_schema = current_schema() ORDER BY 1",
        )
        .await,
        pairs(
            "SELECT indexname::text, indexdef FROM pg_indexes
             WHERE schemaname = current_schema() ORDER BY 1",
        )
        .await,
    ]
}

/// A database as `b160ff0` (2026-12-05, before the functions left the migrations and facts
/// replaced event names) left it, with live state written by that version's own functions: a
/// pending code with its verification and events, and a dev message. Today's store upgrades
/// it; the code still verifies, the event is still delivered, the message still read, and the
/// functions and triggers end as a new database's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upgrade_from_b160ff0_keeps_codes_events_and_messages() {
    use vcode::domain::{Code, CodeLength, Purpose};
    use vcode::store::{CodeStore, DevInboxStore, EventStore, Fact, VerifyOutcome, VerifyParams};

    use crate::support::{codes, phone};

    let server = PostgresServer::shared();
    let url = server.fresh_database().await;
    let client = server.client(url.rsplit('/').next().unwrap()).await;
    client
        .batch_execute(include_str!("fixtures/postgres_b160ff0.sql"))
        .await
        .expect("the old schema applies");
    client
        .batch_execute("SELECT vcode_events_record()")
        .await
        .unwrap();
    let (destination, purpose) = (phone(&random_phone()), Purpose::default());
    let code = Code::generate(CodeLength::default());
    let candidate = codes::candidate(&destination, &purpose, &code);
    let sealed = candidate.sealed.as_ref().map(|sealed| &sealed.0[..]);
    let (limits, windows): (Vec<i32>, Vec<i64>) = (Vec::new(), Vec::new());
    let far = i64::MAX;
    client
        .query(
            "SELECT * FROM vcode_issue($1, $2, $3, $4, 300000::bigint, 60000::bigint, false,
               7::bigint, $5, $6, $7, $8, 60000::bigint)",
            &[
                &destination.key(),
                &purpose.as_str(),
                &candidate.digest.as_bytes(),
                &sealed,
                &far,
                &limits,
                &windows,
                &candidate.verification.as_str(),
            ],
        )
        .await
        .expect("the old issue");
    client
        .execute(
            "SELECT vcode_push_outbox($1, $2, 100, 3600000::bigint)",
            &[
                &destination.key(),
                &format!(
                    r#"{{"phone":"{}","purpose":"login","code":"123456","sent_at_ms":1}}"#,
                    destination.key()
                ),
            ],
        )
        .await
        .expect("the old dev outbox");

    let store = PostgresStore::connect(&PostgresSettings::new(url.clone())).unwrap();
    store.migrate().await.expect("the upgrade applies");
    let versions: Vec<i32> = client
        .query("SELECT version FROM vcode_migrations ORDER BY version", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(versions, (1..=17).collect::<Vec<i32>>());
    // The event the old trigger wrote under its event name: claimed as its fact.
    let claimed = store
        .claim_events(10, Duration::from_secs(30))
        .await
        .unwrap();
    let created = claimed
        .iter()
        .find(|claim| claim.event.subject == candidate.verification.as_str())
        .expect("the old event is claimed");
    assert_eq!(created.event.fact, Fact::Created);
    // The dev message, in the renamed table.
    let messages = store.dev_messages(&destination).await.unwrap();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].code, "123456");
    // The pending code verifies under its id, with today's functions.
    let verified = store
        .verify_by_id(
            &destination,
            &purpose,
            &candidate.verification,
            &codes::digests(&destination, &purpose, &code),
            codes::CLIENT,
            VerifyParams {
                max_attempts: 5,
                destination_failures: None,
                client_failures: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(verified, VerifyOutcome::Verified);
    // The same functions and triggers as a database made today (events on in both).
    let fresh = server.fresh_database().await;
    let today = PostgresStore::connect(&PostgresSettings::new(fresh.clone())).unwrap();
    today.migrate().await.unwrap();
    today.record_events(true).await.unwrap();
    assert_eq!(schema_code(&url).await, schema_code(&fresh).await);
}

/// A database left at each earlier version (the fixture's first `version` migrations, as that
/// version's runner applied them, before functions lived in their own file) upgrades to the
/// same functions, triggers, columns and indexes as a new database: every DROP of an old
/// overload is found, and nothing a later migration assumed of a function is missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upgrade_from_every_earlier_version_ends_as_a_new_database() {
    let server = PostgresServer::shared();
    let fresh = server.fresh_database().await;
    let today = PostgresStore::connect(&PostgresSettings::new(fresh.clone())).unwrap();
    today.migrate().await.unwrap();
    let expected = schema_code(&fresh).await;
    let fixture = include_str!("fixtures/postgres_b160ff0.sql");
    for version in 1..=12 {
        let marker = format!("INSERT INTO vcode_migrations (version) VALUES ({version});");
        let end = fixture.find(&marker).expect("the version's record") + marker.len();
        let url = server.fresh_database().await;
        let client = server.client(url.rsplit('/').next().unwrap()).await;
        client
            .batch_execute(&fixture[..end])
            .await
            .unwrap_or_else(|error| panic!("version {version} applies: {error}"));
        let store = PostgresStore::connect(&PostgresSettings::new(url.clone())).unwrap();
        store
            .migrate()
            .await
            .unwrap_or_else(|error| panic!("the upgrade from version {version}: {error}"));
        let upgraded = schema_code(&url).await;
        for (what, (got, want)) in ["functions", "triggers", "columns", "indexes"]
            .iter()
            .zip(upgraded.iter().zip(expected.iter()))
        {
            assert_eq!(got, want, "{what} after an upgrade from version {version}");
        }
    }
}
