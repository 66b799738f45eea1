//! The code role of the Redis store: issue, undo, verify, inspect, each one atomic step (on one
//! node the issue with the fraud guard's step of the send in it: its prefix's block read).

use async_trait::async_trait;

use super::*;
use crate::store::{
    Admission, Candidates, CodeStore, GuardStep, GuardedIssue, IssueKind, VerifyStep,
};

/// How many bytes of its code's digest bind a verification (`g`, issue.lua): enough to tell
/// one phone's codes apart (a pending verification within 300 bytes, issue 42); older
/// instances compare all of them.
const BINDING_BYTES: usize = 8;

/// A delivery's reply, packed by `issue.lua` (`delivered`) in one string, as its values: each
/// a tag and its bytes, `i` and a little-endian 8-byte integer or `s` and a little-endian
/// 4-byte length and the string.
fn unpack_delivery(mut packed: &[u8]) -> Option<Vec<Value>> {
    let mut values = Vec::with_capacity(4);
    while let Some((&tag, rest)) = packed.split_first() {
        let value;
        (value, packed) = match tag {
            b'i' => {
                let (number, rest) = rest.split_first_chunk::<8>()?;
                (Value::Int(i64::from_le_bytes(*number)), rest)
            }
            b's' => {
                let (length, rest) = rest.split_first_chunk::<4>()?;
                let length = usize::try_from(u32::from_le_bytes(*length)).ok()?;
                let (bytes, rest) = rest.split_at_checked(length)?;
                (Value::BulkString(bytes.to_vec()), rest)
            }
            _ => return None,
        };
        values.push(value);
    }
    Some(values)
}

impl RedisStore {
    /// `issue.lua`, with the guard's step on one node when there is one.
    pub(super) async fn run_issue(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        candidate: CodeCandidate,
        params: &IssueParams,
        budgets: Budgets<'_>,
        guard: Option<GuardStep<'_>>,
    ) -> Result<GuardedIssue, StoreError> {
        let policy = match params.policy {
            ResendPolicy::Reuse => "reuse",
            ResendPolicy::Rotate => "rotate",
        };
        let quota_token = QuotaToken::generate();
        let phone_rules = rule_args(&params.destination_quota);
        // The candidate goes into the outcome; a Cluster's refused send still needs its id.
        let id = &candidate.verification.clone();
        let target = encode_target(destination, purpose);
        // An id that says where it leads needs no target key (`VCODE_REDIS_OLDER_INSTANCES`:
        // every id gets one, for instances of builds that read nothing else).
        let older = self.older_instances;
        let indexed = !candidate.says_where || older;
        // The budgets' logs and the id's target share no hash tag with the phone's: in this
        // script on one node only.
        let one_node = self.connections.one_node();
        let guard = guard.filter(|_| one_node);
        let mut invocation = Invocation::of(&SCRIPTS.issue);
        invocation
            .key(&keys::issue(destination, purpose, id, older))
            .arg(code_record(&candidate.digest, candidate.sealed.as_ref()))
            .arg(duration_ms(params.ttl))
            .arg(duration_ms(params.cooldown))
            .arg(policy)
            .arg(quota_token.0)
            .arg(self.give_up_at_ms())
            .arg(duration_ms(params.retention))
            .arg(if one_node && indexed {
                target.as_str()
            } else {
                ""
            })
            .arg(phone_rules.len())
            .arg(match &guard {
                None => 0u8,
                Some(GuardStep { levels: None, .. }) => 1,
                Some(_) => 2,
            })
            .arg(if params.names_latest_send {
                id.as_str()
            } else {
                ""
            })
            .arg(if older {
                CodeDigest::LEN
            } else {
                BINDING_BYTES
            })
            .arg(phone_rules)
            .arg(budgets.token.0);
        if one_node && indexed {
            invocation.key(keys::verification_target(id));
        }
        let in_script = if one_node { budgets.budgets } else { &[] };
        add_budgets(&mut invocation, in_script);
        if let Some(guard) = &guard {
            fraud::add_guard(&mut invocation, guard);
            if let Some(levels) = &guard.levels {
                levels::add_levels(&mut invocation, levels);
            }
        }
        // A first start's send log, created with the code (under the phone's hash tag).
        if let Some(log) = &candidate.send_log {
            twilio::add_send_log(&mut invocation, destination, log);
        }
        self.add_outbox(&mut invocation, &EventSubject::of(id, destination, purpose));
        // On a Cluster this process's dispatcher looks at the slot when the expiry timer falls
        // due (if the send issues; a hint too many costs one claim).
        self.hint_outbox_after(destination.key(), params.ttl);
        let mut connection = self.connections.get();
        let started = std::time::Instant::now();
        if !one_node && indexed {
            // On a Cluster the target lives on its id's slot: written first, so that a failure
            // leaves nothing issued, and within the same command timeout as the issue (its
            // "not after" is already in the invocation): a send never waits longer for the
            // store than on one node.
            let keep = duration_ms(params.ttl) + duration_ms(params.retention);
            let command = redis::cmd("SET")
                .arg(keys::verification_target(id))
                .arg(&target)
                .arg("PX")
                .arg(keep)
                .to_owned();
            let () = self.bounded(command.query_async(&mut connection)).await?;
        }
        let left =
            super::super::deadline::bound(self.command_timeout).saturating_sub(started.elapsed());
        let reply: Value = self
            .bounded_for(left, invocation.invoke_async(&mut connection))
            .await?;
        let reply = match reply {
            Value::Array(values) => values,
            Value::BulkString(packed) => unpack_delivery(&packed)
                .ok_or_else(|| protocol("issue", &[Value::BulkString(packed)]))?,
            other => return Err(protocol("issue", &[other])),
        };
        match int_at(&reply, 0) {
            Some(-2) => return Err(self.ran_too_late()),
            Some(-4) => return Ok(GuardedIssue::Refused(fraud::refusal_at(&reply, 1)?)),
            _ => {}
        }
        let outcome = parse_issue(&reply, candidate, quota_token, in_script, one_node)
            .ok_or_else(|| protocol("issue", &reply))?;
        if !one_node && indexed && !matches!(outcome, IssueOutcome::Send(_)) {
            // A refused send's id is never handed out: its target goes, off the send's path.
            let (store, key) = (self.clone(), keys::verification_target(id));
            tokio::spawn(async move {
                let mut connection = store.connections.get();
                let command = redis::cmd("DEL").arg(key).to_owned();
                let _: Result<i64, StoreError> =
                    store.bounded(command.query_async(&mut connection)).await;
            });
        }
        let Some(guard) = guard else {
            return Ok(GuardedIssue::Issued {
                outcome,
                admission: None,
            });
        };
        // The prefix's block record follows a delivery's fields.
        let admission = match &outcome {
            IssueOutcome::Send(delivery) => {
                let at = match delivery.kind {
                    IssueKind::Created => CREATED_FIELDS,
                    _ => RESENT_FIELDS,
                };
                let mut admission = fraud::admitted_at(&reply, at)?;
                // The levels' records follow the block record.
                if guard.levels.is_some()
                    && let Admission::Admitted { levels, .. } = &mut admission
                {
                    *levels = Some(levels::records_at(&reply, at + 1)?);
                }
                Some(admission)
            }
            _ => None,
        };
        Ok(GuardedIssue::Issued { outcome, admission })
    }

    /// `verify_id.lua` (by id) or `verify.lua` (by destination: the code's latest send's
    /// verification and its events found in the script). Both take the same arguments (the
    /// limits, a quota token, the candidate digests after a `|`, verify.lua's verification
    /// prefix first) and give the same reply.
    pub(super) async fn run_verify(
        &self,
        step: VerifyStep<'_>,
    ) -> Result<VerifyOutcome, StoreError> {
        let VerifyStep {
            destination,
            purpose,
            id,
            candidates,
            client,
            params,
        } = step;
        let phone_rules = rule_args(params.destination_failures.as_slice());
        let (mut invocation, events, name);
        match id {
            Some(id) => {
                invocation = Invocation::of(&SCRIPTS.verify_id);
                invocation.key(&keys::verify_id(destination, purpose, client, id));
                events = EventSubject::of(id, destination, purpose);
                name = "verify_id";
            }
            None => {
                invocation = Invocation::of(&SCRIPTS.verify);
                invocation.key(&keys::verify(destination, purpose, client));
                // The script finds the subject (the code's latest send).
                events = EventSubject {
                    tag: destination.key(),
                    subject: "",
                    phone_e164: destination.key(),
                    purpose: purpose.as_str(),
                    detail: "",
                };
                name = "verify";
            }
        }
        invocation
            .arg(params.max_attempts)
            .arg(QuotaToken::generate().0)
            .arg(phone_rules.len())
            .arg(phone_rules)
            .arg(rule_args(params.client_failures.as_slice()))
            .arg("|");
        if id.is_none() {
            invocation.arg(keys::verification_prefix(destination.key()));
        }
        for candidate in candidates.digests() {
            invocation.arg(candidate.as_bytes());
        }
        // The outbox's keys and arguments end the invocation (events.lua).
        self.add_outbox(&mut invocation, &events);
        let mut connection = self.connections.get();
        let reply: Vec<Value> = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        parse_verify(&reply).ok_or_else(|| protocol(name, &reply))
    }
}

#[async_trait]
impl CodeStore for RedisStore {
    /// `issue.lua` creates it, as its companion record.
    fn writes_send_logs(&self) -> bool {
        true
    }

    async fn issue_code(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        candidate: CodeCandidate,
        params: &IssueParams,
        budgets: Budgets<'_>,
    ) -> Result<IssueOutcome, StoreError> {
        match self
            .run_issue(destination, purpose, candidate, params, budgets, None)
            .await?
        {
            GuardedIssue::Issued { outcome, .. } => Ok(outcome),
            GuardedIssue::Refused(_) => Err(StoreError::Protocol(
                "issue: a guard's reply unasked".to_owned(),
            )),
        }
    }

    async fn undo_issue(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        undo: &IssueUndo,
    ) -> Result<bool, StoreError> {
        let events = self.outbox_args(&EventSubject::of(&undo.verification, destination, purpose));
        let older = self.older_instances;
        let mut keys = keys::issue(destination, purpose, &undo.verification, older).to_vec();
        if let Some((outbox, _)) = &events {
            keys.extend_from_slice(outbox);
        }
        let mut command = whole_script(&UNDO_ISSUE, &keys);
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
        if let Some((_, args)) = &events {
            command.arg(&args[..]);
        }
        let mut connection = self.connections.get();
        let undone: i64 = self.bounded(command.query_async(&mut connection)).await?;
        Ok(undone == 1)
    }

    /// Straight to the script: no second step to build from the first.
    async fn verify(&self, step: VerifyStep<'_>) -> Result<VerifyOutcome, StoreError> {
        self.run_verify(step).await
    }

    async fn verify_code(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        candidates: &[CodeDigest],
        client: crate::domain::Client,
        params: VerifyParams,
    ) -> Result<VerifyOutcome, StoreError> {
        let step = VerifyStep {
            destination,
            purpose,
            id: None,
            candidates: &Candidates::known(candidates),
            client,
            params,
        };
        self.run_verify(step).await
    }

    async fn pending_code(
        &self,
        destination: &Destination,
        purpose: &Purpose,
    ) -> Result<Option<PendingCode>, StoreError> {
        let mut connection = self.connections.get();
        let command = redis::cmd("HMGET")
            .arg(keys::code(destination, purpose))
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

    async fn locate_verification(
        &self,
        id: &VerificationId,
    ) -> Result<Option<VerificationTarget>, StoreError> {
        let mut connection = self.connections.get();
        let command = redis::cmd("GET")
            .arg(keys::verification_target(id))
            .to_owned();
        let raw: Option<String> = self.bounded(command.query_async(&mut connection)).await?;
        raw.map(|raw| {
            decode_target(&raw)
                .ok_or_else(|| StoreError::Protocol(format!("verification target {raw:?}")))
        })
        .transpose()
    }

    async fn verify_by_id(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        id: &VerificationId,
        candidates: &[CodeDigest],
        client: crate::domain::Client,
        params: VerifyParams,
    ) -> Result<VerifyOutcome, StoreError> {
        let step = VerifyStep {
            destination,
            purpose,
            id: Some(id),
            candidates: &Candidates::known(candidates),
            client,
            params,
        };
        self.run_verify(step).await
    }

    async fn verification(
        &self,
        id: &VerificationId,
        located: Option<&VerificationTarget>,
    ) -> Result<Option<VerificationRecord>, StoreError> {
        self.run_verification(id, located, "read").await
    }

    async fn cancel_verification(
        &self,
        id: &VerificationId,
        located: Option<&VerificationTarget>,
    ) -> Result<Option<VerificationRecord>, StoreError> {
        self.run_verification(id, located, "cancel").await
    }

    async fn mark_unconfirmed(
        &self,
        destination: &Destination,
        id: &VerificationId,
    ) -> Result<(), StoreError> {
        let mut invocation = Invocation::of(&SCRIPTS.verification);
        // The code key only matters to a cancel; a hash of the destination's tag without an `h`
        // field stands in for it: the verification itself. (The send log stood in before, and
        // the script's `HGET` on that sorted set failed with WRONGTYPE whenever the
        // destination's quota was on: the unconfirmed delivery was never recorded.)
        let names = keys::verification_names(destination.key(), id);
        invocation.key(&names[0]).key(&names).arg("unconfirmed");
        let mut connection = self.connections.get();
        let _: Vec<Value> = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        Ok(())
    }
}

impl RedisStore {
    /// `verification.lua` (`read` or `cancel`) on the verification `id` leads to (`located`,
    /// or as its target key says).
    async fn run_verification(
        &self,
        id: &VerificationId,
        located: Option<&VerificationTarget>,
        operation: &str,
    ) -> Result<Option<VerificationRecord>, StoreError> {
        let target = match located {
            Some(target) => target.clone(),
            None => match self.locate_verification(id).await? {
                Some(target) => target,
                None => return Ok(None),
            },
        };
        let mut invocation = Invocation::of(&SCRIPTS.verification);
        invocation
            .key(keys::code_of(&target.phone_e164, &target.purpose))
            .key(&keys::verification_names(&target.phone_e164, id))
            .arg(operation);
        if operation == "cancel" {
            let events = EventSubject {
                tag: &target.phone_e164,
                subject: id.as_str(),
                phone_e164: &target.phone_e164,
                purpose: &target.purpose,
                detail: "",
            };
            self.add_outbox(&mut invocation, &events);
        }
        let mut connection = self.connections.get();
        let reply: Vec<Value> = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        parse_verification(&reply, target).ok_or_else(|| protocol("verification", &reply))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_delivery_unpacks_to_its_values_and_a_cut_one_to_none() {
        let mut packed = b"i".to_vec();
        packed.extend_from_slice(&1_765_000_000_123i64.to_le_bytes());
        packed.push(b's');
        packed.extend_from_slice(&0u32.to_le_bytes());
        packed.push(b's');
        packed.extend_from_slice(&3u32.to_le_bytes());
        packed.extend_from_slice(b"a\0b");
        assert_eq!(
            unpack_delivery(&packed),
            Some(vec![
                Value::Int(1_765_000_000_123),
                Value::BulkString(Vec::new()),
                Value::BulkString(b"a\0b".to_vec()),
            ])
        );
        assert_eq!(unpack_delivery(&packed[..packed.len() - 1]), None);
        assert_eq!(unpack_delivery(b"x"), None);
    }
}
