//! Verifications as a resource: what a verify by id resolves first (the id's phone and
//! purpose, checked against what the request says), and the status read and the cancel of
//! `GET /otp/verifications/{id}` and its `cancel`.

use super::{Caller, OtpError, OtpService, ServiceProfile};
use crate::domain::{Destination, Purpose, VerificationId};
use crate::store::{DeliveryStatus, VerificationRecord, VerificationStatus};

/// Whose verifications a route reaches: `/api/v1`'s (of the configured purposes), or one
/// Twilio Service's (of its own purpose). Another owner's id is unknown to it, as an id that
/// never existed: its status, cancel and verify answer not found, and nothing is counted.
#[derive(Clone, Copy, Debug)]
pub enum Owner<'a> {
    Purposes,
    Service(&'a Purpose),
}

/// One verify, as the client asked for it.
#[derive(Debug, Clone)]
/// Borrowed: a verify reads its fields where the request holds them, copying none.
pub struct VerifyCommand<'a> {
    /// What `otp/send` answered; required when verifying by id.
    pub verification_id: Option<&'a str>,
    /// Required when verifying by phone; by id, it must be the verification's if given.
    pub phone: Option<&'a str>,
    /// `phone`'s counterpart for an email verification: one of the two, never both.
    pub email: Option<&'a str>,
    /// By phone, `login` when absent; by id, it must be the verification's if given.
    pub purpose: Option<&'a str>,
    pub code: &'a str,
    pub audience: Option<&'a str>,
    /// Who asks: a browser's address, or a tenant and the end user it names.
    pub caller: Caller,
    /// Set by a compatibility API: the code is its length, and goes by id whatever
    /// `VCODE_VERIFY_BY` says (the id must be the Service's).
    pub profile: Option<ServiceProfile>,
}

/// A verification as `GET /otp/verifications/{id}` shows it.
#[derive(Debug, Clone)]
pub struct VerificationView {
    pub id: VerificationId,
    pub status: VerificationStatus,
    pub delivery: DeliveryStatus,
    /// The provider's error code, with `Undelivered`.
    pub delivery_error: Option<String>,
    /// Wrong codes this id may still try (0 once it has ended).
    pub remaining_attempts: u32,
    pub created_at_ms: u64,
    pub expires_at_ms: u64,
    /// Shown masked (its `Display`).
    pub destination: Destination,
    pub purpose: Purpose,
}

impl OtpService {
    /// The (phone, purpose) verification `raw` was sent for, and the id; refuses an unknown
    /// or malformed id (`VerificationNotFound`) and a phone or purpose the request names that
    /// is not the verification's (`VerificationMismatch`). Reads the id's immutable record
    /// only: nothing is counted or changed.
    pub(super) async fn verification_target(
        &self,
        raw: &str,
        command: &VerifyCommand<'_>,
    ) -> Result<(Destination, Purpose, VerificationId), OtpError> {
        let id = VerificationId::parse(raw).ok_or(OtpError::VerificationNotFound)?;
        let (phone, purpose) = self.locate(&id).await?;
        let owner = match &command.profile {
            Some(profile) => Owner::Service(&profile.purpose),
            None => Owner::Purposes,
        };
        if !self.owns(owner, &purpose) {
            return Err(OtpError::VerificationNotFound);
        }
        if command.phone.is_some() || command.email.is_some() {
            // A malformed phone or address is still the client's error to hear about.
            let claimed = self.parse_destination(command.phone, command.email)?;
            if claimed.key() != phone.key() {
                return Err(OtpError::VerificationMismatch);
            }
        }
        if command
            .purpose
            .is_some_and(|claimed| claimed != purpose.as_str())
        {
            return Err(OtpError::VerificationMismatch);
        }
        Ok((phone, purpose, id))
    }

    async fn locate(&self, id: &VerificationId) -> Result<(Destination, Purpose), OtpError> {
        let target = self
            .codes
            .locate_verification(id)
            .await?
            .ok_or(OtpError::VerificationNotFound)?;
        target_of(self, &target.phone_e164, &target.purpose)
    }

    /// Whether `owner` reaches a verification of `purpose`.
    fn owns(&self, owner: Owner<'_>, purpose: &Purpose) -> bool {
        match owner {
            Owner::Purposes => self.settings.purposes.contains(purpose),
            Owner::Service(own) => own == purpose,
        }
    }

    /// The verification `raw` names, if `owner`'s.
    pub async fn verification(
        &self,
        raw: &str,
        owner: Owner<'_>,
    ) -> Result<VerificationView, OtpError> {
        let id = VerificationId::parse(raw).ok_or(OtpError::VerificationNotFound)?;
        let record = self
            .codes
            .verification(&id)
            .await?
            .ok_or(OtpError::VerificationNotFound)?;
        let view = self.view(id, record)?;
        if !self.owns(owner, &view.purpose) {
            return Err(OtpError::VerificationNotFound);
        }
        Ok(view)
    }

    /// Cancels the verification `raw` names while it is pending (an ended one is left as it
    /// is), and shows it. Its code stays pending for the code's other ids, if any: one
    /// requester's cancel never ends another's verification.
    pub async fn cancel(&self, raw: &str, owner: Owner<'_>) -> Result<VerificationView, OtpError> {
        let id = VerificationId::parse(raw).ok_or(OtpError::VerificationNotFound)?;
        // Whose it is, before anything changes (the id's target never changes).
        let (_, purpose) = self.locate(&id).await?;
        if !self.owns(owner, &purpose) {
            return Err(OtpError::VerificationNotFound);
        }
        let record = self
            .codes
            .cancel_verification(&id)
            .await?
            .ok_or(OtpError::VerificationNotFound)?;
        let view = self.view(id, record)?;
        tracing::info!(destination = %view.destination, purpose = %view.purpose, status = view.status.as_str(), "verification cancel");
        Ok(view)
    }

    /// Approves the verification `raw` names without its code (Twilio's `Status=approved`: the
    /// caller decided): the same atomic verify by id, given the pending code's own digest, so
    /// the code is consumed and this id approved exactly as by its right code. An id whose code
    /// is no longer pending is left as it is, and shown.
    pub async fn approve(&self, raw: &str, caller: &Caller) -> Result<VerificationView, OtpError> {
        let id = VerificationId::parse(raw).ok_or(OtpError::VerificationNotFound)?;
        let (phone, purpose) = self.locate(&id).await?;
        if let Some(pending) = self.codes.pending_code(&phone, &purpose).await? {
            let (client, params) = self.verify_limits(caller);
            let outcome = self
                .codes
                .verify_by_id(&phone, &purpose, &id, &[pending.digest], client, params)
                .await?;
            tracing::info!(%phone, %purpose, outcome = ?outcome, "verification approved without its code");
        }
        self.verification(raw, Owner::Service(&purpose)).await
    }

    fn view(
        &self,
        id: VerificationId,
        record: VerificationRecord,
    ) -> Result<VerificationView, OtpError> {
        let (phone, purpose) = target_of(self, &record.target.phone_e164, &record.target.purpose)?;
        let remaining_attempts = match record.status {
            VerificationStatus::Pending => self
                .settings
                .max_attempts
                .saturating_sub(record.failed_attempts),
            _ => 0,
        };
        Ok(VerificationView {
            id,
            status: record.status,
            delivery: record.delivery,
            delivery_error: record.delivery_error,
            remaining_attempts,
            created_at_ms: record.created_at_ms,
            expires_at_ms: record.expires_at_ms,
            destination: phone,
            purpose,
        })
    }
}

/// A stored target as domain values; a store that holds anything else is broken.
fn target_of(
    service: &OtpService,
    phone_e164: &str,
    purpose: &str,
) -> Result<(Destination, Purpose), OtpError> {
    let broken = || {
        OtpError::Store(crate::store::StoreError::Protocol(format!(
            "verification target {purpose:?}"
        )))
    };
    let phone = Destination::from_key(phone_e164, &service.phones).ok_or_else(broken)?;
    let purpose = Purpose::parse(purpose).ok_or_else(broken)?;
    Ok((phone, purpose))
}
