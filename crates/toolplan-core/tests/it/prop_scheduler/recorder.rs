//! The recording tool, which logs every call's start and end, and the engines and runtimes the properties run on.

use super::*;

// ---------------------------------------------------------------------------------------------------
// The recording tool
// ---------------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ev {
    Start,
    End,
}

#[derive(Default)]
pub(super) struct Log {
    pub(super) events: Vec<(Ev, String)>,
    pub(super) running: usize,
    pub(super) max_running: usize,
    pub(super) tool_running: HashMap<&'static str, usize>,
    pub(super) tool_max: HashMap<&'static str, usize>,
    pub(super) args: HashMap<String, Vec<Value>>,
}

/// Logs every call's start and end (in one global order), how many calls run at once, and the
/// arguments it got; sleeps `ms`; fails when `fail` is true.
pub(super) struct Rec {
    pub(super) name: &'static str,
    pub(super) log: Arc<Mutex<Log>>,
    /// Whether it says it is read-only (its steps may then start while a streamed plan is still
    /// being written).
    pub(super) read_only: bool,
}

#[async_trait]
impl Tool for Rec {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "records its calls"
    }
    fn annotations(&self) -> toolplan_core::ToolAnnotations {
        if self.read_only {
            toolplan_core::ToolAnnotations::READ_ONLY
        } else {
            toolplan_core::ToolAnnotations::default()
        }
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"ms": {"type": "integer"}, "fail": {"type": "boolean"}},
               "required": ["ms", "fail"]})
    }
    async fn call(&self, arguments: Value, ctx: ToolContext) -> ToolResult {
        let id = ctx.step_id.to_string();
        {
            let mut log = self.log.lock().unwrap();
            log.events.push((Ev::Start, id.clone()));
            log.running += 1;
            log.max_running = log.max_running.max(log.running);
            let now = {
                let n = log.tool_running.entry(self.name).or_default();
                *n += 1;
                *n
            };
            let max = log.tool_max.entry(self.name).or_default();
            *max = (*max).max(now);
            log.args
                .entry(id.clone())
                .or_default()
                .push(arguments.clone());
        }
        let ms = arguments["ms"].as_u64().unwrap_or(0);
        if ms > 0 {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        } else {
            tokio::task::yield_now().await;
        }
        {
            let mut log = self.log.lock().unwrap();
            log.events.push((Ev::End, id.clone()));
            log.running -= 1;
            *log.tool_running.get_mut(self.name).unwrap() -= 1;
        }
        if arguments["fail"] == json!(true) {
            Err(ToolError::failed(format!("{id} failed on purpose")))
        } else {
            Ok(output_of(&id, arguments["text_output"] == json!(true)))
        }
    }
}

pub(super) fn engine(log: &Arc<Mutex<Log>>, config: RunConfig) -> Engine {
    engine_of(log, config, false)
}

/// [`engine`], with `rec` read-only when `read_only` (`rec2` never is).
pub(super) fn engine_of(log: &Arc<Mutex<Log>>, config: RunConfig, read_only: bool) -> Engine {
    let mut tools = ToolRegistry::new();
    for name in ["rec", "rec2"] {
        tools
            .register(Arc::new(Rec {
                name,
                log: Arc::clone(log),
                read_only: read_only && name == "rec",
            }))
            .unwrap();
    }
    // The random plans' dependencies are the ones under test: no written-order waits.
    Engine::new(Arc::new(tools))
        .with_config(config)
        .with_limits(toolplan_core::Limits {
            written_order: toolplan_core::WrittenOrder::Free,
            ..toolplan_core::Limits::default()
        })
}

/// `n` cases, and no regression files written next to the tests.
pub(super) fn cases(n: u32) -> ProptestConfig {
    ProptestConfig {
        cases: n,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

pub(super) fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

pub(super) fn config(concurrency: usize, schedule: Schedule) -> RunConfig {
    RunConfig {
        concurrency,
        schedule,
        ..RunConfig::default()
    }
}
