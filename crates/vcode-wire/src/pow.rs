//! Proof of work (ALTCHA): the body of `pow/verify`. The challenge itself is the widget's own
//! format and is not described here.

use serde::{Deserialize, Serialize};

/// `POST /api/v1/pow/verify`. A missing payload is a rejected proof (40021), as a missing
/// captcha answer is a wrong captcha.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PowVerifyRequest {
    /// The widget's base64 payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
}
