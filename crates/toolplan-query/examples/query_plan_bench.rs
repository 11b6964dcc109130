//! toolplan's side of `bench/query_plan_bench.py`: runs a query plan whose leaf tools sleep
//! `--tool-ms` and whose synthesizer's model answers after `--synth-ms`, `--repeat` times, and prints
//! one JSON object: `{"wall_ms": [...], "tool_calls": n, "llm_calls": m, "critical_path_ms": c}`.
//!
//! The fixed-latency model lives here, in the benchmark, and nowhere in the product: it stands in for
//! an LLM so that only the engine's scheduling is measured (LlamaIndex gets the same stand-in).
//!
//! ```text
//! cargo run --release -p toolplan-query --example query_plan_bench -- \
//!     --plan bench/query_plans/fanout3.json --tool-ms 100 --synth-ms 200 --repeat 5
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolplan_core::{FnTool, RunControl, Tool};
use toolplan_llm::{ChatModel, ChatRequest, ChatResponse, LlmError, Message, StopReason, Usage};
use toolplan_query::{QueryPlanner, SYNTHESIZE, Synthesizer};

/// Answers every prompt after a fixed delay.
struct FixedLatencyModel {
    latency: Duration,
}

#[async_trait]
impl ChatModel for FixedLatencyModel {
    fn name(&self) -> &str {
        "fixed-latency"
    }

    async fn chat(
        &self,
        _request: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError> {
        tokio::select! {
            _ = tokio::time::sleep(self.latency) => {}
            _ = cancel.cancelled() => return Err(LlmError::Cancelled),
        }
        Ok(ChatResponse {
            message: Message::assistant("A short synthesized answer.", vec![]),
            usage: Usage::default(),
            stop: StopReason::EndTurn,
            raw: None,
        })
    }
}

/// A leaf tool that sleeps, then answers; counts its calls in `calls`.
fn source(name: String, delay: Duration, calls: Arc<AtomicU64>) -> Arc<dyn Tool> {
    let answerer = name.clone();
    Arc::new(FnTool::new(
        name,
        "A source that answers after a fixed delay.",
        json!({"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}),
        move |arguments: Value, _| {
            calls.fetch_add(1, Ordering::Relaxed);
            let name = answerer.clone();
            async move {
                tokio::time::sleep(delay).await;
                let q = arguments["input"].as_str().unwrap_or_default();
                Ok(json!(format!("answer of {name} to: {q}")))
            }
        },
    ))
}

struct Options {
    plan: String,
    tool_ms: u64,
    synth_ms: u64,
    repeat: usize,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        plan: String::new(),
        tool_ms: 100,
        synth_ms: 200,
        repeat: 5,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("{flag}: '{value}' is not a number"))
        };
        match flag.as_str() {
            "--plan" => o.plan = value.clone(),
            "--tool-ms" => o.tool_ms = number()?,
            "--synth-ms" => o.synth_ms = number()?,
            "--repeat" => o.repeat = number()?.max(1) as usize,
            other => return Err(format!("unknown option {other}")),
        }
    }
    if o.plan.is_empty() {
        return Err(
            "usage: query_plan_bench --plan FILE [--tool-ms N] [--synth-ms N] [--repeat N]".into(),
        );
    }
    Ok(o)
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let o = options()?;
    let text = std::fs::read_to_string(&o.plan).map_err(|e| format!("{}: {e}", o.plan))?;
    let calls = Arc::new(AtomicU64::new(0));
    let tools: Vec<Arc<dyn Tool>> = (1..=10)
        .map(|i| {
            source(
                format!("source_{i}"),
                Duration::from_millis(o.tool_ms),
                Arc::clone(&calls),
            )
        })
        .collect();
    let model = Arc::new(FixedLatencyModel {
        latency: Duration::from_millis(o.synth_ms),
    });
    let planner =
        QueryPlanner::new(tools, Synthesizer::compact(model)).map_err(|e| e.to_string())?;

    let once = || async {
        let started = Instant::now();
        let plan = planner.compile(&text).map_err(|e| e.to_string())?;
        let run = planner.run(&plan, RunControl::default()).await;
        run.answer().map_err(|e| e.to_string())?;
        Ok::<_, String>((started.elapsed(), plan, run))
    };
    // One warm-up run, as on the LlamaIndex side.
    let (_, plan, _) = once().await?;
    let critical = plan.plan.critical_path(|step| {
        if step.tool == SYNTHESIZE {
            o.synth_ms
        } else {
            o.tool_ms
        }
    });
    let mut wall = Vec::with_capacity(o.repeat);
    let mut last = None;
    for _ in 0..o.repeat {
        calls.store(0, Ordering::Relaxed);
        let (elapsed, _, run) = once().await?;
        wall.push(elapsed.as_secs_f64() * 1000.0);
        last = Some(run);
    }
    let llm_calls = last.map(|r| r.llm.calls).unwrap_or_default();
    println!(
        "{}",
        json!({
            "wall_ms": wall,
            "tool_calls": calls.load(Ordering::Relaxed),
            "llm_calls": llm_calls,
            "critical_path_ms": critical,
        })
    );
    Ok(())
}
