//! The Twilio-compatible API's records on every store: Services per account, compare-and-set
//! writes (concurrent writers from one revision: exactly one wins), send logs that expire, and
//! where the issue creates a first start's log (Redis), created only with a code it delivers.

use std::sync::Arc;
use std::time::Duration;

use vcode::domain::{Destination, EmailAddress};
use vcode::store::{Budgets, IssueOutcome, NewSendLog, ResendPolicy, Store};

use super::{MINUTE, fresh_phone, login, new_code, open, params, standard};
use crate::support::{Backend, codes, random_phone, sms_phone};

const ACCOUNT: &str = "AC0123456789abcdef0123456789abcdef";
const OTHER_ACCOUNT: &str = "ACfedcba9876543210fedcba9876543210";

fn service_sid() -> String {
    vcode::twilio_compat::sid::generate("VA")
}

async fn services_belong_to_their_account_and_change_by_revision(backend: Backend) {
    let t = open(backend);
    let store = &t.store;
    let sid = service_sid();
    assert!(
        store
            .put_twilio_service(ACCOUNT, &sid, None, "one")
            .await
            .unwrap()
    );
    assert!(
        !store
            .put_twilio_service(ACCOUNT, &sid, None, "again")
            .await
            .unwrap()
    );
    let read = store.twilio_service(ACCOUNT, &sid).await.unwrap().unwrap();
    assert_eq!((read.revision, read.body.as_str()), (1, "one"));
    assert_eq!(
        store.twilio_service(OTHER_ACCOUNT, &sid).await.unwrap(),
        None
    );
    assert!(
        !store
            .put_twilio_service(ACCOUNT, &sid, Some(2), "stale")
            .await
            .unwrap()
    );
    assert!(
        store
            .put_twilio_service(ACCOUNT, &sid, Some(1), "two:with:colons")
            .await
            .unwrap()
    );
    let read = store.twilio_service(ACCOUNT, &sid).await.unwrap().unwrap();
    assert_eq!((read.revision, read.body.as_str()), (2, "two:with:colons"));
    let listed = store.twilio_services(ACCOUNT).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].0, sid);
    assert!(
        store
            .twilio_services(OTHER_ACCOUNT)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        !store
            .delete_twilio_service(OTHER_ACCOUNT, &sid)
            .await
            .unwrap()
    );
    assert!(store.delete_twilio_service(ACCOUNT, &sid).await.unwrap());
    assert!(!store.delete_twilio_service(ACCOUNT, &sid).await.unwrap());
    assert_eq!(store.twilio_service(ACCOUNT, &sid).await.unwrap(), None);
}

async fn send_logs_are_compared_and_set_and_expire(backend: Backend) {
    let t = open(backend);
    let store = &t.store;
    let (service, to) = (service_sid(), Destination::from(sms_phone(&random_phone())));
    let ttl = Duration::from_millis(1500);
    assert_eq!(store.twilio_sends(&service, &to).await.unwrap(), None);
    assert!(
        store
            .put_twilio_sends(&service, &to, None, "a", ttl)
            .await
            .unwrap()
    );
    assert!(
        !store
            .put_twilio_sends(&service, &to, None, "b", ttl)
            .await
            .unwrap()
    );
    assert!(
        store
            .put_twilio_sends(&service, &to, Some(1), "b", ttl)
            .await
            .unwrap()
    );
    let read = store.twilio_sends(&service, &to).await.unwrap().unwrap();
    assert_eq!((read.revision, read.body.as_str()), (2, "b"));
    let other = Destination::from(sms_phone(&random_phone()));
    assert_eq!(store.twilio_sends(&service, &other).await.unwrap(), None);
    // An email address's log is its own, named by the folded address.
    let local = format!("Ann{}", rand::random::<u32>());
    let mailbox = |domain: &str| {
        Destination::from(EmailAddress::parse(&format!("{local}@{domain}")).unwrap())
    };
    assert!(
        store
            .put_twilio_sends(&service, &mailbox("Example.COM"), None, "m", ttl)
            .await
            .unwrap()
    );
    let read = store.twilio_sends(&service, &mailbox("example.com")).await;
    assert_eq!(read.unwrap().unwrap().body, "m");
    let read = store.twilio_sends(&service, &to).await.unwrap().unwrap();
    assert_eq!(read.body, "b");
    tokio::time::sleep(ttl + Duration::from_millis(300)).await;
    assert_eq!(store.twilio_sends(&service, &to).await.unwrap(), None);
    // An expired log is as good as none.
    assert!(
        store
            .put_twilio_sends(&service, &to, None, "c", ttl)
            .await
            .unwrap()
    );
    let read = store.twilio_sends(&service, &to).await.unwrap().unwrap();
    assert_eq!((read.revision, read.body.as_str()), (1, "c"));
}

async fn concurrent_writers_from_one_revision_exactly_one_wins(backend: Backend) {
    let t = open(backend);
    let store: Arc<dyn Store> = t.store.clone();
    let (sid, service, to) = (
        service_sid(),
        service_sid(),
        Destination::from(sms_phone(&random_phone())),
    );
    store
        .put_twilio_service(ACCOUNT, &sid, None, "0")
        .await
        .unwrap();
    store
        .put_twilio_sends(&service, &to, None, "0", Duration::from_secs(60))
        .await
        .unwrap();
    let writers = (0..16).map(|n| {
        let (store, sid, service, to) = (store.clone(), sid.clone(), service.clone(), to.clone());
        tokio::spawn(async move {
            let body = n.to_string();
            let service_won = store
                .put_twilio_service(ACCOUNT, &sid, Some(1), &body)
                .await
                .unwrap();
            let log_won = store
                .put_twilio_sends(&service, &to, Some(1), &body, Duration::from_secs(60))
                .await
                .unwrap();
            (service_won, log_won)
        })
    });
    let outcomes: Vec<(bool, bool)> = futures::future::join_all(writers)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        outcomes.iter().filter(|(won, _)| *won).count(),
        1,
        "{outcomes:?}"
    );
    assert_eq!(
        outcomes.iter().filter(|(_, won)| *won).count(),
        1,
        "{outcomes:?}"
    );
    assert_eq!(
        store
            .twilio_service(ACCOUNT, &sid)
            .await
            .unwrap()
            .unwrap()
            .revision,
        2
    );
    assert_eq!(
        store
            .twilio_sends(&service, &to)
            .await
            .unwrap()
            .unwrap()
            .revision,
        2
    );
}

/// Where the issue creates a first start's send log (`writes_send_logs`), it does in its own
/// step: with a code it delivers (revision 1, living its TTL), never with a refused one, and a
/// log there already refuses the issue with nothing changed. Elsewhere the log is its caller's.
async fn an_issue_creates_a_first_starts_send_log_or_changes_nothing(backend: Backend) {
    let t = open(backend);
    let store = &t.store;
    if !store.writes_send_logs() {
        return;
    }
    let (service, to, purpose) = (service_sid(), fresh_phone(), login());
    let log = |service: &str, body: &str, ttl| {
        Some(Box::new(NewSendLog {
            service: service.to_owned(),
            body: body.to_owned(),
            ttl,
        }))
    };
    let ttl = Duration::from_millis(1500);
    let mut candidate = codes::candidate(&to, &purpose, &new_code());
    candidate.send_log = log(&service, "first", ttl);
    let outcome = store
        .issue_code(&to, &purpose, candidate, &standard(), Budgets::none())
        .await
        .unwrap();
    assert!(matches!(outcome, IssueOutcome::Send(_)), "{outcome:?}");
    let read = store.twilio_sends(&service, &to).await.unwrap().unwrap();
    assert_eq!((read.revision, read.body.as_str()), (1, "first"));
    // A second start's issue, which would re-send: refused, the code and the log unchanged.
    let no_cooldown = params(
        Duration::from_secs(300),
        Duration::ZERO,
        ResendPolicy::Reuse,
    );
    let mut again = codes::candidate(&to, &purpose, &new_code());
    again.send_log = log(&service, "second", ttl);
    let outcome = store
        .issue_code(&to, &purpose, again, &no_cooldown, Budgets::none())
        .await
        .unwrap();
    assert!(
        matches!(outcome, IssueOutcome::SendLogExists),
        "{outcome:?}"
    );
    let pending = store.pending_code(&to, &purpose).await.unwrap().unwrap();
    assert_eq!(pending.deliveries, 1);
    let read = store.twilio_sends(&service, &to).await.unwrap().unwrap();
    assert_eq!((read.revision, read.body.as_str()), (1, "first"));
    // Its compare-and-set is any log's.
    assert!(
        store
            .put_twilio_sends(&service, &to, Some(1), "first, again", MINUTE)
            .await
            .unwrap()
    );
    // An issue the cooldown refuses creates no log (another Service's, for the same code's
    // phone: a log of its own).
    let other = service_sid();
    let mut refused = codes::candidate(&to, &purpose, &new_code());
    refused.send_log = log(&other, "refused", ttl);
    let outcome = store
        .issue_code(&to, &purpose, refused, &standard(), Budgets::none())
        .await
        .unwrap();
    assert!(
        matches!(outcome, IssueOutcome::Cooldown { .. }),
        "{outcome:?}"
    );
    assert_eq!(store.twilio_sends(&other, &to).await.unwrap(), None);
    // The created log lives its own TTL.
    let expiring = service_sid();
    let mut candidate = codes::candidate(&to, &purpose, &new_code());
    candidate.send_log = log(&expiring, "short", ttl);
    store
        .issue_code(&to, &purpose, candidate, &no_cooldown, Budgets::none())
        .await
        .unwrap();
    assert!(store.twilio_sends(&expiring, &to).await.unwrap().is_some());
    tokio::time::sleep(ttl + Duration::from_millis(300)).await;
    assert_eq!(store.twilio_sends(&expiring, &to).await.unwrap(), None);
}

on_every_store!(
    an_issue_creates_a_first_starts_send_log_or_changes_nothing,
    services_belong_to_their_account_and_change_by_revision,
    send_logs_are_compared_and_set_and_expire,
    concurrent_writers_from_one_revision_exactly_one_wins,
);
