//! Store steps of one request that share one timeout: a send's fraud-guard step and its issue
//! are two calls to two roles (on a Cluster, two slots), and a store that stalls between them
//! (a frozen primary) must not make a failing send wait for it twice. The send marks when its
//! first step began (`from`); the step that shares the timeout runs in `shared`, where every
//! backend bounds its calls by what is left of one timeout since then (`bound`). Outside both,
//! `bound` is the full timeout.

use std::future::Future;
use std::time::{Duration, Instant};

tokio::task_local! {
    /// When the first store step of the request began.
    static FIRST_STEP: Instant;
    /// Set inside a step that shares the timeout with the steps since `FIRST_STEP`.
    static SHARED_SINCE: Instant;
}

/// Runs a request whose store steps began at `started`.
///
/// A plain function, not an `async fn`: an `async fn` keeps its argument beside the future it
/// awaits, so wrapping the send's state machine (kilobytes) in one doubled its size, and every
/// move of the request's future copied both halves.
pub fn from<F: Future>(started: Instant, request: F) -> impl Future<Output = F::Output> {
    FIRST_STEP.scope(started, request)
}

/// Runs a store step within what is left of one timeout since the request's first step
/// (the full timeout outside `from`). Asks when first polled, not when called: a step made
/// before the request's `from` still counts from it. (Its steps are small, so this one can
/// keep its argument twice.)
pub async fn shared<F: Future>(step: F) -> F::Output {
    match FIRST_STEP.try_with(|started| *started) {
        Ok(started) => SHARED_SINCE.scope(started, step).await,
        Err(_) => step.await,
    }
}

/// How long a store call may take: `timeout`, less what the steps sharing it have used.
pub fn bound(timeout: Duration) -> Duration {
    SHARED_SINCE
        .try_with(|since| timeout.saturating_sub(since.elapsed()))
        .unwrap_or(timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_a_shared_step_inside_a_request_gets_less() {
        let timeout = Duration::from_millis(500);
        assert_eq!(bound(timeout), timeout);
        assert_eq!(shared(async { bound(timeout) }).await, timeout);
        let started = Instant::now() - Duration::from_millis(200);
        from(started, async {
            assert_eq!(bound(timeout), timeout, "unshared steps keep theirs");
            let left = shared(async { bound(timeout) }).await;
            assert!(left <= Duration::from_millis(300), "{left:?}");
            assert!(left >= Duration::from_millis(250), "{left:?}");
        })
        .await;
        let long_ago = Instant::now() - Duration::from_secs(2);
        let left = from(long_ago, shared(async { bound(timeout) })).await;
        assert_eq!(left, Duration::ZERO);
    }
}
