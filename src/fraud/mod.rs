//! The fraud guard (issue 25): per destination prefix (calling code and the next digits) and
//! per country, sends and verified codes are counted per minute in the store, shared by every
//! instance; a prefix whose judged sends convert far below the service's baseline is
//! suspended for a cool-off that grows on repeat, and one whose fresh unconverted sends surge
//! far above its own recent rate is held back until they can be judged. Its second round
//! (issue 39): `levels` judges each send's number ranges, country and service against their
//! own decayed history, letting returning destinations through; `spend` caps what SMS may cost.
//! `policy` judges the minutes, `guard` is the use case the send and verify paths and the
//! operator routes call, `safe_list` the destinations it never judges (configured, and
//! changed while running), and `wide_levels` the country's and the service's counts between
//! an instance's flushes.

mod guard;
pub mod levels;
pub mod policy;
mod safe_list;
mod settings;
pub mod spend;
mod wide_levels;

pub use self::guard::{
    Admitted, ConversionTicket, FraudError, FraudGuard, PrefixState, PrefixTraffic, SendTicket,
    Suspension, TrafficBucket, TrafficReport, country_of,
};
pub use self::policy::{Level, Reason};
pub use self::safe_list::{
    ListedEntry, MAX_ADDED_BY, MAX_DIGITS, MAX_TENANT_ENTRIES, SafeList, SafeListError, parse_entry,
};
pub use self::settings::FraudSettings;
