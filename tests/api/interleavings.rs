//! The postmortem's races replayed step by step on a real redis-server, two instances (two
//! connections) of each strategy sharing it: two sends racing, a verify racing a send, two
//! verifies racing. The legacy strategies must lose or double-accept codes exactly as the Go
//! service did, and `atomic` must do neither, whichever order its steps take.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use vcode::domain::{Code, CodeLength, Destination, Purpose};
use vcode::postmortem::legacy::{self, Legacy, LegacyRedisStore};
use vcode::postmortem::{self, VerifyStrategy};
use vcode::store::redis::{RedisSettings, RedisTopology};
use vcode::store::{
    Budgets, CodeStore, IssueOutcome, IssueParams, RedisStore, ResendPolicy, Stores, VerifyOutcome,
    VerifyParams,
};

use crate::support::{RedisServer, codes, phone, random_phone};

const FLAVOURS: [Legacy; 2] = [Legacy::Original, Legacy::PostmortemFix];

fn connect(server: &RedisServer) -> RedisStore {
    RedisStore::connect(&RedisSettings {
        topology: RedisTopology::Single { url: server.url() },
        connect_timeout: Duration::from_millis(500),
        command_timeout: Duration::from_millis(1000),
        ca_file: None,
        older_instances: false,
    })
    .expect("valid settings")
}

fn legacy_store(server: &RedisServer, flavour: Legacy, gap: Duration) -> LegacyRedisStore {
    LegacyRedisStore::connect(&server.url(), flavour, gap, Duration::from_millis(1000))
        .expect("valid settings")
}

/// Two instances of one legacy strategy on one Redis.
fn legacy_pair(
    server: &RedisServer,
    flavour: Legacy,
    gap: Duration,
) -> (LegacyRedisStore, LegacyRedisStore) {
    (
        legacy_store(server, flavour, gap),
        legacy_store(server, flavour, gap),
    )
}

fn params() -> IssueParams {
    IssueParams {
        retention: Duration::ZERO,
        ttl: Duration::from_secs(300),
        cooldown: Duration::from_secs(60),
        policy: ResendPolicy::Reuse,
        destination_quota: Vec::new(),
        names_latest_send: true,
    }
}

fn limits() -> VerifyParams {
    VerifyParams {
        max_attempts: 5,
        destination_failures: None,
        client_failures: None,
    }
}

fn code(digits: &str) -> Code {
    Code::parse(digits, CodeLength::default()).expect("six digits")
}

fn login() -> Purpose {
    Purpose::default()
}

fn fresh_phone() -> Destination {
    phone(&random_phone())
}

fn digests(phone: &Destination, digits: &str) -> Vec<vcode::domain::CodeDigest> {
    codes::digests(phone, &login(), &code(digits))
}

/// A send: the code that went out by SMS, or `None` when nothing was sent.
async fn send(store: &dyn CodeStore, phone: &Destination, candidate: &str) -> Option<String> {
    let candidate = code(candidate);
    match store
        .issue_code(
            phone,
            &login(),
            codes::candidate(phone, &login(), &candidate),
            &params(),
            Budgets::none(),
        )
        .await
        .expect("Redis answers")
    {
        IssueOutcome::Send(delivery) => Some(
            codes::delivered(phone, &login(), &delivery, &candidate)
                .expose()
                .to_owned(),
        ),
        other => {
            assert!(
                matches!(other, IssueOutcome::Cooldown { .. }),
                "unexpected {other:?}"
            );
            None
        }
    }
}

async fn verify(store: &dyn CodeStore, phone: &Destination, digits: &str) -> VerifyOutcome {
    store
        .verify_code(
            phone,
            &login(),
            &codes::digests(phone, &login(), &code(digits)),
            codes::CLIENT,
            limits(),
        )
        .await
        .expect("Redis answers")
}

/// How many GET commands the server has run (the legacy verify's first round trip).
async fn get_calls(server: &RedisServer) -> u64 {
    let mut connection = server.connection().await;
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut connection)
        .await
        .expect("INFO answers");
    stats
        .lines()
        .find_map(|line| line.strip_prefix("cmdstat_get:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|calls| calls.parse().ok())
        .unwrap_or(0)
}

// --- two sends racing -------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_two_sends_racing_lose_the_first_code() {
    let server = RedisServer::start();
    for flavour in FLAVOURS {
        let (a, b) = legacy_pair(&server, flavour, Duration::ZERO);
        let phone = fresh_phone();
        // Two sends (a double click on two instances): two codes, two paid SMS.
        assert_eq!(send(&a, &phone, "111111").await.as_deref(), Some("111111"));
        assert_eq!(send(&b, &phone, "222222").await.as_deref(), Some("222222"));

        // The Go layout: one string per phone (here the code's digest), overwritten, TTL 300 s.
        let mut redis = server.connection().await;
        let key = legacy::key(&phone);
        let stored: Option<String> = redis::cmd("GET")
            .arg(&key)
            .query_async(&mut redis)
            .await
            .unwrap();
        let expected = hex::encode(digests(&phone, "222222")[0].as_bytes());
        assert_eq!(stored.as_deref(), Some(expected.as_str()), "{flavour:?}");
        let ttl: i64 = redis::cmd("TTL")
            .arg(&key)
            .query_async(&mut redis)
            .await
            .unwrap();
        assert!((295..=300).contains(&ttl), "{flavour:?}: TTL {ttl}");

        // The user types the first SMS: a delivered, unused, unexpired code is refused.
        assert!(
            matches!(
                verify(&a, &phone, "111111").await,
                VerifyOutcome::Mismatch { .. }
            ),
            "{flavour:?}: the first code should be lost"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn atomic_two_sends_racing_make_one_code_that_verifies() {
    let server = RedisServer::start();
    let (a, b) = (connect(&server), connect(&server));
    // Either send may come first; the second is refused without a new code or SMS.
    for (first, second) in [(&a, &b), (&b, &a)] {
        let phone = fresh_phone();
        assert_eq!(
            send(first, &phone, "111111").await.as_deref(),
            Some("111111")
        );
        assert_eq!(send(second, &phone, "222222").await, None);
        assert_eq!(
            verify(second, &phone, "111111").await,
            VerifyOutcome::Verified
        );
    }
    // Truly at once: exactly one of many concurrent sends delivers.
    let phone = fresh_phone();
    let sends = (0..20).map(|i| {
        let store = if i % 2 == 0 { &a } else { &b };
        let digits = format!("{:06}", 100_000 + i);
        let phone = &phone;
        async move { send(store, phone, &digits).await }
    });
    let delivered: Vec<String> = join_all(sends).await.into_iter().flatten().collect();
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert_eq!(
        verify(&a, &phone, &delivered[0]).await,
        VerifyOutcome::Verified
    );
}

// --- a verify racing a send -------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_send_between_get_and_del_is_lost() {
    let server = RedisServer::start();
    for flavour in FLAVOURS {
        let (a, b) = legacy_pair(&server, flavour, Duration::ZERO);
        let phone = fresh_phone();
        send(&a, &phone, "111111").await;

        // Device A's verify: the GET matches ...
        let read = a
            .read_step(&phone, &digests(&phone, "111111"))
            .await
            .expect("Redis answers");
        assert!(read.matched());
        // ... device B asks for a new code, which is stored and sent ...
        assert_eq!(send(&b, &phone, "222222").await.as_deref(), Some("222222"));
        // ... and A's DEL removes it.
        assert_eq!(
            a.finish_verify(read, 5).await.expect("Redis answers"),
            VerifyOutcome::Verified
        );
        assert_eq!(
            verify(&b, &phone, "222222").await,
            VerifyOutcome::CodeExpired,
            "{flavour:?}: the fresh code should be lost"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_original_loses_a_send_during_the_login_and_the_fix_keeps_it() {
    // The same race through `verify_code` itself, with the login's own work (the gap): the
    // original's DEL ends the login, the fix's DEL comes before it.
    let server = RedisServer::start();
    for (flavour, lost) in [(Legacy::Original, true), (Legacy::PostmortemFix, false)] {
        let (a, b) = legacy_pair(&server, flavour, Duration::from_secs(1));
        let phone = fresh_phone();
        send(&a, &phone, "111111").await;
        let gets_before = get_calls(&server).await;
        let device_a = {
            let (a, phone) = (a.clone(), phone.clone());
            tokio::spawn(async move { verify(&a, &phone, "111111").await })
        };
        // Wait until A's GET has run, then send while A's login works.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while get_calls(&server).await == gets_before {
            assert!(tokio::time::Instant::now() < deadline, "the GET never ran");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        // The fix's DEL follows its GET at once: let it land before B's send.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(send(&b, &phone, "222222").await.as_deref(), Some("222222"));
        assert_eq!(device_a.await.unwrap(), VerifyOutcome::Verified);
        let expected = if lost {
            VerifyOutcome::CodeExpired
        } else {
            VerifyOutcome::Verified
        };
        assert_eq!(
            verify(&b, &phone, "222222").await,
            expected,
            "{flavour:?}: the code sent during the login"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn atomic_verify_racing_a_send_loses_nothing() {
    let server = RedisServer::start();
    let (a, b) = (connect(&server), connect(&server));

    // The verify first: the send then makes a new code, which verifies too.
    let phone = fresh_phone();
    send(&a, &phone, "111111").await;
    assert_eq!(verify(&a, &phone, "111111").await, VerifyOutcome::Verified);
    assert_eq!(send(&b, &phone, "222222").await.as_deref(), Some("222222"));
    assert_eq!(verify(&b, &phone, "222222").await, VerifyOutcome::Verified);

    // The send first: it is refused (no SMS), and the pending code still verifies.
    let phone = fresh_phone();
    send(&a, &phone, "111111").await;
    assert_eq!(send(&b, &phone, "222222").await, None);
    assert_eq!(verify(&a, &phone, "111111").await, VerifyOutcome::Verified);
    assert!(
        b.pending_code(&phone, &login()).await.unwrap().is_none(),
        "nothing pending, nothing delivered and unused"
    );
}

// --- two verifies racing ----------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_two_verifies_racing_both_pass() {
    let server = RedisServer::start();
    for flavour in FLAVOURS {
        let (a, b) = legacy_pair(&server, flavour, Duration::ZERO);
        let phone = fresh_phone();
        send(&a, &phone, "111111").await;
        // Both GETs before either DEL.
        let read_a = a
            .read_step(&phone, &digests(&phone, "111111"))
            .await
            .unwrap();
        let read_b = b
            .read_step(&phone, &digests(&phone, "111111"))
            .await
            .unwrap();
        assert!(read_a.matched() && read_b.matched());
        assert_eq!(
            a.finish_verify(read_a, 5).await.unwrap(),
            VerifyOutcome::Verified
        );
        assert_eq!(
            b.finish_verify(read_b, 5).await.unwrap(),
            VerifyOutcome::Verified,
            "{flavour:?}: one code should be accepted twice"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_original_accepts_two_verifies_during_the_login_and_the_fix_one() {
    let server = RedisServer::start();
    for (flavour, both) in [(Legacy::Original, true), (Legacy::PostmortemFix, false)] {
        let (a, b) = legacy_pair(&server, flavour, Duration::from_secs(1));
        let phone = fresh_phone();
        send(&a, &phone, "111111").await;
        let first = verify(&a, &phone, "111111");
        let second = async {
            // B's verify arrives while A's login works (after A's GET and, for the fix, DEL).
            tokio::time::sleep(Duration::from_millis(200)).await;
            verify(&b, &phone, "111111").await
        };
        let (first, second) = tokio::join!(first, second);
        assert_eq!(first, VerifyOutcome::Verified);
        let expected = if both {
            VerifyOutcome::Verified
        } else {
            VerifyOutcome::CodeExpired
        };
        assert_eq!(second, expected, "{flavour:?}: the second verify");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn atomic_two_verifies_racing_accept_once() {
    let server = RedisServer::start();
    let (a, b) = (connect(&server), connect(&server));
    for (first, second) in [(&a, &b), (&b, &a)] {
        let phone = fresh_phone();
        send(&a, &phone, "111111").await;
        assert_eq!(
            verify(first, &phone, "111111").await,
            VerifyOutcome::Verified
        );
        assert_eq!(
            verify(second, &phone, "111111").await,
            VerifyOutcome::CodeExpired
        );
    }
    let phone = fresh_phone();
    send(&a, &phone, "111111").await;
    let verifies = (0..20).map(|i| {
        let store = if i % 2 == 0 { &a } else { &b };
        let phone = &phone;
        async move { verify(store, phone, "111111").await }
    });
    let outcomes = join_all(verifies).await;
    let accepted = outcomes
        .iter()
        .filter(|o| **o == VerifyOutcome::Verified)
        .count();
    assert_eq!(accepted, 1, "{outcomes:?}");
}

// --- the rest of the legacy store -------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_stores_keep_the_go_services_other_habits() {
    let server = RedisServer::start();
    let stores = postmortem::stores_for(
        VerifyStrategy::LegacyOriginal,
        Stores::of(Arc::new(connect(&server))),
        Some(&server.url()),
        Duration::ZERO,
        Duration::from_millis(1000),
    )
    .expect("a legacy store");
    let store = stores.codes.clone();
    let phone = fresh_phone();
    // No cooldown, no dedup: every send is a new code and a new SMS.
    for digits in ["111111", "222222", "333333"] {
        assert_eq!(send(&*store, &phone, digits).await.as_deref(), Some(digits));
    }
    // No attempt counting: wrong codes never destroy the pending one.
    for _ in 0..10 {
        assert_eq!(
            verify(&*store, &phone, "999999").await,
            VerifyOutcome::Mismatch {
                remaining_attempts: 5
            }
        );
    }
    // One key per phone, whatever the purpose.
    let other = Purpose::parse("reset_password").unwrap();
    let pending = store.pending_code(&phone, &other).await.unwrap().unwrap();
    assert_eq!(pending.digest, digests(&phone, "333333")[0]);
    // The rest is the real Redis store's: the dev inbox, and readiness.
    stores.health.ping().await.expect("ping");
    assert!(
        stores
            .dev_inbox
            .dev_messages(&phone)
            .await
            .unwrap()
            .is_empty()
    );
}
