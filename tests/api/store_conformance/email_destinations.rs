//! Email destinations on every store: an address keys its code, its send log and its
//! verifications as a phone does (by `Destination::key`, the address folded to lower case), so
//! `Ann@` and `ann@` are one code and one budget; the per-address quota is checked in the
//! issue's own step; a verification leads back to the address; its unconfirmed delivery is
//! recorded; and concurrent verifies of one emailed code succeed exactly once.

use super::*;
use vcode::domain::EmailAddress;
use vcode::store::{DeliveryStatus, QuotaRule};

fn email(raw: &str) -> Destination {
    Destination::from(EmailAddress::parse(raw).expect("a valid test address"))
}

/// A fresh address (its local part in mixed case), and the same mailbox in lower case.
fn fresh_email() -> (Destination, Destination) {
    // The random part before the tag: a tag is folded away (one mailbox, issue 39).
    let local = format!("Ann.Lee{}+news", rand::random::<u32>());
    (
        email(&format!("{local}@Example.COM")),
        email(&format!("{}@example.com", local.to_ascii_lowercase())),
    )
}

async fn an_address_is_one_code_whatever_its_case(backend: Backend) {
    let t = open(backend);
    let (written, lower) = fresh_email();
    assert_eq!(written.key(), lower.key());
    let sent = deliver(&*t.store, &written, &standard()).await;
    // The same mailbox in lower case: the cooldown holds, and its verify takes the code.
    assert!(matches!(
        issue(&*t.store, &lower, &login(), &standard()).await.0,
        IssueOutcome::Cooldown { .. }
    ));
    let wrong_code = wrong(&sent.code);
    assert!(matches!(
        verify(&*t.store, &lower, &wrong_code).await,
        VerifyOutcome::Mismatch { .. }
    ));
    assert_eq!(
        verify(&*t.store, &lower, &sent.code).await,
        VerifyOutcome::Verified
    );
    assert_eq!(
        verify(&*t.store, &written, &sent.code).await,
        VerifyOutcome::CodeExpired
    );
    // Another address and a phone are other codes.
    let (other, _) = fresh_email();
    assert!(pending_of(&*t.store, &other, &login()).await.is_none());
}

async fn the_per_address_quota_counts_in_the_issue(backend: Backend) {
    let t = open(backend);
    let (written, lower) = fresh_email();
    let p = IssueParams {
        cooldown: Duration::ZERO,
        policy: ResendPolicy::Rotate,
        destination_quota: vec![QuotaRule {
            limit: 2,
            window: Duration::from_secs(3600),
        }],
        ..standard()
    };
    deliver(&*t.store, &written, &p).await;
    deliver(&*t.store, &lower, &p).await;
    let before = pending_of(&*t.store, &lower, &login()).await.unwrap().0;
    match issue(&*t.store, &written, &login(), &p).await.0 {
        IssueOutcome::QuotaExceeded { retry_after } => {
            assert!(retry_after > Duration::from_secs(3500), "{retry_after:?}")
        }
        other => panic!("expected the address's quota, got {other:?}"),
    }
    // Refused: nothing changed.
    assert_eq!(
        pending_of(&*t.store, &lower, &login()).await.unwrap().0,
        before
    );
    // Another address has its own budget.
    let (other, _) = fresh_email();
    deliver(&*t.store, &other, &p).await;
}

async fn a_verification_leads_back_to_the_address(backend: Backend) {
    let t = open(backend);
    let (written, lower) = fresh_email();
    let sent = deliver(&*t.store, &written, &standard()).await;
    let target = t
        .store
        .locate_verification(&sent.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(target.phone_e164, lower.key());
    t.store.mark_unconfirmed(&written, &sent.id).await.unwrap();
    let record = t.store.verification(&sent.id, None).await.unwrap().unwrap();
    assert_eq!(record.delivery, DeliveryStatus::Unconfirmed);
    let outcome = t
        .store
        .verify_by_id(
            &lower,
            &login(),
            &sent.id,
            &codes::digests(&lower, &login(), &sent.code),
            codes::CLIENT,
            five_attempts(),
        )
        .await
        .unwrap();
    assert_eq!(outcome, VerifyOutcome::Verified);
}

async fn concurrent_verifies_of_an_emailed_code_succeed_once(backend: Backend) {
    let t = open(backend);
    let (written, _) = fresh_email();
    let code = deliver(&*t.store, &written, &standard()).await.code;
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let (store, to, code) = (t.store.clone(), written.clone(), code.clone());
            tokio::spawn(async move { verify(&*store, &to, &code).await })
        })
        .collect();
    let verified = futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(Result::unwrap)
        .filter(|outcome| *outcome == VerifyOutcome::Verified)
        .count();
    assert_eq!(verified, 1);
}

on_every_store!(
    an_address_is_one_code_whatever_its_case,
    the_per_address_quota_counts_in_the_issue,
    a_verification_leads_back_to_the_address,
    concurrent_verifies_of_an_emailed_code_succeed_once,
);
