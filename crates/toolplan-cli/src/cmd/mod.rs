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
use std::sync::{Arc, Mutex};

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use toolplan_core::InvalidPlan;

/// Longest request body (DSL, search template, mapping) read from a file or standard input, in
/// bytes: 16 MiB. Changed with the environment variable `TOOLPLAN_MAX_INPUT_BYTES`.
pub const MAX_INPUT_BYTES: u64 = 16 << 20;

/// Longest bulk file read, in bytes: 100 MiB, OpenSearch's default `http.max_content_length`.
/// Changed with the environment variable `TOOLPLAN_MAX_INPUT_BYTES`.
pub const MAX_BULK_BYTES: u64 = 100 << 20;

/// `default`, or the limit `TOOLPLAN_MAX_INPUT_BYTES` sets (a whole number of bytes).
pub fn input_limit(default: u64) -> anyhow::Result<u64> {
    match std::env::var("TOOLPLAN_MAX_INPUT_BYTES") {
        Ok(v) => v.trim().parse().with_context(|| {
            format!("TOOLPLAN_MAX_INPUT_BYTES must be a whole number of bytes, got '{v}'")
        }),
        Err(_) => Ok(default),
    }
}

/// Reads the plan text from a file or, for `-`, from standard input: at most `max_bytes` (the
/// limits' `max_plan_bytes`).
pub fn read_plan(path: &Path, max_bytes: usize) -> anyhow::Result<String> {
    read_input(path, "plan", max_bytes as u64)
        .context("the plan is over [limits] max_plan_bytes, which the config can raise")
}

/// Reads a file or, for `-`, standard input, refusing more than `max_bytes` before reading it all
/// into memory; `what` names it in errors ("cannot read plan file …").
pub fn read_input(path: &Path, what: &str, max_bytes: u64) -> anyhow::Result<String> {
    let (reader, name): (Box<dyn Read>, String) = if path.as_os_str() == "-" {
        (Box::new(std::io::stdin()), "standard input".to_owned())
    } else {
        let file = std::fs::File::open(path)
            .with_context(|| format!("cannot read {what} file '{}'", path.display()))?;
        (Box::new(file), format!("'{}'", path.display()))
    };
    let mut bytes = Vec::new();
    reader
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read the {what} from {name}"))?;
    if bytes.len() as u64 > max_bytes {
        anyhow::bail!("the {what} from {name} has more than {max_bytes} bytes, the limit");
    }
    String::from_utf8(bytes).with_context(|| format!("the {what} from {name} is not UTF-8 text"))
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

/// Standard input as text chunks, as they arrive. A read error, or bytes that are not UTF-8, end the
/// text and are put in `trouble`.
pub fn stdin_text(
    trouble: Arc<Mutex<Option<anyhow::Error>>>,
) -> impl futures::Stream<Item = String> + Send {
    use tokio::io::AsyncReadExt;
    /// Bytes read at a time.
    const CHUNK: usize = 8192;
    let state = (tokio::io::stdin(), Vec::<u8>::new(), false);
    futures::stream::unfold(state, move |(mut stdin, mut carry, done)| {
        let trouble = Arc::clone(&trouble);
        async move {
            if done {
                return None;
            }
            let mut buf = vec![0u8; CHUNK];
            let fail = |e: anyhow::Error| {
                if let Ok(mut t) = trouble.lock() {
                    *t = Some(e);
                }
            };
            loop {
                let n = match stdin.read(&mut buf).await {
                    Ok(n) => n,
                    Err(e) => {
                        fail(
                            anyhow::Error::new(e)
                                .context("cannot read the plan from standard input"),
                        );
                        return None;
                    }
                };
                if n == 0 {
                    if !carry.is_empty() {
                        fail(anyhow::anyhow!(
                            "the plan from standard input is not UTF-8 text"
                        ));
                    }
                    return None;
                }
                carry.extend_from_slice(&buf[..n]);
                // A character cut at the end of a read waits for the rest of its bytes.
                let valid = match std::str::from_utf8(&carry) {
                    Ok(_) => carry.len(),
                    Err(e) if e.error_len().is_none() => e.valid_up_to(),
                    Err(_) => {
                        fail(anyhow::anyhow!(
                            "the plan from standard input is not UTF-8 text"
                        ));
                        return None;
                    }
                };
                if valid == 0 {
                    continue;
                }
                let rest = carry.split_off(valid);
                let text = String::from_utf8(std::mem::replace(&mut carry, rest)).ok()?;
                return Some((text, (stdin, carry, false)));
            }
        }
    })
}
