//! The fused steps on every store, played by the backend itself and by `StepByStep` over its
//! plain roles (the default written once): the same answers either way. An issue with the
//! guard's step counts a delivered send only, a blocked prefix is refused before anything is
//! issued, and a verify's match converts its send.

use std::time::{SystemTime, UNIX_EPOCH};

use super::*;
use vcode::fraud::Reason;
use vcode::fraud::policy::{BUCKET_MS, WINDOW_MINUTES, Window};
use vcode::store::{
    Admission, Candidates, Conversion, FraudSend, FusedSteps, GuardStep, GuardedIssue, PrefixBlock,
    StepByStep, VerifyStep,
};

const CODE_TTL: Duration = Duration::from_secs(900);

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The prefix's sends and conversions from `minute` on.
async fn prefix_counts(store: &dyn Store, prefix: &str, minute: u64) -> (u64, u64) {
    let traffic = store.fraud_traffic(minute, minute + 1).await.unwrap();
    let (mut sends, mut conversions) = (0, 0);
    for (_, _, minutes) in traffic.prefixes.iter().filter(|(p, ..)| p == prefix) {
        for counts in minutes {
            sends += counts.sends;
            conversions += counts.conversions;
        }
    }
    (sends, conversions)
}

/// The service's refusals from `minute` on.
async fn refusals(store: &dyn Store, minute: u64) -> u64 {
    let traffic = store.fraud_traffic(minute, minute + 1).await.unwrap();
    traffic.service.iter().map(|counts| counts.refused).sum()
}

async fn issue_guarded(
    fused: &dyn FusedSteps,
    destination: &Destination,
    code: &Code,
    prefix: &str,
    attribution: &str,
) -> (GuardedIssue, VerificationId) {
    let now = now_ms();
    let window = Window::at(now, Duration::from_secs(60), WINDOW_MINUTES);
    let guard = GuardStep {
        levels: None,
        send: FraudSend {
            prefix,
            country: "GB",
            attribution,
            token: rand::random(),
            now_ms: now,
        },
        window: &window,
        enforce: true,
        attribution_ttl: CODE_TTL,
    };
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
    for (way, fused, prefix) in ways {
        let minute = now_ms() / BUCKET_MS;
        let phone = fresh_phone();
        let attribution = format!("{}:login", phone.key());
        let code = new_code();
        // A delivered send is counted, with its admission answered.
        let (issued, _) = issue_guarded(fused, &phone, &code, prefix, &attribution).await;
        match issued {
            GuardedIssue::Issued {
                outcome: IssueOutcome::Send(_),
                admission: Some(Admission::Admitted { prefix: tally, .. }),
            } => assert_eq!(tally.unjudged.sends, 1, "{way}"),
            other => panic!("{way}: expected a counted delivery, got {other:?}"),
        }
        // A send in its cooldown is neither issued nor counted.
        let (issued, _) = issue_guarded(fused, &phone, &new_code(), prefix, &attribution).await;
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
        assert_eq!(
            prefix_counts(&*t.store, prefix, minute).await,
            (1, 0),
            "{way}"
        );
        // Its verify converts it.
        let candidates = codes::digests(&phone, &login(), &code);
        let step = VerifyStep {
            destination: &phone,
            purpose: &login(),
            id: None,
            candidates: &Candidates::known(&candidates),
            client: codes::CLIENT,
            params: five_attempts(),
        };
        let conversion = Conversion {
            attribution: &attribution,
            prefix,
            country: "GB",
            since_minute: minute - 10,
        };
        let verified = fused
            .verify_converting(step, Some(conversion))
            .await
            .unwrap();
        assert_eq!(verified, VerifyOutcome::Verified, "{way}");
        assert_eq!(
            prefix_counts(&*t.store, prefix, minute).await,
            (1, 1),
            "{way}"
        );
        // Blocked: refused before anything is issued or counted but the refusal.
        let now = now_ms();
        let block = PrefixBlock {
            prefix: prefix.to_owned(),
            country: "GB".to_owned(),
            reason: Reason::Conversion,
            since_ms: now,
            until_ms: now + 15 * 60 * 1000,
            strikes: 1,
            struck_ms: now,
            sends: 40,
            conversions: 1,
            lifted_ms: 0,
            evidence: String::new(),
        };
        assert!(t.store.block_prefix(&block, now).await.unwrap());
        let refused_before = refusals(&*t.store, minute).await;
        let other = fresh_phone();
        let attribution = format!("{}:login", other.key());
        let (issued, id) = issue_guarded(fused, &other, &new_code(), prefix, &attribution).await;
        assert!(
            matches!(issued, GuardedIssue::Refused(ref refused) if *refused == block),
            "{way}: {issued:?}"
        );
        assert_eq!(
            t.store.pending_code(&other, &login()).await.unwrap(),
            None,
            "{way}"
        );
        assert_eq!(t.store.verification(&id).await.unwrap(), None, "{way}");
        assert_eq!(
            prefix_counts(&*t.store, prefix, minute).await,
            (1, 1),
            "{way}"
        );
        let refused = refusals(&*t.store, minute).await - refused_before;
        assert_eq!(refused, 1, "{way}: the refusal is counted");
    }
}

on_every_store!(fused_steps_answer_alike_on_the_backend_and_step_by_step);
