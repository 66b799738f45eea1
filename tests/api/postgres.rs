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
        (1..=19).collect::<Vec<i32>>(),
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
                    says_where: false,
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

/// A flush adds to the counts' rows in shard 0, in one statement; the rows an earlier version
/// left in other shards (migration 0010: one a send's token chose) stay as they were, and a read
/// sums them all, sends with the undelivered added back (migration 0012 keeps those apart): a
/// negative change (a send given back) takes from the minute's total.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flush_adds_to_the_counts_earlier_versions_left_in_their_shards() {
    use vcode::domain::traffic::BUCKET_MS;
    use vcode::store::{FraudStore, MinuteCounts, TrafficChange};

    let (store, client) = migrated_database().await;
    let minute = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        / BUCKET_MS as i64;
    // Shard 3: two sends and one undelivered (three sends), a refusal; shard 7: one converted.
    client
        .execute(
            "INSERT INTO vcode_fraud_counts
               (scope, minute, shard, sends, conversions, refused, undelivered, expires_at_ms)
             SELECT scope, $1::bigint, shard, sends, conversions, refused, undelivered, 9000000000000
             FROM (VALUES ('p:44740', 3, 2, 0, 0, 1), ('c:GB', 3, 2, 0, 0, 1),
                          ('*', 3, 2, 0, 1, 1), ('p:44740', 7, 1, 1, 0, 0),
                          ('c:GB', 7, 1, 1, 0, 0), ('*', 7, 1, 1, 0, 0))
               AS r(scope, shard, sends, conversions, refused, undelivered)",
            &[&minute],
        )
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO vcode_fraud_prefixes (prefix, country, expires_at_ms)
             VALUES ('44740', 'GB', 9000000000000)",
            &[],
        )
        .await
        .unwrap();
    let before = async || -> Vec<(String, i16, i64, i64, i64)> {
        client
            .query(
                "SELECT scope, shard, sends, conversions, undelivered FROM vcode_fraud_counts
                 WHERE shard <> 0 ORDER BY scope, shard",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4)))
            .collect()
    };
    let old_rows = before().await;
    assert_eq!(old_rows.len(), 6);
    let change = |sends, conversions, refused, undelivered| TrafficChange {
        prefix: "44740".to_owned(),
        country: "GB".to_owned(),
        minute: minute as u64,
        sends,
        conversions,
        refused,
        undelivered,
    };
    // Two sends (one undelivered), a conversion and a refusal; then a send given back.
    store
        .add_traffic(&[change(2, 1, 1, 1), change(-1, 0, 0, 0)])
        .await
        .unwrap();
    let traffic = store
        .fraud_traffic(minute as u64, minute as u64)
        .await
        .unwrap();
    let scoped = MinuteCounts {
        minute: minute as u64,
        sends: 3 + 1 + 2 - 1,
        conversions: 1 + 1,
        refused: 0,
        undelivered: 1 + 1,
    };
    assert_eq!(
        traffic.service,
        [MinuteCounts {
            refused: 1 + 1,
            ..scoped
        }]
    );
    assert_eq!(traffic.countries, [("GB".to_owned(), vec![scoped])]);
    assert_eq!(
        traffic.prefixes,
        [("44740".to_owned(), "GB".to_owned(), vec![scoped])]
    );
    // One row a scope in shard 0, the old ones untouched.
    let shards: Vec<(String, i16)> = client
        .query(
            "SELECT scope, shard FROM vcode_fraud_counts ORDER BY scope, shard",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    let expected: Vec<(String, i16)> = ["*", "c:GB", "p:44740"]
        .iter()
        .flat_map(|scope| [0, 3, 7].map(|shard| (scope.to_string(), shard)))
        .collect();
    assert_eq!(shards, expected);
    assert_eq!(before().await, old_rows);
}

/// Flushes of several instances at once, each listing the same prefixes and minutes in its own
/// order, take the rows in one order (the statement's, not the changes'): none deadlocks (a
/// deadlock fails one of its statements after `deadlock_timeout`), and every change counts once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn flushes_of_several_instances_at_once_never_deadlock() {
    use vcode::domain::traffic::BUCKET_MS;
    use vcode::store::{FraudStore, TrafficChange};

    let url = PostgresServer::shared().fresh_database().await;
    let settings = PostgresSettings {
        statement_timeout: Duration::from_secs(20),
        ..PostgresSettings::new(url)
    };
    let instances: Vec<std::sync::Arc<PostgresStore>> = (0..2)
        .map(|_| std::sync::Arc::new(PostgresStore::connect(&settings).unwrap()))
        .collect();
    instances[0].migrate().await.unwrap();
    let minute = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        / BUCKET_MS;
    let changes: Vec<TrafficChange> = [("44740", "GB"), ("44741", "GB"), ("1202", "US")]
        .iter()
        .flat_map(|(prefix, country)| {
            [minute - 1, minute].map(|minute| TrafficChange {
                prefix: prefix.to_string(),
                country: country.to_string(),
                minute,
                sends: 1,
                conversions: 1,
                refused: 1,
                undelivered: 0,
            })
        })
        .collect();
    let (tasks, flushes) = (8, 25);
    let running: Vec<_> = (0..tasks)
        .map(|task| {
            let store = instances[task % 2].clone();
            // Every other task lists the changes the other way round.
            let mut changes = changes.clone();
            if task % 4 >= 2 {
                changes.reverse();
            }
            tokio::spawn(async move {
                for _ in 0..flushes {
                    store.add_traffic(&changes).await.expect("no deadlock");
                }
            })
        })
        .collect();
    for task in join_all(running).await {
        task.unwrap();
    }
    let traffic = instances[1]
        .fraud_traffic(minute - 1, minute)
        .await
        .unwrap();
    let each = (tasks * flushes) as u64;
    let service: Vec<(u64, u64, u64)> = traffic
        .service
        .iter()
        .map(|c| (c.minute, c.sends, c.refused))
        .collect();
    assert_eq!(
        service,
        [
            (minute - 1, 3 * each, 3 * each),
            (minute, 3 * each, 3 * each)
        ]
    );
    let mut prefixes: Vec<(String, String, Vec<u64>)> = traffic
        .prefixes
        .iter()
        .map(|(p, c, m)| {
            (
                p.clone(),
                c.clone(),
                m.iter().map(|c| c.conversions).collect(),
            )
        })
        .collect();
    prefixes.sort();
    assert_eq!(
        prefixes,
        [("1202", "US"), ("44740", "GB"), ("44741", "GB")]
            .map(|(p, c)| (p.to_owned(), c.to_owned(), vec![each, each]))
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
    assert_eq!(versions, (1..=19).collect::<Vec<i32>>());
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

/// A level row changed send after send is updated in place (heap-only, HOT): its expiry, the
/// one indexed column a change could move, stays until a third of its life has passed, and
/// migration 19 leaves room in its page, so a send adds no entry to the table's indexes (it
/// added one to each, for each of its five scopes, and postgres's work per send grew with the
/// dead entries: 2.1 million instructions after 300 sends, 2.6 million after 1,000).
#[tokio::test]
async fn a_busy_level_row_is_updated_in_place() {
    use vcode::domain::traffic::{HalfLives, LevelChange, RecordLife};
    use vcode::store::{LevelStore, LevelUpdate};

    let (store, client) = migrated_database().await;
    let scopes = ["t:busy"];
    let start = 1_800_000_000_000u64;
    for i in 0..200 {
        store
            .count_levels(&LevelUpdate {
                scopes: &scopes,
                change: LevelChange::SEND,
                // 10 ms apart: each send's expiry differs from the last one's.
                now_ms: start + i * 10,
                half_lives: HalfLives {
                    recent_ms: 60_000.0,
                    history_ms: 600_000.0,
                },
                record_life: RecordLife {
                    ttl: Duration::from_secs(3600),
                    young_ttl: Duration::from_secs(3600),
                    young_sends: 2.5,
                },
                returning: None,
            })
            .await
            .unwrap();
    }
    // Each backend reports its counts once idle, within about ten seconds.
    let deadline = Instant::now() + Duration::from_secs(30);
    let seen = loop {
        let row = client
            .query_one(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables \
                 WHERE relname = 'vcode_fraud_levels'",
                &[],
            )
            .await
            .unwrap();
        let seen = (row.get::<_, i64>(0), row.get::<_, i64>(1));
        if seen.0 >= 150 || Instant::now() >= deadline {
            break seen;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let reported = seen.0 >= 150;
    assert!(reported, "the updates were never reported: {seen:?}");
    let (updates, in_place) = seen;
    assert!(
        in_place * 10 >= updates * 9,
        "{in_place} of {updates} updates of a level row were heap-only"
    );
}

/// A level's counts are read by their scope's key, however many rows the table holds and
/// whatever the planner knew of it when it planned: a generic plan made while the table was
/// small hashed the whole table on every later call (with a day's thousands of ranges, postgres
/// did 3.2 times the work per verified code that it did before the levels, and 1.1 times per
/// send). Counted by the transaction's own statistics: ten calls while the table is empty
/// (past the first calls' custom plans), then 3,000 ranges, then ten more.
#[tokio::test]
async fn a_level_is_read_by_its_key_not_by_a_scan() {
    let (_store, client) = migrated_database().await;
    let now: i64 = 1_800_000_000_000;
    let count = async |call: i64| {
        let rows = client
            .query(
                "SELECT * FROM vcode_levels_count(ARRAY['c:86', 'p:86138', 'r:8613800'], $1, $2, \
                 60000, 600000, 0, 1, 0, 3600000, 3600000, 2.5, 0, 0, true)",
                &[&call, &(now + call)],
            )
            .await
            .unwrap();
        assert_eq!(rows.len(), 3, "each scope's counts");
    };
    let scans = async || -> i64 {
        client
            .query_one(
                "SELECT seq_scan FROM pg_stat_xact_user_tables \
                 WHERE relname = 'vcode_fraud_levels'",
                &[],
            )
            .await
            .unwrap()
            .get(0)
    };
    client.batch_execute("BEGIN").await.unwrap();
    for call in 0..10 {
        count(call).await;
    }
    client
        .batch_execute(&format!(
            "INSERT INTO vcode_fraud_levels (scope, shard, t_ms, rs, hs, expires_at_ms) \
             SELECT 'r:86138' || i, 0, {now}, 1, 1, {now} + 3600000 \
             FROM generate_series(1, 3000) AS i"
        ))
        .await
        .unwrap();
    let before = scans().await;
    for call in 10..20 {
        count(call).await;
    }
    let scanned = scans().await - before;
    client.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(
        scanned, 0,
        "ten counts of three scopes among 3,000 scanned the table"
    );
}

/// A new database at today's version: its store, and a plain connection for assertions
/// straight on its tables.
async fn migrated_database() -> (PostgresStore, tokio_postgres::Client) {
    let server = PostgresServer::shared();
    let url = server.fresh_database().await;
    let store = PostgresStore::connect(&PostgresSettings::new(url.clone())).unwrap();
    store.migrate().await.unwrap();
    let client = server.client(url.rsplit('/').next().unwrap()).await;
    (store, client)
}
