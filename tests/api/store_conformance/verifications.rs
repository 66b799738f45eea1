//! Verification ids on every store: each send's id has its own attempts, guesses under one id
//! never spend another's nor destroy the code, a match consumes the code for every id, and a
//! verification's status follows its code (pending, approved, canceled, expired, spent).

use super::*;
use vcode::store::{DeliveryStatus, VerificationStatus};

async fn verify_id(
    store: &dyn Store,
    phone: &Destination,
    id: &VerificationId,
    code: &Code,
) -> VerifyOutcome {
    store
        .verify_by_id(
            phone,
            &login(),
            id,
            &codes::digests(phone, &login(), code),
            codes::CLIENT,
            five_attempts(),
        )
        .await
        .expect("store answers")
}

async fn status(store: &dyn Store, id: &VerificationId) -> Option<VerificationStatus> {
    store
        .verification(id, None)
        .await
        .expect("store answers")
        .map(|record| record.status)
}

/// Resends without a cooldown: each delivery of the same code answers an id of its own.
fn no_cooldown() -> IssueParams {
    params(
        Duration::from_secs(300),
        Duration::ZERO,
        ResendPolicy::Reuse,
    )
}

async fn a_send_is_located_and_pending(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let sent = deliver(&*t.store, &phone, &standard()).await;
    let target = t
        .store
        .locate_verification(&sent.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(target.phone_e164, phone.key());
    assert_eq!(target.purpose, "login");
    let record = t.store.verification(&sent.id, None).await.unwrap().unwrap();
    assert_eq!(record.status, VerificationStatus::Pending);
    assert_eq!(record.delivery, DeliveryStatus::Sent);
    assert_eq!(record.failed_attempts, 0);
    assert!(
        record.expires_at_ms >= record.created_at_ms + 299_000,
        "{record:?}"
    );
    let unknown = VerificationId::generate();
    assert_eq!(t.store.locate_verification(&unknown).await.unwrap(), None);
    assert_eq!(status(&*t.store, &unknown).await, None);
    t.store.mark_unconfirmed(&phone, &sent.id).await.unwrap();
    let record = t.store.verification(&sent.id, None).await.unwrap().unwrap();
    assert_eq!(record.delivery, DeliveryStatus::Unconfirmed);
}

async fn guesses_spend_only_their_own_id_and_never_the_code(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let owner = deliver(&*t.store, &phone, &no_cooldown()).await;
    // Another requester's send re-sends the same code under an id of its own.
    let other = deliver(&*t.store, &phone, &no_cooldown()).await;
    assert_eq!(other.kind, IssueKind::Redelivered);
    assert_eq!(other.code, owner.code);
    let wrong = wrong(&owner.code);
    for left in (1..5).rev() {
        assert_eq!(
            verify_id(&*t.store, &phone, &other.id, &wrong).await,
            VerifyOutcome::Mismatch {
                remaining_attempts: left
            }
        );
    }
    assert_eq!(
        verify_id(&*t.store, &phone, &other.id, &wrong).await,
        VerifyOutcome::Destroyed
    );
    // Spent for good, even with the right code.
    assert_eq!(
        verify_id(&*t.store, &phone, &other.id, &owner.code).await,
        VerifyOutcome::Destroyed
    );
    assert_eq!(
        status(&*t.store, &other.id).await,
        Some(VerificationStatus::MaxAttemptsReached)
    );
    // The owner's id and the code are untouched.
    let (_, pending) = pending_of(&*t.store, &phone, &login())
        .await
        .expect("the code stays");
    assert_eq!(pending.failed_attempts, 0);
    let record = t
        .store
        .verification(&owner.id, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (record.status, record.failed_attempts),
        (VerificationStatus::Pending, 0)
    );
    assert_eq!(
        verify_id(&*t.store, &phone, &owner.id, &owner.code).await,
        VerifyOutcome::Verified
    );
    assert_eq!(
        status(&*t.store, &owner.id).await,
        Some(VerificationStatus::Approved)
    );
    assert!(pending_of(&*t.store, &phone, &login()).await.is_none());
}

async fn a_match_consumes_the_code_for_every_id(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let first = deliver(&*t.store, &phone, &no_cooldown()).await;
    let second = deliver(&*t.store, &phone, &no_cooldown()).await;
    assert_eq!(
        verify_id(&*t.store, &phone, &second.id, &second.code).await,
        VerifyOutcome::Verified
    );
    assert_eq!(
        verify_id(&*t.store, &phone, &first.id, &first.code).await,
        VerifyOutcome::CodeExpired
    );
    assert_eq!(
        status(&*t.store, &first.id).await,
        Some(VerificationStatus::Expired)
    );
    // An id verifies only the code its send delivered: not the next one.
    let third = deliver(&*t.store, &phone, &no_cooldown()).await;
    assert_eq!(
        verify_id(&*t.store, &phone, &first.id, &third.code).await,
        VerifyOutcome::CodeExpired
    );
    assert_eq!(
        verify_id(&*t.store, &phone, &third.id, &third.code).await,
        VerifyOutcome::Verified
    );
}

async fn a_rotated_code_leaves_the_earlier_ids_expired(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let rotate = params(
        Duration::from_secs(300),
        Duration::ZERO,
        ResendPolicy::Rotate,
    );
    let first = deliver(&*t.store, &phone, &rotate).await;
    let second = deliver(&*t.store, &phone, &rotate).await;
    assert_eq!(second.kind, IssueKind::Rotated);
    assert_eq!(
        status(&*t.store, &first.id).await,
        Some(VerificationStatus::Expired)
    );
    assert_eq!(
        verify_id(&*t.store, &phone, &first.id, &second.code).await,
        VerifyOutcome::CodeExpired
    );
    assert_eq!(
        verify_id(&*t.store, &phone, &second.id, &second.code).await,
        VerifyOutcome::Verified
    );
}

async fn a_canceled_id_no_longer_verifies_and_the_others_still_do(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let first = deliver(&*t.store, &phone, &no_cooldown()).await;
    let second = deliver(&*t.store, &phone, &no_cooldown()).await;
    let canceled = t
        .store
        .cancel_verification(&first.id, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(canceled.status, VerificationStatus::Canceled);
    assert_eq!(
        verify_id(&*t.store, &phone, &first.id, &first.code).await,
        VerifyOutcome::Canceled
    );
    assert!(pending_of(&*t.store, &phone, &login()).await.is_some());
    assert_eq!(
        verify_id(&*t.store, &phone, &second.id, &second.code).await,
        VerifyOutcome::Verified
    );
    // An ended verification stays as it is.
    let again = t
        .store
        .cancel_verification(&second.id, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.status, VerificationStatus::Approved);
    assert_eq!(
        t.store
            .cancel_verification(&VerificationId::generate(), None)
            .await
            .unwrap(),
        None
    );
}

async fn verifications_expire_with_their_code_and_are_kept_for_the_retention(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let short = params(Duration::from_millis(300), MINUTE, ResendPolicy::Reuse);
    let sent = deliver(&*t.store, &phone, &short).await;
    assert_eq!(
        status(&*t.store, &sent.id).await,
        Some(VerificationStatus::Pending)
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        status(&*t.store, &sent.id).await,
        Some(VerificationStatus::Expired)
    );
    assert_eq!(
        verify_id(&*t.store, &phone, &sent.id, &sent.code).await,
        VerifyOutcome::CodeExpired
    );
    // Gone once the retention has passed too.
    let brief = IssueParams {
        retention: Duration::ZERO,
        ..short
    };
    let other = deliver(&*t.store, &fresh_phone(), &brief).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(status(&*t.store, &other.id).await, None);
    assert_eq!(t.store.locate_verification(&other.id).await.unwrap(), None);
}

async fn an_undone_issue_leaves_no_verification(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let sent = deliver(&*t.store, &phone, &standard()).await;
    assert!(
        t.store
            .undo_issue(&phone, &login(), &sent.undo)
            .await
            .unwrap()
    );
    assert_eq!(status(&*t.store, &sent.id).await, None);
    assert_eq!(
        verify_id(&*t.store, &phone, &sent.id, &sent.code).await,
        VerifyOutcome::CodeExpired
    );
}

/// A resend rolled back (its SMS never went out) leaves the earlier send the code's latest: a
/// verify by phone ends that send's verification, approved (it used to name the undone one).
async fn a_rolled_back_resend_leaves_the_earlier_send_the_latest(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let first = deliver(&*t.store, &phone, &no_cooldown()).await;
    let second = deliver(&*t.store, &phone, &no_cooldown()).await;
    assert!(
        t.store
            .undo_issue(&phone, &login(), &second.undo)
            .await
            .unwrap()
    );
    assert_eq!(
        verify(&*t.store, &phone, &first.code).await,
        VerifyOutcome::Verified
    );
    assert_eq!(
        status(&*t.store, &first.id).await,
        Some(VerificationStatus::Approved)
    );
}

async fn concurrent_verifies_of_one_id_succeed_exactly_once(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let sent = deliver(&*t.store, &phone, &standard()).await;
    let tasks: Vec<_> = (0..100)
        .map(|_| {
            let (store, phone, id, code) = (
                t.store.clone(),
                phone.clone(),
                sent.id.clone(),
                sent.code.clone(),
            );
            tokio::spawn(async move { verify_id(&*store, &phone, &id, &code).await })
        })
        .collect();
    let outcomes: Vec<VerifyOutcome> = futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let verified = outcomes
        .iter()
        .filter(|o| **o == VerifyOutcome::Verified)
        .count();
    let expired = outcomes
        .iter()
        .filter(|o| **o == VerifyOutcome::CodeExpired)
        .count();
    assert_eq!((verified, expired), (1, 99), "{outcomes:?}");
}

async fn concurrent_wrong_guesses_under_one_id_never_exceed_its_budget(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let owner = deliver(&*t.store, &phone, &no_cooldown()).await;
    let other = deliver(&*t.store, &phone, &no_cooldown()).await;
    let wrong = wrong(&owner.code);
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let (store, phone, id, code) = (
                t.store.clone(),
                phone.clone(),
                other.id.clone(),
                wrong.clone(),
            );
            tokio::spawn(async move { verify_id(&*store, &phone, &id, &code).await })
        })
        .collect();
    let outcomes: Vec<VerifyOutcome> = futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let compared = outcomes
        .iter()
        .filter(|o| matches!(o, VerifyOutcome::Mismatch { .. }))
        .count();
    assert_eq!(compared, 4, "{outcomes:?}");
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, VerifyOutcome::Mismatch { .. } | VerifyOutcome::Destroyed))
    );
    let record = t
        .store
        .verification(&other.id, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.failed_attempts, 5);
    assert_eq!(
        verify_id(&*t.store, &phone, &owner.id, &owner.code).await,
        VerifyOutcome::Verified
    );
}

/// An SMS whose provider answered too late is recorded as unconfirmed also when the phone's
/// quota is on: the quota's send log shares the phone's hash tag, and Redis once passed that
/// sorted set as the code's key, so the step failed with WRONGTYPE and the send stayed `sent`.
async fn an_unconfirmed_send_under_a_phone_quota_is_recorded(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let p = IssueParams {
        destination_quota: vec![vcode::store::QuotaRule {
            limit: 5,
            window: Duration::from_secs(3600),
        }],
        ..standard()
    };
    let sent = deliver(&*t.store, &phone, &p).await;
    t.store.mark_unconfirmed(&phone, &sent.id).await.unwrap();
    let record = t.store.verification(&sent.id, None).await.unwrap().unwrap();
    assert_eq!(record.delivery, DeliveryStatus::Unconfirmed);
    assert_eq!(record.status, VerificationStatus::Pending);
    // The code is untouched: it still verifies under its id.
    assert_eq!(
        verify_id(&*t.store, &phone, &sent.id, &sent.code).await,
        VerifyOutcome::Verified
    );
}

on_every_store!(
    a_send_is_located_and_pending,
    an_unconfirmed_send_under_a_phone_quota_is_recorded,
    guesses_spend_only_their_own_id_and_never_the_code,
    a_match_consumes_the_code_for_every_id,
    a_rotated_code_leaves_the_earlier_ids_expired,
    a_canceled_id_no_longer_verifies_and_the_others_still_do,
    verifications_expire_with_their_code_and_are_kept_for_the_retention,
    an_undone_issue_leaves_no_verification,
    a_rolled_back_resend_leaves_the_earlier_send_the_latest,
    concurrent_verifies_of_one_id_succeed_exactly_once,
    concurrent_wrong_guesses_under_one_id_never_exceed_its_budget,
);
