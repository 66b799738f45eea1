//! Readiness: the service can do its work only while its store answers and it is not shutting
//! down (`/readyz`). On SIGTERM it drains: `/readyz` answers 503 at once, so that a load
//! balancer stops sending new requests while the ones in flight finish.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::store::{HealthCheck, StoreError};

pub struct Readiness {
    store: Arc<dyn HealthCheck>,
    draining: AtomicBool,
}

impl Readiness {
    pub fn new(store: Arc<dyn HealthCheck>) -> Self {
        Self {
            store,
            draining: AtomicBool::new(false),
        }
    }

    /// From now on not ready: the process is shutting down.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    pub async fn check(&self) -> Result<(), StoreError> {
        if self.draining.load(Ordering::Relaxed) {
            return Err(StoreError::Unavailable("shutting down".to_owned()));
        }
        self.store.ping().await
    }
}
