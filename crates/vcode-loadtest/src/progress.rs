//! The live counters of a run (the stop rule reads them too) and the progress bar that shows
//! them on stderr.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::ledger::Findings;
use crate::options::Stop;

const REFRESH: Duration = Duration::from_millis(200);

/// Counters every user adds to as it goes.
#[derive(Debug, Default)]
pub struct Live {
    requests: AtomicU64,
    verified: AtomicU64,
    false_rejections: AtomicU64,
    double_accepts: AtomicU64,
}

impl Live {
    pub fn request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    pub fn findings(&self, findings: &Findings) {
        self.verified
            .fetch_add(findings.verified, Ordering::Relaxed);
        self.false_rejections
            .fetch_add(findings.false_rejections, Ordering::Relaxed);
        self.double_accepts
            .fetch_add(findings.double_accepts, Ordering::Relaxed);
    }

    fn message(&self) -> String {
        format!(
            "{} requests, {} verified, {} false rejections, {} double accepts",
            self.requests(),
            self.verified.load(Ordering::Relaxed),
            self.false_rejections.load(Ordering::Relaxed),
            self.double_accepts.load(Ordering::Relaxed),
        )
    }
}

/// A bar over the run's duration or request budget, refreshed a few times a second.
pub struct Progress {
    bar: ProgressBar,
    ticker: tokio::task::JoinHandle<()>,
}

impl Progress {
    /// Draws only when `visible` and stderr is a terminal.
    pub fn start(stop: Stop, live: Arc<Live>, visible: bool) -> Self {
        let length = match stop {
            Stop::After(duration) => u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            Stop::Requests(requests) => requests,
        };
        let target = if visible && std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(length), target);
        if let Ok(style) = ProgressStyle::with_template(
            "{spinner} {elapsed_precise} [{bar:30}] {percent:>3}% {msg}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        let ticker = tokio::spawn(tick(bar.clone(), stop, live));
        Self { bar, ticker }
    }

    pub fn finish(self) {
        self.ticker.abort();
        self.bar.finish_and_clear();
    }
}

async fn tick(bar: ProgressBar, stop: Stop, live: Arc<Live>) {
    let started = Instant::now();
    loop {
        let position = match stop {
            Stop::After(_) => u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            Stop::Requests(_) => live.requests(),
        };
        bar.set_position(position.min(bar.length().unwrap_or(u64::MAX)));
        bar.set_message(live.message());
        tokio::time::sleep(REFRESH).await;
    }
}
