//! Runs plans through one of the first-plan checks: reads JSON lines from stdin, each `{"id",
//! "question", "tools": [{"name", "description", "parameters"}], "plan": {"steps": [...]}}`, and
//! prints for each a JSON line with what the check would send the plan back for:
//!
//! * `unasked`: `{"id", "unasked": [step ids]}`, the steps [`toolplan_planner::unasked_steps`]
//!   finds the question does not ask for;
//! * `options`: `{"id", "left_out": [{"step", "parameter": [names], "value"}]}`, the options
//!   [`toolplan_planner::options_left_out`] finds the question names and no step sets;
//! * `dates`: `{"id", "made_up": [{"step", "parameter": [names], "value"}]}`, the dates
//!   [`toolplan_planner::dates_not_given`] finds the steps write and the question does not give;
//! * `contradicted`: `{"id", "contradicted": [{"step", "parameter": [names], "value", "named"}]}`,
//!   the options [`toolplan_planner::options_contradicted`] finds the steps set while the question
//!   names another value;
//! * `twins`: `{"id", "contradicted": [...]}` as `contradicted`, the steps
//!   [`toolplan_planner::contradicted_twins`] finds are another step's twin but for a value the
//!   question contradicts;
//! * `repeats`: `{"id", "repeats": [step ids]}`, the steps
//!   [`toolplan_planner::repeats_with_additions`] finds repeat another step with additions the
//!   question does not give.
//!
//! For `bench/bfcl_unasked.py`, which runs BFCL's ground truth through them.
//!
//!     cargo run --release -p toolplan-planner --example checks -- unasked|options|dates|contradicted|twins|repeats < lines.jsonl

use std::io::{BufRead, Write};

use serde_json::{Value, json};
use toolplan_planner::{
    contradicted_twins, dates_not_given, options_contradicted, options_left_out,
    repeats_with_additions, tool_text, unasked_steps,
};

fn main() -> std::io::Result<()> {
    let check = std::env::args().nth(1).unwrap_or_default();
    if ![
        "unasked",
        "options",
        "dates",
        "contradicted",
        "twins",
        "repeats",
    ]
    .contains(&check.as_str())
    {
        eprintln!("usage: checks unasked|options|dates|contradicted|twins|repeats < lines.jsonl");
        std::process::exit(2);
    }
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line?;
        let Ok(entry) = serde_json::from_str::<Value>(&line) else {
            eprintln!("checks: skipped a line that is not JSON");
            continue;
        };
        let question = entry["question"].as_str().unwrap_or_default();
        let tools = entry["tools"].as_array().cloned().unwrap_or_default();
        let tool = |name: &str| tools.iter().find(|t| t["name"] == name);
        let found = if check == "unasked" {
            let steps = unasked_steps(question, &entry["plan"], |name| {
                tool(name).map(|t| {
                    tool_text(
                        name,
                        t["description"].as_str().unwrap_or_default(),
                        &t["parameters"],
                    )
                })
            });
            json!({"id": entry["id"], "unasked": steps.iter().map(|s| &s.id).collect::<Vec<_>>()})
        } else {
            let steps = entry["plan"]["steps"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let calls = steps.iter().map(|s| {
                (
                    s["id"].as_str().unwrap_or_default(),
                    s["tool"].as_str().unwrap_or_default(),
                    &s["arguments"],
                )
            });
            if check == "repeats" {
                json!({"id": entry["id"], "repeats": repeats_with_additions(question, calls)})
            } else if check == "contradicted" || check == "twins" {
                let schema_of = |name: &str| tool(name).map(|t| &t["parameters"]);
                let found = if check == "twins" {
                    contradicted_twins(question, calls, schema_of)
                } else {
                    options_contradicted(question, calls, schema_of)
                };
                let found: Vec<Value> = found
                    .iter()
                    .map(|o| {
                        json!({"step": o.step, "parameter": o.parameter, "value": o.value,
                           "named": o.named})
                    })
                    .collect();
                json!({"id": entry["id"], "contradicted": found})
            } else if check == "dates" {
                let made_up: Vec<Value> = dates_not_given(question, calls)
                    .iter()
                    .map(|d| json!({"step": d.step, "parameter": d.parameter, "value": d.value}))
                    .collect();
                json!({"id": entry["id"], "made_up": made_up})
            } else {
                let options =
                    options_left_out(question, calls, |name| tool(name).map(|t| &t["parameters"]));
                let left_out: Vec<Value> = options
                    .iter()
                    .map(|o| json!({"step": o.step, "parameter": o.parameter, "value": o.value}))
                    .collect();
                json!({"id": entry["id"], "left_out": left_out})
            }
        };
        writeln!(out, "{found}")?;
    }
    Ok(())
}
