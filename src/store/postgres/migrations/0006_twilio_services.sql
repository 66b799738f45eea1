-- vcode's PostgreSQL store, version 6: the Twilio-compatible API's records (src/twilio_compat).
-- Each write is one statement, a compare-and-set on the row's revision (1 when created, one
-- more at each write). The codes themselves stay in vcode_codes and vcode_verifications.

-- Each account's Services; another account's is not found.
CREATE TABLE vcode_twilio_services (
  account_sid text NOT NULL,
  sid text NOT NULL,
  revision bigint NOT NULL,
  body text NOT NULL,
  PRIMARY KEY (account_sid, sid)
);

-- The send log of one Service's verification of one phone, while it lives (the sweep removes
-- it after; an expired row counts as absent).
CREATE TABLE vcode_twilio_sends (
  service_sid text NOT NULL,
  phone text NOT NULL,
  revision bigint NOT NULL,
  body text NOT NULL,
  expires_at_ms bigint NOT NULL,
  PRIMARY KEY (service_sid, phone)
);
CREATE INDEX vcode_twilio_sends_expiry ON vcode_twilio_sends (expires_at_ms);
