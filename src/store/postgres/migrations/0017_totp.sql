-- vcode's PostgreSQL store, version 17: authenticator-app (TOTP) entities, factors and
-- challenges (issue 40). One row per record: its scope (a Twilio Service's SID, or
-- `key:<API key name>`), the identity, its SID ('' for the identity's entity), its revision
-- (every write is a compare-and-set on it) and its body, the JSON the TOTP use cases own (a
-- factor's secret in it sealed with the keyring, never in clear). Kept until deleted.
CREATE TABLE IF NOT EXISTS vcode_totp_records (
  scope text NOT NULL,
  identity text NOT NULL,
  sid text NOT NULL,
  revision bigint NOT NULL,
  body text NOT NULL,
  PRIMARY KEY (scope, identity, sid)
);
