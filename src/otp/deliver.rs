//! The last step of a send: the issued code's message (an SMS or an email, the only step that
//! differs by channel), after the budgets where the issue could not reserve them. A message
//! that certainly did not go out undoes the issue and releases the budgets; one in doubt (no
//! answer) stands as a send. A confirmed SMS's provider message is recorded for its receipts;
//! in dev mode the message is kept in the dev inbox.

use std::time::{SystemTime, UNIX_EPOCH};

use super::send::{MINUTE, Outgoing, Reservations};
use super::{Caller, OtpError, OtpService};
use crate::domain::{Code, Destination, EmailAddress, Phone, Purpose};
use crate::email::{EmailErrorKind, EmailMessage};
use crate::sms::{SmsErrorKind, SmsMessage};
use crate::stats::Event;
use crate::store::{
    Budgets, DeliveryStatus, DevMessage, IssueKind, IssuedCode, ReceiptStore, SentMessage,
};

impl OtpService {
    /// The SMS of an issued code (after the budgets, if the issue could not reserve them); an
    /// SMS that does not go out undoes the issue and releases the budgets.
    pub(super) async fn deliver(
        &self,
        out: &Outgoing<'_>,
        caller: &Caller,
        code: Code,
        (budgets, reserved): (Budgets<'_>, Reservations),
    ) -> Result<DeliveryStatus, OtpError> {
        let Outgoing {
            destination,
            purpose,
            delivery,
            ..
        } = *out;
        if !delivery.budgets_reserved
            && let Err(error) = self.reserve_budgets(budgets, caller).await
        {
            self.undo(destination, purpose, delivery, &error).await;
            return Err(error);
        }
        let (e164, purpose_name) = (destination.key(), purpose.as_str());
        let code = match delivery.kind {
            IssueKind::Redelivered => {
                let opened = delivery.sealed.as_ref().and_then(|sealed| {
                    let digest = delivery.digest();
                    self.keyring.open_code(e164, purpose_name, digest, sealed)
                });
                match opened {
                    Some(pending) => pending,
                    None => {
                        let error = OtpError::Unsealable;
                        self.undo(destination, purpose, delivery, &error).await;
                        self.release(reserved).await;
                        return Err(error);
                    }
                }
            }
            IssueKind::Created | IssueKind::Rotated => code,
        };

        let sent = match destination {
            Destination::Phone(phone) => self.deliver_sms(phone, out, &code).await,
            Destination::Email(email) => self.deliver_email(email.address(), out, &code).await,
        };
        let status = match sent {
            Ok(status) => status,
            Err(error) => {
                self.undo(destination, purpose, delivery, &error).await;
                self.release(reserved).await;
                return Err(error);
            }
        };

        // An unconfirmed message too: the outbox is what may have reached the destination.
        if self.keep_dev_messages {
            self.record(destination, purpose, &code).await;
        }
        Ok(status)
    }

    /// Hands the code's SMS to the provider. `Err` only when it certainly did not go out (the
    /// caller rolls the send back); an unconfirmed SMS is a send.
    async fn deliver_sms(
        &self,
        phone: &Phone,
        out: &Outgoing<'_>,
        code: &Code,
    ) -> Result<DeliveryStatus, OtpError> {
        let Outgoing {
            destination,
            purpose,
            locale,
            profile,
            delivery,
            ..
        } = *out;
        let message = SmsMessage {
            phone,
            purpose,
            code,
            expires_in: profile
                .and_then(|profile| profile.code_ttl)
                .unwrap_or(self.settings.code_ttl),
            locale,
            tenant: profile.and_then(|profile| profile.wording.as_ref()),
        };
        match self.sender.send(&message).await {
            Ok(receipt) => {
                self.stats.record(Event::SmsSent);
                // The send's one line at `info`: at the default level every line is a formatted
                // write to stdout in the request's thread (four a send cost as much CPU as the
                // send itself).
                tracing::info!(
                    %phone, %purpose, delivery = delivery.kind.as_str(),
                    deliveries = delivery.undo.deliveries,
                    provider = receipt.provider,
                    message_id = receipt.message_id.as_deref().unwrap_or("-"),
                    "SMS delivered"
                );
                if let (Some(receipts), Some(message_id)) = (&self.receipts, &receipt.message_id) {
                    self.track_message(receipts.as_ref(), out, receipt.provider, message_id)
                        .await;
                }
                Ok(DeliveryStatus::Sent)
            }
            // The SMS may be on its way: rolling its code back would make it fail on arrival,
            // and a second SMS before the cooldown would be the duplicate the cooldown is for.
            // So it stands as a send (code, cooldown, quotas), and the client is told.
            Err(sms_error) if sms_error.kind() == SmsErrorKind::Unconfirmed => {
                self.stats.record(Event::SmsUnconfirmed);
                tracing::warn!(
                    %phone, %purpose, delivery = delivery.kind.as_str(),
                    deliveries = delivery.undo.deliveries,
                    provider = sms_error.provider(),
                    error = sms_error.code(),
                    "SMS unconfirmed: no answer from the provider; the code and its cooldown stay"
                );
                self.mark_unconfirmed(destination, delivery).await;
                Ok(DeliveryStatus::Unconfirmed)
            }
            Err(sms_error) => {
                self.stats.record(Event::SmsFailed);
                // A number the provider says cannot receive it is the client's error, not ours;
                // so is a send past the provider's own limit, which it answers as a quota.
                Err(match sms_error.kind() {
                    SmsErrorKind::InvalidNumber => OtpError::UndeliverablePhone(sms_error),
                    SmsErrorKind::Throttled => OtpError::SmsThrottled {
                        retry_after: sms_error.retry_after().unwrap_or(MINUTE),
                        source: sms_error,
                    },
                    _ => OtpError::SmsDelivery(sms_error),
                })
            }
        }
    }

    /// Hands the code's mail to the relay, as `deliver_sms` the SMS: a refusal (`5xx`) or a
    /// relay that did not take it is `Err` (rolled back); a message written whole whose answer
    /// never came is `unconfirmed` and stands. Counted in `vcode_email_total{result}`.
    async fn deliver_email(
        &self,
        address: &EmailAddress,
        out: &Outgoing<'_>,
        code: &Code,
    ) -> Result<DeliveryStatus, OtpError> {
        let Outgoing {
            destination,
            purpose,
            locale,
            profile,
            delivery,
            ..
        } = *out;
        // `parse_destination` refuses an address where there is no mailer.
        let Some(mailer) = &self.mailer else {
            return Err(OtpError::EmailOff);
        };
        // A Service's mail names it and says its own lifetime, as its SMS does.
        let message = EmailMessage {
            to: address,
            purpose,
            code,
            expires_in: profile
                .and_then(|profile| profile.code_ttl)
                .unwrap_or(self.settings.code_ttl),
            locale,
            service_name: profile
                .and_then(|profile| profile.wording.as_ref())
                .map(|wording| wording.name.as_str()),
        };
        match mailer.send(&message).await {
            Ok(sent) => {
                crate::metrics::count_event("vcode_email", "result", "sent");
                tracing::info!(
                    %address, %purpose, delivery = delivery.kind.as_str(),
                    deliveries = delivery.undo.deliveries,
                    message_id = %sent.message_id,
                    reply = %sent.reply,
                    "email delivered to the relay"
                );
                Ok(DeliveryStatus::Sent)
            }
            Err(error) => {
                crate::metrics::count_event("vcode_email", "result", error.kind().metric_label());
                if error.kind() == EmailErrorKind::Unconfirmed {
                    tracing::warn!(
                        %address, %purpose, delivery = delivery.kind.as_str(),
                        %error,
                        "email unconfirmed: the relay never answered the message; the code and its cooldown stay"
                    );
                    self.mark_unconfirmed(destination, delivery).await;
                    Ok(DeliveryStatus::Unconfirmed)
                } else {
                    Err(OtpError::EmailDelivery(error))
                }
            }
        }
    }

    /// The issue wrote `sent`; the rarer unconfirmed case costs this second write.
    async fn mark_unconfirmed(&self, destination: &Destination, delivery: &IssuedCode) {
        let verification = &delivery.undo.verification;
        if let Err(error) = self.codes.mark_unconfirmed(destination, verification).await {
            tracing::warn!(%destination, %error, "verification not marked unconfirmed");
        }
    }

    /// Records which provider message carried this send's SMS, so that its receipts find the
    /// verification (and the fraud guard's mark of the send, which an `undelivered` receipt
    /// takes out of the guard's judgement): kept as long as the verification. A failure costs
    /// only the receipts.
    async fn track_message(
        &self,
        receipts: &dyn ReceiptStore,
        out: &Outgoing<'_>,
        provider: &str,
        message_id: &str,
    ) {
        let Outgoing {
            destination,
            purpose,
            delivery,
            guarded,
            ..
        } = *out;
        let Ok(message_id) = crate::sms::receipts::message_id(message_id) else {
            tracing::warn!(%destination, provider, "provider message id not kept: no receipt can match it");
            return;
        };
        let keep = self.issue_params.ttl + self.issue_params.retention;
        let message = SentMessage {
            destination,
            purpose,
            verification: &delivery.undo.verification,
            provider,
            message_id: &message_id,
            guarded,
        };
        match receipts.record_message(&message, keep).await {
            Ok(()) => {
                crate::metrics::count_sms_tracked(provider, &crate::fraud::country_of(destination))
            }
            Err(error) => {
                tracing::warn!(%destination, provider, %error, "provider message not recorded: its receipts will not match")
            }
        }
    }

    /// Dev mode: the message as its recipient would read it.
    async fn record(&self, destination: &Destination, purpose: &Purpose, code: &Code) {
        let sent_at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let message = DevMessage {
            phone: destination.key().to_owned(),
            purpose: purpose.as_str().to_owned(),
            code: code.expose().to_owned(),
            sent_at_ms,
        };
        if let Err(error) = self.dev_inbox.keep_dev_message(&message).await {
            tracing::warn!(%destination, %error, "dev inbox: message not recorded");
        }
    }
}
