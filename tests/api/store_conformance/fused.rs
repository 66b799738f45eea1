//! The fused step (`issue_guarded`) on every store, played by the backend itself and by
//! `StepByStep` over its plain roles (the default written once): the same answers either way.
//! A blocked prefix is refused before anything is issued (no code pending, no verification, no
//! cooldown for a later issue); an open one issues and answers its admission, a flagged one
//! (not enforced) its block too; a send that does not deliver answers none; the step counts no
//! traffic (the guard's flush does). The send's levels are counted in the step, and answered,
//! where the store can (Redis on one node, PostgreSQL), only when the issue delivers.

use std::time::{SystemTime, UNIX_EPOCH};

use super::*;
use vcode::domain::traffic::{
    BUCKET_MS, HalfLives, LEVEL_RECORD_LIFE, LevelChange, LevelCounts, Reason,
};
use vcode::store::{
    Admission, Candidates, FraudSend, FusedSteps, GuardStep, GuardedIssue, LevelStep, LevelUpdate,
    PrefixBlock, StepByStep, TrafficCounts, VerifyStep,
};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn guard(prefix: &str, enforce: bool, now_ms: u64) -> GuardStep<'_> {
    GuardStep {
        send: FraudSend {
            prefix,
            country: "GB",
            now_ms,
        },
        enforce,
        levels: None,
    }
}

async fn issue_guarded(
    fused: &dyn FusedSteps,
    destination: &Destination,
    code: &Code,
    guard: GuardStep<'_>,
) -> (GuardedIssue, VerificationId) {
    let candidate = codes::candidate(destination, &login(), code);
    let id = candidate.verification.clone();
    let issued = fused
        .issue_guarded(
            destination,
            &login(),
            candidate,
            &standard(),
            Budgets::none(),
            guard,
        )
        .await
        .expect("store answers");
    (issued, id)
}

fn block(prefix: &str, now: u64) -> PrefixBlock {
    PrefixBlock {
        prefix: prefix.to_owned(),
        country: "GB".to_owned(),
        reason: Reason::Conversion,
        since_ms: now,
        until_ms: now + 15 * BUCKET_MS,
        strikes: 1,
        struck_ms: now,
        sends: 40,
        conversions: 1,
        lifted_ms: 0,
        evidence: String::new(),
    }
}

async fn fused_steps_answer_alike_on_the_backend_and_step_by_step(backend: Backend) {
    let t = open(backend);
    let apart = StepByStep {
        codes: t.store.clone(),
        fraud: t.store.clone(),
        quotas: t.store.clone(),
    };
    let ways: [(&str, &dyn FusedSteps, &str); 2] = [
        ("the backend's", &*t.store, "44751"),
        ("step by step", &apart, "44752"),
    ];
    let minute = now_ms() / BUCKET_MS;
    for (way, fused, prefix) in ways {
        let phone = fresh_phone();
        let code = new_code();
        // An open prefix: issued, admitted with no block.
        let (issued, _) = issue_guarded(fused, &phone, &code, guard(prefix, true, now_ms())).await;
        match issued {
            GuardedIssue::Issued {
                outcome: IssueOutcome::Send(_),
                admission: Some(admission),
            } => assert_eq!(
                admission,
                Admission::Admitted {
                    block: None,
                    levels: None
                },
                "{way}"
            ),
            other => panic!("{way}: expected an admitted delivery, got {other:?}"),
        }
        // A send in its cooldown is not issued, and answers no admission.
        let (issued, _) =
            issue_guarded(fused, &phone, &new_code(), guard(prefix, true, now_ms())).await;
        assert!(
            matches!(
                issued,
                GuardedIssue::Issued {
                    outcome: IssueOutcome::Cooldown { .. },
                    admission: None
                }
            ),
            "{way}: {issued:?}"
        );
        // Its code verifies as any other (the codes role's plain verify).
        let candidates = codes::digests(&phone, &login(), &code);
        let step = VerifyStep {
            destination: &phone,
            purpose: &login(),
            id: None,
            candidates: &Candidates::known(&candidates),
            client: codes::CLIENT,
            params: five_attempts(),
        };
        assert_eq!(
            t.store.verify(step).await.unwrap(),
            VerifyOutcome::Verified,
            "{way}"
        );

        // Blocked: refused before anything is issued.
        let now = now_ms();
        let blocked = block(prefix, now);
        assert!(t.store.block_prefix(&blocked, now).await.unwrap());
        let other = fresh_phone();
        let (issued, id) =
            issue_guarded(fused, &other, &new_code(), guard(prefix, true, now)).await;
        assert!(
            matches!(issued, GuardedIssue::Refused(ref refused) if *refused == blocked),
            "{way}: {issued:?}"
        );
        assert_eq!(
            t.store.pending_code(&other, &login()).await.unwrap(),
            None,
            "{way}"
        );
        assert_eq!(
            t.store.verification(&id, None).await.unwrap(),
            None,
            "{way}"
        );
        // Nothing issued, so nothing cools a plain issue down.
        let (outcome, sent) = issue(&*t.store, &other, &login(), &standard()).await;
        assert!(
            matches!(outcome, IssueOutcome::Send(_)) && sent.is_some(),
            "{way}: the refused issue left a cooldown: {outcome:?}"
        );
        // Not enforced: issued, flagged by the block.
        let flagged = fresh_phone();
        let (issued, _) =
            issue_guarded(fused, &flagged, &new_code(), guard(prefix, false, now)).await;
        match issued {
            GuardedIssue::Issued {
                outcome: IssueOutcome::Send(_),
                admission: Some(admission),
            } => assert_eq!(
                admission,
                Admission::Admitted {
                    block: Some(blocked),
                    levels: None
                },
                "{way}"
            ),
            other => panic!("{way}: expected a flagged delivery, got {other:?}"),
        }
    }
    // No step counted any traffic: the guard's flush does.
    assert_eq!(
        t.store.fraud_traffic(minute - 5, minute + 5).await.unwrap(),
        TrafficCounts::default()
    );
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

/// The recent and the history sends of each level, as read without adding anything.
async fn level_sends(store: &dyn Store, scopes: &[String], now_ms: u64) -> Vec<(f64, f64)> {
    let scopes: Vec<&str> = scopes.iter().map(String::as_str).collect();
    let levels: Vec<LevelCounts> = store
        .count_levels(&LevelUpdate {
            scopes: &scopes,
            change: LevelChange::default(),
            now_ms,
            half_lives: HALF_LIVES,
            record_life: LEVEL_RECORD_LIFE,
            returning: None,
        })
        .await
        .expect("store answers");
    levels
        .iter()
        .map(|level| (level.recent.sends, level.history.sends))
        .collect()
}

const HALF_LIVES: HalfLives = HalfLives {
    recent_ms: 300_000.0,
    history_ms: 86_400_000.0,
};

async fn fused_a_send_s_levels_are_counted_in_the_step_where_the_store_can(backend: Backend) {
    let t = open(backend);
    // Redis on one node (Sentinel's is one) and PostgreSQL count them in the step; the embedded
    // store and a Cluster leave them to the guard.
    let in_the_step = matches!(
        backend,
        Backend::Redis | Backend::Sentinel | Backend::Postgres
    );
    let now = now_ms();
    let tag: u64 = rand::random();
    let scopes = vec![format!("t:fused:p:{tag:x}"), format!("t:fused:c:{tag:x}")];
    let with_levels = |prefix, enforce| GuardStep {
        levels: Some(LevelStep {
            scopes: &scopes,
            now_ms: now,
            half_lives: HALF_LIVES,
            record_life: LEVEL_RECORD_LIFE,
        }),
        ..guard(prefix, enforce, now)
    };
    let phone = fresh_phone();
    let (issued, _) =
        issue_guarded(&*t.store, &phone, &new_code(), with_levels("44761", true)).await;
    let levels = match issued {
        GuardedIssue::Issued {
            outcome: IssueOutcome::Send(_),
            admission:
                Some(Admission::Admitted {
                    block: None,
                    levels,
                }),
        } => levels,
        other => panic!("expected an admitted delivery, got {other:?}"),
    };
    if in_the_step {
        let levels = levels.expect("the levels counted in the step");
        assert_eq!(levels.len(), scopes.len(), "{levels:?}");
        for level in &levels {
            assert!(
                close(level.recent.sends, 1.0) && close(level.history.sends, 1.0),
                "this send counted once: {level:?}"
            );
        }
    } else {
        assert_eq!(levels, None);
    }
    // Neither a send that does not deliver (its cooldown) nor a refused one is counted, nor
    // one taken step by step (which leaves the levels to the guard).
    let (issued, _) =
        issue_guarded(&*t.store, &phone, &new_code(), with_levels("44761", true)).await;
    assert!(
        matches!(
            issued,
            GuardedIssue::Issued {
                outcome: IssueOutcome::Cooldown { .. },
                admission: None
            }
        ),
        "{issued:?}"
    );
    assert!(
        t.store
            .block_prefix(&block("44762", now), now)
            .await
            .unwrap()
    );
    let (issued, _) = issue_guarded(
        &*t.store,
        &fresh_phone(),
        &new_code(),
        with_levels("44762", true),
    )
    .await;
    assert!(matches!(issued, GuardedIssue::Refused(_)), "{issued:?}");
    let apart = StepByStep {
        codes: t.store.clone(),
        fraud: t.store.clone(),
        quotas: t.store.clone(),
    };
    let (issued, _) = issue_guarded(
        &apart,
        &fresh_phone(),
        &new_code(),
        with_levels("44761", true),
    )
    .await;
    assert!(
        matches!(
            issued,
            GuardedIssue::Issued {
                outcome: IssueOutcome::Send(_),
                admission: Some(Admission::Admitted {
                    block: None,
                    levels: None
                })
            }
        ),
        "{issued:?}"
    );
    let expected = if in_the_step { 1.0 } else { 0.0 };
    for (recent, history) in level_sends(&*t.store, &scopes, now).await {
        assert!(
            close(recent, expected) && close(history, expected),
            "{backend:?}: ({recent}, {history}), expected {expected}"
        );
    }
}

on_every_store!(
    fused_steps_answer_alike_on_the_backend_and_step_by_step,
    fused_a_send_s_levels_are_counted_in_the_step_where_the_store_can,
);
