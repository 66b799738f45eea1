//! The health role: whether the store answers (for `/readyz`).

use async_trait::async_trait;

use super::StoreError;

/// Whether the store answers (for `/readyz`).
#[async_trait]
pub trait HealthCheck: Send + Sync + 'static {
    async fn ping(&self) -> Result<(), StoreError>;
}
