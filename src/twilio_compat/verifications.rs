//! Verifications: start (send, or re-send the same code under the same `VE…` SID), fetch,
//! cancel or approve, and check — each through the OTP use cases under the Service's tenant,
//! by SMS to a phone (`Channel=sms`) or by mail to an address (`Channel=email`): one
//! `Destination`, so the quotas, the fraud guard and the stores are /api/v1's.
//!
//! A `VE…` SID is the vcode verification id of the verification's first send. A re-send within
//! its life is vcode's `reuse` resend: the same pending code delivered again (a new vcode id is
//! bound to it, which no client is shown); the first id stays bound to that code and verifies
//! it until its own expiry, with its own attempts, so the SID, the code, the expiry and the
//! five checks are those of the first send, as on Twilio. The send log of (Service,
//! destination) names that first id and lists the sends (`send_code_attempts`, at most five).

use serde::{Deserialize, Serialize};

use super::services::{WRITE_TRIES, is_friendly_name};
use super::{Service, TwilioCompat, TwilioError, now_ms, sid};
use crate::domain::{Destination, EmailAddress, NumberType, VerificationId};
use crate::otp::{
    Caller, OtpError, Owner, SendCommand, TenantId, VerificationStatus, VerificationView,
    VerifyCommand,
};
use crate::store::{NewSendLog, Revised};

/// Sends of one verification, the first included (Twilio's limit).
pub const MAX_SENDS: usize = 5;

/// Tries of a release's compare-and-set (see [`TwilioCompat::release`]).
const RELEASE_TRIES: usize = 8 * WRITE_TRIES;

/// What `POST /Verifications` asks for.
#[derive(Clone, Debug)]
pub struct StartCommand {
    pub to: String,
    pub channel: String,
    pub locale: Option<String>,
    /// The name the SMS or the mail gives instead of the Service's `FriendlyName`.
    pub custom_friendly_name: Option<String>,
    /// Twilio's `ChannelConfiguration` (SendGrid's template, sender and substitutions for
    /// email): a JSON object, checked and otherwise ignored, since vcode's mail is its own
    /// template from `VCODE_EMAIL_FROM`.
    pub channel_configuration: Option<String>,
    /// Twilio's `RateLimits`: a JSON object of a Rate Limit's `UniqueName` to the value this
    /// start counts for (`rate_limits.rs`).
    pub rate_limits: Option<String>,
}

/// Twilio's statuses (`failed` is never reached: a send whose SMS or mail fails is undone and
/// answered as an error, so no verification exists).
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
    /// E.164, or the email address as the first start wrote it (its domain lower-cased).
    pub to: String,
    /// `sms` or `email`.
    pub channel: &'static str,
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

/// What a check names: the phone or address (its current verification) or the verification.
#[derive(Clone, Debug)]
pub enum CheckTarget {
    To(String),
    Verification(String),
}

/// The send log of (Service, destination), as stored.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct SendLog {
    /// The first send's vcode verification id: the `VE…` SID.
    verification: String,
    created_ms: u64,
    attempts: Vec<SendAttempt>,
    /// An email address as the first start wrote it, which `to` echoes (the destination's
    /// key is the folded form); absent for a phone, whose key is its E.164.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    to: Option<String>,
}

impl SendLog {
    fn decode(record: &Revised) -> Result<Self, TwilioError> {
        serde_json::from_str(&record.body).map_err(|error| TwilioError::Internal(error.into()))
    }

    /// The log as `serde_json` writes it (`decode` reads either), written by hand: serde's
    /// writer cost a start more than its store step.
    fn encode(&self) -> String {
        let mut out = String::with_capacity(96 + 96 * self.attempts.len());
        out.push_str("{\"verification\":");
        push_json_str(&mut out, &self.verification);
        out.push_str(",\"created_ms\":");
        out.push_str(itoa::Buffer::new().format(self.created_ms));
        out.push_str(",\"attempts\":[");
        for (index, attempt) in self.attempts.iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            out.push_str("{\"attempt_sid\":");
            push_json_str(&mut out, &attempt.attempt_sid);
            out.push_str(",\"time_ms\":");
            out.push_str(itoa::Buffer::new().format(attempt.time_ms));
            out.push_str(",\"channel\":");
            push_json_str(&mut out, &attempt.channel);
            out.push('}');
        }
        out.push(']');
        if let Some(to) = &self.to {
            out.push_str(",\"to\":");
            push_json_str(&mut out, to);
        }
        out.push('}');
        out
    }
}

/// `text` as a JSON string: as it is when nothing in it needs escaping, serde's escaping
/// otherwise (the send log here, the answers the routes write by hand).
pub fn push_json_str(out: &mut String, text: &str) {
    // Every byte looked at, without stopping at the first that needs escaping: the compiler
    // then checks them many at a time (a start's URL, `to` and log: about 850 instructions
    // where a byte at a time took 2,150).
    let needs_escaping = text.bytes().fold(false, |needs, byte| {
        needs | (byte < 0x20) | (byte == b'"') | (byte == b'\\')
    });
    if needs_escaping {
        out.push_str(&serde_json::to_string(text).expect("a string serialises"));
    } else {
        out.push('"');
        out.push_str(text);
        out.push('"');
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

/// Where the verification a send log names stands.
enum LogState {
    Pending,
    /// Not (yet) in the store, and the log is recent: its first send is still under way. A
    /// concurrent start is told to retry (20429) rather than send: it would otherwise make
    /// a second verification, or answer the SID of one whose send may yet fail.
    InFlight,
    /// Ended, or never issued (its first send failed and took itself out of the log).
    Ended,
}

/// How long a first send may be under way: past this, a log whose verification never
/// appeared is an abandoned one (its process ended mid-send), and a start replaces it. Longer
/// than a send's store steps and its SMS provider's timeout together.
const IN_FLIGHT: u64 = 30_000;

/// The destination `to` names on `channel`: a phone for `sms`, an address for `email` (the
/// other's form is Twilio's 60200 on `To`).
fn start_destination(
    otp: &crate::otp::OtpService,
    channel: &str,
    to: &str,
) -> Result<Destination, TwilioError> {
    match channel {
        "sms" => Ok(otp.parse_destination(Some(to), None)?),
        "email" => Ok(otp.parse_destination(None, Some(to))?),
        "call" | "whatsapp" | "sna" | "rcs" | "auto" => {
            Err(TwilioError::ChannelDisabled(channel.to_owned()))
        }
        _ => Err(TwilioError::InvalidParameter("Channel")),
    }
}

/// The destination a check's `To` names: an address if it holds an `@`, else a phone.
fn check_destination(otp: &crate::otp::OtpService, to: &str) -> Result<Destination, TwilioError> {
    if to.contains('@') {
        let address = EmailAddress::parse(to).map_err(|_| TwilioError::InvalidParameter("To"))?;
        Ok(address.into())
    } else {
        Ok(otp.parse_phone(to)?.into())
    }
}

/// `ChannelConfiguration` is accepted when it is a JSON object, as Twilio's, and ignored.
fn is_channel_configuration(raw: &str) -> bool {
    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(raw).is_ok()
}

/// What `to` shows: an address as written (the key is its folded form), a phone's E.164.
fn shown_to(destination: &Destination) -> Option<String> {
    destination
        .email()
        .map(|address| address.as_str().to_owned())
}

/// The log a first start writes: `chosen`'s, with this one send.
fn fresh_log(chosen: &VerificationId, destination: &Destination, attempt: &SendAttempt) -> SendLog {
    SendLog {
        verification: chosen.as_str().to_owned(),
        created_ms: attempt.time_ms,
        attempts: vec![attempt.clone()],
        to: shown_to(destination),
    }
}

impl TwilioCompat {
    /// Starts a verification of `To` by SMS or email, or re-sends the pending one's code (up
    /// to `MAX_SENDS` sends, then 60203).
    pub async fn start(
        &self,
        account: &str,
        service_sid: &str,
        command: StartCommand,
    ) -> Result<Verification, TwilioError> {
        let service = self.service(account, service_sid).await?;
        let destination = start_destination(&self.otp, &command.channel, &command.to)?;
        if let Some(name) = &command.custom_friendly_name
            && !is_friendly_name(name)
        {
            return Err(TwilioError::InvalidParameter("CustomFriendlyName"));
        }
        if let Some(raw) = &command.channel_configuration
            && !is_channel_configuration(raw)
        {
            return Err(TwilioError::InvalidParameter("ChannelConfiguration"));
        }
        let buckets = service.metered(command.rate_limits.as_deref())?;
        if let Destination::Phone(phone) = &destination
            && service.skip_sms_to_landlines
            && phone.number_type() == NumberType::FixedLine
        {
            return Err(TwilioError::Landline);
        }
        let attempt = SendAttempt {
            attempt_sid: sid::generate(sid::SEND_ATTEMPT),
            time_ms: now_ms(),
            channel: destination.channel().as_str().to_owned(),
        };
        // The id is chosen before the send so that the send takes its place in the log first:
        // concurrent starts never pass the limit nor make two verifications. Where the store
        // can, a first start's log is created by the send's own issue, if there is none (one
        // store step where there would be two); a log there already is another start's, and
        // the start goes the log's way, once, with a new id (a Cluster's target of the
        // refused one may still be being deleted). One send call: its future is big.
        let folds = self.otp.writes_send_logs();
        let mut log_exists = false;
        loop {
            let chosen = self
                .otp
                .new_verification_id(&destination, &service.purpose());
            let (log, send_log) = if folds && !log_exists {
                let fresh = fresh_log(&chosen.id, &destination, &attempt);
                let send_log = NewSendLog {
                    service: service.sid.clone(),
                    body: fresh.encode(),
                    ttl: self.log_ttl(&service),
                };
                (fresh, Some(send_log))
            } else {
                let reserved = self
                    .reserve(&service, &destination, &chosen.id, &attempt, log_exists)
                    .await?;
                (reserved, None)
            };
            let folded = send_log.is_some();
            let mut profile = service.profile();
            profile.wording = Some(service.wording(command.custom_friendly_name.as_deref()));
            profile.send_log = send_log;
            profile.buckets = buckets.clone();
            let (phone, email) = match &destination {
                Destination::Phone(phone) => (Some(phone.as_e164().to_owned()), None),
                Destination::Email(email) => (None, Some(email.address().as_str().to_owned())),
            };
            let send = SendCommand {
                phone,
                email,
                purpose: None,
                captcha_id: None,
                captcha_answer: None,
                locale: command.locale.clone(),
                altcha: None,
                caller: caller_of(&service),
                idempotency_key: None,
                profile: Some(Box::new(profile)),
                verification: Some(chosen),
            };
            // The destination read above goes to the send as it is: read once, not twice.
            match self.otp.send_to(send, destination.clone()).await {
                Ok(_) => return Ok(self.shown(&service, &destination, log, TwilioStatus::Pending)),
                Err(OtpError::SendLogExists) if folded => log_exists = true,
                Err(error) => {
                    // Its send back out of the log (which a folded issue may have written
                    // before its SMS failed).
                    self.release(&service, &destination, &attempt).await;
                    return Err(error.into());
                }
            }
        }
    }

    /// Takes this send's place in the log of (Service, destination), and answers the log as it
    /// stands: the first start writes the log naming `chosen` in one create-if-absent step,
    /// with no read before (unless the log is known to exist: `log_exists`); otherwise the
    /// send is added to the pending verification's log (60203 once it has `MAX_SENDS`), or
    /// starts a new log in place of an ended one, or is told to retry while another start's
    /// first send is under way. Each write is a compare-and-set.
    async fn reserve(
        &self,
        service: &Service,
        destination: &Destination,
        chosen: &VerificationId,
        attempt: &SendAttempt,
        log_exists: bool,
    ) -> Result<SendLog, TwilioError> {
        let fresh = fresh_log(chosen, destination, attempt);
        let mut revision = None;
        let mut write = !log_exists;
        for _ in 0..WRITE_TRIES {
            if write && self.put_log(service, destination, revision, &fresh).await? {
                return Ok(fresh);
            }
            write = true;
            let Some(record) = self.store.twilio_sends(&service.sid, destination).await? else {
                revision = None;
                continue;
            };
            let mut log = SendLog::decode(&record)?;
            match self.log_state(service, &log).await? {
                LogState::Pending => {}
                LogState::InFlight => return Err(busy()),
                LogState::Ended => {
                    revision = Some(record.revision);
                    continue;
                }
            }
            if log.attempts.len() >= MAX_SENDS {
                return Err(TwilioError::MaxSendAttempts);
            }
            log.attempts.push(attempt.clone());
            if self
                .put_log(service, destination, Some(record.revision), &log)
                .await?
            {
                return Ok(log);
            }
            revision = Some(record.revision);
        }
        Err(busy())
    }

    /// Where the verification `log` names stands.
    async fn log_state(&self, service: &Service, log: &SendLog) -> Result<LogState, TwilioError> {
        let owner = Owner::Service(&service.purpose());
        match self.otp.verification(&log.verification, owner).await {
            Ok(view) if view.status == VerificationStatus::Pending => Ok(LogState::Pending),
            Ok(_) => Ok(LogState::Ended),
            Err(OtpError::VerificationNotFound) => {
                let recent = now_ms().saturating_sub(log.created_ms) < IN_FLIGHT;
                Ok(if recent && !log.attempts.is_empty() {
                    LogState::InFlight
                } else {
                    LogState::Ended
                })
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Takes a reserved send whose SMS or mail did not go out back out of the log (a first
    /// send's log left with no send is an ended one); a log without it is left as it is.
    /// It tries longer than a reservation: a reservation that gives up answers "retry", but a
    /// release that gave up would list a send that never went out, and count it against the
    /// log's five. Each failed compare-and-set is another start's write that landed, and the
    /// starts of one log are few, so the tries run out only in a storm; that is logged.
    async fn release(&self, service: &Service, destination: &Destination, attempt: &SendAttempt) {
        for _ in 0..RELEASE_TRIES {
            let Ok(Some(record)) = self.store.twilio_sends(&service.sid, destination).await else {
                return;
            };
            let Ok(mut log) = SendLog::decode(&record) else {
                return;
            };
            let listed = log.attempts.len();
            log.attempts
                .retain(|kept| kept.attempt_sid != attempt.attempt_sid);
            if log.attempts.len() == listed {
                return;
            }
            if self
                .put_log(service, destination, Some(record.revision), &log)
                .await
                .unwrap_or(true)
            {
                return;
            }
        }
        tracing::warn!(
            service = %service.sid,
            %destination,
            "a send that did not go out is still listed in its verification's attempts: its log changed under every try"
        );
    }

    /// Writes the log of (Service, destination) if it is still at `revision`.
    async fn put_log(
        &self,
        service: &Service,
        destination: &Destination,
        revision: Option<u64>,
        log: &SendLog,
    ) -> Result<bool, TwilioError> {
        let ttl = self.log_ttl(service);
        Ok(self
            .store
            .put_twilio_sends(&service.sid, destination, revision, &log.encode(), ttl)
            .await?)
    }

    /// How long a send log lives: as long as its verification can be read.
    fn log_ttl(&self, service: &Service) -> std::time::Duration {
        let settings = self.otp.settings();
        service.code_ttl().unwrap_or(settings.code_ttl) + settings.verification_retention
    }

    /// The verification `sid` of the Service, and its view.
    async fn owned_verification(
        &self,
        service: &Service,
        sid: &str,
    ) -> Result<VerificationView, TwilioError> {
        let not_found = || verification_not_found(&service.sid, sid);
        let id = sid::verification_id(sid).ok_or_else(not_found)?;
        let view = match self
            .otp
            .verification(id.as_str(), Owner::Service(&service.purpose()))
            .await
        {
            Ok(view) => view,
            Err(OtpError::VerificationNotFound) => return Err(not_found()),
            Err(error) => return Err(error.into()),
        };
        if view.purpose != service.profile().purpose {
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
    ) -> Result<Verification, TwilioError> {
        let service = self.service(account, service_sid).await?;
        let view = self.owned_verification(&service, sid).await?;
        let id = view.id.as_str();
        let view = match status {
            "canceled" => {
                self.otp
                    .cancel(id, Owner::Service(&service.purpose()))
                    .await?
            }
            "approved" => {
                self.otp
                    .approve(id, &caller_of(&service), Owner::Service(&service.purpose()))
                    .await?
            }
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
    ) -> Result<VerificationCheck, TwilioError> {
        let service = self.service(account, service_sid).await?;
        let profile = service.profile();
        let (id, destination) = match &target {
            CheckTarget::To(to) => {
                let destination = check_destination(&self.otp, to)?;
                let log = self
                    .store
                    .twilio_sends(&service.sid, &destination)
                    .await?
                    .ok_or_else(|| check_not_found(&service.sid))?;
                (SendLog::decode(&log)?.verification, Some(destination))
            }
            CheckTarget::Verification(sid) => {
                let id = sid::verification_id(sid).ok_or_else(|| check_not_found(&service.sid))?;
                (id.as_str().to_owned(), None)
            }
        };
        let purpose = profile.purpose.clone();
        let command = VerifyCommand {
            verification_id: Some(&id),
            phone: destination
                .as_ref()
                .and_then(|destination| destination.phone())
                .map(|phone| phone.as_e164()),
            email: destination
                .as_ref()
                .and_then(|destination| destination.email())
                .map(|address| address.as_str()),
            purpose: Some(purpose.as_str()),
            code,
            audience: None,
            caller: caller_of(&service),
            profile: Some(profile),
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
        let view = self
            .otp
            .verification(&id, Owner::Service(&service.purpose()))
            .await?;
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
        let destination = &view.destination;
        let log = match self.store.twilio_sends(&service.sid, destination).await? {
            Some(record) => Some(SendLog::decode(&record)?).filter(|log| log.verification == id),
            None => None,
        };
        let log = log.unwrap_or_else(|| SendLog {
            verification: id.to_owned(),
            created_ms: view.created_at_ms,
            attempts: vec![SendAttempt {
                attempt_sid: sid::generate(sid::SEND_ATTEMPT),
                time_ms: view.created_at_ms,
                channel: destination.channel().as_str().to_owned(),
            }],
            to: None,
        });
        Ok(self.shown(service, destination, log, view.status.into()))
    }

    fn shown(
        &self,
        service: &Service,
        destination: &Destination,
        log: SendLog,
        status: TwilioStatus,
    ) -> Verification {
        Verification {
            sid: sid::of_verification_text(&log.verification).unwrap_or_default(),
            service_sid: service.sid.clone(),
            account_sid: service.account_sid.clone(),
            to: log.to.unwrap_or_else(|| destination.key().to_owned()),
            channel: destination.channel().as_str(),
            status,
            created_ms: log.created_ms,
            updated_ms: log.attempts.last().map_or(log.created_ms, |a| a.time_ms),
            send_code_attempts: log.attempts,
        }
    }
}

/// A Service's caller: its account, a tenant of its own that names no end user (its end users
/// are the Service's Rate Limits' business), so its server's address is never a client.
fn caller_of(service: &Service) -> Caller {
    Caller::Tenant {
        tenant: TenantId::twilio_account(&service.account_sid),
        end_user: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_log_is_written_as_serde_writes_it() {
        let log = SendLog {
            verification: "abc_-\"q".to_owned(),
            created_ms: 1_764_000_000_123,
            attempts: vec![
                SendAttempt {
                    attempt_sid: sid::generate(sid::SEND_ATTEMPT),
                    time_ms: 1_764_000_000_123,
                    channel: "sms".to_owned(),
                },
                SendAttempt {
                    attempt_sid: sid::generate(sid::SEND_ATTEMPT),
                    time_ms: 0,
                    channel: "e\\mail".to_owned(),
                },
            ],
            to: None,
        };
        assert_eq!(log.encode(), serde_json::to_string(&log).unwrap());
        // An address's log keeps the address as written, which `to` echoes.
        let mailed = SendLog {
            to: Some("Ann.\"Lee\"@Example.com".to_owned()),
            ..log
        };
        assert_eq!(mailed.encode(), serde_json::to_string(&mailed).unwrap());
        let empty = SendLog {
            attempts: Vec::new(),
            ..mailed
        };
        assert_eq!(empty.encode(), serde_json::to_string(&empty).unwrap());
    }
}
