//! What one SMS costs per destination country (`VCODE_SMS_PRICES`, `VCODE_SMS_PRICE_CURRENCY`),
//! for the operator console's spend estimate. vcode never bills by it: a provider's invoice is
//! the truth; this is the operator's own table of what they pay.

use std::collections::BTreeMap;

use crate::domain::Region;

/// The key of the price for every region the table does not list.
pub const OTHERS: &str = "*";

/// Prices of one SMS by region, in one currency.
#[derive(Clone, Debug, PartialEq)]
pub struct SmsPrices {
    currency: String,
    /// Region (ISO 3166-1 alpha-2, upper case) or [`OTHERS`] → price.
    by_region: BTreeMap<String, f64>,
}

impl Default for SmsPrices {
    /// No table, in US dollars.
    fn default() -> Self {
        Self {
            currency: DEFAULT_CURRENCY.to_owned(),
            by_region: BTreeMap::new(),
        }
    }
}

pub const DEFAULT_CURRENCY: &str = "USD";

impl SmsPrices {
    /// A table from (region or `*`, price) pairs; the reason when one is refused.
    pub fn new(
        currency: &str,
        entries: impl IntoIterator<Item = (String, f64)>,
    ) -> Result<Self, String> {
        let mut by_region = BTreeMap::new();
        for (region, price) in entries {
            let region = region.trim();
            let key = if region == OTHERS {
                OTHERS.to_owned()
            } else {
                Region::parse(region)
                    .ok_or_else(|| {
                        format!(
                            "{region:?} is not a region: expected CN, GB, … or * for the others"
                        )
                    })?
                    .as_str()
                    .to_owned()
            };
            if !(price.is_finite() && price >= 0.0) {
                return Err(format!(
                    "{key}: a price is a number of 0 or more, not {price}"
                ));
            }
            if by_region.insert(key.clone(), price).is_some() {
                return Err(format!("{key} is priced twice"));
            }
        }
        Ok(Self {
            currency: parse_currency(currency)?,
            by_region,
        })
    }

    /// `CN=0.045,GB=0.040,*=0.050` as `VCODE_SMS_PRICES` gives it.
    pub fn parse_pairs(text: &str) -> Result<Vec<(String, f64)>, String> {
        crate::config::text::list(text, |pair| {
            let (region, price) = pair
                .split_once('=')
                .ok_or_else(|| format!("{pair:?}: expected REGION=PRICE, such as CN=0.045"))?;
            let price = price
                .trim()
                .parse::<f64>()
                .map_err(|_| format!("{pair:?}: expected REGION=PRICE, such as CN=0.045"))?;
            Ok((region.trim().to_owned(), price))
        })
    }

    pub fn currency(&self) -> &str {
        &self.currency
    }

    /// Every price, by region and `*`.
    pub fn table(&self) -> &BTreeMap<String, f64> {
        &self.by_region
    }

    /// The price of one SMS to `region`: its own, or the others' (`*`); `None` when neither is
    /// set.
    pub fn price_of(&self, region: &str) -> Option<f64> {
        self.by_region
            .get(region)
            .or_else(|| self.by_region.get(OTHERS))
            .copied()
    }
}

/// ISO 4217's shape: three letters, upper-cased.
fn parse_currency(raw: &str) -> Result<String, String> {
    let raw = raw.trim();
    if raw.len() == 3 && raw.bytes().all(|b| b.is_ascii_alphabetic()) {
        Ok(raw.to_ascii_uppercase())
    } else {
        Err(format!(
            "{raw:?} is not a currency: expected an ISO 4217 code such as USD, EUR or CNY"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Result<SmsPrices, String> {
        SmsPrices::new("usd", SmsPrices::parse_pairs(text)?)
    }

    #[test]
    fn a_region_gets_its_own_price_or_the_others() {
        let prices = table("cn=0.045, GB=0.04 ,*=0.05").expect("a good table");
        assert_eq!(prices.currency(), "USD");
        assert_eq!(prices.price_of("CN"), Some(0.045));
        assert_eq!(prices.price_of("GB"), Some(0.04));
        assert_eq!(prices.price_of("US"), Some(0.05));
        let without_others = table("CN=0.045").expect("a good table");
        assert_eq!(without_others.price_of("US"), None);
        assert_eq!(SmsPrices::default().price_of("CN"), None);
    }

    #[test]
    fn bad_tables_are_refused_with_the_reason() {
        let refused = |text: &str, reason: &str| {
            let error = table(text).expect_err(text);
            assert!(error.contains(reason), "{text}: {error}");
        };
        refused("CN", "expected REGION=PRICE");
        refused("CN=cheap", "expected REGION=PRICE");
        refused("XX=0.1", "not a region");
        refused("CN=-0.1", "0 or more");
        refused("CN=NaN", "0 or more");
        refused("CN=inf", "0 or more");
        refused("CN=0.1,cn=0.2", "CN is priced twice");
        refused("*=0.1,*=0.2", "* is priced twice");
        assert!(
            SmsPrices::new("dollars", [])
                .expect_err("not ISO 4217")
                .contains("ISO 4217")
        );
    }
}
