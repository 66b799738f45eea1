//! The embedded store's dev inbox role: the dev inbox (dev mode only).

use async_trait::async_trait;

use super::*;
use crate::store::DevInboxStore;

#[async_trait]
impl DevInboxStore for MemoryStore {
    async fn keep_dev_message(&self, message: &DevMessage) -> Result<(), StoreError> {
        let expires_at_ms = self.now_ms().saturating_add(duration_ms(DEV_INBOX_TTL));
        let mut inboxes = self.dev_inboxes.lock(&message.phone);
        let inbox = inboxes.entry(message.phone.as_str().into()).or_default();
        if inbox.messages.len() == DEV_INBOX_CAPACITY {
            inbox.messages.pop_front();
        }
        inbox.messages.push_back(message.clone());
        inbox.expires_at_ms = expires_at_ms;
        Ok(())
    }

    async fn dev_messages(&self, destination: &Destination) -> Result<Vec<DevMessage>, StoreError> {
        let now = self.now_ms();
        Ok(self
            .dev_inboxes
            .lock(destination.key())
            .get(destination.key())
            .filter(|inbox| inbox.expires_at_ms > now)
            .map(|inbox| inbox.messages.iter().cloned().collect())
            .unwrap_or_default())
    }
}
