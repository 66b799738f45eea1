-- Version 10: a verify by phone ends the verification of its code's latest send, as a verify
-- under that id would: approved on a match; on a miss, the code's failed attempts (or one more
-- than the id's own, if a verify under the id counted more), and spent with the code at the
-- limit. The verification row's trigger (0004) then writes its events in this same
-- transaction. Only a verification still pending takes it (a canceled or spent one is left as
-- it is). The index finds a phone's verifications of a purpose, newest first.
CREATE INDEX vcode_verifications_target ON vcode_verifications (phone, purpose, created_at_ms);
