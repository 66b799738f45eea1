//! The operator's stats route: its query. The report it answers belongs to the server's stats
//! module (daily counters), which only operators read.

use serde::{Deserialize, Serialize};

/// `GET /api/v1/stats?days=N`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsQuery {
    /// How many days back, today included; 1 when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days: Option<u32>,
}
