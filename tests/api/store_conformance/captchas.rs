//! Captchas and proof-of-work replays in the store: stored once, read back, taken once.

use super::*;
use vcode::domain::CaptchaId;
use vcode::store::StoredCaptcha;

fn sample() -> StoredCaptcha {
    StoredCaptcha { seed: u64::MAX - 7 }
}

async fn stored_captchas_read_back_and_are_taken_once(backend: Backend) {
    let t = open(backend);
    let id = CaptchaId::generate();
    t.store.put_captcha(&id, &sample(), MINUTE).await.unwrap();
    assert_eq!(t.store.captcha(&id).await.unwrap(), Some(sample()));
    assert_eq!(
        t.store.captcha(&id).await.unwrap(),
        Some(sample()),
        "reading leaves it"
    );
    assert_eq!(t.store.take_captcha(&id).await.unwrap(), Some(sample()));
    assert_eq!(t.store.take_captcha(&id).await.unwrap(), None);
    assert_eq!(t.store.captcha(&id).await.unwrap(), None);
    assert_eq!(
        t.store.take_captcha(&CaptchaId::generate()).await.unwrap(),
        None
    );
}

async fn captchas_expire(backend: Backend) {
    let t = open(backend);
    let id = CaptchaId::generate();
    t.store
        .put_captcha(&id, &sample(), Duration::from_millis(200))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(t.store.captcha(&id).await.unwrap(), None);
    assert_eq!(t.store.take_captcha(&id).await.unwrap(), None);
}

async fn concurrent_takes_get_it_once(backend: Backend) {
    let t = open(backend);
    let id = CaptchaId::generate();
    t.store.put_captcha(&id, &sample(), MINUTE).await.unwrap();
    let takers: Vec<_> = (0..50)
        .map(|_| {
            let (store, id) = (t.store.clone(), id.clone());
            tokio::spawn(async move { store.take_captcha(&id).await.unwrap() })
        })
        .collect();
    let taken = futures::future::join_all(takers)
        .await
        .into_iter()
        .filter(|r| r.as_ref().unwrap().is_some())
        .count();
    assert_eq!(taken, 1);
}

on_every_store!(
    stored_captchas_read_back_and_are_taken_once,
    captchas_expire,
    concurrent_takes_get_it_once,
);
