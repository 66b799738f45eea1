//! `ToTheEnd`: a route's step that must finish even if its client goes away (a send: a code is
//! never left stored without its SMS or its roll-back). The handler polls the step itself, so a
//! send that finishes while the request is served costs no task of its own (a `tokio::spawn`
//! per send cost a task, a wake-up of the handler and one more pass of actix's dispatcher:
//! about 5k instructions a send). Only if the request is dropped before the step ends (the
//! client went away) does the rest of the step move to a task of its own, from the await point
//! it had reached; its future asks for a waker again on its first poll there, as every future
//! must. A panic in the step answers as a failed task did: an error, not a lost worker.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

use tracing::Instrument;

/// The step panicked (the panic's message went to the log as every panic's does).
#[derive(Debug, thiserror::Error)]
#[error("the step panicked")]
pub struct Panicked;

/// A step polled in place that runs to its end on a task of its own if dropped unfinished.
pub struct ToTheEnd<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    /// Boxed: a send's state machine is kilobytes, and it must not move once polled (a drop
    /// hands the box itself to the task).
    step: Option<Pin<Box<F>>>,
}

impl<F> ToTheEnd<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    pub fn new(step: F) -> Self {
        Self {
            step: Some(Box::pin(step)),
        }
    }
}

impl<F> Future for ToTheEnd<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    type Output = Result<F::Output, Panicked>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(step) = self.step.as_mut() else {
            return Poll::Ready(Err(Panicked));
        };
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| step.as_mut().poll(cx)));
        match polled {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(output)) => {
                self.step = None;
                Poll::Ready(Ok(output))
            }
            Err(_) => {
                // A step that panicked is not polled again, nor finished on a task.
                self.step = None;
                Poll::Ready(Err(Panicked))
            }
        }
    }
}

impl<F> Drop for ToTheEnd<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn drop(&mut self) {
        let Some(step) = self.step.take() else {
            return;
        };
        // Outside a runtime (the server's own shutdown) nothing can run it: as for any task.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(step.instrument(tracing::Span::current()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn a_step_that_ends_in_place_answers_its_output() {
        assert_eq!(ToTheEnd::new(async { 7 }).await.unwrap(), 7);
    }

    #[tokio::test]
    async fn a_dropped_step_runs_to_its_end_from_where_it_was() {
        let (started, finished) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let (started_in, finished_in) = (started.clone(), finished.clone());
        let (resume, resumed) = tokio::sync::oneshot::channel::<()>();
        let step = ToTheEnd::new(async move {
            started_in.store(true, Ordering::SeqCst);
            resumed.await.expect("resumed");
            finished_in.store(true, Ordering::SeqCst);
        });
        // The request is dropped while its step waits: the client went away.
        let timed_out = tokio::time::timeout(Duration::from_millis(20), step).await;
        assert!(timed_out.is_err());
        assert!(started.load(Ordering::SeqCst));
        assert!(!finished.load(Ordering::SeqCst));
        // Its wait ends after the drop: the step, now a task of its own, is woken and finishes.
        resume.send(()).expect("the step still waits");
        for _ in 0..100 {
            if finished.load(Ordering::SeqCst) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the dropped step never finished");
    }

    #[tokio::test]
    async fn a_panic_answers_an_error() {
        let step = ToTheEnd::new(async {
            if std::hint::black_box(true) {
                panic!("a bug");
            }
        });
        assert!(step.await.is_err());
    }
}
