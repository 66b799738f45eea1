//! Redis going away and coming back: requests fail fast with 503/50300, `/readyz` says so, and
//! service resumes by itself, scripts and all, without restarting vcode.

use std::time::{Duration, Instant};

use vcode_wire::paths;

use crate::support::app::Answer;
use crate::support::{Backend, TestApp, eventually, random_phone, spawn_app};

/// The command timeout the harness configures, plus slack for a loaded test machine.
const BOUND: Duration = Duration::from_millis(500 + 700);

async fn timed(request: impl std::future::Future<Output = Answer>) -> (Answer, Duration) {
    let started = Instant::now();
    let answer = request.await;
    (answer, started.elapsed())
}

async fn assert_unavailable(app: &TestApp, number: &str) {
    for (answer, elapsed) in [
        timed(app.send(number)).await,
        timed(app.verify(number, "123456")).await,
    ] {
        assert_eq!((answer.status, answer.code()), (503, 50300), "{answer:?}");
        assert!(elapsed < BOUND, "answered after {elapsed:?}");
    }
    let (ready, elapsed) = timed(app.get(paths::READYZ)).await;
    assert_eq!((ready.status, ready.code()), (503, 50300), "{ready:?}");
    assert!(elapsed < BOUND, "readyz answered after {elapsed:?}");
    assert_eq!(
        app.get(paths::HEALTHZ).await.status,
        200,
        "the process itself is fine"
    );
}

async fn recovers(app: &TestApp) -> bool {
    eventually(Duration::from_secs(10), || async {
        app.send(&random_phone()).await.status == 200
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stopped_redis_answers_503_quickly_and_service_resumes_after_restart() {
    let mut app = spawn_app(Backend::Redis).await;
    let number = random_phone();
    assert_eq!(app.send(&number).await.status, 200);

    app.redis.as_mut().unwrap().stop();
    assert_unavailable(&app, &number).await;
    // Still failing fast on repeated tries while it stays down.
    assert_unavailable(&app, &number).await;

    // A new process: empty, and without the scripts vcode loaded before.
    app.redis.as_mut().unwrap().restart();
    assert!(
        recovers(&app).await,
        "service did not resume after Redis came back"
    );
    assert_eq!(app.get(paths::READYZ).await.status, 200);
    let number = random_phone();
    assert_eq!(app.send(&number).await.status, 200);
    let code = app.last_code(&number).await;
    assert_eq!(app.verify(&number, &code).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn paused_redis_answers_503_within_the_timeout_then_resumes() {
    let app = spawn_app(Backend::Redis).await;
    let number = random_phone();
    assert_eq!(app.send(&number).await.status, 200);
    let code = app.last_code(&number).await;

    app.redis.as_ref().unwrap().pause();
    assert_unavailable(&app, &number).await;
    app.redis.as_ref().unwrap().resume();

    assert!(
        recovers(&app).await,
        "service did not resume after Redis was resumed"
    );
    // The code sent before the pause is intact.
    assert_eq!(app.verify(&number, &code).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn script_flush_is_recovered_without_an_error() {
    let app = spawn_app(Backend::Redis).await;
    let number = random_phone();
    assert_eq!(app.send(&number).await.status, 200);
    let code = app.last_code(&number).await;
    let mut redis = app.redis.as_ref().unwrap().connection().await;
    let _: () = ::redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(app.verify(&number, &code).await.status, 200);
    assert_eq!(app.send(&random_phone()).await.status, 200);
}

/// The postmortem's legacy strategy started while its Redis is down (the reproduction script
/// starts vcode and Redis side by side): once Redis comes up, sends, verifies and the dev inbox
/// work, without restarting vcode.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_legacy_strategy_started_before_its_redis_works_once_redis_is_up() {
    use vcode::otp::VerifyBy;
    use vcode::postmortem::VerifyStrategy;
    let mut redis = crate::support::RedisServer::start();
    let store = crate::support::app::redis_settings_of(&redis);
    redis.stop();
    let app = crate::support::app::spawn_on(store, |s| {
        s.verify_strategy = VerifyStrategy::LegacyOriginal;
        s.otp.verify_by = VerifyBy::Phone;
    })
    .await;
    let number = random_phone();
    for _ in 0..4 {
        assert_eq!(app.outbox(&number).await.code(), 50300);
        assert_eq!(app.send(&number).await.code(), 50300);
    }
    redis.restart();
    assert!(
        eventually(Duration::from_secs(10), || async {
            app.send(&number).await.status == 200
        })
        .await,
        "the legacy strategy did not resume after Redis came up"
    );
    // Every worker's connections, not only the one that answered first.
    for _ in 0..8 {
        let outbox = app.outbox(&number).await;
        assert_eq!(outbox.status, 200, "{outbox:?}");
    }
    let code = app.last_code(&number).await;
    assert_eq!(app.verify(&number, &code).await.status, 200);
}
