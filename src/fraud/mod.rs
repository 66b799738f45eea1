//! The fraud guard (issues 25 and 39): `levels` judges each send's number ranges, country and
//! service against their own decayed history in the store, shared by every instance; a level
//! whose unconverted (or undelivered) sends go far beyond what its history explains is refused
//! for a cool-off that grows on repeat (`policy`), letting returning destinations through;
//! `spend` caps what SMS may cost. `guard` is the use case the send and verify paths and the
//! operator routes call, `safe_list` the destinations it never judges (configured, and changed
//! while running), `wide_levels` the country's and the service's counts between an instance's
//! flushes, and `traffic` the operator's report counted the same way. (The first round's
//! per-minute judgement of one prefix was retired on 2026-12-06: the levels decided every
//! pumping scenario it did, and its counts were a third of a send's cost on the shared server.)

mod guard;
pub mod levels;
pub mod policy;
mod safe_list;
mod settings;
pub mod spend;
mod traffic;
mod wide_levels;

pub use self::guard::{
    Admitted, FraudError, FraudGuard, PrefixState, PrefixTraffic, SendTicket, Suspension,
    TrafficBucket, TrafficReport, country_of,
};
pub use self::policy::{Level, Reason};
pub use self::safe_list::{
    ListedEntry, MAX_ADDED_BY, MAX_DIGITS, MAX_TENANT_ENTRIES, SafeList, SafeListError, parse_entry,
};
pub use self::settings::FraudSettings;
