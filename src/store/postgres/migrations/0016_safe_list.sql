-- vcode's PostgreSQL store, version 16: the fraud guard's safe list as operators and tenants
-- change it while vcode runs (issue 39). One row per entry: its tenant ('' for an entry that
-- exempts every send, `twilio:AC…` for one account's), a number or prefix in digits without
-- `+`, who added it and when (unix ms). Kept until removed: the sweep does not touch it.
CREATE TABLE IF NOT EXISTS vcode_fraud_safe_list (
  tenant text NOT NULL DEFAULT '',
  digits text NOT NULL,
  added_by text NOT NULL,
  added_at_ms bigint NOT NULL,
  PRIMARY KEY (tenant, digits)
);
