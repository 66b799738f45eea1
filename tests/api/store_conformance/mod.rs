//! One suite, every store: the embedded store, the Redis store (one node, Cluster, Sentinel) and
//! the PostgreSQL store must behave the same. This file opens a store under test and holds the steps the tests share;
//! the codes, the captchas and the Redis key layout have a file each.

mod captchas;
mod email_destinations;
mod factors;
mod fraud;
mod fused;
mod levels;
mod pending_codes;
mod receipts;
mod redis_layout;
mod safe_list;
mod twilio;
mod verifications;

use std::sync::Arc;
use std::time::Duration;

use vcode::domain::{Code, CodeLength, Destination, Purpose, VerificationId};
use vcode::store::redis::{RedisSettings, RedisTopology};
use vcode::store::{
    Budgets, DevMessage, IssueKind, IssueOutcome, IssueParams, IssueUndo, MemoryStore, PendingCode,
    RedisStore, ResendPolicy, Store, VerifyOutcome, VerifyParams,
};

use crate::support::{Backend, Deployment, RedisServer, codes, phone, random_phone};

/// A backend of the test's own, with the servers it runs on (they die with it).
pub struct StoreUnderTest {
    pub store: Arc<dyn Store>,
    pub redis: Option<RedisServer>,
    _deployment: Option<Deployment>,
}

pub fn open(backend: Backend) -> StoreUnderTest {
    match backend {
        Backend::Memory => StoreUnderTest {
            store: MemoryStore::spawn(Duration::from_millis(100)),
            redis: None,
            _deployment: None,
        },
        Backend::Redis => {
            let server = RedisServer::start();
            let store = RedisStore::connect(&RedisSettings {
                topology: RedisTopology::Single { url: server.url() },
                connect_timeout: Duration::from_millis(500),
                command_timeout: Duration::from_millis(500),
                ca_file: None,
                older_instances: false,
            })
            .expect("valid settings");
            StoreUnderTest {
                store: Arc::new(store),
                redis: Some(server),
                _deployment: None,
            }
        }
        Backend::Postgres => StoreUnderTest {
            store: Arc::new(crate::postgres::open_store()),
            redis: None,
            _deployment: None,
        },
        Backend::Cluster | Backend::Sentinel => {
            let deployment = Deployment::start(backend).expect("a Cluster or Sentinel backend");
            let store = RedisStore::connect(&deployment.settings()).expect("valid settings");
            StoreUnderTest {
                store: Arc::new(store),
                redis: None,
                _deployment: Some(deployment),
            }
        }
    }
}

const MINUTE: Duration = Duration::from_secs(60);

fn params(ttl: Duration, cooldown: Duration, policy: ResendPolicy) -> IssueParams {
    IssueParams {
        ttl,
        retention: MINUTE,
        cooldown,
        policy,
        destination_quota: Vec::new(),
        // As where verifies by phone may come: the Redis layout test reads the code's `v`.
        names_latest_send: true,
    }
}

fn five_attempts() -> VerifyParams {
    VerifyParams {
        max_attempts: 5,
        destination_failures: None,
        client_failures: None,
    }
}

fn standard() -> IssueParams {
    params(Duration::from_secs(300), MINUTE, ResendPolicy::Reuse)
}

fn new_code() -> Code {
    Code::generate(CodeLength::default())
}

fn login() -> Purpose {
    Purpose::default()
}

fn fresh_phone() -> Destination {
    phone(&random_phone())
}

/// An issue of a new code, as a use case would make it: the outcome, and the code it delivers
/// if it delivers one.
async fn issue(
    store: &dyn Store,
    phone: &Destination,
    purpose: &Purpose,
    p: &IssueParams,
) -> (IssueOutcome, Option<Code>) {
    let (outcome, sent, _) = issue_with_id(store, phone, purpose, p).await;
    (outcome, sent)
}

/// `issue`, and the id the send answers.
async fn issue_with_id(
    store: &dyn Store,
    phone: &Destination,
    purpose: &Purpose,
    p: &IssueParams,
) -> (IssueOutcome, Option<Code>, VerificationId) {
    let code = new_code();
    let candidate = codes::candidate(phone, purpose, &code);
    let id = candidate.verification.clone();
    let outcome = store
        .issue_code(phone, purpose, candidate, p, Budgets::none())
        .await
        .expect("store answers");
    let sent = match &outcome {
        IssueOutcome::Send(delivery) => Some(codes::delivered(phone, purpose, delivery, &code)),
        _ => None,
    };
    (outcome, sent, id)
}

/// A delivery, the code it sends and the id it answers.
struct Delivered {
    code: Code,
    kind: IssueKind,
    undo: IssueUndo,
    id: VerificationId,
}

async fn deliver_for(
    store: &dyn Store,
    phone: &Destination,
    purpose: &Purpose,
    p: &IssueParams,
) -> Delivered {
    match issue_with_id(store, phone, purpose, p).await {
        (IssueOutcome::Send(delivery), Some(code), id) => Delivered {
            code,
            kind: delivery.kind,
            undo: delivery.undo,
            id,
        },
        (other, ..) => panic!("expected a delivery, got {other:?}"),
    }
}

async fn deliver(store: &dyn Store, phone: &Destination, p: &IssueParams) -> Delivered {
    deliver_for(store, phone, &login(), p).await
}

async fn verify_for(
    store: &dyn Store,
    phone: &Destination,
    purpose: &Purpose,
    code: &Code,
) -> VerifyOutcome {
    store
        .verify_code(
            phone,
            purpose,
            &codes::digests(phone, purpose, code),
            codes::CLIENT,
            five_attempts(),
        )
        .await
        .expect("store answers")
}

async fn verify(store: &dyn Store, phone: &Destination, code: &Code) -> VerifyOutcome {
    verify_for(store, phone, &login(), code).await
}

/// The pending code of (phone, login), opened, with its counters.
async fn pending_of(
    store: &dyn Store,
    phone: &Destination,
    purpose: &Purpose,
) -> Option<(Code, PendingCode)> {
    let pending = store
        .pending_code(phone, purpose)
        .await
        .expect("store answers")?;
    Some((codes::pending(phone, purpose, &pending), pending))
}

fn wrong(code: &Code) -> Code {
    let digits: String = code
        .expose()
        .bytes()
        .map(|b| char::from(b'0' + (b - b'0' + 1) % 10))
        .collect();
    Code::parse(&digits, CodeLength::default()).expect("six digits")
}
