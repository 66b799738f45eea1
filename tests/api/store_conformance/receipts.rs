//! Delivery receipts on every store: a recorded message leads to its verification, a receipt
//! moves the delivery forward only and answers the whole transition, a message never recorded
//! (or one whose record has expired) is unknown, and an unconfirmed send's `sent` receipt
//! confirms it.

use super::*;
use vcode::store::{DeliveryStatus, Receipt, ReceiptOutcome, SendMark, SentMessage};

/// Twilio's message `message_id`, carrying the SMS of the send `id` answered.
fn sent_message<'a>(
    phone: &'a Destination,
    id: &'a VerificationId,
    message_id: &'a str,
    guarded: Option<SendMark>,
) -> SentMessage<'a> {
    // Every test's purpose is `login`: a static one, borrowed for the message's life.
    static LOGIN: std::sync::LazyLock<Purpose> = std::sync::LazyLock::new(Purpose::default);
    SentMessage {
        destination: phone,
        purpose: &LOGIN,
        verification: id,
        provider: "twilio",
        message_id,
        guarded,
    }
}

fn receipt<'a>(
    message_id: &'a str,
    delivery: DeliveryStatus,
    error: Option<&'a str>,
) -> Receipt<'a> {
    Receipt {
        provider: "twilio",
        message_id,
        delivery,
        error_code: error,
    }
}

async fn apply(store: &dyn Store, receipt: &Receipt<'_>) -> ReceiptOutcome {
    store.apply_receipt(receipt).await.expect("store answers")
}

async fn delivery(store: &dyn Store, id: &VerificationId) -> (DeliveryStatus, Option<String>) {
    let record = store.verification(id, None).await.unwrap().expect("known");
    (record.delivery, record.delivery_error)
}

async fn a_receipt_moves_the_delivery_forward_once(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let sent = deliver(&*t.store, &phone, &standard()).await;
    let message = format!("SM{}", random_phone());
    // The fraud guard's mark of the send, handed back with the transition.
    let mark = SendMark {
        minute: 29_000_000,
        token: u64::MAX - 7,
    };
    t.store
        .record_message(
            &sent_message(&phone, &sent.id, &message, Some(mark)),
            MINUTE,
        )
        .await
        .unwrap();
    // Another provider's message of the same id is another message.
    let elsewhere = Receipt {
        provider: "aliyun",
        ..receipt(&message, DeliveryStatus::Delivered, None)
    };
    assert_eq!(apply(&*t.store, &elsewhere).await, ReceiptOutcome::Unknown);
    assert_eq!(
        apply(&*t.store, &receipt(&message, DeliveryStatus::Sent, None)).await,
        ReceiptOutcome::Unchanged
    );
    let undelivered = receipt(&message, DeliveryStatus::Undelivered, Some("30003"));
    let ReceiptOutcome::Changed(transition) = apply(&*t.store, &undelivered).await else {
        panic!("the first final word changes the delivery");
    };
    assert_eq!(transition.verification, sent.id);
    assert_eq!(transition.target.phone_e164, phone.key());
    assert_eq!(transition.target.purpose, "login");
    assert_eq!(
        (transition.provider.as_str(), transition.message_id.as_str()),
        ("twilio", message.as_str())
    );
    assert_eq!(transition.previous, DeliveryStatus::Sent);
    assert_eq!(transition.delivery, DeliveryStatus::Undelivered);
    assert_eq!(transition.error_code.as_deref(), Some("30003"));
    assert_eq!(transition.guarded, Some(mark));
    assert!(transition.changed_at_ms >= transition.created_at_ms);
    assert!(transition.created_at_ms > 1_700_000_000_000, "unix ms");
    for later in [
        receipt(&message, DeliveryStatus::Undelivered, Some("30003")),
        receipt(&message, DeliveryStatus::Delivered, None),
        receipt(&message, DeliveryStatus::Sent, None),
    ] {
        assert_eq!(apply(&*t.store, &later).await, ReceiptOutcome::Unchanged);
    }
    assert_eq!(
        delivery(&*t.store, &sent.id).await,
        (DeliveryStatus::Undelivered, Some("30003".to_owned()))
    );
}

async fn a_sent_receipt_confirms_an_unconfirmed_send(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let sent = deliver(&*t.store, &phone, &standard()).await;
    t.store.mark_unconfirmed(&phone, &sent.id).await.unwrap();
    let message = format!("SM{}", random_phone());
    t.store
        .record_message(&sent_message(&phone, &sent.id, &message, None), MINUTE)
        .await
        .unwrap();
    let ReceiptOutcome::Changed(transition) =
        apply(&*t.store, &receipt(&message, DeliveryStatus::Sent, None)).await
    else {
        panic!("sent is further along than unconfirmed");
    };
    assert_eq!(transition.previous, DeliveryStatus::Unconfirmed);
    assert_eq!(transition.guarded, None, "a send the guard did not count");
    assert_eq!(
        delivery(&*t.store, &sent.id).await,
        (DeliveryStatus::Sent, None)
    );
    assert!(matches!(
        apply(
            &*t.store,
            &receipt(&message, DeliveryStatus::Delivered, None)
        )
        .await,
        ReceiptOutcome::Changed(_)
    ));
    assert_eq!(
        delivery(&*t.store, &sent.id).await,
        (DeliveryStatus::Delivered, None)
    );
}

async fn an_expired_message_record_is_unknown(backend: Backend) {
    let t = open(backend);
    let phone = fresh_phone();
    let sent = deliver(&*t.store, &phone, &standard()).await;
    let message = format!("SM{}", random_phone());
    t.store
        .record_message(
            &sent_message(&phone, &sent.id, &message, None),
            Duration::from_millis(200),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        apply(
            &*t.store,
            &receipt(&message, DeliveryStatus::Delivered, None)
        )
        .await,
        ReceiptOutcome::Unknown
    );
    assert_eq!(
        delivery(&*t.store, &sent.id).await,
        (DeliveryStatus::Sent, None)
    );
}

on_every_store!(
    a_receipt_moves_the_delivery_forward_once,
    a_sent_receipt_confirms_an_unconfirmed_send,
    an_expired_message_record_is_unknown,
);
