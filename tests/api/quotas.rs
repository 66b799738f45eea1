//! Abuse limits in the store: per-phone SMS quotas, sliding windows, the per-phone failed-verify
//! quota and the all-or-nothing budget reservations, on every store. Through HTTP:
//! `quotas_http.rs`.

use std::collections::HashMap;
use std::time::Duration;

use futures::future::join_all;
use vcode::domain::{Code, CodeLength, Destination, Purpose};
use vcode::settings::AbuseSettings;
use vcode::store::{
    Budget, Budgets, CodeStore, IssueOutcome, IssueParams, QuotaDecision, QuotaRule, QuotaScope,
    QuotaStore, QuotaToken, ResendPolicy, VerifyOutcome, VerifyParams,
};

use crate::support::codes as support_codes;
use crate::support::{Backend, TestApp, phone, random_phone, spawn_app_with};

const MINUTE: Duration = Duration::from_secs(60);

fn rule(limit: u32, window: Duration) -> QuotaRule {
    QuotaRule::new(limit, window).expect("a limit above 0")
}

fn no_limits(settings: &mut vcode::Settings) {
    settings.abuse = AbuseSettings::unlimited();
}

fn issue_params(destination_quota: Vec<QuotaRule>) -> IssueParams {
    IssueParams {
        retention: Duration::ZERO,
        ttl: Duration::from_secs(300),
        cooldown: Duration::ZERO,
        policy: ResendPolicy::Reuse,
        destination_quota,
        names_latest_send: true,
    }
}

async fn issue(
    store: &dyn CodeStore,
    phone: &Destination,
    purpose: &str,
    params: &IssueParams,
) -> IssueOutcome {
    let purpose = Purpose::parse(purpose).unwrap();
    let code = Code::generate(CodeLength::default());
    store
        .issue_code(
            phone,
            &purpose,
            support_codes::candidate(phone, &purpose, &code),
            params,
            Budgets::none(),
        )
        .await
        .unwrap()
}

/// An app whose store is checked directly (its quotas are set per call).
async fn store_of(backend: Backend) -> TestApp {
    spawn_app_with(backend, no_limits).await
}

async fn phone_quota_counts_sms_across_purposes(backend: Backend) {
    let app = store_of(backend).await;
    let phone = phone(&random_phone());
    let params = issue_params(vec![rule(2, MINUTE)]);
    assert!(matches!(
        issue(&*app.store.codes, &phone, "login", &params).await,
        IssueOutcome::Send(_)
    ));
    assert!(matches!(
        issue(&*app.store.codes, &phone, "reset", &params).await,
        IssueOutcome::Send(_)
    ));
    match issue(&*app.store.codes, &phone, "signup", &params).await {
        IssueOutcome::QuotaExceeded { retry_after } => {
            assert!(
                retry_after > Duration::from_secs(55) && retry_after <= MINUTE,
                "{retry_after:?}"
            )
        }
        other => panic!("expected the quota, got {other:?}"),
    }
    let signup = Purpose::parse("signup").unwrap();
    assert!(
        app.store
            .codes
            .pending_code(&phone, &signup)
            .await
            .unwrap()
            .is_none(),
        "nothing issued"
    );
}

async fn cooldown_is_answered_before_the_quota(backend: Backend) {
    let app = store_of(backend).await;
    let phone = phone(&random_phone());
    let params = IssueParams {
        cooldown: MINUTE,
        ..issue_params(vec![rule(1, MINUTE)])
    };
    assert!(matches!(
        issue(&*app.store.codes, &phone, "login", &params).await,
        IssueOutcome::Send(_)
    ));
    // A duplicate is deduplicated by the cooldown and costs no quota.
    assert!(matches!(
        issue(&*app.store.codes, &phone, "login", &params).await,
        IssueOutcome::Cooldown { .. }
    ));
}

async fn an_undone_issue_gives_its_quota_back(backend: Backend) {
    let app = store_of(backend).await;
    let phone = phone(&random_phone());
    let params = issue_params(vec![rule(1, MINUTE)]);
    let IssueOutcome::Send(delivery) = issue(&*app.store.codes, &phone, "login", &params).await
    else {
        panic!("expected a delivery")
    };
    assert!(
        app.store
            .codes
            .undo_issue(&phone, &Purpose::default(), &delivery.undo)
            .await
            .unwrap()
    );
    assert!(matches!(
        issue(&*app.store.codes, &phone, "login", &params).await,
        IssueOutcome::Send(_)
    ));
}

async fn the_window_slides(backend: Backend) {
    let app = store_of(backend).await;
    let phone = phone(&random_phone());
    let window = Duration::from_millis(600);
    let params = issue_params(vec![rule(2, window)]);
    assert!(matches!(
        issue(&*app.store.codes, &phone, "a", &params).await,
        IssueOutcome::Send(_)
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(matches!(
        issue(&*app.store.codes, &phone, "b", &params).await,
        IssueOutcome::Send(_)
    ));
    let IssueOutcome::QuotaExceeded { retry_after } =
        issue(&*app.store.codes, &phone, "c", &params).await
    else {
        panic!("the window is full")
    };
    // Room again when the first event leaves, not when an aligned window restarts.
    assert!(retry_after <= Duration::from_millis(300), "{retry_after:?}");
    tokio::time::sleep(retry_after + Duration::from_millis(30)).await;
    assert!(matches!(
        issue(&*app.store.codes, &phone, "c", &params).await,
        IssueOutcome::Send(_)
    ));
    // The second event is still inside its window: no room for a fourth yet.
    assert!(matches!(
        issue(&*app.store.codes, &phone, "d", &params).await,
        IssueOutcome::QuotaExceeded { .. }
    ));
}

async fn failed_verifies_are_limited_across_codes(backend: Backend) {
    let app = store_of(backend).await;
    let phone = phone(&random_phone());
    let params = issue_params(Vec::new());
    let verify = VerifyParams {
        max_attempts: 5,
        destination_failures: Some(rule(3, MINUTE)),
        client_failures: None,
    };
    let mut codes = HashMap::new();
    for purpose in ["login", "reset"] {
        let IssueOutcome::Send(d) = issue(&*app.store.codes, &phone, purpose, &params).await else {
            panic!("expected a delivery")
        };
        let purpose = Purpose::parse(purpose).unwrap();
        let pending = app
            .store
            .codes
            .pending_code(&phone, &purpose)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(d.kind, vcode::store::IssueKind::Created);
        codes.insert(
            purpose.as_str().to_owned(),
            support_codes::pending(&phone, &purpose, &pending),
        );
    }
    let wrong = |code: &Code| {
        let digits: String = code
            .expose()
            .chars()
            .map(|c| if c == '0' { '1' } else { '0' })
            .collect();
        Code::parse(&digits, CodeLength::default()).unwrap()
    };
    let login = Purpose::default();
    let reset = Purpose::parse("reset").unwrap();
    for purpose in [&login, &reset, &login] {
        let outcome = app
            .store
            .codes
            .verify_code(
                &phone,
                purpose,
                &support_codes::digests(&phone, purpose, &wrong(&codes[purpose.as_str()])),
                support_codes::CLIENT,
                verify,
            )
            .await
            .unwrap();
        assert!(
            matches!(outcome, VerifyOutcome::Mismatch { .. }),
            "{outcome:?}"
        );
    }
    // Even the right code is not compared now, and it stays pending.
    let outcome = app
        .store
        .codes
        .verify_code(
            &phone,
            &reset,
            &support_codes::digests(&phone, &reset, &codes["reset"]),
            support_codes::CLIENT,
            verify,
        )
        .await
        .unwrap();
    assert!(
        matches!(outcome, VerifyOutcome::QuotaExceeded { .. }),
        "{outcome:?}"
    );
    assert!(
        app.store
            .codes
            .pending_code(&phone, &reset)
            .await
            .unwrap()
            .is_some()
    );
}

/// Reserves `token` in each `(scope, rules)` budget at once.
async fn reserve(
    store: &dyn QuotaStore,
    budgets: &[(QuotaScope, &[QuotaRule])],
    token: QuotaToken,
) -> QuotaDecision {
    let budgets: Vec<Budget<'_>> = budgets
        .iter()
        .map(|&(scope, rules)| Budget { scope, rules })
        .collect();
    store.reserve_quota(&budgets, token).await.unwrap()
}

async fn reservations_hold_exactly_the_limit_under_concurrency(backend: Backend) {
    let app = store_of(backend).await;
    let scope = QuotaScope::ClientIp("203.0.113.7".parse().unwrap());
    let rules = vec![rule(10, MINUTE)];
    let attempts = (0..50).map(|_| {
        let (store, rules) = (app.store.quotas.clone(), rules.clone());
        tokio::spawn(async move {
            reserve(store.as_ref(), &[(scope, &rules)], QuotaToken::generate()).await
        })
    });
    let decisions: Vec<QuotaDecision> = join_all(attempts)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        decisions
            .iter()
            .filter(|d| **d == QuotaDecision::Granted)
            .count(),
        10
    );
    // Other scopes have their own logs; a release makes room again.
    let store = app.store.quotas.as_ref();
    let other = QuotaScope::ClientIp("203.0.113.8".parse().unwrap());
    let token = QuotaToken::generate();
    assert_eq!(
        reserve(store, &[(other, &rules)], token).await,
        QuotaDecision::Granted
    );
    assert_eq!(
        reserve(store, &[(QuotaScope::Global, &[rule(1, MINUTE)])], token).await,
        QuotaDecision::Granted
    );
    let full = reserve(store, &[(scope, &rules)], QuotaToken::generate()).await;
    assert!(
        matches!(full, QuotaDecision::Exceeded { scope: refused, .. } if refused == scope),
        "{full:?}"
    );
    let mine = QuotaToken::generate();
    let two = [rule(2, MINUTE)];
    assert_eq!(
        reserve(store, &[(other, &two)], mine).await,
        QuotaDecision::Granted
    );
    assert!(matches!(
        reserve(store, &[(other, &two)], QuotaToken::generate()).await,
        QuotaDecision::Exceeded { .. }
    ));
    store.release_quota(&[other], mine).await.unwrap();
    assert_eq!(
        reserve(store, &[(other, &two)], QuotaToken::generate()).await,
        QuotaDecision::Granted
    );
}

/// A send's client and global budgets are reserved together: when one has no room nothing is
/// recorded in the other, the refusal names the budget that had none, and a release gives
/// both back.
async fn budgets_are_reserved_all_or_nothing(backend: Backend) {
    let app = store_of(backend).await;
    let store = app.store.quotas.as_ref();
    let client = QuotaScope::ClientIp("198.51.100.20".parse().unwrap());
    let one = [rule(1, MINUTE)];
    let three = [rule(3, MINUTE)];
    let both: [(QuotaScope, &[QuotaRule]); 2] = [(client, &one), (QuotaScope::Global, &three)];

    let first = QuotaToken::generate();
    assert_eq!(reserve(store, &both, first).await, QuotaDecision::Granted);
    // The client is full: refused, and the global budget keeps its two free places.
    for _ in 0..5 {
        let refused = reserve(store, &both, QuotaToken::generate()).await;
        assert!(
            matches!(refused, QuotaDecision::Exceeded { scope, retry_after }
                if scope == client && retry_after > Duration::ZERO && retry_after <= MINUTE),
            "{refused:?}"
        );
    }
    for _ in 0..2 {
        assert_eq!(
            reserve(
                store,
                &[(QuotaScope::Global, &three)],
                QuotaToken::generate()
            )
            .await,
            QuotaDecision::Granted
        );
    }
    // Now both are full; the first budget without room is named.
    let refused = reserve(store, &both, QuotaToken::generate()).await;
    assert!(
        matches!(refused, QuotaDecision::Exceeded { scope, .. } if scope == client),
        "{refused:?}"
    );
    let global_full = reserve(
        store,
        &[(QuotaScope::Global, &three)],
        QuotaToken::generate(),
    )
    .await;
    assert!(
        matches!(
            global_full,
            QuotaDecision::Exceeded {
                scope: QuotaScope::Global,
                ..
            }
        ),
        "{global_full:?}"
    );
    // Releasing the first send frees its place in both budgets.
    store
        .release_quota(&[client, QuotaScope::Global], first)
        .await
        .unwrap();
    assert_eq!(
        reserve(store, &both, QuotaToken::generate()).await,
        QuotaDecision::Granted
    );
}

/// Many clients reserving with the one global budget at once: the global budget grants exactly
/// its limit, and a client refused for it records nothing in its own log, though the two logs
/// may lie apart (the embedded store keeps them in different shards, each with its own lock).
async fn budgets_apart_are_reserved_all_or_nothing_under_concurrency(backend: Backend) {
    let app = store_of(backend).await;
    let one = [rule(1, MINUTE)];
    let global = [rule(20, MINUTE)];
    let clients: Vec<QuotaScope> = (0..64u8)
        .map(|n| QuotaScope::ClientIp(format!("198.51.100.{}", 100 + n).parse().unwrap()))
        .collect();
    let attempts = clients.iter().map(|&client| {
        let (store, one, global) = (app.store.quotas.clone(), one, global);
        tokio::spawn(async move {
            let both: [(QuotaScope, &[QuotaRule]); 2] =
                [(client, &one), (QuotaScope::Global, &global)];
            reserve(store.as_ref(), &both, QuotaToken::generate()).await
        })
    });
    let decisions: Vec<QuotaDecision> = join_all(attempts)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let granted = decisions
        .iter()
        .filter(|d| **d == QuotaDecision::Granted)
        .count();
    assert_eq!(granted, 20, "{decisions:?}");
    // A granted client's one place is taken; a refused one's is still free.
    let store = app.store.quotas.as_ref();
    for (client, decision) in clients.iter().zip(&decisions) {
        let alone = reserve(store, &[(*client, &one)], QuotaToken::generate()).await;
        match decision {
            QuotaDecision::Granted => assert!(
                matches!(alone, QuotaDecision::Exceeded { scope, .. } if scope == *client),
                "{client:?} was granted, yet has room: {alone:?}"
            ),
            QuotaDecision::Exceeded { scope, .. } => {
                assert_eq!(*scope, QuotaScope::Global);
                assert_eq!(
                    alone,
                    QuotaDecision::Granted,
                    "{client:?} was refused, yet its log was written"
                );
            }
        }
    }
}

/// Where one node holds every log (the embedded store, one Redis node, Sentinel's primary), a
/// send's budgets are reserved in its issue's step, and a budget without room refuses it with
/// nothing changed: no code, no event in the phone's log nor in the other budgets. Elsewhere
/// (PostgreSQL, a Cluster) the issue leaves them to the caller and records nothing there.
async fn budgets_are_reserved_with_the_issue_on_one_node(backend: Backend) {
    let app = store_of(backend).await;
    let in_one_step = matches!(
        backend,
        Backend::Memory | Backend::Redis | Backend::Sentinel
    );
    let client = QuotaScope::ClientIp(format!("192.0.2.{}", rand::random::<u8>()).parse().unwrap());
    let one = [rule(1, MINUTE)];
    let plenty = [rule(1000, MINUTE)];
    let budgets = [
        Budget {
            scope: client,
            rules: &one,
        },
        Budget {
            scope: QuotaScope::Global,
            rules: &plenty,
        },
    ];
    let phone_rules = issue_params(vec![rule(1, MINUTE)]);
    let issue_with = |phone: Destination, token: QuotaToken| {
        let (codes, params, budgets) = (app.store.codes.clone(), phone_rules.clone(), budgets);
        async move {
            let purpose = Purpose::default();
            let code = Code::generate(CodeLength::default());
            let candidate = support_codes::candidate(&phone, &purpose, &code);
            let budgets = Budgets {
                budgets: &budgets,
                token,
            };
            codes
                .issue_code(&phone, &purpose, candidate, &params, budgets)
                .await
                .unwrap()
        }
    };

    let first = phone(&random_phone());
    let IssueOutcome::Send(delivery) = issue_with(first.clone(), QuotaToken::generate()).await
    else {
        panic!("expected a delivery")
    };
    assert_eq!(delivery.budgets_reserved, in_one_step, "{backend:?}");
    // The client's budget is full exactly when the issue reserved it.
    let again = reserve(
        app.store.quotas.as_ref(),
        &[(client, &one)],
        QuotaToken::generate(),
    )
    .await;
    assert_eq!(again == QuotaDecision::Granted, !in_one_step, "{again:?}");
    if !in_one_step {
        return;
    }

    let second = phone(&random_phone());
    match issue_with(second.clone(), QuotaToken::generate()).await {
        IssueOutcome::BudgetExceeded { scope, retry_after } => {
            assert_eq!(scope, client);
            assert!(
                retry_after > Duration::ZERO && retry_after <= MINUTE,
                "{retry_after:?}"
            );
        }
        other => panic!("expected the client's budget to refuse, got {other:?}"),
    }
    let pending = app
        .store
        .codes
        .pending_code(&second, &Purpose::default())
        .await
        .unwrap();
    assert!(pending.is_none(), "a refused send leaves no code");
    // Nor an event in the phone's log (its 1 a minute still has room) or the global budget
    // (999 places left of 1000: one taken by the first send).
    let lone = [Budget {
        scope: QuotaScope::Global,
        rules: &plenty,
    }];
    let outcome = app
        .store
        .codes
        .issue_code(
            &second,
            &Purpose::default(),
            support_codes::candidate(
                &second,
                &Purpose::default(),
                &Code::generate(CodeLength::default()),
            ),
            &phone_rules,
            Budgets {
                budgets: &lone,
                token: QuotaToken::generate(),
            },
        )
        .await
        .unwrap();
    assert!(matches!(outcome, IssueOutcome::Send(_)), "{outcome:?}");
    let global_used = (0..998).map(|_| QuotaToken::generate());
    for token in global_used {
        let granted = reserve(
            app.store.quotas.as_ref(),
            &[(QuotaScope::Global, &plenty)],
            token,
        )
        .await;
        assert_eq!(granted, QuotaDecision::Granted);
    }
    let full = reserve(
        app.store.quotas.as_ref(),
        &[(QuotaScope::Global, &plenty)],
        QuotaToken::generate(),
    )
    .await;
    assert!(
        matches!(full, QuotaDecision::Exceeded { .. }),
        "two sends and 998 reservations fill 1000: {full:?}"
    );
}

on_every_store!(
    budgets_are_reserved_with_the_issue_on_one_node,
    phone_quota_counts_sms_across_purposes,
    cooldown_is_answered_before_the_quota,
    an_undone_issue_gives_its_quota_back,
    the_window_slides,
    failed_verifies_are_limited_across_codes,
    reservations_hold_exactly_the_limit_under_concurrency,
    budgets_are_reserved_all_or_nothing,
    budgets_apart_are_reserved_all_or_nothing_under_concurrency,
);
