-- vcode's PostgreSQL store, version 10: the fraud guard's sends to one prefix no longer queue
-- behind each other (issue 25 point 7). Until now every send of a prefix took the prefix's
-- advisory lock and updated the one row of its prefix, its country and the service for the
-- minute, and held both until its transaction committed (an fsync with the durable defaults):
-- one commit at a time, about 100 sends a second to one prefix against 1,300-1,800 without the
-- guard.
--
-- Now each minute of a scope is counted in up to 16 rows (`shard`), and a send writes the
-- shard its token names (the same in every scope, so that two sends meet on at most one
-- shard's rows); its release and its conversion write the same shard (the attribution keeps
-- the token). Reads sum the shards. Counting stays exact: every change is one atomic
-- increment of one row. The prefix's lock is gone from the send and its release: the block is
-- read in the send's statement, so a block recorded (committed) before a send's step refuses
-- it, on every instance; blocks still serialise on the lock among themselves.

ALTER TABLE vcode_fraud_counts ADD COLUMN shard smallint NOT NULL DEFAULT 0;
ALTER TABLE vcode_fraud_counts DROP CONSTRAINT vcode_fraud_counts_pkey;
ALTER TABLE vcode_fraud_counts ADD PRIMARY KEY (scope, minute, shard);

DROP FUNCTION IF EXISTS vcode_fraud_add(text, bigint, bigint, bigint, bigint, bigint);

-- Attributions keep nothing new: the token they hold already names the shard.
