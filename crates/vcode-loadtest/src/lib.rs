//! `vcode loadtest`: virtual users against running vcode instances, counting lost and reused
//! codes. A client of the service: it speaks the HTTP API through `vcode-wire` and shares no
//! code with the server.
//!
//! Each virtual user has its own phone and reads its SMS from the dev inbox, so it knows
//! exactly which codes it was sent; the ledger then judges every verify answer against that:
//! a refused code that was delivered, unexpired, unused and within the attempt limit is a false
//! rejection, and a code accepted twice is a double accept.
//!
//! `--scenario pumping` plays no logins but an SMS pumping attack beside honest users, and
//! reports what the conversion guard let the bot be paid ([`pumping`]).

mod client;
mod ledger;
mod options;
mod progress;
pub mod pumping;
mod report;
mod runner;
mod tally;
mod user;

use std::path::PathBuf;

use anyhow::{Context, bail};

pub use self::options::{Options, Scenario, Stop};
pub use self::report::{Excused, Latency, Report, comparison_table};
pub use self::runner::run;
pub use self::tally::{Announced, Sends, Verifies};

/// `vcode loadtest`: runs, prints the report (a table, or JSON with `--json`) on stdout, and
/// with `--expect-clean` fails if the run was not clean.
pub async fn run_cli(options: Options) -> anyhow::Result<()> {
    if options.scenario == Scenario::Pumping {
        return pumping::run_cli(&options).await;
    }
    let report = run(&options).await?;
    if options.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table());
    }
    if options.expect_clean && !report.is_clean() {
        bail!(
            "--expect-clean: {} false rejections, {} double accepts, {} failed calls",
            report.false_rejections,
            report.double_accepts,
            report.failed_calls()
        );
    }
    Ok(())
}

/// `vcode loadtest-table`: reads `vcode loadtest --json` reports (all of logins, or all of the
/// pumping scenario) and prints them side by side.
pub fn print_comparison(paths: &[PathBuf]) -> anyhow::Result<()> {
    let texts = paths
        .iter()
        .map(|path| {
            std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))
                .map(|text| (path, text))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let pumping: Result<Vec<pumping::PumpingReport>, _> = texts
        .iter()
        .map(|(_, text)| serde_json::from_str(text))
        .collect();
    if let Ok(reports) = pumping {
        print!("{}", pumping::pumping_table(&reports));
        return Ok(());
    }
    let reports = texts
        .iter()
        .map(|(path, text)| {
            serde_json::from_str(text).with_context(|| {
                format!(
                    "{} is not a loadtest --json report (or not of the same kind as the others)",
                    path.display()
                )
            })
        })
        .collect::<anyhow::Result<Vec<Report>>>()?;
    print!("{}", comparison_table(&reports));
    Ok(())
}
