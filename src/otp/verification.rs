//! Verifications as a resource: what a verify by id resolves first (the id's phone and
//! purpose, checked against what the request says), and the status read and the cancel of
//! `GET /otp/verifications/{id}` and its `cancel`.

use super::{Caller, NewVerificationId, OtpError, OtpService, ServiceProfile};
use crate::domain::{Destination, Purpose, VerificationId};
use crate::keyring::purpose_tag;
use crate::store::{DeliveryStatus, VerificationRecord, VerificationStatus, VerificationTarget};

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
        let owner = match &command.profile {
            Some(profile) => Owner::Service(&profile.purpose),
            None => Owner::Purposes,
        };
        let (phone, purpose) = self.locate(&id, owner).await?;
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

    /// Where `id` leads, if to one of `owner`'s purposes: read from the id itself where it is
    /// a phone's (`Keyring::locate_id`), else from the store's index of ids.
    async fn locate(
        &self,
        id: &VerificationId,
        owner: Owner<'_>,
    ) -> Result<(Destination, Purpose), OtpError> {
        if let Some(target) = self.located(id, owner) {
            return target_of(self, &target.phone_e164, &target.purpose);
        }
        let target = self
            .codes
            .locate_verification(id)
            .await?
            .ok_or(OtpError::VerificationNotFound)?;
        target_of(self, &target.phone_e164, &target.purpose)
    }

    /// Where `id` leads as the id itself says, if it is a phone's for one of `owner`'s
    /// purposes; `None` sends the caller to the store's index.
    fn located(&self, id: &VerificationId, owner: Owner<'_>) -> Option<VerificationTarget> {
        let located = self.keyring.locate_id(id)?;
        let purpose = match owner {
            Owner::Service(own) => {
                (purpose_tag(own.as_str()) == located.purpose_tag).then_some(own)
            }
            Owner::Purposes => self.purpose_of_tag(located.purpose_tag),
        }?;
        Some(VerificationTarget {
            phone_e164: located.phone_e164,
            purpose: purpose.as_str().to_owned(),
        })
    }

    /// The configured purpose whose tag `tag` is, if exactly one's is.
    fn purpose_of_tag(&self, tag: [u8; 3]) -> Option<&Purpose> {
        let mut matching = self.purpose_tags.iter().filter(|(own, _)| *own == tag);
        let (_, purpose) = matching.next()?;
        matching.next().is_none().then_some(purpose)
    }

    /// Whether the store keeps nothing of the verification `id`, which says where it leads:
    /// past its retention it is as unknown as an id the store indexed and forgot (`40401`),
    /// not an expired code. Read only on a verify's `CodeExpired`.
    pub(super) async fn forgotten(
        &self,
        id: &VerificationId,
        destination: &Destination,
        purpose: &Purpose,
    ) -> Result<bool, OtpError> {
        if !self.says_where(id, destination, purpose) {
            return Ok(false);
        }
        let target = VerificationTarget::of(destination, purpose);
        Ok(self.codes.verification(id, Some(&target)).await?.is_none())
    }

    /// The id of a new send to `destination` for `purpose`, and whether it says where it
    /// leads: a phone's does (no store need index it) unless another configured purpose
    /// shares its purpose's tag; any other is random.
    pub(crate) fn new_verification_id(
        &self,
        destination: &Destination,
        purpose: &Purpose,
    ) -> NewVerificationId {
        let tag = self.tag_of(purpose);
        let shared = self
            .purpose_tags
            .iter()
            .any(|(own, other)| *own == tag && other != purpose);
        let located = match destination {
            Destination::Phone(_) if !shared => {
                self.keyring.phone_verification_id(destination.key(), tag)
            }
            _ => None,
        };
        match located {
            Some(id) => NewVerificationId {
                id,
                says_where: true,
            },
            None => NewVerificationId {
                id: VerificationId::generate(),
                says_where: false,
            },
        }
    }

    /// Whether `id` says by itself that it leads to `destination` and `purpose`.
    fn says_where(
        &self,
        id: &VerificationId,
        destination: &Destination,
        purpose: &Purpose,
    ) -> bool {
        matches!(destination, Destination::Phone(_))
            && self.keyring.locate_id(id).is_some_and(|located| {
                located.phone_e164 == destination.key()
                    && located.purpose_tag == self.tag_of(purpose)
            })
    }

    /// `purpose`'s tag: a configured purpose's from the table (no hash on a send's path).
    fn tag_of(&self, purpose: &Purpose) -> [u8; 3] {
        self.purpose_tags
            .iter()
            .find(|(_, own)| own == purpose)
            .map_or_else(|| purpose_tag(purpose.as_str()), |(tag, _)| *tag)
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
        let located = self.located(&id, owner);
        let record = self
            .codes
            .verification(&id, located.as_ref())
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
        let (destination, purpose) = self.locate(&id, owner).await?;
        if !self.owns(owner, &purpose) {
            return Err(OtpError::VerificationNotFound);
        }
        let target = VerificationTarget::of(&destination, &purpose);
        let record = self
            .codes
            .cancel_verification(&id, Some(&target))
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
    pub async fn approve(
        &self,
        raw: &str,
        caller: &Caller,
        owner: Owner<'_>,
    ) -> Result<VerificationView, OtpError> {
        let id = VerificationId::parse(raw).ok_or(OtpError::VerificationNotFound)?;
        let (phone, purpose) = self.locate(&id, owner).await?;
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
