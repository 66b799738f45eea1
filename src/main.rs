//! The `vcode` binary: a thin CLI over the library. With no subcommand it serves.

use anyhow::Context;
use clap::{Parser, Subcommand};
use vcode::{Application, Settings, telemetry};

#[derive(Parser)]
#[command(version, about = "Verification codes by SMS and image captchas")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the HTTP API (the default). Configured by VCODE_* environment variables.
    Serve,
    /// Check the VCODE_* environment variables and print the settings they give.
    CheckConfig,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let json_logs = std::env::var("VCODE_LOG_FORMAT").is_ok_and(|format| format == "json");
    telemetry::init(json_logs);
    let settings = Settings::from_env().context("configuration")?;
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            Application::build(settings)
                .await?
                .run_until_stopped()
                .await?
        }
        Command::CheckConfig => println!("{settings:#?}"),
    }
    Ok(())
}
