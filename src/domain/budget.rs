//! A tenant's own send budget, as its credential entry sets it (`VCODE_API_KEYS`,
//! `VCODE_TWILIO_COMPAT_ACCOUNTS`): `hour=N` and `day=N` after the digest, each in place of the
//! service's default (`VCODE_QUOTA_TENANT_HOUR`, `_DAY`); `0` turns that window off.

/// The most a budget may allow in a window (the quotas' own ceiling).
const MOST: u32 = 1_000_000;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendBudget {
    pub per_hour: Option<u32>,
    pub per_day: Option<u32>,
}

impl SendBudget {
    /// `hour=N day=N` in any order, either or both, separated by spaces; empty: the defaults.
    pub fn parse(fields: &str) -> Result<Self, String> {
        let mut budget = Self::default();
        for field in fields.split_whitespace() {
            let (name, value) = field
                .split_once('=')
                .ok_or_else(|| format!("{field:?}: expected hour=N or day=N"))?;
            let value: u32 = value
                .parse()
                .ok()
                .filter(|value| *value <= MOST)
                .ok_or_else(|| format!("{field:?}: expected a whole number from 0 to {MOST}"))?;
            let slot = match name {
                "hour" => &mut budget.per_hour,
                "day" => &mut budget.per_day,
                _ => return Err(format!("{field:?}: expected hour=N or day=N")),
            };
            if slot.replace(value).is_some() {
                return Err(format!("{name} given twice"));
            }
        }
        Ok(budget)
    }

    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_reads_its_windows_and_refuses_anything_else() {
        assert_eq!(SendBudget::parse("").unwrap(), SendBudget::default());
        assert_eq!(
            SendBudget::parse(" day=50000  hour=5000 ").unwrap(),
            SendBudget {
                per_hour: Some(5000),
                per_day: Some(50000)
            }
        );
        for bad in ["hour", "hour=x", "week=1", "hour=1 hour=2", "day=1000001"] {
            assert!(SendBudget::parse(bad).is_err(), "{bad}");
        }
    }
}
