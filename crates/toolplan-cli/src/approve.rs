//! `--confirm`: plans approved on the terminal. The plan is shown whole on the controlling terminal
//! (`/dev/tty`, not stdin, which may carry the plan itself) and runs only on a `y`; anything else,
//! or no terminal at all, declines it. The wait is bounded by the gate's timeout
//! (`[limits] approval_timeout`, default 5m) and by Ctrl-C.

use std::io::{BufRead, BufReader, Read, Write};

use async_trait::async_trait;
use toolplan_core::approval::{Approval, ApprovalRequest, Approver};

/// The terminal that approvals are asked on.
const TERMINAL: &str = "/dev/tty";

/// Asks on the controlling terminal.
pub struct TerminalApprover;

#[async_trait]
impl Approver for TerminalApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Approval {
        let question = format!(
            "This plan needs your approval (! marks the steps that may change or destroy \
             something):\n{}\nRun it? [y/N] ",
            request.describe()
        );
        // A blocking read: on its own thread, which the process's exit ends if no answer comes
        // before the gate's timeout.
        match tokio::task::spawn_blocking(move || ask(&question)).await {
            Ok(Ok(answer)) if matches!(answer.trim().to_lowercase().as_str(), "y" | "yes") => {
                Approval::Approved
            }
            Ok(Ok(answer)) => Approval::Declined(format!(
                "the answer on the terminal was '{}', not y",
                answer.trim()
            )),
            Ok(Err(e)) => Approval::Declined(format!(
                "--confirm asks on the terminal, and there is none ({TERMINAL}: {e}); use \
                 --confirm never, or approve through the library or an MCP client"
            )),
            Err(e) => Approval::Declined(format!("the terminal prompt failed: {e}")),
        }
    }
}

/// Writes `question` to the terminal and reads one line of answer from it.
fn ask(question: &str) -> std::io::Result<String> {
    let mut terminal = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(TERMINAL)?;
    terminal.write_all(question.as_bytes())?;
    terminal.flush()?;
    let mut answer = String::new();
    // One line, and not more than a line's worth of it.
    BufReader::new(terminal.take(1024)).read_line(&mut answer)?;
    Ok(answer)
}
