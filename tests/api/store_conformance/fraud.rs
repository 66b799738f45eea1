//! The fraud guard's role in the store: a send's step only reads its prefix's block (refused
//! when active and enforced, the record answered otherwise, nothing written, not even a
//! refusal); blocks recorded, refused while one stands, flagged, listed and lifted; and the
//! traffic report's minutes as the instances' flushes add to them (`add_traffic`): each change
//! summed into its prefix's, its country's and the service's minute (refusals the service's
//! alone, undelivered sends still sends), taken back by a negative change, never read below 0,
//! read for the span asked only, and counted exactly once under concurrent flushes.
//!
//! The stores may differ in what they keep of a minute whose counts are all 0 (the embedded
//! store and PostgreSQL keep a row where Redis writes no field), and in whether a scope without
//! a minute in the span is listed: the report is compared without either (`report`).

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use super::*;
use vcode::domain::traffic::{BUCKET_MS, Reason};
use vcode::store::{Admission, FraudSend, MinuteCounts, PrefixBlock, TrafficChange, TrafficCounts};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A send into `prefix` (of `country`) at `at_ms`.
fn send<'a>(prefix: &'a str, country: &'a str, at_ms: u64) -> FraudSend<'a> {
    FraudSend {
        prefix,
        country,
        now_ms: at_ms,
    }
}

async fn admit(store: &dyn Store, send: &FraudSend<'_>, enforce: bool) -> Admission {
    store
        .admit_send(send, enforce)
        .await
        .expect("store answers")
}

fn admitted(block: Option<PrefixBlock>) -> Admission {
    Admission::Admitted {
        block,
        levels: None,
    }
}

fn block(prefix: &str, reason: Reason, now: u64, until_ms: u64) -> PrefixBlock {
    PrefixBlock {
        prefix: prefix.to_owned(),
        country: "GB".to_owned(),
        reason,
        since_ms: now,
        until_ms,
        strikes: 1,
        struck_ms: now,
        sends: 40,
        conversions: 1,
        lifted_ms: 0,
        evidence: format!("range of {prefix}: evidence kept as written"),
    }
}

/// One flush's change of `prefix`'s `minute`: `[sends, conversions, refused, undelivered]`.
fn change(prefix: &str, country: &str, minute: u64, [s, c, r, u]: [i64; 4]) -> TrafficChange {
    TrafficChange {
        prefix: prefix.to_owned(),
        country: country.to_owned(),
        minute,
        sends: s,
        conversions: c,
        refused: r,
        undelivered: u,
    }
}

/// One minute's counts: `[sends, conversions, refused, undelivered]`.
fn counts(minute: u64, [s, c, r, u]: [u64; 4]) -> MinuteCounts {
    MinuteCounts {
        minute,
        sends: s,
        conversions: c,
        refused: r,
        undelivered: u,
    }
}

async fn add(store: &dyn Store, changes: &[TrafficChange]) {
    store.add_traffic(changes).await.expect("store answers");
}

/// A traffic report as every store must answer it: each scope's minutes in order, without
/// the minutes that count nothing, the scopes without a minute left out, the scopes sorted.
#[derive(Debug, Default, PartialEq, Eq)]
struct Report {
    service: Vec<MinuteCounts>,
    countries: Vec<(String, Vec<MinuteCounts>)>,
    prefixes: Vec<(String, String, Vec<MinuteCounts>)>,
}

fn counted(minutes: &[MinuteCounts]) -> Vec<MinuteCounts> {
    let mut kept: Vec<MinuteCounts> = minutes
        .iter()
        .filter(|c| (c.sends, c.conversions, c.refused, c.undelivered) != (0, 0, 0, 0))
        .copied()
        .collect();
    kept.sort_by_key(|c| c.minute);
    kept
}

fn report_of(traffic: &TrafficCounts) -> Report {
    let mut countries: Vec<_> = traffic
        .countries
        .iter()
        .map(|(country, minutes)| (country.clone(), counted(minutes)))
        .filter(|(_, minutes)| !minutes.is_empty())
        .collect();
    countries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut prefixes: Vec<_> = traffic
        .prefixes
        .iter()
        .map(|(prefix, country, minutes)| (prefix.clone(), country.clone(), counted(minutes)))
        .filter(|(.., minutes)| !minutes.is_empty())
        .collect();
    prefixes.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    Report {
        service: counted(&traffic.service),
        countries,
        prefixes,
    }
}

async fn report(store: &dyn Store, from: u64, to: u64) -> Report {
    let traffic = store.fraud_traffic(from, to).await.expect("store answers");
    // Whatever a store keeps, it answers the span asked for and each minute once.
    let spans = std::iter::once(&traffic.service)
        .chain(traffic.countries.iter().map(|(_, minutes)| minutes))
        .chain(traffic.prefixes.iter().map(|(.., minutes)| minutes));
    for minutes in spans {
        assert!(
            minutes.iter().all(|c| (from..=to).contains(&c.minute)),
            "outside {from}..={to}: {minutes:?}"
        );
        let mut seen: Vec<u64> = minutes.iter().map(|c| c.minute).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), minutes.len(), "a minute twice: {minutes:?}");
    }
    report_of(&traffic)
}

/// The report the changes make when every count stays at or above 0 all along: what the
/// concurrent test expects, whatever order the flushes ran in.
fn sum_of(changes: &[TrafficChange]) -> Report {
    type Sums = BTreeMap<u64, [i64; 4]>;
    fn into(sums: &mut Sums, minute: u64, [s, c, r, u]: [i64; 4]) {
        let sum = sums.entry(minute).or_default();
        for (total, by) in sum.iter_mut().zip([s, c, r, u]) {
            *total += by;
        }
    }
    fn minutes(sums: &Sums) -> Vec<MinuteCounts> {
        let minutes: Vec<MinuteCounts> = sums
            .iter()
            .map(|(&minute, sum)| counts(minute, sum.map(|n| u64::try_from(n).unwrap())))
            .collect();
        counted(&minutes)
    }
    let (mut service, mut countries, mut prefixes) =
        (Sums::new(), BTreeMap::new(), BTreeMap::new());
    for ch in changes {
        let scoped = [ch.sends, ch.conversions, 0, ch.undelivered];
        into(
            &mut service,
            ch.minute,
            [ch.sends, ch.conversions, ch.refused, ch.undelivered],
        );
        into(
            countries.entry(ch.country.clone()).or_default(),
            ch.minute,
            scoped,
        );
        into(
            prefixes
                .entry((ch.prefix.clone(), ch.country.clone()))
                .or_default(),
            ch.minute,
            scoped,
        );
    }
    Report {
        service: minutes(&service),
        countries: countries
            .iter()
            .map(|(country, sums)| (country.clone(), minutes(sums)))
            .filter(|(_, minutes)| !minutes.is_empty())
            .collect(),
        prefixes: prefixes
            .iter()
            .map(|((prefix, country), sums)| (prefix.clone(), country.clone(), minutes(sums)))
            .filter(|(.., minutes)| !minutes.is_empty())
            .collect(),
    }
}

async fn fraud_admit_reads_the_prefix_s_block_and_writes_nothing(backend: Backend) {
    let t = open(backend);
    let now = now_ms();
    // No block: admitted, enforced or not, with no record to answer.
    for enforce in [true, false] {
        let admission = admit(&*t.store, &send("44740", "GB", now), enforce).await;
        assert_eq!(admission, admitted(None), "enforce: {enforce}");
    }
    // An active block refuses when enforced and is answered when not.
    let until = now + 15 * BUCKET_MS;
    let suspended = block("44740", Reason::Conversion, now, until);
    assert!(t.store.block_prefix(&suspended, now).await.unwrap());
    let blocked = send("44740", "GB", now);
    assert_eq!(
        admit(&*t.store, &blocked, true).await,
        Admission::Refused(suspended.clone())
    );
    assert_eq!(
        admit(&*t.store, &blocked, false).await,
        admitted(Some(suspended.clone()))
    );
    // The block is its prefix's alone: not a shorter or a longer one's.
    for other in ["44741", "4474", "447401"] {
        let admission = admit(&*t.store, &send(other, "GB", now), true).await;
        assert_eq!(admission, admitted(None), "{other}");
    }
    // Active at the send's own time: up to its end, not at it.
    assert_eq!(
        admit(&*t.store, &send("44740", "GB", until - 1), true).await,
        Admission::Refused(suspended.clone())
    );
    assert_eq!(
        admit(&*t.store, &send("44740", "GB", until), true).await,
        admitted(Some(suspended.clone()))
    );
    // An expired block passes, its record answered.
    let expired = block(
        "44742",
        Reason::Surge,
        now - 20 * BUCKET_MS,
        now - 5 * BUCKET_MS,
    );
    assert!(t.store.block_prefix(&expired, now).await.unwrap());
    assert_eq!(
        admit(&*t.store, &send("44742", "GB", now), true).await,
        admitted(Some(expired.clone()))
    );

    // Many admits at once, refused, flagged and passed: none writes anything, a refusal
    // included, and the blocks stay as recorded.
    let tasks: Vec<_> = (0..48)
        .map(|i| {
            let store = t.store.clone();
            tokio::spawn(async move {
                let prefix = ["44740", "44742", "44743"][i % 3];
                let enforce = i % 2 == 0;
                let admission = admit(&*store, &send(prefix, "GB", now), enforce).await;
                (prefix, enforce, admission)
            })
        })
        .collect();
    let mut refused = 0;
    for task in tasks {
        let (prefix, enforce, admission) = task.await.unwrap();
        let refuses = prefix == "44740" && enforce;
        assert_eq!(
            matches!(admission, Admission::Refused(_)),
            refuses,
            "{prefix} enforce: {enforce}: {admission:?}"
        );
        refused += usize::from(refuses);
    }
    assert_eq!(refused, 8);
    let minute = now / BUCKET_MS;
    assert_eq!(
        t.store
            .fraud_traffic(minute - 60, minute + 60)
            .await
            .unwrap(),
        TrafficCounts::default(),
        "an admit counts nothing, not even its refusal"
    );
    let mut blocks = t.store.prefix_blocks().await.unwrap();
    blocks.sort_by(|a, b| a.prefix.cmp(&b.prefix));
    assert_eq!(blocks, [suspended, expired]);
}

async fn fraud_blocks_refuse_flag_list_and_lift(backend: Backend) {
    let t = open(backend);
    let now = now_ms();
    let until = now + 15 * BUCKET_MS;
    let suspended = block("44740", Reason::Conversion, now, until);
    assert!(t.store.block_prefix(&suspended, now).await.unwrap());
    let later = PrefixBlock {
        strikes: 2,
        ..suspended.clone()
    };
    assert!(
        !t.store.block_prefix(&later, now).await.unwrap(),
        "an active block stands"
    );
    assert_eq!(
        t.store.prefix_blocks().await.unwrap(),
        vec![suspended.clone()],
        "the record as written, evidence and all"
    );
    // Enforced: refused. Monitored: admitted, flagged by its block.
    let sent = send("44740", "GB", now);
    assert_eq!(
        admit(&*t.store, &sent, true).await,
        Admission::Refused(suspended.clone())
    );
    assert_eq!(
        admit(&*t.store, &sent, false).await,
        admitted(Some(suspended.clone()))
    );
    // Lifted: open again, the lift noted, strikes kept; a second lift finds nothing, nor
    // one of a prefix never blocked.
    let lifted_at = now + 1000;
    assert!(t.store.lift_block("44740", lifted_at).await.unwrap());
    assert!(!t.store.lift_block("44740", lifted_at).await.unwrap());
    assert!(!t.store.lift_block("44799", lifted_at).await.unwrap());
    let lifted = PrefixBlock {
        until_ms: lifted_at,
        lifted_ms: lifted_at,
        ..suspended.clone()
    };
    assert_eq!(t.store.prefix_blocks().await.unwrap(), vec![lifted.clone()]);
    assert!(!lifted.is_active(lifted_at));
    assert_eq!(
        admit(&*t.store, &send("44740", "GB", lifted_at), true).await,
        admitted(Some(lifted))
    );
    // Once over, a new block is recorded in its place, and refuses.
    let held = block("44740", Reason::Surge, lifted_at, lifted_at + BUCKET_MS);
    assert!(t.store.block_prefix(&held, lifted_at).await.unwrap());
    assert_eq!(t.store.prefix_blocks().await.unwrap(), vec![held.clone()]);
    assert_eq!(
        admit(&*t.store, &send("44740", "GB", lifted_at + 1), true).await,
        Admission::Refused(held)
    );
    // Past its end there is nothing to lift.
    assert!(
        !t.store
            .lift_block("44740", lifted_at + BUCKET_MS)
            .await
            .unwrap()
    );
}

/// Changes of three prefixes of two countries over two minutes, in two flushes (one naming a
/// prefix's minute twice): summed per minute into each prefix, country and the service.
async fn fraud_traffic_sums_changes_into_prefix_country_and_service(backend: Backend) {
    let t = open(backend);
    let m0 = now_ms() / BUCKET_MS - 2;
    let m1 = m0 + 1;
    add(
        &*t.store,
        &[
            // Three sends, one undelivered (a send still), one verified, two refused.
            change("44740", "GB", m0, [3, 1, 2, 1]),
            change("1202", "US", m0, [2, 2, 0, 0]),
            change("44740", "GB", m1, [1, 0, 0, 0]),
        ],
    )
    .await;
    add(
        &*t.store,
        &[
            change("44740", "GB", m0, [1, 0, 0, 0]),
            change("1202", "US", m1, [4, 1, 1, 2]),
            change("44741", "GB", m1, [2, 1, 0, 0]),
            // A receipt's undelivered for a send counted in an earlier flush: not another send.
            change("44740", "GB", m0, [0, 0, 0, 1]),
        ],
    )
    .await;
    let gb_44740 = vec![counts(m0, [4, 1, 0, 2]), counts(m1, [1, 0, 0, 0])];
    let gb_44741 = vec![counts(m1, [2, 1, 0, 0])];
    let us_1202 = vec![counts(m0, [2, 2, 0, 0]), counts(m1, [4, 1, 0, 2])];
    let expected = Report {
        // The refusals reach the service alone.
        service: vec![counts(m0, [6, 3, 2, 2]), counts(m1, [7, 2, 1, 2])],
        countries: vec![
            (
                "GB".to_owned(),
                vec![counts(m0, [4, 1, 0, 2]), counts(m1, [3, 1, 0, 0])],
            ),
            ("US".to_owned(), us_1202.clone()),
        ],
        prefixes: vec![
            ("1202".to_owned(), "US".to_owned(), us_1202),
            ("44740".to_owned(), "GB".to_owned(), gb_44740),
            ("44741".to_owned(), "GB".to_owned(), gb_44741),
        ],
    };
    assert_eq!(report(&*t.store, m0, m1).await, expected);
    assert_eq!(
        report(&*t.store, m0 - 30, m1 + 30).await,
        expected,
        "a wider span reads the same"
    );
    // The minutes outside the span are left out.
    let only = |minute: u64| {
        let keep = |minutes: &Vec<MinuteCounts>| -> Vec<MinuteCounts> {
            minutes
                .iter()
                .filter(|c| c.minute == minute)
                .copied()
                .collect()
        };
        Report {
            service: keep(&expected.service),
            countries: expected
                .countries
                .iter()
                .map(|(c, m)| (c.clone(), keep(m)))
                .filter(|(_, m)| !m.is_empty())
                .collect(),
            prefixes: expected
                .prefixes
                .iter()
                .map(|(p, c, m)| (p.clone(), c.clone(), keep(m)))
                .filter(|(.., m)| !m.is_empty())
                .collect(),
        }
    };
    assert_eq!(report(&*t.store, m0, m0).await, only(m0));
    assert_eq!(report(&*t.store, m1, m1).await, only(m1));
    assert_eq!(
        only(m0).prefixes.len(),
        2,
        "44741 has no minute in the span"
    );
    assert_eq!(report(&*t.store, m0 - 30, m0 - 1).await, Report::default());
    assert_eq!(report(&*t.store, m1 + 1, m1 + 30).await, Report::default());
}

/// A negative change (a send given back, a refusal taken back) nets out; a count changes take
/// below 0 reads as 0.
async fn fraud_traffic_takes_back_and_never_reads_below_zero(backend: Backend) {
    let t = open(backend);
    let m = now_ms() / BUCKET_MS;
    add(&*t.store, &[change("44750", "GB", m, [3, 2, 1, 1])]).await;
    add(&*t.store, &[change("44750", "GB", m, [-1, 0, -1, 0])]).await;
    // Sent and given back: a minute that counts nothing.
    add(
        &*t.store,
        &[
            change("44751", "GB", m, [1, 0, 0, 0]),
            change("44751", "GB", m, [-1, 0, 0, 0]),
        ],
    )
    .await;
    let given_back = vec![counts(m, [2, 2, 0, 1])];
    assert_eq!(
        report(&*t.store, m, m).await,
        Report {
            service: given_back.clone(),
            countries: vec![("GB".to_owned(), given_back.clone())],
            prefixes: vec![("44750".to_owned(), "GB".to_owned(), given_back.clone())],
        }
    );

    // Driven below 0, in a minute and a country of their own: sends, refusals and undelivered
    // read 0, the one conversion stays.
    let earlier = m - 1;
    add(&*t.store, &[change("3361", "FR", earlier, [1, 0, 0, 0])]).await;
    add(
        &*t.store,
        &[
            change("3361", "FR", earlier, [-3, 1, -2, 0]),
            change("3361", "FR", earlier, [0, 0, 0, -1]),
        ],
    )
    .await;
    let floored = vec![counts(earlier, [0, 1, 0, 0])];
    assert_eq!(
        report(&*t.store, earlier, earlier).await,
        Report {
            service: floored.clone(),
            countries: vec![("FR".to_owned(), floored.clone())],
            prefixes: vec![("3361".to_owned(), "FR".to_owned(), floored)],
        }
    );
    // Whatever each store kept of it, no count of that minute reads below 0 (or wraps).
    let traffic = t.store.fraud_traffic(earlier, m).await.unwrap();
    let all = std::iter::once(&traffic.service)
        .chain(traffic.countries.iter().map(|(_, minutes)| minutes))
        .chain(traffic.prefixes.iter().map(|(.., minutes)| minutes))
        .flatten();
    for c in all {
        assert!(
            c.sends <= 3 && c.conversions <= 2 && c.refused <= 1 && c.undelivered <= 1,
            "{c:?}"
        );
    }
}

/// Sixteen tasks flushing fifty times each at once, all into the same prefix's minute (and a
/// few others'), some flushes giving a send back: every change counted exactly once.
async fn fraud_concurrent_flushes_are_each_counted_once(backend: Backend) {
    let t = open(backend);
    let m = now_ms() / BUCKET_MS;
    let (tasks, flushes) = (16, 50);
    // Task `task`'s flush `n`: its own counts never go below 0 at any point, so the sum does
    // not either, whatever the order.
    let flush = move |task: i64, n: i64| -> Vec<TrafficChange> {
        let mut changes = vec![
            change(
                "44740",
                "GB",
                m,
                [
                    1 + n % 3,
                    n % 2,
                    i64::from(n % 5 == 0),
                    i64::from(n % 7 == 0),
                ],
            ),
            change("44741", "GB", m, [2, i64::from(task % 2 == 0), 0, 0]),
            change("1202", "US", m - 1, [1, 0, i64::from(n % 4 == 0), 0]),
        ];
        if n % 10 == 9 {
            changes.push(change("44740", "GB", m, [-1, 0, 0, 0]));
        }
        changes
    };
    let running: Vec<_> = (0..tasks)
        .map(|task| {
            let store = t.store.clone();
            tokio::spawn(async move {
                for n in 0..flushes {
                    add(&*store, &flush(task, n)).await;
                }
            })
        })
        .collect();
    for task in running {
        task.await.unwrap();
    }
    let all: Vec<TrafficChange> = (0..tasks)
        .flat_map(|task| (0..flushes).flat_map(move |n| flush(task, n)))
        .collect();
    let expected = sum_of(&all);
    // What the model sums to, by hand: 16 × (50 + 49 − 5) sends into 44740.
    let prefix_44740 = &expected.prefixes[1];
    assert_eq!(
        (prefix_44740.0.as_str(), prefix_44740.2[0].sends),
        ("44740", 16 * 94)
    );
    assert_eq!(report(&*t.store, m - 1, m).await, expected);
}

on_every_store!(
    fraud_admit_reads_the_prefix_s_block_and_writes_nothing,
    fraud_blocks_refuse_flag_list_and_lift,
    fraud_traffic_sums_changes_into_prefix_country_and_service,
    fraud_traffic_takes_back_and_never_reads_below_zero,
    fraud_concurrent_flushes_are_each_counted_once,
);
