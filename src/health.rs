//! Readiness: the service can do its work only while its store answers (`/readyz`).

use std::sync::Arc;

use crate::store::{HealthCheck, StoreError};

pub struct Readiness {
    store: Arc<dyn HealthCheck>,
}

impl Readiness {
    pub fn new(store: Arc<dyn HealthCheck>) -> Self {
        Self { store }
    }

    pub async fn check(&self) -> Result<(), StoreError> {
        self.store.ping().await
    }
}
