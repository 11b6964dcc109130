//! One file per subcommand; each parses nothing itself (that is [`crate::args`]) and prints its result.

pub mod ask;
pub mod dsl;
pub mod index;
pub mod mcp;
pub mod query_plan;
pub mod run;
pub mod search;
pub mod template;
pub mod tools;
pub mod validate;

use std::io::Read;
use std::path::Path;

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use toolplan_core::InvalidPlan;

/// Reads the plan text from a file or, for `-`, from standard input.
pub fn read_plan(path: &Path) -> anyhow::Result<String> {
    read_input(path, "plan")
}

/// Reads a file or, for `-`, standard input; `what` names it in errors ("cannot read plan file …").
pub fn read_input(path: &Path, what: &str) -> anyhow::Result<String> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .with_context(|| format!("cannot read the {what} from standard input"))?;
        return Ok(text);
    }
    std::fs::read_to_string(path)
        .with_context(|| format!("cannot read {what} file '{}'", path.display()))
}

/// "s" unless `n` is 1, for counts in messages.
pub fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A cancellation token that Ctrl-C cancels: running steps then fail, the rest are skipped, and the
/// command still reports what happened.
pub fn cancel_on_interrupt() -> CancellationToken {
    let cancel = CancellationToken::new();
    let on_interrupt = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_interrupt.cancel();
        }
    });
    cancel
}

/// Prints every problem of an invalid plan on standard error.
pub fn print_problems(path: &Path, invalid: &InvalidPlan) {
    let n = invalid.problems.len();
    eprintln!(
        "error: invalid plan {}: {n} problem{}",
        path.display(),
        if n == 1 { "" } else { "s" }
    );
    for p in &invalid.problems {
        eprintln!("  - {p}");
    }
}
