//! Abuse limits through HTTP: per-phone, per-IP and global SMS quotas, the failed-verify quota,
//! the region allow-list and the client address behind proxies, on every store and across two
//! instances sharing one Redis.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use vcode::client_ip::TrustedProxies;
use vcode::domain::{Purpose, Region};
use vcode::settings::{AbuseSettings, Regions};
use vcode::store::ResendPolicy;
use vcode_wire::{RetryAfterData, SendRequest, paths};

use crate::support::app::Answer;
use crate::support::{
    Backend, TestApp, phone, random_phone, spawn_app_with, spawn_second_instance, wrong_code,
};

fn assert_quota_answer(answer: &Answer) {
    assert_eq!((answer.status, answer.code()), (429, 42902), "{answer:?}");
    let retry_after: u64 = answer
        .retry_after
        .as_deref()
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!(retry_after >= 1);
    assert_eq!(answer.data::<RetryAfterData>().retry_after, retry_after);
}

async fn phone_quota_through_http(backend: Backend) {
    let app = spawn_app_with(backend, |s| {
        s.abuse = AbuseSettings {
            sends_per_phone_hour: 3,
            ..AbuseSettings::unlimited()
        };
        s.otp.resend_cooldown = Duration::ZERO;
    })
    .await;
    let number = random_phone();
    for _ in 0..3 {
        assert_eq!(app.send(&number).await.status, 200);
    }
    assert_quota_answer(&app.send(&number).await);
    assert_eq!(
        app.inbox(&number).await.len(),
        3,
        "no SMS for the refused send"
    );
}

async fn ip_quota_through_http_leaves_no_code_behind(backend: Backend) {
    let app = spawn_app_with(backend, |s| {
        s.abuse = AbuseSettings {
            sends_per_ip_hour: 3,
            ..AbuseSettings::unlimited()
        };
    })
    .await;
    for _ in 0..3 {
        assert_eq!(app.send(&random_phone()).await.status, 200);
    }
    let fourth = random_phone();
    assert_quota_answer(&app.send(&fourth).await);
    assert!(app.inbox(&fourth).await.is_empty());
    let pending = app
        .store
        .codes
        .pending_code(&phone(&fourth), &Purpose::default())
        .await
        .unwrap();
    assert!(pending.is_none(), "the refused send's code was rolled back");
}

async fn global_budget_through_http(backend: Backend) {
    let app = spawn_app_with(backend, |s| {
        s.abuse = AbuseSettings {
            sends_global_minute: 2,
            ..AbuseSettings::unlimited()
        };
    })
    .await;
    assert_eq!(app.send(&random_phone()).await.status, 200);
    assert_eq!(app.send(&random_phone()).await.status, 200);
    assert_quota_answer(&app.send(&random_phone()).await);
}

async fn failed_verify_quota_outlives_fresh_codes(backend: Backend) {
    let app = spawn_app_with(backend, |s| {
        s.abuse = AbuseSettings {
            failed_verifies_per_phone_day: 3,
            ..AbuseSettings::unlimited()
        };
        s.otp.resend_cooldown = Duration::ZERO;
        s.otp.resend = ResendPolicy::Rotate;
    })
    .await;
    let number = random_phone();
    app.send(&number).await;
    let code = app.last_code(&number).await;
    let wrong = wrong_code(&code);
    for _ in 0..3 {
        assert_eq!(app.verify(&number, wrong).await.code(), 40010);
    }
    assert_quota_answer(&app.verify(&number, &code).await);
    // A fresh code does not mean fresh guesses.
    assert_eq!(app.send(&number).await.status, 200);
    let fresh = app.last_code(&number).await;
    assert_quota_answer(&app.verify(&number, &fresh).await);
}

async fn numbers_outside_the_allowed_regions_are_refused(backend: Backend) {
    let app = spawn_app_with(backend, |s| {
        s.abuse.allowed_regions = Regions::of([Region::parse("HK").unwrap()]);
    })
    .await;
    let refused = app.send(&random_phone()).await;
    assert_eq!((refused.status, refused.code()), (400, 40005));
    assert_eq!(app.send("+85251234567").await.status, 200);
}

async fn send_from(app: &TestApp, number: &str, forwarded_for: &str) -> Answer {
    app.request(
        app.client
            .post(app.url(paths::OTP_SEND))
            .header("x-forwarded-for", forwarded_for)
            .json(&SendRequest::new(number)),
    )
    .await
}

async fn spoofed_forwarded_for_changes_nothing(backend: Backend) {
    let app = spawn_app_with(backend, |s| {
        s.abuse = AbuseSettings {
            sends_per_ip_hour: 2,
            ..AbuseSettings::unlimited()
        };
    })
    .await;
    // The peer (127.0.0.1) is no trusted proxy: every send counts against it.
    assert_eq!(
        send_from(&app, &random_phone(), "198.51.100.1")
            .await
            .status,
        200
    );
    assert_eq!(
        send_from(&app, &random_phone(), "198.51.100.2")
            .await
            .status,
        200
    );
    assert_quota_answer(&send_from(&app, &random_phone(), "198.51.100.3").await);
}

async fn a_trusted_proxy_names_the_client(backend: Backend) {
    let app = spawn_app_with(backend, |s| {
        s.abuse = AbuseSettings {
            sends_per_ip_hour: 2,
            trusted_proxies: TrustedProxies::parse("127.0.0.0/8").unwrap(),
            ..AbuseSettings::unlimited()
        };
    })
    .await;
    for client in ["198.51.100.1", "198.51.100.2", "198.51.100.3"] {
        assert_eq!(
            send_from(&app, &random_phone(), client).await.status,
            200,
            "{client}"
        );
    }
    // A client-written hop to the left does not help: the right-most untrusted one counts.
    assert_eq!(
        send_from(&app, &random_phone(), "6.6.6.6, 198.51.100.1")
            .await
            .status,
        200
    );
    assert_quota_answer(&send_from(&app, &random_phone(), "7.7.7.7, 198.51.100.1").await);
}

/// A hop that is no address, where the walk through trusted proxies reaches it, leaves the
/// client unknown: the request is refused, not counted in the proxy's own budget (which every
/// such client would share) nor in the address a client wrote to its left.
async fn an_unreadable_forwarded_for_is_refused_not_pooled_with_the_proxy(backend: Backend) {
    let app = spawn_app_with(backend, |s| {
        s.abuse = AbuseSettings {
            sends_per_ip_hour: 2,
            trusted_proxies: TrustedProxies::parse("127.0.0.0/8").unwrap(),
            ..AbuseSettings::unlimited()
        };
    })
    .await;
    for forwarded_for in ["garbage", "unknown", "198.51.100.1, nonsense"] {
        let number = random_phone();
        let refused = send_from(&app, &number, forwarded_for).await;
        assert_eq!(
            (refused.status, refused.code()),
            (400, 40000),
            "{forwarded_for}: {refused:?}"
        );
        assert!(app.inbox(&number).await.is_empty(), "{forwarded_for}");
        let captcha = app.request(
            app.client
                .post(app.url(paths::CAPTCHA))
                .header("x-forwarded-for", forwarded_for),
        );
        assert_eq!(captcha.await.code(), 40000, "{forwarded_for}");
    }
    // The proxy's own budget (127.0.0.1, its requests without the header) is whole.
    for _ in 0..2 {
        assert_eq!(app.send(&random_phone()).await.status, 200);
    }
    // A hop with the port some proxies add is its address.
    for forwarded_for in ["198.51.100.7:5040", "198.51.100.7"] {
        assert_eq!(
            send_from(&app, &random_phone(), forwarded_for).await.status,
            200
        );
    }
    assert_quota_answer(&send_from(&app, &random_phone(), "198.51.100.7:5041").await);
}

on_every_store!(
    phone_quota_through_http,
    ip_quota_through_http_leaves_no_code_behind,
    global_budget_through_http,
    failed_verify_quota_outlives_fresh_codes,
    numbers_outside_the_allowed_regions_are_refused,
    spoofed_forwarded_for_changes_nothing,
    a_trusted_proxy_names_the_client,
    an_unreadable_forwarded_for_is_refused_not_pooled_with_the_proxy,
);

async fn tally(answers: Vec<Answer>) -> HashMap<i64, usize> {
    let mut tally = HashMap::new();
    for answer in answers {
        *tally.entry(answer.code()).or_default() += 1;
    }
    tally
}

/// Two instances sharing one harness-started store, as a deployment would run them.
async fn two_instances(
    backend: Backend,
    customise: fn(&mut vcode::Settings),
) -> (Arc<TestApp>, Arc<TestApp>) {
    let first = spawn_app_with(backend, customise).await;
    let second = spawn_second_instance(&first, customise).await;
    (Arc::new(first), Arc::new(second))
}

async fn phone_quota_holds_across_two_instances(backend: Backend) {
    let (a, b) = two_instances(backend, |s| {
        s.abuse = AbuseSettings {
            sends_per_phone_hour: 5,
            ..AbuseSettings::unlimited()
        };
        s.otp.resend_cooldown = Duration::ZERO;
    })
    .await;
    let number = random_phone();
    let sends = (0..40).map(|i| {
        let app = if i % 2 == 0 { a.clone() } else { b.clone() };
        let number = number.clone();
        tokio::spawn(async move { app.send(&number).await })
    });
    let answers = join_all(sends)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let tally = tally(answers).await;
    assert_eq!(tally.get(&200), Some(&5), "{tally:?}");
    assert_eq!(tally.get(&42902), Some(&35), "{tally:?}");
    assert_eq!(a.inbox(&number).await.len(), 5, "exactly five SMS");
}

async fn ip_quota_holds_across_two_instances(backend: Backend) {
    let (a, b) = two_instances(backend, |s| {
        s.abuse = AbuseSettings {
            sends_per_ip_hour: 10,
            ..AbuseSettings::unlimited()
        };
    })
    .await;
    let numbers: Vec<String> = (0..40).map(|_| random_phone()).collect();
    let sends = numbers.iter().enumerate().map(|(i, number)| {
        let app = if i % 2 == 0 { a.clone() } else { b.clone() };
        let number = number.clone();
        tokio::spawn(async move { app.send(&number).await })
    });
    let answers = join_all(sends)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let tally = tally(answers).await;
    assert_eq!(tally.get(&200), Some(&10), "{tally:?}");
    assert_eq!(tally.get(&42902), Some(&30), "{tally:?}");
    let mut delivered = 0;
    for number in &numbers {
        delivered += a.inbox(number).await.len();
    }
    assert_eq!(delivered, 10, "exactly ten SMS");
}

// Two instances on one shared store: Redis, and PostgreSQL.
on_stores!(
    shared_redis => Redis, shared_postgres => Postgres;
    [phone_quota_holds_across_two_instances, ip_quota_holds_across_two_instances]
);

/// The number of times Redis ran a script since its counters were reset.
fn scripts_run(server: &crate::support::RedisServer) -> u64 {
    let stats: String = ::redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.client().get_connection().unwrap())
        .unwrap();
    stats
        .lines()
        .filter(|line| line.starts_with("cmdstat_evalsha:") || line.starts_with("cmdstat_eval:"))
        .filter_map(|line| {
            line.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// On one Redis node, a send with every default limit on (the phone's SMS quota and the
/// client's budget) and the fraud guard at its default is one script for the code, its
/// budgets and the guard's step, one round trip; a Cluster keeps three (the budgets and the
/// guard live on slots of their own).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_send_with_the_default_limits_is_one_script_on_one_node() {
    let app = spawn_app_with(Backend::Redis, |s| s.abuse = AbuseSettings::default()).await;
    let server = app.redis.as_ref().expect("the app's own Redis");
    assert_eq!(
        app.send(&random_phone()).await.status,
        200,
        "warm-up (loads the script)"
    );
    ::redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .exec(&mut server.client().get_connection().unwrap())
        .unwrap();
    for _ in 0..5 {
        assert_eq!(app.send(&random_phone()).await.status, 200);
    }
    assert_eq!(
        scripts_run(server),
        5,
        "one script for the code, its budgets and the fraud guard (its minute counts and its \
         levels)"
    );
    // Both limits were in it: the client's budget (20 an hour by default) is 6 down.
    let budget: u64 = ::redis::cmd("ZCARD")
        .arg("verify_code:quota:{budgets}:ip:127.0.0.1")
        .query(&mut server.client().get_connection().unwrap())
        .unwrap();
    assert_eq!(budget, 6);
}
