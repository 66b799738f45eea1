//! Pending codes: issue, resend policies, verify, expiry, undo, concurrency and the dev inbox.

use super::*;

async fn issue_creates_a_pending_code(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let candidate = new_code();
    let outcome = t
        .store
        .issue_code(
            &phone,
            &login(),
            codes::candidate(&phone, &login(), &candidate),
            &standard(),
            Budgets::none(),
        )
        .await
        .unwrap();
    let IssueOutcome::Send(delivery) = outcome else {
        panic!("expected a delivery, got {outcome:?}")
    };
    assert_eq!(delivery.kind, IssueKind::Created);
    let (code, pending) = pending_of(&*t.store, &phone, &login()).await.unwrap();
    assert_eq!(code, candidate);
    assert_eq!(pending.failed_attempts, 0);
    assert_eq!(pending.deliveries, 1);
}

async fn cooldown_refuses_a_second_issue_and_changes_nothing(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let first = deliver(&*t.store, &phone, &standard()).await;
    for _ in 0..3 {
        match issue(&*t.store, &phone, &login(), &standard()).await.0 {
            IssueOutcome::Cooldown { retry_after } => {
                assert!(
                    retry_after > Duration::from_secs(55) && retry_after <= MINUTE,
                    "{retry_after:?}"
                )
            }
            other => panic!("expected the cooldown, got {other:?}"),
        }
    }
    let pending = t
        .store
        .pending_code(&phone, &login())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(codes::pending(&phone, &login(), &pending), first.code);
    assert_eq!(pending.deliveries, 1);
}

async fn reuse_redelivers_the_same_code_and_keeps_attempts(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let p = params(
        Duration::from_secs(300),
        Duration::from_millis(100),
        ResendPolicy::Reuse,
    );
    let first = deliver(&*t.store, &phone, &p).await;
    assert!(matches!(
        verify(&*t.store, &phone, &wrong(&first.code)).await,
        VerifyOutcome::Mismatch {
            remaining_attempts: 4
        }
    ));
    tokio::time::sleep(Duration::from_millis(150)).await;
    let again = deliver(&*t.store, &phone, &p).await;
    assert_eq!(again.kind, IssueKind::Redelivered);
    assert_eq!(again.code, first.code);
    let pending = t
        .store
        .pending_code(&phone, &login())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(pending.deliveries, 2);
    assert_eq!(
        pending.failed_attempts, 1,
        "a resend never resets failed attempts"
    );
}

async fn rotate_replaces_the_code_and_keeps_attempts(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let p = params(
        Duration::from_secs(300),
        Duration::ZERO,
        ResendPolicy::Rotate,
    );
    let first = deliver(&*t.store, &phone, &p).await;
    verify(&*t.store, &phone, &wrong(&first.code)).await;
    let mut second = deliver(&*t.store, &phone, &p).await;
    // One in a million draws repeats the code; rotate again rather than flake.
    while second.code == first.code {
        second = deliver(&*t.store, &phone, &p).await;
    }
    assert_eq!(second.kind, IssueKind::Rotated);
    assert!(matches!(
        verify(&*t.store, &phone, &first.code).await,
        VerifyOutcome::Mismatch {
            remaining_attempts: 3
        }
    ));
    assert_eq!(
        verify(&*t.store, &phone, &second.code).await,
        VerifyOutcome::Verified
    );
}

async fn verify_consumes_a_matching_code_once(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let delivery = deliver(&*t.store, &phone, &standard()).await;
    assert_eq!(
        verify(&*t.store, &phone, &delivery.code).await,
        VerifyOutcome::Verified
    );
    assert_eq!(
        verify(&*t.store, &phone, &delivery.code).await,
        VerifyOutcome::CodeExpired
    );
    assert!(
        t.store
            .pending_code(&phone, &login())
            .await
            .unwrap()
            .is_none()
    );
    // A verified code no longer holds a cooldown: the next send makes a new code.
    let next = deliver(&*t.store, &phone, &standard()).await;
    assert_eq!(next.kind, IssueKind::Created);
}

async fn wrong_codes_count_down_then_destroy(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let delivery = deliver(&*t.store, &phone, &standard()).await;
    let bad = wrong(&delivery.code);
    for remaining in (1..=4).rev() {
        assert_eq!(
            verify(&*t.store, &phone, &bad).await,
            VerifyOutcome::Mismatch {
                remaining_attempts: remaining
            }
        );
        // A wrong guess never removes the pending code.
        assert!(
            t.store
                .pending_code(&phone, &login())
                .await
                .unwrap()
                .is_some()
        );
    }
    assert_eq!(
        verify(&*t.store, &phone, &bad).await,
        VerifyOutcome::Destroyed
    );
    assert_eq!(
        verify(&*t.store, &phone, &delivery.code).await,
        VerifyOutcome::CodeExpired
    );
}

async fn resend_does_not_reset_the_attempt_count(backend: Backend) {
    for policy in [ResendPolicy::Reuse, ResendPolicy::Rotate] {
        let t = open(backend);
        let phone = fresh_phone();
        let p = params(Duration::from_secs(300), Duration::ZERO, policy);
        let first = deliver(&*t.store, &phone, &p).await;
        let bad = wrong(&first.code);
        verify(&*t.store, &phone, &bad).await;
        verify(&*t.store, &phone, &bad).await;
        let second = deliver(&*t.store, &phone, &p).await;
        let bad = wrong(&second.code);
        assert_eq!(
            verify(&*t.store, &phone, &bad).await,
            VerifyOutcome::Mismatch {
                remaining_attempts: 2
            },
            "{policy:?}"
        );
        verify(&*t.store, &phone, &bad).await;
        assert_eq!(
            verify(&*t.store, &phone, &bad).await,
            VerifyOutcome::Destroyed,
            "{policy:?}"
        );
    }
}

async fn codes_expire(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let p = params(Duration::from_millis(300), MINUTE, ResendPolicy::Reuse);
    let delivery = deliver(&*t.store, &phone, &p).await;
    assert!(
        t.store
            .pending_code(&phone, &login())
            .await
            .unwrap()
            .is_some()
    );
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert!(
        t.store
            .pending_code(&phone, &login())
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        verify(&*t.store, &phone, &delivery.code).await,
        VerifyOutcome::CodeExpired
    );
    // An expired code holds no cooldown either.
    assert_eq!(
        deliver(&*t.store, &phone, &p).await.kind,
        IssueKind::Created
    );
}

async fn purposes_are_isolated(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let reset = Purpose::parse("reset_password").unwrap();
    let login_code = deliver(&*t.store, &phone, &standard()).await.code;
    // The login cooldown does not hold back another purpose.
    let (IssueOutcome::Send(_), Some(reset_code)) =
        issue(&*t.store, &phone, &reset, &standard()).await
    else {
        panic!("another purpose has its own cooldown")
    };
    let outcome = verify_for(&*t.store, &phone, &reset, &login_code).await;
    if reset_code != login_code {
        assert_eq!(
            outcome,
            VerifyOutcome::Mismatch {
                remaining_attempts: 4
            }
        );
    }
    let login_pending = t
        .store
        .pending_code(&phone, &login())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        login_pending.failed_attempts, 0,
        "a wrong reset code never counts against login"
    );
    assert_eq!(
        verify(&*t.store, &phone, &login_code).await,
        VerifyOutcome::Verified
    );
    assert!(
        t.store
            .pending_code(&phone, &reset)
            .await
            .unwrap()
            .is_some()
    );
}

async fn undo_removes_a_created_code(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let delivery = deliver(&*t.store, &phone, &standard()).await;
    assert!(
        t.store
            .undo_issue(&phone, &login(), &delivery.undo)
            .await
            .unwrap()
    );
    assert!(
        t.store
            .pending_code(&phone, &login())
            .await
            .unwrap()
            .is_none()
    );
    // Its cooldown went with it.
    assert_eq!(
        deliver(&*t.store, &phone, &standard()).await.kind,
        IssueKind::Created
    );
}

async fn undo_restores_a_redelivered_or_rotated_code(backend: Backend) {
    for policy in [ResendPolicy::Reuse, ResendPolicy::Rotate] {
        let t = open(backend);
        let phone = fresh_phone();
        let p = params(Duration::from_secs(300), Duration::ZERO, policy);
        let first = deliver(&*t.store, &phone, &p).await;
        let second = deliver(&*t.store, &phone, &p).await;
        assert!(
            t.store
                .undo_issue(&phone, &login(), &second.undo)
                .await
                .unwrap()
        );
        let pending = t
            .store
            .pending_code(&phone, &login())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            codes::pending(&phone, &login(), &pending),
            first.code,
            "{policy:?}"
        );
        assert_eq!(pending.deliveries, 1, "{policy:?}");
        assert_eq!(
            verify(&*t.store, &phone, &first.code).await,
            VerifyOutcome::Verified
        );
    }
}

async fn undo_never_touches_a_later_code(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let p = params(
        Duration::from_secs(300),
        Duration::ZERO,
        ResendPolicy::Rotate,
    );
    let first = deliver(&*t.store, &phone, &p).await;
    let second = deliver(&*t.store, &phone, &p).await;
    assert!(
        !t.store
            .undo_issue(&phone, &login(), &first.undo)
            .await
            .unwrap()
    );
    let pending = t
        .store
        .pending_code(&phone, &login())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(codes::pending(&phone, &login(), &pending), second.code);
    assert_eq!(pending.deliveries, 2);
    // Nor a code that was verified and issued anew.
    assert_eq!(
        verify(&*t.store, &phone, &second.code).await,
        VerifyOutcome::Verified
    );
    let third = deliver(&*t.store, &phone, &p).await;
    assert!(
        !t.store
            .undo_issue(&phone, &login(), &second.undo)
            .await
            .unwrap()
    );
    assert_eq!(
        pending_of(&*t.store, &phone, &login()).await.unwrap().0,
        third.code
    );
}

async fn concurrent_verifies_succeed_exactly_once(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let code = deliver(&*t.store, &phone, &standard()).await.code;
    let tasks: Vec<_> = (0..100)
        .map(|_| {
            let (store, phone, code) = (t.store.clone(), phone.clone(), code.clone());
            tokio::spawn(async move { verify(&*store, &phone, &code).await })
        })
        .collect();
    let outcomes: Vec<VerifyOutcome> = futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| **o == VerifyOutcome::Verified)
            .count(),
        1
    );
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| **o == VerifyOutcome::CodeExpired)
            .count(),
        99
    );
}

async fn concurrent_issues_make_exactly_one_code(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let (store, phone) = (t.store.clone(), phone.clone());
            tokio::spawn(async move { issue(&*store, &phone, &login(), &standard()).await })
        })
        .collect();
    let outcomes: Vec<(IssueOutcome, Option<Code>)> = futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let delivered: Vec<&Code> = outcomes
        .iter()
        .filter_map(|(_, code)| code.as_ref())
        .collect();
    assert_eq!(delivered.len(), 1);
    let cooled = outcomes
        .iter()
        .filter(|(o, _)| matches!(o, IssueOutcome::Cooldown { .. }))
        .count();
    assert_eq!(cooled, 49);
    let pending = t
        .store
        .pending_code(&phone, &login())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(codes::pending(&phone, &login(), &pending), *delivered[0]);
    assert_eq!(pending.deliveries, 1);
}

async fn outbox_keeps_messages_in_order_per_phone(backend: Backend) {
    let t = open(backend);
    let (a, b) = (fresh_phone(), fresh_phone());
    let message = |phone: &Destination, code: &str, at: u64| DevMessage {
        phone: phone.key().to_owned(),
        purpose: "login".to_owned(),
        code: code.to_owned(),
        sent_at_ms: at,
    };
    for (i, code) in ["111111", "222222", "333333"].iter().enumerate() {
        t.store
            .keep_dev_message(&message(&a, code, i as u64))
            .await
            .unwrap();
    }
    t.store
        .keep_dev_message(&message(&b, "999999", 9))
        .await
        .unwrap();
    let codes: Vec<String> = t
        .store
        .dev_messages(&a)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.code)
        .collect();
    assert_eq!(codes, ["111111", "222222", "333333"]);
    assert_eq!(t.store.dev_messages(&b).await.unwrap().len(), 1);
    assert!(
        t.store
            .dev_messages(&fresh_phone())
            .await
            .unwrap()
            .is_empty()
    );
}

async fn ping_answers(backend: Backend) {
    let t = open(backend);
    t.store.ping().await.unwrap();
}

on_every_store!(
    issue_creates_a_pending_code,
    cooldown_refuses_a_second_issue_and_changes_nothing,
    reuse_redelivers_the_same_code_and_keeps_attempts,
    rotate_replaces_the_code_and_keeps_attempts,
    verify_consumes_a_matching_code_once,
    wrong_codes_count_down_then_destroy,
    resend_does_not_reset_the_attempt_count,
    codes_expire,
    purposes_are_isolated,
    undo_removes_a_created_code,
    undo_restores_a_redelivered_or_rotated_code,
    undo_never_touches_a_later_code,
    concurrent_verifies_succeed_exactly_once,
    concurrent_issues_make_exactly_one_code,
    outbox_keeps_messages_in_order_per_phone,
    ping_answers,
);
