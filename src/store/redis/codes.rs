//! The code role of the Redis store: issue, undo, verify, inspect, each one atomic step.

use async_trait::async_trait;

use super::*;
use crate::store::CodeStore;

#[async_trait]
impl CodeStore for RedisStore {
    async fn issue_code(
        &self,
        phone: &Phone,
        purpose: &Purpose,
        candidate: CodeCandidate,
        params: &IssueParams,
        budgets: Budgets<'_>,
    ) -> Result<IssueOutcome, StoreError> {
        let policy = match params.policy {
            ResendPolicy::Reuse => "reuse",
            ResendPolicy::Rotate => "rotate",
        };
        let quota_token = QuotaToken::generate();
        let phone_rules = rule_args(&params.phone_quota);
        let mut invocation = SCRIPTS.issue.prepare_invoke();
        invocation
            .key(&keys::issue(phone, purpose))
            .arg(code_record(&candidate.digest, candidate.sealed.as_ref()))
            .arg(duration_ms(params.ttl))
            .arg(duration_ms(params.cooldown))
            .arg(policy)
            .arg(quota_token.0)
            .arg(self.give_up_at_ms())
            .arg(phone_rules.len())
            .arg(phone_rules)
            .arg(budgets.token.0);
        // The budgets' logs share no hash tag with the phone's: in this script on one node only.
        let one_node = self.connections.one_node();
        let in_script = if one_node { budgets.budgets } else { &[] };
        add_budgets(&mut invocation, in_script);
        let mut connection = self.connections.get();
        let reply: Vec<Value> = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        if int_at(&reply, 0) == Some(-2) {
            return Err(self.ran_too_late());
        }
        parse_issue(&reply, quota_token, in_script, one_node)
            .ok_or_else(|| protocol("issue", &reply))
    }

    async fn undo_issue(
        &self,
        phone: &Phone,
        purpose: &Purpose,
        undo: &IssueUndo,
    ) -> Result<bool, StoreError> {
        let mut command = whole_script(UNDO_ISSUE, &keys::issue(phone, purpose));
        command
            .arg(undo.digest.as_bytes())
            .arg(undo.sent_at_ms)
            .arg(undo.deliveries)
            .arg(undo.quota_token.0);
        if let Some(previous) = &undo.previous {
            command
                .arg(code_record(&previous.digest, previous.sealed.as_ref()))
                .arg(previous.sent_at_ms)
                .arg(previous.expires_at_ms);
        }
        let mut connection = self.connections.get();
        let undone: i64 = self.bounded(command.query_async(&mut connection)).await?;
        Ok(undone == 1)
    }

    async fn verify_code(
        &self,
        phone: &Phone,
        purpose: &Purpose,
        candidates: &[CodeDigest],
        client: std::net::IpAddr,
        params: VerifyParams,
    ) -> Result<VerifyOutcome, StoreError> {
        let phone_rules = rule_args(params.phone_failures.as_slice());
        let mut invocation = SCRIPTS.verify.prepare_invoke();
        invocation
            .key(&keys::verify(phone, purpose, client))
            .arg(params.max_attempts)
            .arg(QuotaToken::generate().0)
            .arg(phone_rules.len())
            .arg(phone_rules)
            .arg(rule_args(params.client_failures.as_slice()))
            .arg("|");
        for candidate in candidates {
            invocation.arg(candidate.as_bytes());
        }
        let mut connection = self.connections.get();
        let reply: Vec<Value> = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        parse_verify(&reply).ok_or_else(|| protocol("verify", &reply))
    }

    async fn pending_code(
        &self,
        phone: &Phone,
        purpose: &Purpose,
    ) -> Result<Option<PendingCode>, StoreError> {
        let mut connection = self.connections.get();
        let command = redis::cmd("HMGET")
            .arg(keys::code(phone, purpose))
            .arg(&["h", "a", "n"])
            .to_owned();
        type Fields = (Option<Vec<u8>>, Option<u32>, Option<u32>);
        let reply: Fields = self.bounded(command.query_async(&mut connection)).await?;
        Ok(match reply {
            (Some(record), failed_attempts, deliveries) => {
                let (digest, sealed) = split_code_record(&record)
                    .ok_or_else(|| StoreError::Protocol("code record".to_owned()))?;
                Some(PendingCode {
                    digest,
                    sealed,
                    // Fields at their default are not stored (issue.lua).
                    failed_attempts: failed_attempts.unwrap_or(0),
                    deliveries: deliveries.unwrap_or(1),
                })
            }
            (None, ..) => None,
        })
    }
}
