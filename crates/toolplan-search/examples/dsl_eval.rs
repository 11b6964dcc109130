//! Query-DSL benchmark: execution accuracy of the DSL a model writes for the questions of
//! `bench/dsl_eval/questions.json` (three indices: the shared iris data and two of our own), with
//! OpenSearch's plain algorithm (first `{`, no validation, no repair) and with toolplan's planner
//! (first valid object, deterministic corrections, checks against the mapping and a dry run on the
//! index, repair by the model) — the same model, side by side.
//!
//! Both read the same first reply: the prompt is the same and decoding is greedy, so a second call
//! for the plain algorithm would return the same text; toolplan's planner then adds its repair calls.
//!
//! ```text
//! cargo run --release -p toolplan-search --features local --example dsl_eval -- \
//!     [--model local|local:PATH|openai:NAME …] [--only q1,q7] [--max-repairs 1] [--out FILE.jsonl] \
//!     [--no-values] [--no-observe] [--no-amend] [--timeout SECS]
//! ```
//!
//! `--no-values` plans with OpenSearch's own user prompt (no keyword values, none searched);
//! `--no-observe` without the execution-guided checks; `--no-amend` with them, but without the
//! corrections the planner makes from them itself: each switches one part of the method off.
//! `--timeout` is the longest one model call may take (default 120 s; more on a busy machine).

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolplan_llm::{ConnectOptions, ModelSpec};
use toolplan_search::eval::{Question, judge, plain_extract};
use toolplan_search::prompts::OPENSEARCH_USER_PROMPT;
use toolplan_search::{DslPlanner, EmbeddedBackend, PlanParameters, SearchBackend};

#[path = "common/eval_set.rs"]
mod eval_set;

use eval_set::Error;

/// Runs `body` and judges the response; an error (a clause the index cannot run) is a wrong answer.
async fn score(backend: &EmbeddedBackend, q: &Question, body: &Value) -> (bool, Option<String>) {
    match backend.search(&q.index, body).await {
        Ok(response) => (judge(q, &response), None),
        Err(e) => (false, Some(e.to_string())),
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let mut model = "local".to_owned();
    let mut only: Option<Vec<String>> = None;
    let mut max_repairs = 1usize;
    let mut out: Option<PathBuf> = None;
    let (mut with_values, mut with_observations, mut with_amendments) = (true, true, true);
    let mut options = ConnectOptions::default();
    let mut set =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/dsl_eval/questions.json");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--model" => model = value()?,
            "--only" => only = Some(value()?.split(',').map(str::to_owned).collect()),
            "--max-repairs" => max_repairs = value()?.parse()?,
            "--out" => out = Some(PathBuf::from(value()?)),
            "--questions" => set = PathBuf::from(value()?),
            "--no-values" => with_values = false,
            "--no-observe" => with_observations = false,
            "--no-amend" => with_amendments = false,
            "--timeout" => {
                options.policy.timeout = std::time::Duration::from_secs(value()?.parse()?);
            }
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let dir = tempfile::tempdir()?;
    let (set, backend) = eval_set::load(&set, dir.path()).await?;
    let backend = Arc::new(backend);
    let mut questions: Vec<Question> = serde_json::from_value(set["questions"].clone())?;
    if let Some(only) = &only {
        questions.retain(|q| only.contains(&q.id));
    }

    let spec: ModelSpec = model.parse()?;
    let started = Instant::now();
    let chat = toolplan_llm::connect(&spec, &options).await?;
    eprintln!(
        "model {} ready in {:.1} s",
        chat.name(),
        started.elapsed().as_secs_f64()
    );
    let mut planner = DslPlanner::new(chat, Arc::clone(&backend) as Arc<dyn SearchBackend>)
        .with_max_repairs(max_repairs)
        .with_keyword_values(with_values)
        .with_observations(with_observations)
        .with_amendments(with_amendments);
    if !with_values {
        planner = planner.with_user_prompt(OPENSEARCH_USER_PROMPT);
    }
    let mut log = match &out {
        Some(p) => Some(std::fs::File::create(p)?),
        None => None,
    };

    let cancel = CancellationToken::new();
    let (mut plain_ok, mut ours_ok, mut calls, mut input, mut output) = (0, 0, 0, 0, 0);
    let (mut plain_fallbacks, mut ours_fallbacks, mut repaired, mut corrected) = (0, 0, 0, 0);
    let mut observed = 0;
    let mut per_index: HashMap<String, (u32, u32, u32)> = HashMap::new();
    let total_started = Instant::now();
    println!(
        "{:<5} {:<11} {:>5} {:>5} {:>6} {:>7}  question",
        "id", "index", "plain", "ours", "calls", "secs"
    );
    for q in &questions {
        let t = Instant::now();
        let plan = planner
            .plan(&q.question, &q.index, &PlanParameters::default(), &cancel)
            .await?;
        let secs = t.elapsed().as_secs_f64();
        let first = plan
            .attempts
            .first()
            .map(|a| a.reply.as_str())
            .unwrap_or_default();
        let plain_dsl = plain_extract(first);
        let plain_fell_back = plain_dsl == toolplan_search::planner::default_fallback()
            && !first.contains("match_all");
        let (p_ok, p_err) = score(&backend, q, &plain_dsl).await;
        let (o_ok, o_err) = score(&backend, q, &plan.dsl).await;
        plain_ok += u32::from(p_ok);
        ours_ok += u32::from(o_ok);
        plain_fallbacks += u32::from(plain_fell_back);
        ours_fallbacks += u32::from(plan.fallback.is_some());
        repaired += u32::from(plan.attempts.len() > 1);
        corrected += u32::from(plan.attempts.iter().any(|a| !a.fixes.is_empty()));
        observed += u32::from(plan.attempts.iter().any(|a| a.observed));
        calls += plan.llm_calls;
        input += plan.input_tokens;
        output += plan.output_tokens;
        let e = per_index.entry(q.index.clone()).or_default();
        e.0 += 1;
        e.1 += u32::from(p_ok);
        e.2 += u32::from(o_ok);
        let mark = |ok| if ok { "ok" } else { "WRONG" };
        println!(
            "{:<5} {:<11} {:>5} {:>5} {:>6} {:>7.1}  {}",
            q.id,
            q.index,
            mark(p_ok),
            mark(o_ok),
            plan.llm_calls,
            secs,
            q.question
        );
        if let Some(f) = log.as_mut() {
            let attempts: Vec<Value> = plan
                .attempts
                .iter()
                .map(|a| json!({"reply": a.reply, "fixes": a.fixes, "problems": a.problems, "observed": a.observed}))
                .collect();
            writeln!(
                f,
                "{}",
                json!({
                    "id": q.id, "index": q.index, "question": q.question,
                    "plain": {"ok": p_ok, "dsl": plain_dsl, "error": p_err},
                    "ours": {"ok": o_ok, "dsl": plan.dsl, "error": o_err, "fallback": plan.fallback},
                    "attempts": attempts, "seconds": secs,
                })
            )?;
        }
    }
    let n = questions.len().max(1) as f64;
    let pct = |k: u32| 100.0 * f64::from(k) / n;
    println!();
    let mut names: Vec<_> = per_index.keys().cloned().collect();
    names.sort();
    for name in names {
        let (t, p, o) = per_index[&name];
        println!("{name:<11} {t:>3} questions: plain {p:>3} right, ours {o:>3} right");
    }
    println!(
        "execution accuracy over {} questions: plain OpenSearch algorithm {plain_ok} ({:.1}%), toolplan {ours_ok} ({:.1}%)",
        questions.len(),
        pct(plain_ok),
        pct(ours_ok)
    );
    println!(
        "plain fallbacks {plain_fallbacks}; toolplan: {corrected} corrected without the model, {repaired} sent back for repair, {observed} with observations of a valid query, {ours_fallbacks} fallbacks; {calls} model calls, {input} input / {output} output tokens; {:.0} s",
        total_started.elapsed().as_secs_f64()
    );
    Ok(())
}
