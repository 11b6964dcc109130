//! `toolplan-conformance`: runs OpenSearch's YAML REST tests against the embedded search engine and
//! prints the pass rate per suite.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use toolplan_conformance::report::{self, DEFAULT_SUITES};

/// Runs OpenSearch's YAML REST tests (search, aggregations, count, msearch, mappings) on the
/// embedded search engine, with the Java runner's matching rules, and prints what passed.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// The directory of suite directories (default: the vendored tests).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Comma-separated suites to run (default: all the vendored ones).
    #[arg(long, value_delimiter = ',')]
    suites: Vec<String>,
    /// Also write the table and one line per test to this file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print one line per test.
    #[arg(long)]
    verbose: bool,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let dir = args.dir.unwrap_or_else(report::vendored_dir);
    let suites: Vec<&str> = if args.suites.is_empty() {
        DEFAULT_SUITES.to_vec()
    } else {
        args.suites.iter().map(String::as_str).collect()
    };
    let outcome = report::run_suites(&dir, &suites)
        .await
        .with_context(|| format!("running the suites in {}", dir.display()))?;
    let mut table = report::table(&outcome.results);
    for unread in &outcome.unread {
        table.push_str(&format!("not read: {unread}\n"));
    }
    print!("{table}");
    let details = report::details(&outcome.results);
    if args.verbose {
        print!("{details}");
    }
    if let Some(out) = args.out {
        std::fs::write(&out, format!("{table}\n{details}"))
            .with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}
