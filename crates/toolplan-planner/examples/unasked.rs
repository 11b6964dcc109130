//! Reads JSON lines from stdin, each `{"id", "question", "tools": [{"name", "description",
//! "parameters"}], "plan": {"steps": [...]}}`, and prints for each a JSON line `{"id", "unasked":
//! [step ids]}`: the steps [`toolplan_planner::unasked_steps`] would send back. For
//! `bench/bfcl_unasked.py`, which runs BFCL's ground truth through the check.
//!
//!     cargo run --release -p toolplan-planner --example unasked < lines.jsonl

use std::io::{BufRead, Write};

use serde_json::{Value, json};
use toolplan_planner::{tool_text, unasked_steps};

fn main() -> std::io::Result<()> {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line?;
        let Ok(entry) = serde_json::from_str::<Value>(&line) else {
            eprintln!("unasked: skipped a line that is not JSON");
            continue;
        };
        let tools: Vec<(String, String)> = entry["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                let name = t["name"].as_str().unwrap_or_default();
                let description = t["description"].as_str().unwrap_or_default();
                (
                    name.to_owned(),
                    tool_text(name, description, &t["parameters"]),
                )
            })
            .collect();
        let found = unasked_steps(
            entry["question"].as_str().unwrap_or_default(),
            &entry["plan"],
            |name| {
                tools
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, t)| t.clone())
            },
        );
        let ids: Vec<&str> = found.iter().map(|s| s.id.as_str()).collect();
        writeln!(out, "{}", json!({"id": entry["id"], "unasked": ids}))?;
    }
    Ok(())
}
