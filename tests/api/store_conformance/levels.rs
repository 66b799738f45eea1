//! The fraud guard's levels in the store (issue 39): every store decays and adds alike (the
//! embedded store computes with `LevelCounts::updated`, the others in Lua and SQL: their
//! answers must agree), answers in the order asked, counts concurrent events once each, starts
//! an expired record afresh, and remembers returning destinations for their time only.

use std::time::{SystemTime, UNIX_EPOCH};

use super::*;
use vcode::domain::traffic::{HalfLives, LevelChange, LevelCounts, RecordLife};
use vcode::store::LevelUpdate;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A name no other test (nor another run on the same store) uses.
fn scope(name: &str) -> String {
    format!("t:{name}:{:x}", rand::random::<u64>())
}

fn update<'a>(scopes: &'a [&'a str], change: LevelChange, now_ms: u64) -> LevelUpdate<'a> {
    LevelUpdate {
        scopes,
        change,
        now_ms,
        half_lives: HalfLives {
            recent_ms: 60_000.0,
            history_ms: 600_000.0,
        },
        record_life: life(Duration::from_secs(3600)),
        returning: None,
    }
}

/// A record's life of `ttl`, young or not.
fn life(ttl: Duration) -> RecordLife {
    RecordLife {
        ttl,
        young_ttl: ttl,
        young_sends: 3.0,
    }
}

fn close(a: f64, b: f64) -> bool {
    // Each store decays in its own arithmetic (Lua, SQL, Rust): a few roundings apart.
    (a - b).abs() < 1e-5 * a.abs().max(1.0)
}

fn assert_counts(got: &LevelCounts, want: &LevelCounts) {
    let pairs = [
        (got.recent.sends, want.recent.sends),
        (got.recent.conversions, want.recent.conversions),
        (got.recent.undelivered, want.recent.undelivered),
        (got.history.sends, want.history.sends),
        (got.history.conversions, want.history.conversions),
        (got.history.undelivered, want.history.undelivered),
    ];
    assert!(
        pairs.iter().all(|(a, b)| close(*a, *b)),
        "got {got:?}, want {want:?}"
    );
}

async fn levels_decay_and_add_as_the_policy_computes(backend: Backend) {
    let under = open(backend);
    let store = &under.store;
    let (a, b) = (scope("a"), scope("b"));
    let scopes = [a.as_str(), b.as_str()];
    let t0 = now_ms();
    let first = store
        .count_levels(&update(&scopes, LevelChange::SEND, t0))
        .await
        .expect("store answers");
    assert_eq!(first.len(), 2);
    let one = LevelCounts::default().updated(
        t0,
        t0,
        &update(&[], LevelChange::SEND, t0).half_lives,
        &LevelChange::SEND,
    );
    assert_counts(&first[0], &one);
    assert_counts(&first[1], &one);
    // A minute later (one recent half-life), a conversion into `a` only, then a send into
    // both: `a` holds 1 send decayed by half (recent) and 2^(-0.1) (history), plus a send, and
    // the conversion; `b` no conversion.
    let t1 = t0 + 60_000;
    let half = update(&[], LevelChange::SEND, t0).half_lives;
    store
        .count_levels(&update(&scopes[..1], LevelChange::CONVERSION, t1))
        .await
        .unwrap();
    let after = store
        .count_levels(&update(&scopes, LevelChange::SEND, t1))
        .await
        .unwrap();
    let a_want = one
        .updated(t0, t1, &half, &LevelChange::CONVERSION)
        .updated(t1, t1, &half, &LevelChange::SEND);
    let b_want = one.updated(t0, t1, &half, &LevelChange::SEND);
    assert_counts(&after[0], &a_want);
    assert_counts(&after[1], &b_want);
    assert!(close(after[0].recent.sends, 1.5), "{:?}", after[0]);
    assert!(close(after[0].recent.conversions, 1.0));
    // Order follows the question, not the store's.
    let reversed = [b.as_str(), a.as_str()];
    let undelivered = store
        .count_levels(&update(&reversed, LevelChange::UNDELIVERED, t1))
        .await
        .unwrap();
    assert!(close(undelivered[0].recent.conversions, 0.0));
    assert!(close(undelivered[1].recent.conversions, 1.0));
    assert!(close(undelivered[1].recent.undelivered, 1.0));
    // A clock behind the record's decays nothing (and loses nothing).
    let behind = store
        .count_levels(&update(&scopes[..1], LevelChange::SEND, t0))
        .await
        .unwrap();
    assert!(close(behind[0].recent.sends, 2.5), "{:?}", behind[0]);
}

async fn concurrent_level_events_count_once_each(backend: Backend) {
    let under = open(backend);
    let store = under.store.clone();
    let (a, service) = (scope("hot"), scope("service"));
    let now = now_ms();
    let tasks: Vec<_> = (0..40)
        .map(|_| {
            let (store, a, service) = (store.clone(), a.clone(), service.clone());
            tokio::spawn(async move {
                let scopes = [a.as_str(), service.as_str()];
                store
                    .count_levels(&update(&scopes, LevelChange::SEND, now))
                    .await
                    .expect("store answers");
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let scopes = [a.as_str(), service.as_str()];
    let counted = store
        .count_levels(&update(&scopes, LevelChange::default(), now))
        .await
        .unwrap();
    assert!(close(counted[0].recent.sends, 40.0), "{:?}", counted[0]);
    assert!(close(counted[1].history.sends, 40.0), "{:?}", counted[1]);
}

async fn an_expired_level_record_starts_afresh(backend: Backend) {
    let under = open(backend);
    let store = &under.store;
    let a = scope("old");
    let scopes = [a.as_str()];
    let t0 = now_ms();
    let mut short = update(&scopes, LevelChange::SEND, t0);
    short.record_life = life(Duration::from_millis(300));
    store.count_levels(&short).await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let later = now_ms();
    let counted = store
        .count_levels(&update(&scopes, LevelChange::SEND, later))
        .await
        .unwrap();
    assert!(close(counted[0].history.sends, 1.0), "{:?}", counted[0]);
}

/// A record changed often outlives its first expiry (each store keeps it at least its `ttl`
/// after its last change; Redis sets the expiry again only once a third of it has passed) and
/// still expires once left alone.
async fn a_level_record_lives_its_ttl_past_its_last_change(backend: Backend) {
    let under = open(backend);
    let store = &under.store;
    let a = scope("busy");
    let scopes = [a.as_str()];
    let count = || async {
        let mut change = update(&scopes, LevelChange::SEND, now_ms());
        change.record_life = life(Duration::from_millis(1000));
        store.count_levels(&change).await.unwrap()
    };
    let started = now_ms();
    count().await;
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        count().await;
    }
    let counted = count().await;
    assert!(now_ms() - started >= 1200);
    // Eight sends, barely decayed over a second and a half (the history's half-life: 10 min).
    assert!(
        (counted[0].history.sends - 8.0).abs() < 0.1,
        "{:?}",
        counted[0]
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let counted = count().await;
    assert!(close(counted[0].history.sends, 1.0), "{:?}", counted[0]);
}

/// A record of fewer than three sends (a bot's random number makes two) lives the young's
/// short life; one that grows to three lives its full ttl, whichever shards its sends went to
/// (PostgreSQL's rows of a scope are per shard: the scope's history decides, not the row's).
async fn a_young_level_record_lives_briefly_until_it_grows(backend: Backend) {
    let under = open(backend);
    let store = &under.store;
    let few = scope("few");
    // Several scopes of three sends each, spread over PostgreSQL's rows.
    let grown: Vec<String> = (0..4).map(|i| scope(&format!("grown{i}"))).collect();
    let brief = RecordLife {
        ttl: Duration::from_secs(60),
        young_ttl: Duration::from_millis(400),
        young_sends: 2.5,
    };
    let send = |scope: &str| {
        let scope = scope.to_owned();
        async move {
            let scopes = [scope.as_str()];
            let mut change = update(&scopes, LevelChange::SEND, now_ms());
            change.record_life = brief;
            store.count_levels(&change).await.unwrap()
        }
    };
    for _ in 0..2 {
        send(&few).await;
    }
    for scope in &grown {
        // Two at once take two shards on PostgreSQL (and are young there: neither saw the
        // other); the third sees both, and keeps them too.
        tokio::join!(send(scope), send(scope));
        send(scope).await;
    }
    tokio::time::sleep(Duration::from_millis(900)).await;
    let counted = send(&few).await;
    assert!(
        close(counted[0].history.sends, 1.0),
        "two sends are young: gone after their short life, {:?}",
        counted[0]
    );
    for scope in &grown {
        let counted = send(scope).await;
        assert!(
            (counted[0].history.sends - 4.0).abs() < 0.01,
            "three sends outlive the young's life, on every shard: {scope} {:?}",
            counted[0]
        );
    }
}

/// A refused send is counted like every admitted one, then taken back out of the history
/// alone: its levels' recent memory keeps it (a pump that goes on stays anomalous), their
/// history does not learn it. On PostgreSQL the withdrawal may land on another shard's row than
/// the send: the scope's sum is what is answered. Never below nothing: a withdrawal from a
/// record that is gone answers 0.
async fn a_refused_send_leaves_the_history_and_stays_recent(backend: Backend) {
    let under = open(backend);
    let store = &under.store;
    let (a, gone) = (scope("refused"), scope("gone"));
    let scopes = [a.as_str()];
    let t0 = now_ms();
    store
        .count_levels(&update(&scopes, LevelChange::CONVERSION, t0))
        .await
        .unwrap();
    // Three sends at once (three shards on PostgreSQL), each refused once counted.
    let sent = update(&scopes, LevelChange::SEND, t0);
    let send = || store.count_levels(&sent);
    let (x, y, z) = tokio::join!(send(), send(), send());
    for counted in [x, y, z] {
        counted.unwrap();
    }
    let t1 = t0 + 30_000;
    let refusal = update(&scopes, LevelChange::REFUSED, t1);
    let refuse = || store.count_levels(&refusal);
    let (x, y) = tokio::join!(refuse(), refuse());
    x.unwrap();
    y.unwrap();
    let counted = store
        .count_levels(&update(&scopes, LevelChange::REFUSED, t1))
        .await
        .unwrap();
    let half = update(&[], LevelChange::SEND, t0).half_lives;
    let mut want = LevelCounts::default().updated(t0, t0, &half, &LevelChange::CONVERSION);
    for _ in 0..3 {
        want = want.updated(t0, t0, &half, &LevelChange::SEND);
    }
    want = want.updated(t0, t1, &half, &LevelChange::REFUSED);
    for _ in 0..2 {
        want = want.updated(t1, t1, &half, &LevelChange::REFUSED);
    }
    assert_counts(&counted[0], &want);
    assert!(close(counted[0].history.sends, 0.0), "{:?}", counted[0]);
    assert!(close(counted[0].history.conversions, 2f64.powf(-0.05)));
    // Half a recent half-life later: the three sends, decayed, still there.
    assert!(
        close(counted[0].recent.sends, 3.0 * 2f64.powf(-0.5)),
        "{:?}",
        counted[0]
    );
    let nothing = store
        .count_levels(&update(&[gone.as_str()], LevelChange::REFUSED, t1))
        .await
        .unwrap();
    assert_counts(&nothing[0], &LevelCounts::default());
}

async fn returning_destinations_are_remembered_for_their_time(backend: Backend) {
    let under = open(backend);
    let store = &under.store;
    let (kept, brief, never) = (
        rand::random::<u64>(),
        rand::random::<u64>(),
        rand::random::<u64>(),
    );
    let a = scope("conv");
    let scopes = [a.as_str()];
    let now = now_ms();
    for (digest, ttl) in [
        (kept, Duration::from_secs(3600)),
        (brief, Duration::from_millis(300)),
    ] {
        let mut conversion = update(&scopes, LevelChange::CONVERSION, now);
        conversion.returning = Some((digest, ttl));
        store.count_levels(&conversion).await.unwrap();
    }
    assert!(store.is_returning(&[kept], now_ms()).await.unwrap());
    assert!(store.is_returning(&[never, kept], now_ms()).await.unwrap());
    assert!(!store.is_returning(&[never], now_ms()).await.unwrap());
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!store.is_returning(&[brief], now_ms()).await.unwrap());
    assert!(store.is_returning(&[kept], now_ms()).await.unwrap());
}

on_every_store!(
    levels_decay_and_add_as_the_policy_computes,
    concurrent_level_events_count_once_each,
    an_expired_level_record_starts_afresh,
    a_level_record_lives_its_ttl_past_its_last_change,
    a_young_level_record_lives_briefly_until_it_grows,
    a_refused_send_leaves_the_history_and_stays_recent,
    returning_destinations_are_remembered_for_their_time,
);
