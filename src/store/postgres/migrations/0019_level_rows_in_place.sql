-- vcode's PostgreSQL store, version 19: room in each page of the guard's levels for a row's
-- next version. A send updates five level rows; vcode_levels_count now leaves their expiry
-- (the only indexed column it changes) alone until a third of its life has passed, so an
-- update can be heap-only (HOT) when the row's page has room for the new version: no index
-- entry added, none left dead. Pages written from now on keep 30 % free; older pages gain
-- room as their dead versions are pruned.
ALTER TABLE vcode_fraud_levels SET (fillfactor = 70);
