//! The postmortem's reproduction, kept on purpose to replay its outage (dev mode, Redis only):
//! `VCODE_VERIFY_STRATEGY` picks vcode's atomic verify or one of the Go service's, and
//! `stores_for` wraps the real stores so that a legacy strategy's codes go through
//! `legacy::LegacyRedisStore`. The stores themselves know nothing of it.

pub mod legacy;

use std::sync::Arc;
use std::time::Duration;

use self::legacy::{Legacy, LegacyRedisStore};
use crate::store::{StepByStep, StoreError, Stores};

/// How verifies read, compare and delete codes (`VCODE_VERIFY_STRATEGY`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum VerifyStrategy {
    /// vcode's design: every read-compare-write is one Lua script.
    #[default]
    Atomic,
    /// The Go service before the postmortem.
    LegacyOriginal,
    /// The Go service after the postmortem's fix.
    LegacyPostmortemFix,
}

impl VerifyStrategy {
    pub const ALL: [Self; 3] = [
        Self::Atomic,
        Self::LegacyOriginal,
        Self::LegacyPostmortemFix,
    ];

    /// The name `VCODE_VERIFY_STRATEGY` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Atomic => "atomic",
            Self::LegacyOriginal => "legacy-original",
            Self::LegacyPostmortemFix => "legacy-postmortem-fix",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == raw)
    }

    pub fn is_legacy(self) -> bool {
        self != Self::Atomic
    }
}

impl std::fmt::Display for VerifyStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The stores a strategy runs on: `stores` as they are for `atomic`; for a legacy strategy the
/// codes go through a `LegacyRedisStore` on the Redis node at `url` (the one `stores` use, if
/// they run on one node), every other role staying `stores`'. `gap` is the login's own work.
pub fn stores_for(
    strategy: VerifyStrategy,
    mut stores: Stores,
    url: Option<&str>,
    gap: Duration,
    command_timeout: Duration,
) -> Result<Stores, StoreError> {
    let flavour = match strategy {
        VerifyStrategy::Atomic => return Ok(stores),
        VerifyStrategy::LegacyOriginal => Legacy::Original,
        VerifyStrategy::LegacyPostmortemFix => Legacy::PostmortemFix,
    };
    let url = url.ok_or_else(|| {
        StoreError::Unavailable("the legacy strategies run on one Redis node".to_owned())
    })?;
    tracing::warn!(
        strategy = %strategy,
        gap_ms = gap.as_millis() as u64,
        "legacy verify strategy: codes are lost and reused by design (reproduction only)"
    );
    stores.codes = Arc::new(LegacyRedisStore::connect(
        url,
        flavour,
        gap,
        command_timeout,
    )?);
    // The legacy codes know nothing of the guard: its steps follow theirs.
    stores.fused = Arc::new(StepByStep {
        codes: stores.codes.clone(),
        fraud: stores.fraud.clone(),
        quotas: stores.quotas.clone(),
    });
    Ok(stores)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategy_names_round_trip() {
        for strategy in VerifyStrategy::ALL {
            assert_eq!(VerifyStrategy::parse(strategy.as_str()), Some(strategy));
        }
        assert_eq!(VerifyStrategy::default(), VerifyStrategy::Atomic);
        assert!(!VerifyStrategy::Atomic.is_legacy());
        assert!(VerifyStrategy::LegacyOriginal.is_legacy());
        assert_eq!(VerifyStrategy::parse("Atomic"), None);
        assert_eq!(VerifyStrategy::parse("legacy"), None);
    }
}
