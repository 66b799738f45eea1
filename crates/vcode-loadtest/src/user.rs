//! A virtual user: one phone, its SMS (read from the dev inbox, in delivery order) and its
//! logins, played scenario by scenario; each login's verifies are settled in its ledger.

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tokio::task::JoinHandle;
use vcode_wire::DevMessage;

use crate::client::{Client, SendAnswer, Timed, VerifyAnswer};
use crate::ledger::{Attempt, Ledger, Verdict};
use crate::options::Scenario;
use crate::progress::Live;
use crate::tally::{ScenarioFigures, Tally};

/// How hard users press: sends per resend storm, simultaneous submissions per double submit.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub taps: usize,
    pub submits: usize,
}

pub struct VirtualUser {
    phone: String,
    rng: StdRng,
    client: Arc<Client>,
    live: Arc<Live>,
    shape: Shape,
    ledger: Ledger,
    /// The `verification_id` of the newest delivered send: what verifies the newest SMS.
    verification_id: Option<String>,
    /// The last SMS read; everything after it in the outbox is new.
    last_seen: Option<DevMessage>,
    tally: Tally,
}

impl VirtualUser {
    pub fn new(
        phone: String,
        seed: u64,
        client: Arc<Client>,
        live: Arc<Live>,
        shape: Shape,
        tally: Tally,
    ) -> Self {
        Self {
            phone,
            rng: StdRng::seed_from_u64(seed),
            client,
            live,
            shape,
            ledger: Ledger::default(),
            verification_id: None,
            last_seen: None,
            tally,
        }
    }

    /// Reads the outbox once so that SMS left from an earlier run are not taken as new.
    pub async fn open_inbox(&mut self) {
        if let Some(messages) = self.outbox().await {
            self.last_seen = messages.last().cloned();
        }
    }

    /// `mixed` picks one of the concrete scenarios for each login.
    fn pick(&mut self, scenario: Scenario) -> Scenario {
        match scenario {
            Scenario::Mixed => {
                Scenario::CONCRETE[self.rng.random_range(0..Scenario::CONCRETE.len())]
            }
            concrete => concrete,
        }
    }

    /// Plays one login and settles its verifies.
    pub async fn login(&mut self, scenario: Scenario) {
        let scenario = self.pick(scenario);
        let sms_before = self.tally.sms_sent;
        let attempts = match scenario {
            Scenario::ResendStorm => self.resend_storm().await,
            Scenario::LoginVsResend => self.login_vs_resend().await,
            // `pick` never returns `Mixed`, and the runner plays no `Pumping` logins.
            Scenario::DoubleSubmit | Scenario::Mixed | Scenario::Pumping => {
                self.double_submit().await
            }
        };
        let mut figures = ScenarioFigures {
            logins: 1,
            sms_sent: self.tally.sms_sent - sms_before,
            ..ScenarioFigures::default()
        };
        match attempts {
            None => figures.logins_without_code = 1,
            Some(attempts) => {
                let findings = self.ledger.settle(&attempts);
                self.live.findings(&findings);
                self.tally.findings += findings;
                figures.verified = findings.verified;
                figures.false_rejections = findings.false_rejections;
                figures.double_accepts = findings.double_accepts;
            }
        }
        *self.tally.scenarios.entry(scenario).or_default() += figures;
    }

    pub fn into_tally(self) -> Tally {
        self.tally
    }

    /// Taps "send" several times at once, then types the first SMS that arrived.
    async fn resend_storm(&mut self) -> Option<Vec<Attempt>> {
        let taps: Vec<_> = (0..self.shape.taps).map(|_| self.spawn_send()).collect();
        for tap in taps {
            if let Some(send) = joined(tap).await {
                self.note_send(&send);
            }
        }
        let code = self.first_new_code().await?;
        let verify = self.client.verify(self.id(), &self.phone, &code).await;
        Some(self.note_verify(&code, &verify).into_iter().collect())
    }

    /// Sends once; then device A verifies that code while device B asks for a new one at the
    /// same moment and, if an SMS comes, types it.
    async fn login_vs_resend(&mut self) -> Option<Vec<Attempt>> {
        let send = self.client.send(&self.phone).await;
        self.note_send(&send);
        let first = self.first_new_code().await?;
        let device_a = self.spawn_verify(&first);

        let resend = self.client.send(&self.phone).await;
        self.note_send(&resend);
        let mut attempts = Vec::new();
        if matches!(resend.answer, SendAnswer::Delivered(_)) {
            // Device B types the newest SMS.
            if let Some(second) = self.read_new_sms().await.pop() {
                let verify = self
                    .client
                    .verify(self.id(), &self.phone, &second.code)
                    .await;
                attempts.extend(self.note_verify(&second.code, &verify));
            }
        }
        if let Some(verify) = joined(device_a).await {
            attempts.extend(self.note_verify(&first, &verify));
        }
        Some(attempts)
    }

    /// Sends once, then submits the code several times at once.
    async fn double_submit(&mut self) -> Option<Vec<Attempt>> {
        let send = self.client.send(&self.phone).await;
        self.note_send(&send);
        let code = self.first_new_code().await?;
        let submits: Vec<_> = (0..self.shape.submits)
            .map(|_| self.spawn_verify(&code))
            .collect();
        let mut attempts = Vec::new();
        for submit in submits {
            if let Some(verify) = joined(submit).await {
                attempts.extend(self.note_verify(&code, &verify));
            }
        }
        Some(attempts)
    }

    fn spawn_send(&self) -> JoinHandle<Timed<SendAnswer>> {
        let (client, phone) = (self.client.clone(), self.phone.clone());
        tokio::spawn(async move { client.send(&phone).await })
    }

    /// Verifies `code` under the id of the newest delivered send (device A keeps the id its
    /// own send answered, as a page would).
    fn spawn_verify(&self, code: &str) -> JoinHandle<Timed<VerifyAnswer>> {
        let (client, phone, code) = (self.client.clone(), self.phone.clone(), code.to_owned());
        let id = self.verification_id.clone();
        tokio::spawn(async move { client.verify(id.as_deref(), &phone, &code).await })
    }

    fn id(&self) -> Option<&str> {
        self.verification_id.as_deref()
    }

    /// The code of the first SMS that arrived since the last read; without one, the newest
    /// unused code the user already has (as a user with an SMS still on screen would).
    async fn first_new_code(&mut self) -> Option<String> {
        let new = self.read_new_sms().await;
        match new.into_iter().next() {
            Some(first) => Some(first.code),
            None => self.ledger.latest_unused().map(str::to_owned),
        }
    }

    /// SMS that arrived since the last read, oldest first; each goes into the ledger.
    async fn read_new_sms(&mut self) -> Vec<DevMessage> {
        let Some(messages) = self.outbox().await else {
            return Vec::new();
        };
        let new = after_last_seen(messages, self.last_seen.as_ref());
        if let Some(last) = new.last() {
            self.last_seen = Some(last.clone());
        }
        for message in &new {
            self.ledger.delivered(&message.code, message.sent_at_ms);
        }
        self.tally.sms_sent += new.len() as u64;
        new
    }

    async fn outbox(&mut self) -> Option<Vec<DevMessage>> {
        self.tally.outbox_reads += 1;
        match self.client.outbox(&self.phone).await {
            Ok(messages) => Some(messages),
            Err(error) => {
                self.tally.failure(&error.to_string());
                None
            }
        }
    }

    /// Counts a send; a delivery's answer tells the ledger how long codes live.
    fn note_send(&mut self, send: &Timed<SendAnswer>) {
        self.live.request();
        self.tally.request(send);
        self.tally.send(&send.answer);
        if let SendAnswer::Delivered(sent) = &send.answer {
            self.ledger
                .code_ttl_announced(Duration::from_secs(sent.expires_in));
            self.verification_id = Some(sent.verification_id.clone());
        }
    }

    /// Counts a verify of `code`; the ledger gets it if the service compared the code.
    fn note_verify(&mut self, code: &str, verify: &Timed<VerifyAnswer>) -> Option<Attempt> {
        self.live.request();
        self.tally.request(verify);
        let verdict = match &verify.answer {
            VerifyAnswer::Accepted => {
                self.tally.verifies.accepted += 1;
                Verdict::Accepted
            }
            VerifyAnswer::Refused(refusal) => {
                self.tally.verifies.rejected += 1;
                Verdict::Refused(*refusal)
            }
            VerifyAnswer::Failed(what) => {
                self.tally.verifies.failed += 1;
                self.tally.failure(what);
                return None;
            }
        };
        Some(Attempt {
            code: code.to_owned(),
            verdict,
            started: verify.started,
            started_ms: verify.started_ms,
            ended: verify.ended,
            ended_ms: verify.ended_ms,
        })
    }
}

/// The messages after `last_seen` (all of them if it is gone, e.g. trimmed from the outbox).
fn after_last_seen(
    mut messages: Vec<DevMessage>,
    last_seen: Option<&DevMessage>,
) -> Vec<DevMessage> {
    let start = last_seen
        .and_then(|seen| messages.iter().rposition(|m| m == seen))
        .map_or(0, |index| index + 1);
    messages.split_off(start.min(messages.len()))
}

/// A spawned call's result; a panic in it is re-raised here.
async fn joined<T>(handle: JoinHandle<T>) -> Option<T> {
    match handle.await {
        Ok(value) => Some(value),
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        // Cancelled: the runtime is shutting down.
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sms(code: &str, sent_at_ms: u64) -> DevMessage {
        DevMessage {
            phone: "+8613800138000".into(),
            purpose: "login".into(),
            code: code.into(),
            sent_at_ms,
        }
    }

    #[test]
    fn new_sms_are_those_after_the_last_one_read() {
        let all = vec![sms("1", 1), sms("2", 2), sms("3", 3)];
        assert_eq!(after_last_seen(all.clone(), None), all);
        assert_eq!(
            after_last_seen(all.clone(), Some(&sms("2", 2))),
            [sms("3", 3)]
        );
        assert!(after_last_seen(all.clone(), Some(&sms("3", 3))).is_empty());
        // Trimmed away: everything left is new.
        assert_eq!(after_last_seen(all.clone(), Some(&sms("0", 0))), all);
    }
}
