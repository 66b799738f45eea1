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
        candidate: Code,
        params: &IssueParams,
    ) -> Result<IssueOutcome, StoreError> {
        let policy = match params.policy {
            ResendPolicy::Reuse => "reuse",
            ResendPolicy::Rotate => "rotate",
        };
        let quota_token = QuotaToken::generate();
        let mut invocation = SCRIPTS.issue.prepare_invoke();
        invocation
            .key(&keys::issue(phone, purpose))
            .arg(candidate.expose())
            .arg(duration_ms(params.ttl))
            .arg(duration_ms(params.cooldown))
            .arg(policy)
            .arg(quota_token.0)
            .arg(rule_args(&params.phone_quota));
        let mut connection = self.connection.clone();
        let reply: Vec<Value> = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        parse_issue(&reply, quota_token).ok_or_else(|| protocol("issue", &reply))
    }

    async fn undo_issue(
        &self,
        phone: &Phone,
        purpose: &Purpose,
        undo: &IssueUndo,
    ) -> Result<bool, StoreError> {
        let mut invocation = SCRIPTS.undo_issue.prepare_invoke();
        invocation
            .key(&keys::issue(phone, purpose))
            .arg(undo.code.expose())
            .arg(undo.sent_at_ms)
            .arg(undo.deliveries)
            .arg(undo.quota_token.0);
        if let Some(previous) = &undo.previous {
            invocation
                .arg(previous.code.expose())
                .arg(previous.sent_at_ms)
                .arg(previous.expires_at_ms);
        }
        let mut connection = self.connection.clone();
        let undone: i64 = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        Ok(undone == 1)
    }

    async fn verify_code(
        &self,
        phone: &Phone,
        purpose: &Purpose,
        code: &Code,
        params: VerifyParams,
    ) -> Result<VerifyOutcome, StoreError> {
        let mut invocation = SCRIPTS.verify.prepare_invoke();
        invocation
            .key(&keys::verify(phone, purpose))
            .arg(code.expose())
            .arg(params.max_attempts)
            .arg(QuotaToken::generate().0)
            .arg(rule_args(params.phone_failures.as_slice()));
        let mut connection = self.connection.clone();
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
        let mut connection = self.connection.clone();
        let command = redis::cmd("HMGET")
            .arg(keys::code(phone, purpose))
            .arg(&["c", "a", "n"])
            .to_owned();
        let reply: (Option<String>, Option<u32>, Option<u32>) =
            self.bounded(command.query_async(&mut connection)).await?;
        Ok(match reply {
            (Some(code), failed_attempts, deliveries) => Some(PendingCode {
                code: Code::from_stored(code),
                failed_attempts: failed_attempts.unwrap_or(0),
                deliveries: deliveries.unwrap_or(0),
            }),
            (None, ..) => None,
        })
    }
}
