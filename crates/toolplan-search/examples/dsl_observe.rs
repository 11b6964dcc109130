//! What the execution-guided checks of the query-DSL planner ([`toolplan_search::planner::observe`])
//! say about recorded bodies, without a model: each body of a `dsl_eval` results file
//! (`bench/results/dsl_eval.jsonl`) is run on the evaluation indices and observed, and the
//! observations are printed beside whether the body was right. It shows where the checks fire on
//! right answers (the risk) and on wrong ones (the chance), before a model run.
//!
//! ```text
//! cargo run -p toolplan-search --example dsl_observe -- [--results FILE.jsonl] [--questions FILE.json]
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolplan_search::planner::observe::{self, Context};
use toolplan_search::planner::values::keyword_values;
use toolplan_search::{Mapping, SearchBackend};

#[path = "common/eval_set.rs"]
mod eval_set;

use eval_set::Error;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench");
    let mut results = root.join("results/dsl_eval.jsonl");
    let mut set = root.join("dsl_eval/questions.json");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--results" => results = PathBuf::from(value()?),
            "--questions" => set = PathBuf::from(value()?),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let dir = tempfile::tempdir()?;
    let (_, backend) = eval_set::load(&set, dir.path()).await?;
    let backend = Arc::new(backend);
    let cancel = CancellationToken::new();
    let (mut right_flagged, mut wrong_flagged, mut right, mut wrong) = (0, 0, 0, 0);
    for line in std::fs::read_to_string(&results)?.lines() {
        let r: Value = serde_json::from_str(line)?;
        let (id, index, question) = (
            r["id"].as_str().unwrap_or_default(),
            r["index"].as_str().unwrap_or_default(),
            r["question"].as_str().unwrap_or_default(),
        );
        let mapping = Mapping::parse(&backend.get_mapping(index).await?)?;
        let sample = backend.sample_document(index).await?;
        let values = keyword_values(backend.as_ref(), index, &mapping, &cancel).await?;
        let cx = Context {
            question,
            mapping: &mapping,
            values: &values,
            sample: sample.as_ref(),
        };
        let ok = r["ours"]["ok"].as_bool().unwrap_or(false);
        let body = &r["ours"]["dsl"];
        let ran = observe::run(backend.as_ref(), index, body, &cancel)
            .await
            .ok();
        let found = observe::observations(&cx, body, ran.as_ref());
        if ok {
            right += 1;
            right_flagged += u32::from(!found.is_empty());
        } else {
            wrong += 1;
            wrong_flagged += u32::from(!found.is_empty());
        }
        println!("{id:<4} {:<5} {question}", if ok { "ok" } else { "WRONG" });
        for o in &found {
            println!("       - {o}");
        }
    }
    println!(
        "observed: {wrong_flagged} of {wrong} wrong bodies, {right_flagged} of {right} right ones"
    );
    Ok(())
}
