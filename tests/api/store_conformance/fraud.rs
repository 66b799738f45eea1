//! The fraud guard's counts and blocks in the store: sends and conversions per minute, per
//! prefix, country and service, split at the grace period; releases; blocks refused,
//! flagged, listed and lifted; concurrent sends counted exactly once each, and refused once a
//! block is recorded.

use std::time::{SystemTime, UNIX_EPOCH};

use super::*;
use vcode::fraud::Reason;
use vcode::fraud::policy::{BUCKET_MS, Counts, Tally, WINDOW_MINUTES, Window};
use vcode::store::{Admission, FraudSend, PrefixBlock, SendMark};

const GRACE: Duration = Duration::from_secs(60);
/// Longer than the oldest send a test makes: its attribution is still there to convert.
const CODE_TTL: Duration = Duration::from_secs(900);

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A send into `prefix` for the code of `attribution`, at `at_ms`.
fn send<'a>(prefix: &'a str, attribution: &'a str, at_ms: u64) -> FraudSend<'a> {
    FraudSend {
        prefix,
        country: "GB",
        attribution,
        token: at_ms ^ attribution.len() as u64 ^ rand::random::<u64>(),
        now_ms: at_ms,
    }
}

/// The oldest minute a verify now can convert: as the guard asks, a code's life back.
fn since() -> u64 {
    now_ms() / BUCKET_MS - 10
}

fn window(at_ms: u64) -> Window {
    Window::at(at_ms, GRACE, WINDOW_MINUTES)
}

/// Admits `send` at its time (enforced) and returns the counts it answers, the attribution's
/// previous mark and the mark the send was counted under: its minute, and its token but for
/// the low bits (a store may choose the shard the send is counted in).
async fn admit(
    store: &dyn Store,
    send: &FraudSend<'_>,
) -> (Tally, Tally, Option<SendMark>, SendMark) {
    let window = window(send.now_ms);
    match store
        .admit_send(send, &window, true, CODE_TTL)
        .await
        .expect("store answers")
    {
        Admission::Admitted {
            prefix,
            service,
            previous,
            mark,
            ..
        } => {
            assert_eq!(mark.minute, window.minute);
            assert_eq!(mark.token >> 4, send.token >> 4, "{mark:?} for {send:?}");
            (prefix, service, previous, mark)
        }
        Admission::Refused(block) => panic!("refused: {block:?}"),
    }
}

fn counts(sends: u64, conversions: u64) -> Counts {
    Counts {
        sends,
        conversions,
        undelivered: 0,
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

async fn fraud_sends_are_counted_per_prefix_and_split_at_grace(backend: Backend) {
    let t = open(backend);
    let now = now_ms();
    let five_minutes_ago = now - 5 * BUCKET_MS;
    // Two sends into 44740 five minutes ago (judged now), one into 44741.
    admit(
        &*t.store,
        &send("44740", "+447400000001:login", five_minutes_ago),
    )
    .await;
    admit(
        &*t.store,
        &send("44740", "+447400000002:login", five_minutes_ago),
    )
    .await;
    let (other, _, _, _) = admit(
        &*t.store,
        &send("44741", "+447410000001:login", five_minutes_ago),
    )
    .await;
    assert_eq!(
        other,
        Tally {
            judged: counts(0, 0),
            unjudged: counts(1, 0)
        }
    );
    // One of them verified: attributed to its send's minute, once.
    let converted = t
        .store
        .count_conversion("+447400000001:login", "44740", "GB", since())
        .await
        .unwrap();
    assert_eq!(converted, Some(five_minutes_ago / BUCKET_MS));
    let again = t
        .store
        .count_conversion("+447400000001:login", "44740", "GB", since())
        .await
        .unwrap();
    assert_eq!(again, None, "a send converts once");
    let never_sent = t
        .store
        .count_conversion("+447400000009:login", "44740", "GB", since())
        .await
        .unwrap();
    assert_eq!(never_sent, None);
    // A fresh send now: the older ones are judged, it is not.
    let (prefix, service, previous, _) =
        admit(&*t.store, &send("44740", "+447400000003:login", now)).await;
    assert_eq!(previous, None);
    assert_eq!(
        prefix,
        Tally {
            judged: counts(2, 1),
            unjudged: counts(1, 0)
        }
    );
    assert_eq!(
        service,
        Tally {
            judged: counts(3, 1),
            unjudged: counts(1, 0)
        }
    );
    // Past the window (an hour), a send is no longer read.
    let long_ago = now - 2 * 3600 * 1000;
    admit(&*t.store, &send("44742", "+447420000001:login", long_ago)).await;
    let (prefix, service, _, _) =
        admit(&*t.store, &send("44742", "+447420000002:login", now)).await;
    assert_eq!(
        prefix,
        Tally {
            judged: counts(0, 0),
            unjudged: counts(1, 0)
        }
    );
    assert_eq!(service.judged.sends + service.unjudged.sends, 5);
}

/// A verify counts in its send's minute while the window stays the same: a late one (its send
/// judged) on the judged side, a prompt one (its send in the window's last minute) within grace;
/// the next send's judgement reads both (Redis: its running tally adjusted, not summed afresh).
async fn fraud_conversions_reach_the_running_judgement_on_their_side(backend: Backend) {
    let t = open(backend);
    let now = now_ms();
    let late = send("44760", "+447600000001:login", now - 5 * BUCKET_MS);
    admit(&*t.store, &late).await;
    let (prefix, ..) = admit(&*t.store, &send("44760", "+447600000002:login", now)).await;
    assert_eq!(
        prefix,
        Tally {
            judged: counts(1, 0),
            unjudged: counts(1, 0)
        }
    );
    let converted = t
        .store
        .count_conversion("+447600000001:login", "44760", "GB", since())
        .await
        .unwrap();
    assert_eq!(converted, Some(late.now_ms / BUCKET_MS));
    let (prefix, ..) = admit(&*t.store, &send("44760", "+447600000003:login", now)).await;
    assert_eq!(
        prefix,
        Tally {
            judged: counts(1, 1),
            unjudged: counts(2, 0)
        },
        "a late verify counts as a judged conversion"
    );
    let converted = t
        .store
        .count_conversion("+447600000003:login", "44760", "GB", since())
        .await
        .unwrap();
    assert_eq!(converted, Some(now / BUCKET_MS));
    let (prefix, ..) = admit(&*t.store, &send("44760", "+447600000004:login", now)).await;
    assert_eq!(
        prefix,
        Tally {
            judged: counts(1, 1),
            unjudged: counts(3, 1)
        },
        "a prompt verify counts within grace"
    );
}

async fn fraud_a_release_uncounts_the_send_and_restores_its_attribution(backend: Backend) {
    let t = open(backend);
    let now = now_ms();
    let earlier = now - 3 * BUCKET_MS;
    let attribution = "+447400000001:login";
    admit(&*t.store, &send("44740", attribution, earlier)).await;
    // A resend refused later (its cooldown): given back, the first send's minute restored.
    let resend = send("44740", attribution, now);
    let (prefix, _, previous, resent) = admit(&*t.store, &resend).await;
    assert_eq!((prefix.judged.sends, prefix.unjudged.sends), (1, 1));
    assert_eq!(previous.map(|mark| mark.minute), Some(earlier / BUCKET_MS));
    t.store
        .release_send(&resend, resent, previous, false)
        .await
        .unwrap();
    let converted = t
        .store
        .count_conversion(attribution, "44740", "GB", since())
        .await
        .unwrap();
    assert_eq!(
        converted,
        Some(earlier / BUCKET_MS),
        "the first send converts"
    );
    let (prefix, _, previous, _) =
        admit(&*t.store, &send("44740", "+447400000002:login", now)).await;
    assert_eq!(previous, None);
    assert_eq!(
        prefix,
        Tally {
            judged: counts(1, 1),
            unjudged: counts(1, 0)
        },
        "the released send is gone"
    );
    // A send the guard refused after counting it: uncounted, counted as refused.
    let refused = send("44740", "+447400000003:login", now);
    let (_, _, _, counted) = admit(&*t.store, &refused).await;
    t.store
        .release_send(&refused, counted, None, true)
        .await
        .unwrap();
    let minute = now / BUCKET_MS;
    let traffic = t.store.fraud_traffic(minute - 5, minute).await.unwrap();
    let this_minute = traffic
        .service
        .iter()
        .find(|c| c.minute == minute)
        .expect("this minute counted");
    assert_eq!((this_minute.sends, this_minute.refused), (1, 1));
    assert_eq!(
        t.store
            .count_conversion("+447400000003:login", "44740", "GB", since())
            .await
            .unwrap(),
        None,
        "a released first send has no attribution left"
    );
    // Two sends of one code at once, the first given back after the second marked it: the
    // second's mark stays, and its verify converts it.
    let first = send("44743", "+447430000001:login", earlier);
    let second = send("44743", "+447430000001:login", now);
    let (_, _, none, first_counted) = admit(&*t.store, &first).await;
    let (_, _, first_mark, _) = admit(&*t.store, &second).await;
    assert_eq!(first_mark, Some(first_counted));
    t.store
        .release_send(&first, first_counted, none, false)
        .await
        .unwrap();
    let converted = t
        .store
        .count_conversion("+447430000001:login", "44743", "GB", since())
        .await
        .unwrap();
    assert_eq!(converted, Some(minute), "the second send's mark stayed");
}

async fn fraud_blocks_refuse_flag_list_and_lift(backend: Backend) {
    let t = open(backend);
    let now = now_ms();
    let until = now + 15 * 60 * 1000;
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
        vec![suspended.clone()]
    );
    // Enforced: refused, nothing counted but the refusal.
    let refused = send("44740", "+447400000001:login", now);
    let admission = t
        .store
        .admit_send(&refused, &window(now), true, CODE_TTL)
        .await
        .unwrap();
    assert_eq!(admission, Admission::Refused(suspended.clone()));
    // Monitored: counted, the block answered.
    let admission = t
        .store
        .admit_send(&refused, &window(now), false, CODE_TTL)
        .await
        .unwrap();
    let Admission::Admitted {
        prefix,
        block: flagged,
        ..
    } = admission
    else {
        panic!("monitor never refuses")
    };
    assert_eq!(prefix.unjudged.sends, 1, "the refused send was not counted");
    assert_eq!(flagged, Some(suspended.clone()));
    let minute = now / BUCKET_MS;
    let traffic = t.store.fraud_traffic(minute, minute).await.unwrap();
    assert_eq!(traffic.service[0].refused, 1);
    // Lifted: open again, strikes kept; a second lift finds nothing.
    let lifted_at = now + 1000;
    assert!(t.store.lift_block("44740", lifted_at).await.unwrap());
    assert!(!t.store.lift_block("44740", lifted_at).await.unwrap());
    assert!(!t.store.lift_block("44799", lifted_at).await.unwrap());
    let blocks = t.store.prefix_blocks().await.unwrap();
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].until_ms, lifted_at);
    assert_eq!(blocks[0].lifted_ms, lifted_at);
    assert_eq!(blocks[0].strikes, 1);
    assert!(!blocks[0].is_active(lifted_at));
    admit(&*t.store, &send("44740", "+447400000002:login", lifted_at)).await;
    // Once over, a new block is recorded.
    let held = block("44740", Reason::Surge, lifted_at, lifted_at + 60_000);
    assert!(t.store.block_prefix(&held, lifted_at).await.unwrap());
    assert_eq!(t.store.prefix_blocks().await.unwrap(), vec![held]);
}

async fn fraud_concurrent_sends_are_each_counted_once(backend: Backend) {
    let t = open(backend);
    let now = now_ms();
    let sends = 64;
    let tasks: Vec<_> = (0..sends)
        .map(|i| {
            let store = t.store.clone();
            tokio::spawn(async move {
                let attribution = format!("+4474000{i:05}:login");
                let send = send("44740", &attribution, now);
                let (prefix, _, _, counted) = admit(&*store, &send).await;
                // Every other send is given back, concurrently with the others' counts.
                if i % 2 == 1 {
                    store
                        .release_send(&send, counted, None, false)
                        .await
                        .unwrap();
                }
                prefix.unjudged.sends
            })
        })
        .collect();
    let mut seen = Vec::new();
    for task in tasks {
        seen.push(task.await.unwrap());
    }
    // Each send saw itself counted, and no two saw the same total while none was released.
    assert!(seen.iter().all(|&n| (1..=sends).contains(&n)), "{seen:?}");
    let (prefix, service, _, _) =
        admit(&*t.store, &send("44740", "+447409999999:login", now)).await;
    assert_eq!(prefix.unjudged.sends, sends / 2 + 1);
    assert_eq!(service.unjudged.sends, sends / 2 + 1);
    // Concurrent verifies of one code convert it once.
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let store = t.store.clone();
            tokio::spawn(async move {
                store
                    .count_conversion("+447400000000:login", "44740", "GB", since())
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut converted = 0;
    for task in tasks {
        converted += usize::from(task.await.unwrap().is_some());
    }
    assert_eq!(converted, 1);
}

/// Many concurrent sends to one prefix (each its own code and random token: on PostgreSQL
/// spread over the minute's count shards), a third released and a third converted as they
/// run, then a block recorded while more race it: every count stays exact, the report sums a
/// minute into one, and every send begun after the block was recorded is refused.
async fn fraud_one_prefix_under_concurrent_sends_stays_exact_and_a_block_stops_it(
    backend: Backend,
) {
    let t = open(backend);
    let now = now_ms();
    let minute = now / BUCKET_MS;
    let sends: u64 = 96;
    let tasks: Vec<_> = (0..sends)
        .map(|i| {
            let store = t.store.clone();
            tokio::spawn(async move {
                let attribution = format!("+4474100{i:05}:login");
                let send = send("44741", &attribution, now);
                let (_, _, _, counted) = admit(&*store, &send).await;
                match i % 3 {
                    1 => store
                        .release_send(&send, counted, None, false)
                        .await
                        .unwrap(),
                    2 => {
                        let converted = store
                            .count_conversion(&attribution, "44741", "GB", since())
                            .await
                            .unwrap();
                        assert_eq!(converted, Some(minute));
                    }
                    _ => {}
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let (kept, converted) = (sends - sends / 3, sends / 3);
    let minute_of = |traffic: &vcode::store::TrafficCounts| {
        let (_, _, minutes) = traffic
            .prefixes
            .iter()
            .find(|(prefix, _, _)| prefix == "44741")
            .expect("the prefix counted")
            .clone();
        assert_eq!(minutes.len(), 1, "one count per minute: {minutes:?}");
        let service = traffic.service.clone();
        assert_eq!(service.len(), 1, "one count per minute: {service:?}");
        (minutes[0], service[0])
    };
    let (prefix, service) = minute_of(&t.store.fraud_traffic(minute, minute).await.unwrap());
    assert_eq!((prefix.sends, prefix.conversions), (kept, converted));
    assert_eq!((service.sends, service.conversions), (kept, converted));

    // A block recorded while sends race it; a second wave starts once it is recorded.
    let racing = 32;
    let wave = |from: u64| -> Vec<_> {
        (from..from + racing)
            .map(|i| {
                let store = t.store.clone();
                tokio::spawn(async move {
                    let attribution = format!("+4474101{i:05}:login");
                    let send = send("44741", &attribution, now);
                    let admission = store
                        .admit_send(&send, &window(now), true, CODE_TTL)
                        .await
                        .unwrap();
                    matches!(admission, Admission::Refused(_))
                })
            })
            .collect()
    };
    let first = wave(0);
    let suspended = block("44741", Reason::Conversion, now, now + 15 * 60 * 1000);
    assert!(t.store.block_prefix(&suspended, now).await.unwrap());
    let second = wave(racing);
    let mut refused_first = 0;
    for task in first {
        refused_first += u64::from(task.await.unwrap());
    }
    for task in second {
        assert!(
            task.await.unwrap(),
            "a send begun after the block was counted"
        );
    }
    let (prefix, service) = minute_of(&t.store.fraud_traffic(minute, minute).await.unwrap());
    assert_eq!(prefix.sends, kept + racing - refused_first);
    assert_eq!(service.sends, kept + racing - refused_first);
    assert_eq!(service.refused, refused_first + racing);
}

async fn fraud_traffic_reads_minutes_countries_and_prefixes(backend: Backend) {
    let t = open(backend);
    let now = now_ms();
    let minute = now / BUCKET_MS;
    let earlier = now - 2 * BUCKET_MS;
    admit(&*t.store, &send("44740", "+447400000001:login", earlier)).await;
    let us = FraudSend {
        prefix: "1202",
        country: "US",
        attribution: "+12025550143:login",
        token: 7,
        now_ms: now,
    };
    admit(&*t.store, &us).await;
    t.store
        .count_conversion("+12025550143:login", "1202", "US", since())
        .await
        .unwrap();
    let traffic = t.store.fraud_traffic(minute - 10, minute).await.unwrap();
    let service: Vec<(u64, u64, u64)> = traffic
        .service
        .iter()
        .filter(|c| c.sends > 0)
        .map(|c| (c.minute, c.sends, c.conversions))
        .collect();
    assert_eq!(service, [(earlier / BUCKET_MS, 1, 0), (minute, 1, 1)]);
    let mut countries: Vec<(String, u64)> = traffic
        .countries
        .iter()
        .map(|(c, m)| (c.clone(), m.iter().map(|c| c.sends).sum()))
        .collect();
    countries.sort();
    assert_eq!(countries, [("GB".to_owned(), 1), ("US".to_owned(), 1)]);
    let mut prefixes: Vec<(String, String, u64)> = traffic
        .prefixes
        .iter()
        .map(|(p, c, m)| (p.clone(), c.clone(), m.iter().map(|c| c.conversions).sum()))
        .collect();
    prefixes.sort();
    assert_eq!(
        prefixes,
        [
            ("1202".to_owned(), "US".to_owned(), 1),
            ("44740".to_owned(), "GB".to_owned(), 0)
        ]
    );
    // A span before any send reads nothing.
    let before = t
        .store
        .fraud_traffic(minute - 100, minute - 50)
        .await
        .unwrap();
    assert!(before.service.iter().all(|c| c.sends == 0));
}

/// A receipt's `undelivered`: the send leaves the judgement (neither converted nor
/// unconverted) in its own minute, and stays a send in the traffic report; nothing is moved
/// where no send is left to move.
async fn fraud_an_undelivered_send_leaves_the_judgement(backend: Backend) {
    let t = open(backend);
    let now = now_ms();
    let five_minutes_ago = now - 5 * BUCKET_MS;
    let minute = five_minutes_ago / BUCKET_MS;
    let sends = [
        send("44750", "+447500000001:login", five_minutes_ago),
        send("44750", "+447500000002:login", five_minutes_ago),
        send("44750", "+447500000003:login", five_minutes_ago),
    ];
    let mut marks = Vec::new();
    for sent in &sends {
        marks.push(admit(&*t.store, sent).await.3);
    }
    t.store
        .count_conversion("+447500000001:login", "44750", "GB", since())
        .await
        .unwrap();
    let lost = marks[1];
    assert_eq!(lost.minute, minute);
    t.store
        .count_undelivered("44750", "GB", lost)
        .await
        .unwrap();
    let (prefix, service, _, _) =
        admit(&*t.store, &send("44750", "+447500000004:login", now)).await;
    for tally in [prefix, service] {
        assert_eq!(
            (
                tally.judged.judged_sends(),
                tally.judged.conversions,
                tally.judged.unconverted()
            ),
            (2, 1, 1),
            "{tally:?}"
        );
        assert_eq!(tally.unjudged.judged_sends(), 1, "{tally:?}");
    }
    let traffic = t.store.fraud_traffic(minute, minute).await.unwrap();
    let of = |minutes: &[vcode::store::MinuteCounts]| {
        minutes
            .iter()
            .map(|c| (c.minute, c.sends, c.conversions, c.undelivered))
            .collect::<Vec<_>>()
    };
    let expected = [(minute, 3, 1, 1)];
    assert_eq!(of(&traffic.service), expected);
    let countries: Vec<_> = traffic
        .countries
        .iter()
        .map(|(c, m)| (c.as_str(), of(m)))
        .collect();
    assert_eq!(countries, [("GB", expected.to_vec())]);
    let prefixes: Vec<_> = traffic
        .prefixes
        .iter()
        .map(|(p, c, m)| (p.as_str(), c.as_str(), of(m)))
        .collect();
    assert_eq!(prefixes, [("44750", "GB", expected.to_vec())]);

    // A minute without sends (past retention, or never counted) moves nothing, and the
    // undelivered never outnumber the sends.
    let nothing_then = SendMark {
        minute: minute - 100,
        token: 1,
    };
    t.store
        .count_undelivered("44750", "GB", nothing_then)
        .await
        .unwrap();
    for _ in 0..5 {
        t.store
            .count_undelivered("44750", "GB", lost)
            .await
            .unwrap();
    }
    let traffic = t.store.fraud_traffic(minute - 100, minute).await.unwrap();
    for counts in &traffic.service {
        assert!(counts.undelivered <= counts.sends, "{counts:?}");
        assert_eq!(counts.sends, if counts.minute == minute { 3 } else { 0 });
    }
}

/// Writes to judged minutes after a send has read them (late conversions, some racing other
/// sends, an undelivered receipt, a release) reach the next sends' judgement of the same
/// window: on PostgreSQL the judged minutes are read from a tally the window's first send
/// stored (migration 0013), which those writes must keep exact.
async fn fraud_late_writes_to_judged_minutes_reach_the_judgement(backend: Backend) {
    let t = open(backend);
    let now = now_ms();
    let five_minutes_ago = now - 5 * BUCKET_MS;
    let late = 12;
    let attributions: Vec<String> = (0..late + 2)
        .map(|i| format!("+4476000{i:05}:login"))
        .collect();
    let mut marks = Vec::new();
    for attribution in &attributions {
        marks.push(
            admit(&*t.store, &send("44760", attribution, five_minutes_ago))
                .await
                .3,
        );
    }
    let judged = |tally: Tally| (tally.judged.judged_sends(), tally.judged.conversions);
    let sent = late as u64 + 2;
    // The window's first send reads (and, where the store keeps one, tallies) them.
    let (prefix, service, _, _) =
        admit(&*t.store, &send("44760", "+447609999990:login", now)).await;
    assert_eq!(judged(prefix), (sent, 0));
    assert_eq!(judged(service), (sent, 0));
    // Late conversions, while more sends of the same window read the judged minutes.
    let tasks: Vec<_> = (0..late)
        .map(|i| {
            let store = t.store.clone();
            let attribution = attributions[i].clone();
            tokio::spawn(async move {
                let other = format!("+44760999{i:04}:login");
                let (prefix, _, _, _) = admit(&*store, &send("44760", &other, now)).await;
                assert!(prefix.judged.conversions <= late as u64, "{prefix:?}");
                store
                    .count_conversion(&attribution, "44760", "GB", since())
                    .await
                    .unwrap()
            })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), Some(five_minutes_ago / BUCKET_MS));
    }
    let (prefix, service, _, _) =
        admit(&*t.store, &send("44760", "+447609999991:login", now)).await;
    assert_eq!(judged(prefix), (sent, late as u64));
    assert_eq!(judged(service), (sent, late as u64));
    // An undelivered send and a released one leave the judged sends.
    t.store
        .count_undelivered("44760", "GB", marks[late])
        .await
        .unwrap();
    let released = send("44760", &attributions[late + 1], five_minutes_ago);
    t.store
        .release_send(&released, marks[late + 1], None, false)
        .await
        .unwrap();
    let (prefix, service, _, _) =
        admit(&*t.store, &send("44760", "+447609999992:login", now)).await;
    assert_eq!(judged(prefix), (sent - 2, late as u64));
    assert_eq!(judged(service), (sent - 2, late as u64));
    assert_eq!(
        prefix.unjudged.sends,
        late as u64 + 3,
        "this window's own sends"
    );
}

on_every_store!(
    fraud_late_writes_to_judged_minutes_reach_the_judgement,
    fraud_an_undelivered_send_leaves_the_judgement,
    fraud_conversions_reach_the_running_judgement_on_their_side,
    fraud_sends_are_counted_per_prefix_and_split_at_grace,
    fraud_a_release_uncounts_the_send_and_restores_its_attribution,
    fraud_blocks_refuse_flag_list_and_lift,
    fraud_concurrent_sends_are_each_counted_once,
    fraud_one_prefix_under_concurrent_sends_stays_exact_and_a_block_stops_it,
    fraud_traffic_reads_minutes_countries_and_prefixes,
);
