//! Fills a running vcode with pending codes through its API (`otp/send` for distinct phones),
//! for the "many pending codes" rows of `scripts/bench-http.sh`. Quotas must be off.
//!
//! `cargo run --release --example fill_codes -- http://127.0.0.1:18081 1000000`

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use vcode_wire::{SendRequest, paths};

const CONCURRENCY: u64 = 64;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let base = args.next().ok_or("usage: fill_codes URL COUNT")?;
    let count: u64 = args.next().ok_or("usage: fill_codes URL COUNT")?.parse()?;
    let url = format!("{base}{}", paths::OTP_SEND);
    let client = reqwest::Client::new();
    let next = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..CONCURRENCY)
        .map(|_| {
            let (client, url, next, failed) =
                (client.clone(), url.clone(), next.clone(), failed.clone());
            tokio::spawn(async move {
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= count {
                        return;
                    }
                    // Distinct valid Chinese mobile numbers: +86 137 then 8 digits.
                    let body = SendRequest::new(format!("+86137{n:08}"));
                    let ok = client
                        .post(&url)
                        .json(&body)
                        .send()
                        .await
                        .is_ok_and(|r| r.status().is_success());
                    if !ok {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await?;
    }
    let failed = failed.load(Ordering::Relaxed);
    eprintln!(
        "filled {} codes in {:.1} s ({failed} failed)",
        count - failed,
        started.elapsed().as_secs_f64()
    );
    if failed > 0 {
        return Err(format!("{failed} sends failed").into());
    }
    Ok(())
}
