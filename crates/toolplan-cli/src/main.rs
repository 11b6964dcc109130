//! `toolplan`: validate and run tool plans, and ask an agent that plans, from the command line.
//!
//! The binary is thin: argument parsing ([`args`]), the settings every command runs with, resolved
//! once from the flags, the environment, `toolplan.toml` ([`config`]) and the defaults
//! ([`settings`]), one file per subcommand under [`cmd`], the tool sets a plan can run against
//! ([`toolset`]), and terminal output ([`render`], [`progress`]). Plan logic lives in
//! `toolplan-core`, models in `toolplan-llm`, the agent loop in `toolplan-agent`, query plans in
//! `toolplan-query`, search in `toolplan-search`.
//!
//! Exit codes: 0 when the command did its job (a plan that ran is a success even if some steps
//! failed), 2 when the plan is invalid or the command line is wrong, 1 for any other error. A
//! standard output closed by its reader (`toolplan run … | head -c1`) ends the command quietly
//! with 0.

mod approve;
mod args;
mod cmd;
mod config;
mod output;
mod progress;
mod render;
mod settings;
mod toolset;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};
use crate::settings::Settings;

/// The outcome of a subcommand that did not fail with an error.
pub enum Outcome {
    /// Done.
    Ok,
    /// The plan is invalid; the problems were printed.
    InvalidPlan,
}

#[tokio::main]
async fn main() -> ExitCode {
    // Code that prints with println! rather than through output::write still ends quietly on a
    // closed pipe.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if output::is_closed_pipe_panic(info) {
            std::process::exit(0);
        }
        default_hook(info);
    }));
    let cli = Cli::parse();
    let result = match Settings::resolve(&cli.command, cli.trust_config) {
        Ok(settings) => execute(cli.command, settings).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::InvalidPlan) => ExitCode::from(2),
        Err(e) if e.downcast_ref::<output::StdoutClosed>().is_some() => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// Runs `command` with its settings.
async fn execute(command: Command, settings: Settings) -> anyhow::Result<Outcome> {
    match command {
        Command::Run(a) => cmd::run::execute(a, settings).await,
        Command::Validate(a) => cmd::validate::execute(a, settings).await,
        Command::Tools(a) => cmd::tools::execute(a, settings).await,
        Command::Ask(a) => cmd::ask::execute(a, settings).await,
        Command::QueryPlan(a) => cmd::query_plan::execute(a, settings).await,
        Command::Index(a) => cmd::index::execute(a).await,
        Command::Search(a) => cmd::search::execute(a).await,
        Command::Dsl(a) => cmd::dsl::execute(a, settings).await,
        Command::Template(a) => cmd::template::execute(a).await,
        Command::Mcp(a) => cmd::mcp::execute(a, settings).await,
    }
}
