//! The `vcode` binary: a thin CLI over the library. With no subcommand it serves.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use vcode::settings::{self, Settings};
use vcode::startup::Application;
use vcode::telemetry;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    version,
    about = "Verification codes by SMS and email, image captchas and proof of work, a Twilio Verify-compatible API; atomic on an embedded store, Redis or PostgreSQL"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the HTTP API (the default). Configured by VCODE_* environment variables.
    Serve,
    /// Check the VCODE_* environment variables (and RUST_LOG) as start-up does, and print every
    /// setting: variable, value, and whether it is the default or set. Secrets show as ***.
    CheckConfig,
    /// Generate an API key for a caller: prints the key (give it to the caller, once) and the
    /// `name:sha256hex` entry to add to VCODE_API_KEYS (the service keeps only the digest).
    ApiKey {
        /// The caller's name, shown in logs and metrics: 1 to 64 of A-Za-z0-9_.-
        name: String,
    },
    /// Create an account for the Twilio Verify-compatible API: prints its Account SID, its
    /// Auth Token (give them to the application, once) and the entry to add to
    /// VCODE_TWILIO_COMPAT_ACCOUNTS (the service keeps only the token's digest).
    TwilioAccount,
    /// Play virtual users against running instances (dev mode, one shared Redis) and count
    /// false rejections and double accepts.
    Loadtest(vcode_loadtest::Options),
    /// Exit 0 when `/readyz` on the configured listener (VCODE_BIND) answers 200, 1 otherwise:
    /// a container's health check without a shell or curl.
    Healthcheck,
    /// Print `vcode loadtest --json` reports side by side.
    LoadtestTable {
        #[arg(required = true, value_name = "REPORT.json")]
        reports: Vec<PathBuf>,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command.unwrap_or(Command::Serve) {
        // The server's runtime is one thread: the HTTP workers run their own, and what is left
        // here (the shared Redis connection's I/O, the stats flush, the expiry sweep) is one
        // task at a time anyway. A multi-threaded runtime would wake and park its idle threads
        // on every Redis reply (measured: ~20% of the server's CPU under load).
        Command::Serve => runtime(false)?.block_on(async {
            Application::build(settings()?)
                .await?
                .run_until_stopped()
                .await
                .map_err(anyhow::Error::from)
        })?,
        Command::ApiKey { name } => {
            let (key, entry) = vcode::api_keys::generate(&name).map_err(anyhow::Error::msg)?;
            println!("key (give it to {name}; it is not shown again): {key}");
            println!("VCODE_API_KEYS entry: {entry}");
        }
        Command::TwilioAccount => {
            let (account, token, entry) = vcode::twilio_compat::accounts::generate();
            println!("Account SID: {account}");
            println!("Auth Token (give it to the application; it is not shown again): {token}");
            println!("VCODE_TWILIO_COMPAT_ACCOUNTS entry: {entry}");
        }
        Command::Healthcheck => {
            let bind = Settings::from_env().context("configuration")?.bind;
            if let Err(why) = vcode::startup::check_ready(bind, std::time::Duration::from_secs(3)) {
                eprintln!("not ready: {why}");
                std::process::exit(1);
            }
        }
        Command::CheckConfig => print!("{}", settings::table::from_env().context("configuration")?),
        // The load generator is a client: it reads no VCODE_* settings and logs nothing.
        Command::Loadtest(options) => runtime(true)?.block_on(vcode_loadtest::run_cli(options))?,
        Command::LoadtestTable { reports } => vcode_loadtest::print_comparison(&reports)?,
    }
    Ok(())
}

fn runtime(multi_thread: bool) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    builder.enable_all().build()
}

/// Reads the service's settings from the environment, then starts the logs as they say.
fn settings() -> anyhow::Result<Settings> {
    let settings = Settings::from_env().context("configuration")?;
    telemetry::init(&settings.log);
    Ok(settings)
}
