//! Verifications: start (send, or re-send the same code under the same `VE…` SID), fetch,
//! cancel or approve, and check — each through the OTP use cases under the Service's tenant.
//!
//! A `VE…` SID is the vcode verification id of the verification's first send. A re-send within
//! its life is vcode's `reuse` resend: the same pending code delivered again (a new vcode id is
//! bound to it, which no client is shown); the first id stays bound to that code and verifies
//! it until its own expiry, with its own attempts, so the SID, the code, the expiry and the
//! five checks are those of the first send, as on Twilio. The send log of (Service, phone)
//! names that first id and lists the sends (`send_code_attempts`, at most five).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::services::WRITE_TRIES;
use super::{Service, TwilioCompat, TwilioError, now_ms, sid};
use crate::domain::{NumberType, Phone, VerificationId};
use crate::otp::{OtpError, SendCommand, VerificationStatus, VerificationView, VerifyCommand};
use crate::store::Revised;

/// Sends of one verification, the first included (Twilio's limit).
pub const MAX_SENDS: usize = 5;

/// What `POST /Verifications` asks for.
#[derive(Clone, Debug)]
pub struct StartCommand {
    pub to: String,
    pub channel: String,
    pub locale: Option<String>,
    pub client_ip: IpAddr,
}

/// Twilio's statuses (`failed` is never reached: a send whose SMS fails is undone and answered
/// as an error, so no verification exists).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TwilioStatus {
    Pending,
    Approved,
    Canceled,
    MaxAttemptsReached,
    Expired,
}

impl TwilioStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Canceled => "canceled",
            Self::MaxAttemptsReached => "max_attempts_reached",
            Self::Expired => "expired",
        }
    }
}

impl From<VerificationStatus> for TwilioStatus {
    fn from(status: VerificationStatus) -> Self {
        match status {
            VerificationStatus::Pending => Self::Pending,
            VerificationStatus::Approved => Self::Approved,
            VerificationStatus::Canceled => Self::Canceled,
            VerificationStatus::Expired => Self::Expired,
            VerificationStatus::MaxAttemptsReached => Self::MaxAttemptsReached,
        }
    }
}

/// One send of a verification, as `send_code_attempts` lists it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct SendAttempt {
    pub attempt_sid: String,
    pub time_ms: u64,
    pub channel: String,
}

/// A verification as Twilio shows it.
#[derive(Clone, Debug)]
pub struct Verification {
    pub sid: String,
    pub service_sid: String,
    pub account_sid: String,
    /// E.164.
    pub to: String,
    pub channel: String,
    pub status: TwilioStatus,
    pub created_ms: u64,
    pub updated_ms: u64,
    pub send_code_attempts: Vec<SendAttempt>,
}

/// What a check answers: the verification, and whether this code approved it.
#[derive(Clone, Debug)]
pub struct VerificationCheck {
    pub verification: Verification,
    pub valid: bool,
}

/// What a check names: the phone (its current verification) or the verification.
#[derive(Clone, Debug)]
pub enum CheckTarget {
    To(String),
    Verification(String),
}

/// The send log of (Service, phone), as stored.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct SendLog {
    /// The first send's vcode verification id: the `VE…` SID.
    verification: String,
    created_ms: u64,
    attempts: Vec<SendAttempt>,
}

impl SendLog {
    fn decode(record: &Revised) -> Result<Self, TwilioError> {
        serde_json::from_str(&record.body).map_err(|error| TwilioError::Internal(error.into()))
    }

    fn encode(&self) -> String {
        serde_json::to_string(self).expect("a send log serialises")
    }
}

/// Digits, as many as a Service's codes may have (4 to 10).
fn is_code_like(code: &str) -> bool {
    let code = code.trim();
    (4..=10).contains(&code.len()) && code.bytes().all(|b| b.is_ascii_digit())
}

/// Too many concurrent writers of one record: the client may retry.
fn busy() -> TwilioError {
    TwilioError::TooManyRequests {
        retry_after: std::time::Duration::from_secs(1),
    }
}

fn verification_not_found(service: &str, sid: &str) -> TwilioError {
    TwilioError::NotFound(format!("/Services/{service}/Verifications/{sid}"))
}

fn check_not_found(service: &str) -> TwilioError {
    TwilioError::NotFound(format!("/Services/{service}/VerificationCheck"))
}

/// The send log's revision (for the next compare-and-set), and the log while its verification
/// is still pending.
type LiveLog = (Option<u64>, Option<SendLog>);

/// What a start found before its send.
enum Reservation {
    /// A verification is pending: this send is its re-send, already in its log.
    Resend(SendLog),
    /// None is: this send starts one; the log (if any, ended) is at `revision`.
    First { revision: Option<u64> },
}

impl TwilioCompat {
    /// Starts a verification of `To` by SMS, or re-sends the pending one's code (up to
    /// `MAX_SENDS` sends, then 60203).
    pub async fn start(
        &self,
        account: &str,
        service_sid: &str,
        command: StartCommand,
    ) -> Result<Verification, TwilioError> {
        let service = self.service(account, service_sid).await?;
        match command.channel.as_str() {
            "sms" => {}
            "call" | "email" | "whatsapp" | "sna" | "rcs" | "auto" => {
                return Err(TwilioError::ChannelDisabled(command.channel));
            }
            _ => return Err(TwilioError::InvalidParameter("Channel")),
        }
        let phone = self.otp.parse_phone(&command.to)?;
        if service.skip_sms_to_landlines && phone.number_type() == NumberType::FixedLine {
            return Err(TwilioError::Landline);
        }
        let attempt = SendAttempt {
            attempt_sid: sid::generate(sid::SEND_ATTEMPT),
            time_ms: now_ms(),
            channel: "sms".to_owned(),
        };
        // A re-send takes its place in the log before its SMS goes out, so that concurrent
        // re-sends never pass the limit.
        let reserved = self.reserve_resend(&service.sid, &phone, &attempt).await?;
        let send = SendCommand {
            phone: Some(phone.as_e164().to_owned()),
            email: None,
            purpose: None,
            captcha_id: None,
            captcha_answer: None,
            locale: command.locale,
            altcha: None,
            client_ip: command.client_ip,
            idempotency_key: None,
            tenant: Some(service.tenant()),
        };
        let sent = match self.otp.send(send).await {
            Ok(receipt) => receipt.verification_id,
            Err(error) => {
                if let Reservation::Resend(_) = reserved {
                    self.release_resend(&service.sid, &phone, &attempt).await;
                }
                return Err(error.into());
            }
        };
        let log = match reserved {
            Reservation::Resend(log) => log,
            Reservation::First { revision } => {
                let sent = sent.ok_or_else(|| {
                    TwilioError::Internal("a send without its verification id".into())
                })?;
                self.record_first_send(&service.sid, &phone, revision, &sent, attempt)
                    .await?
            }
        };
        Ok(self.shown(&service, &phone, &log, TwilioStatus::Pending))
    }

    /// Adds `attempt` to the log of the pending verification of (Service, phone), if there is
    /// one, in one compare-and-set: 60203 once it has `MAX_SENDS`.
    async fn reserve_resend(
        &self,
        service: &str,
        phone: &Phone,
        attempt: &SendAttempt,
    ) -> Result<Reservation, TwilioError> {
        for _ in 0..WRITE_TRIES {
            let (revision, live) = self.live_log(service, phone).await?;
            let Some(mut log) = live else {
                return Ok(Reservation::First { revision });
            };
            if log.attempts.len() >= MAX_SENDS {
                return Err(TwilioError::MaxSendAttempts);
            }
            log.attempts.push(attempt.clone());
            if self.put_log(service, phone, revision, &log).await? {
                return Ok(Reservation::Resend(log));
            }
        }
        Err(busy())
    }

    /// Takes a reserved re-send whose SMS did not go out back out of the log.
    async fn release_resend(&self, service: &str, phone: &Phone, attempt: &SendAttempt) {
        for _ in 0..WRITE_TRIES {
            let Ok(Some(record)) = self.store.twilio_sends(service, phone).await else {
                return;
            };
            let Ok(mut log) = SendLog::decode(&record) else {
                return;
            };
            log.attempts
                .retain(|kept| kept.attempt_sid != attempt.attempt_sid);
            if self
                .put_log(service, phone, Some(record.revision), &log)
                .await
                .unwrap_or(true)
            {
                return;
            }
        }
    }

    /// The send log of (Service, phone) and, while its verification is pending, the log itself.
    async fn live_log(&self, service: &str, phone: &Phone) -> Result<LiveLog, TwilioError> {
        let Some(record) = self.store.twilio_sends(service, phone).await? else {
            return Ok((None, None));
        };
        let log = SendLog::decode(&record)?;
        let pending = match self.otp.verification(&log.verification).await {
            Ok(view) => view.status == VerificationStatus::Pending,
            Err(OtpError::VerificationNotFound) => false,
            Err(error) => return Err(error.into()),
        };
        Ok((Some(record.revision), pending.then_some(log)))
    }

    /// Starts the log of the verification `sent` began; when another start of the same phone
    /// came between, its pending verification is the one this send re-sent (the same pending
    /// code), and the send is added to its log.
    async fn record_first_send(
        &self,
        service: &str,
        phone: &Phone,
        mut revision: Option<u64>,
        sent: &VerificationId,
        attempt: SendAttempt,
    ) -> Result<SendLog, TwilioError> {
        let mut live: Option<SendLog> = None;
        for _ in 0..WRITE_TRIES {
            let log = match live {
                Some(mut log) => {
                    log.attempts.push(attempt.clone());
                    log
                }
                None => SendLog {
                    verification: sent.as_str().to_owned(),
                    created_ms: attempt.time_ms,
                    attempts: vec![attempt.clone()],
                },
            };
            if self.put_log(service, phone, revision, &log).await? {
                return Ok(log);
            }
            (revision, live) = self.live_log(service, phone).await?;
        }
        Err(busy())
    }

    /// Writes the log of (Service, phone) if it is still at `revision`; it lives as long as
    /// its verification can be read.
    async fn put_log(
        &self,
        service: &str,
        phone: &Phone,
        revision: Option<u64>,
        log: &SendLog,
    ) -> Result<bool, TwilioError> {
        let settings = self.otp.settings();
        let ttl = settings.code_ttl + settings.verification_retention;
        Ok(self
            .store
            .put_twilio_sends(service, phone, revision, &log.encode(), ttl)
            .await?)
    }

    /// The verification `sid` of the Service, and its view.
    async fn owned_verification(
        &self,
        service: &Service,
        sid: &str,
    ) -> Result<VerificationView, TwilioError> {
        let not_found = || verification_not_found(&service.sid, sid);
        let id = sid::verification_id(sid).ok_or_else(not_found)?;
        let view = match self.otp.verification(id.as_str()).await {
            Ok(view) => view,
            Err(OtpError::VerificationNotFound) => return Err(not_found()),
            Err(error) => return Err(error.into()),
        };
        if view.purpose != service.tenant().purpose {
            return Err(not_found());
        }
        Ok(view)
    }

    /// A verification of the Service, with its sends.
    pub async fn verification(
        &self,
        account: &str,
        service_sid: &str,
        sid: &str,
    ) -> Result<Verification, TwilioError> {
        let service = self.service(account, service_sid).await?;
        let view = self.owned_verification(&service, sid).await?;
        self.shown_view(&service, view).await
    }

    /// `Status=canceled` cancels a pending verification, `Status=approved` approves it without
    /// its code (an ended one is left as it is, and shown).
    pub async fn update_verification(
        &self,
        account: &str,
        service_sid: &str,
        sid: &str,
        status: &str,
        client: IpAddr,
    ) -> Result<Verification, TwilioError> {
        let service = self.service(account, service_sid).await?;
        let view = self.owned_verification(&service, sid).await?;
        let id = view.id.as_str();
        let view = match status {
            "canceled" => self.otp.cancel(id).await?,
            "approved" => self.otp.approve(id, client).await?,
            _ => return Err(TwilioError::InvalidParameter("Status")),
        };
        self.shown_view(&service, view).await
    }

    /// Checks `code` against the verification `target` names. A wrong code answers `pending`
    /// (not an error); the fifth answers 60202, as does every later check.
    pub async fn check(
        &self,
        account: &str,
        service_sid: &str,
        code: &str,
        target: CheckTarget,
        client: IpAddr,
    ) -> Result<VerificationCheck, TwilioError> {
        let service = self.service(account, service_sid).await?;
        let tenant = service.tenant();
        let (id, phone) = match &target {
            CheckTarget::To(to) => {
                let phone = self.otp.parse_phone(to)?;
                let log = self
                    .store
                    .twilio_sends(&service.sid, &phone)
                    .await?
                    .ok_or_else(|| check_not_found(&service.sid))?;
                (SendLog::decode(&log)?.verification, Some(phone))
            }
            CheckTarget::Verification(sid) => {
                let id = sid::verification_id(sid).ok_or_else(|| check_not_found(&service.sid))?;
                (id.as_str().to_owned(), None)
            }
        };
        let command = VerifyCommand {
            verification_id: Some(id.clone()),
            phone: phone.as_ref().map(|phone| phone.as_e164().to_owned()),
            email: None,
            purpose: Some(tenant.purpose.as_str().to_owned()),
            code: code.to_owned(),
            audience: None,
            client,
            tenant: Some(tenant),
        };
        let valid = match self.otp.verify(command).await {
            Ok(_token) => true,
            Err(OtpError::WrongCode { .. }) => false,
            // Digits of another length than the Service's are a wrong code to Twilio, never
            // its right one: nothing to compare.
            Err(OtpError::InvalidCode) if is_code_like(code) => false,
            Err(error) => {
                return Err(match TwilioError::from(error) {
                    TwilioError::NotFound(_) => check_not_found(&service.sid),
                    other => other,
                });
            }
        };
        let view = self.otp.verification(&id).await?;
        let verification = self.shown_view(&service, view).await?;
        Ok(VerificationCheck {
            verification,
            valid,
        })
    }

    /// The verification `view` shows, with the sends its log lists (a verification whose log
    /// a later one replaced shows its first send).
    async fn shown_view(
        &self,
        service: &Service,
        view: VerificationView,
    ) -> Result<Verification, TwilioError> {
        let id = view.id.as_str();
        // A Twilio Service sends SMS only: its verifications' destinations are phones.
        let Some(phone) = view.destination.phone() else {
            return Err(crate::otp::OtpError::VerificationNotFound.into());
        };
        let log = match self.store.twilio_sends(&service.sid, phone).await? {
            Some(record) => Some(SendLog::decode(&record)?).filter(|log| log.verification == id),
            None => None,
        };
        let log = log.unwrap_or_else(|| SendLog {
            verification: id.to_owned(),
            created_ms: view.created_at_ms,
            attempts: vec![SendAttempt {
                attempt_sid: sid::generate(sid::SEND_ATTEMPT),
                time_ms: view.created_at_ms,
                channel: "sms".to_owned(),
            }],
        });
        Ok(self.shown(service, phone, &log, view.status.into()))
    }

    fn shown(
        &self,
        service: &Service,
        phone: &Phone,
        log: &SendLog,
        status: TwilioStatus,
    ) -> Verification {
        let id = VerificationId::parse(&log.verification);
        Verification {
            sid: id.as_ref().map(sid::of_verification).unwrap_or_default(),
            service_sid: service.sid.clone(),
            account_sid: service.account_sid.clone(),
            to: phone.as_e164().to_owned(),
            channel: "sms".to_owned(),
            status,
            created_ms: log.created_ms,
            updated_ms: log.attempts.last().map_or(log.created_ms, |a| a.time_ms),
            send_code_attempts: log.attempts.clone(),
        }
    }
}
