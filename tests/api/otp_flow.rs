//! The OTP API through HTTP, as a user goes through it.

use std::time::Duration;

use vcode::otp::VerifyBy;
use vcode::store::ResendPolicy;
use vcode_wire::{
    Delivery, Health, HealthStatus, RetryAfterData, SendData, VerifyData, VerifyRequest,
    WrongCodeData, paths,
};

use crate::support::app::ok_body;
use crate::support::{
    Backend, TestApp, phone, random_phone, spawn_app, spawn_app_with, wrong_code,
};

async fn happy_path_send_read_verify(backend: Backend) {
    let app = spawn_app(backend).await;
    let number = random_phone();
    let sent = app.send(&number).await;
    assert_eq!(sent.status, 200, "{sent:?}");
    let id = sent.data::<SendData>().verification_id;
    assert_eq!(id.len(), 22, "{sent:?}");
    assert_eq!(
        sent.body,
        ok_body(SendData {
            verification_id: id,
            expires_in: 300,
            resend_after: 60,
            delivery: Delivery::Sent,
        })
    );
    let inbox = app.inbox(&number).await;
    assert_eq!(inbox.len(), 1);
    let code = &inbox[0];
    assert_eq!(code.len(), 6);
    assert!(
        !sent.body.to_string().contains(code.as_str()),
        "a code is never in a response"
    );

    let verified = app.verify(&number, code).await;
    assert_eq!(verified.status, 200, "{verified:?}");
    let data = verified.data::<VerifyData>();
    assert!(data.verified);
    let token = data
        .token
        .expect("a verification token (tests/api/tokens.rs checks it)");
    assert_eq!(
        verified.body,
        ok_body(VerifyData {
            verified: true,
            token: Some(token)
        })
    );

    let again = app.verify(&number, code).await;
    assert_eq!((again.status, again.code()), (410, 41000));
}

async fn national_and_international_forms_are_one_phone(backend: Backend) {
    let app = spawn_app(backend).await;
    let national = format!("138{}", &random_phone()[6..]);
    let international = format!("+86{national}");
    assert_eq!(app.send(&national).await.status, 200);
    // Same phone: the cooldown applies to the other form too.
    let second = app.send(&international).await;
    assert_eq!((second.status, second.code()), (429, 42900));
    let code = app.last_code(&international).await;
    assert_eq!(app.verify(&international, &code).await.status, 200);
}

async fn resend_inside_cooldown_is_refused_with_retry_after(backend: Backend) {
    let app = spawn_app(backend).await;
    let number = random_phone();
    assert_eq!(app.send(&number).await.status, 200);
    let refused = app.send(&number).await;
    assert_eq!((refused.status, refused.code()), (429, 42900));
    let retry_after: u64 = refused
        .retry_after
        .as_deref()
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((59..=60).contains(&retry_after), "{retry_after}");
    assert_eq!(refused.data::<RetryAfterData>().retry_after, retry_after);
    assert_eq!(app.inbox(&number).await.len(), 1, "no second SMS");
}

async fn reuse_delivers_the_same_code_again(backend: Backend) {
    let app = spawn_app_with(backend, |s| s.otp.resend_cooldown = Duration::ZERO).await;
    let number = random_phone();
    assert_eq!(app.send(&number).await.status, 200);
    assert_eq!(app.send(&number).await.status, 200);
    let inbox = app.inbox(&number).await;
    assert_eq!(inbox.len(), 2);
    assert_eq!(inbox[0], inbox[1]);
    assert_eq!(app.verify(&number, &inbox[0]).await.status, 200);
}

async fn rotate_delivers_a_new_code_and_retires_the_old(backend: Backend) {
    let app = spawn_app_with(backend, |s| {
        s.otp.resend_cooldown = Duration::ZERO;
        s.otp.resend = ResendPolicy::Rotate;
    })
    .await;
    let number = random_phone();
    assert_eq!(app.send(&number).await.status, 200);
    let first = app.last_code(&number).await;
    let mut second = first.clone();
    // A rotation draws a fresh code; a one-in-a-million repeat just rotates again.
    while second == first {
        assert_eq!(app.send(&number).await.status, 200);
        second = app.last_code(&number).await;
    }
    let old = app.verify(&number, &first).await;
    assert_eq!((old.status, old.code()), (400, 40010), "{old:?}");
    assert_eq!(app.verify(&number, &second).await.status, 200);
}

/// Four wrong codes under the latest send's id count down its attempts; the fifth spends them.
async fn spend_the_attempts(app: &TestApp, number: &str, wrong: &str) {
    for remaining in (1..=4).rev() {
        let answer = app.verify(number, wrong).await;
        assert_eq!((answer.status, answer.code()), (400, 40010), "{answer:?}");
        assert_eq!(answer.data::<WrongCodeData>().remaining_attempts, remaining);
    }
    let locked = app.verify(number, wrong).await;
    assert_eq!((locked.status, locked.code()), (429, 42901), "{locked:?}");
}

/// By id (the default), five wrong codes end that verification: the right code no longer
/// verifies under it, and guesses never destroy the code, which a new send's id still verifies.
async fn wrong_codes_up_to_the_limit_spend_the_verification(backend: Backend) {
    let app = spawn_app_with(backend, |s| s.otp.resend_cooldown = Duration::ZERO).await;
    let number = random_phone();
    let spent = app.send_id(&number).await;
    let code = app.last_code(&number).await;
    spend_the_attempts(&app, &number, wrong_code(&code)).await;
    let refused = app.verify_id(&spent, &code).await;
    assert_eq!(
        (refused.status, refused.code()),
        (429, 42901),
        "the spent verification takes not even the right code: {refused:?}"
    );
    let fresh = app.send_id(&number).await;
    assert_eq!(app.last_code(&number).await, code, "the same code again");
    let verified = app.verify_id(&fresh, &code).await;
    assert_eq!(verified.status, 200, "{verified:?}");
}

/// By phone the budget is the code's own: five wrong codes destroy it.
async fn wrong_codes_up_to_the_limit_destroy_the_code(backend: Backend) {
    // The phone path (VCODE_VERIFY_BY=phone) keeps its destroying budget.
    let app = spawn_app_with(backend, |s| s.otp.verify_by = VerifyBy::Phone).await;
    let number = random_phone();
    app.send(&number).await;
    let code = app.last_code(&number).await;
    spend_the_attempts(&app, &number, wrong_code(&code)).await;
    let gone = app.verify(&number, &code).await;
    assert_eq!(
        (gone.status, gone.code()),
        (410, 41000),
        "the right code is gone too"
    );
}

/// A resend answers a new id but gives no attempts back: by id, the first send's attempts stay
/// spent; by phone, the code's.
async fn a_resend_does_not_reset_failed_attempts(backend: Backend) {
    for by in [VerifyBy::Id, VerifyBy::Phone] {
        let app = spawn_app_with(backend, |s| {
            s.otp.verify_by = by;
            s.otp.resend_cooldown = Duration::ZERO;
        })
        .await;
        let number = random_phone();
        let first = app.send_id(&number).await;
        let code = app.last_code(&number).await;
        // Under the first send's id, and its phone for the phone path.
        let guess = VerifyRequest {
            phone: Some(number.clone()),
            ..VerifyRequest::with_id(&first, wrong_code(&code))
        };
        for _ in 0..3 {
            app.post_json(paths::OTP_VERIFY, &guess).await;
        }
        assert_eq!(app.send(&number).await.status, 200);
        let answer = app.post_json(paths::OTP_VERIFY, &guess).await;
        assert_eq!(
            answer.data::<WrongCodeData>().remaining_attempts,
            1,
            "{by:?}"
        );
        let locked = app.post_json(paths::OTP_VERIFY, &guess).await;
        assert_eq!(locked.code(), 42901, "{by:?}: {locked:?}");
    }
}

async fn codes_expire_after_their_ttl(backend: Backend) {
    let app = spawn_app_with(backend, |s| s.otp.code_ttl = Duration::from_secs(1)).await;
    let number = random_phone();
    let sent = app.send(&number).await;
    assert_eq!(sent.data::<SendData>().expires_in, 1);
    let code = app.last_code(&number).await;
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let expired = app.verify(&number, &code).await;
    assert_eq!((expired.status, expired.code()), (410, 41000));
    assert_eq!(
        app.send(&number).await.status,
        200,
        "an expired code holds no cooldown"
    );
}

async fn purposes_never_touch_each_other(backend: Backend) {
    let app = spawn_app(backend).await;
    let number = random_phone();
    assert_eq!(app.send_for(&number, "login").await.status, 200);
    let login_code = app.last_code(&number).await;
    assert_eq!(app.send_for(&number, "reset_password").await.status, 200);
    let reset_code = app.last_code(&number).await;
    if login_code != reset_code {
        let crossed = app.verify_for(&number, &login_code, "reset_password").await;
        assert_eq!(crossed.code(), 40010);
    }
    assert_eq!(
        app.verify_for(&number, &login_code, "login").await.status,
        200
    );
    let pending = app
        .store
        .codes
        .pending_code(
            &phone(&number),
            &vcode::domain::Purpose::parse("reset_password").unwrap(),
        )
        .await
        .unwrap();
    assert!(
        pending.is_some(),
        "verifying login left the reset code alone"
    );
    assert_eq!(
        app.verify_for(&number, &reset_code, "reset_password")
            .await
            .status,
        200
    );
}

async fn health_and_readiness(backend: Backend) {
    let app = spawn_app(backend).await;
    let health = app.get(paths::HEALTHZ).await;
    assert_eq!(health.status, 200, "{health:?}");
    assert_eq!(health.data::<Health>().status, HealthStatus::Up);
    let ready = app.get(paths::READYZ).await;
    assert_eq!(ready.status, 200, "{ready:?}");
    assert_eq!(ready.data::<Health>().status, HealthStatus::Ready);
}

async fn dev_routes_do_not_exist_outside_dev_mode(backend: Backend) {
    let app = spawn_app_with(backend, |s| s.dev_mode = false).await;
    let number = random_phone();
    assert_eq!(app.send(&number).await.status, 200);
    let answer = app.outbox(&number).await;
    assert_eq!((answer.status, answer.code()), (404, 40400));
}

on_every_store!(
    happy_path_send_read_verify,
    national_and_international_forms_are_one_phone,
    resend_inside_cooldown_is_refused_with_retry_after,
    reuse_delivers_the_same_code_again,
    rotate_delivers_a_new_code_and_retires_the_old,
    wrong_codes_up_to_the_limit_spend_the_verification,
    wrong_codes_up_to_the_limit_destroy_the_code,
    a_resend_does_not_reset_failed_attempts,
    codes_expire_after_their_ttl,
    purposes_never_touch_each_other,
    health_and_readiness,
    dev_routes_do_not_exist_outside_dev_mode,
);
