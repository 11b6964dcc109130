//! `NativeEngine`: a `toolplan_core::Engine` for Python. Tools are registered one by one (each
//! checked on its own at once, so a bad schema or a taken name fails its registration); the engine
//! with all of them is built on first use after a change and kept. Plans come as JSON text.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolplan_core::{
    Engine, InvalidPlan, Limits, Plan, RunConfig, RunControl, RunExtension, Tool, ToolAnnotations,
    ToolRegistry,
};
use toolplan_query::QueryPlan;

use crate::convert::MAX_DEPTH_CEILING;
use crate::py_tool::{EventLoop, PyTool};
use crate::report::NativeRun;
use crate::runtime::{RunHandle, block_on_interruptible, runtime};

create_exception!(
    _toolplan,
    InvalidPlanError,
    PyValueError,
    "A plan that does not validate; its argument is the list of every problem."
);

/// The engine, its settings and its tools.
#[pyclass(frozen, module = "toolplan._toolplan")]
pub struct NativeEngine {
    state: Mutex<State>,
}

struct State {
    limits: Limits,
    config: RunConfig,
    tools: Vec<Arc<dyn Tool>>,
    /// The engine over `tools`, built on first use after a change.
    engine: Option<Arc<Engine>>,
}

/// Seconds from Python as a duration: `None` stays `None`; anything not finite and positive is an
/// error naming the setting.
fn seconds(name: &str, value: Option<f64>) -> PyResult<Option<Duration>> {
    match value {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 && s < 1e9 => Ok(Some(Duration::from_secs_f64(s))),
        Some(s) => Err(PyValueError::new_err(format!(
            "{name} must be a positive number of seconds (or None), not {s}"
        ))),
    }
}

/// A count from Python, at least 1.
fn count(name: &str, value: Option<usize>, default: usize) -> PyResult<usize> {
    match value {
        None => Ok(default),
        Some(0) => Err(PyValueError::new_err(format!("{name} must be at least 1"))),
        Some(n) => Ok(n),
    }
}

impl NativeEngine {
    fn state(&self) -> PyResult<MutexGuard<'_, State>> {
        self.state
            .lock()
            .map_err(|_| PyRuntimeError::new_err("the engine's state was poisoned by a panic"))
    }

    /// The engine over every registered tool.
    fn engine(&self) -> PyResult<Arc<Engine>> {
        let mut state = self.state()?;
        if let Some(engine) = &state.engine {
            return Ok(Arc::clone(engine));
        }
        let mut registry = ToolRegistry::new();
        registry
            .register_all(state.tools.iter().cloned())
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let engine = Arc::new(
            Engine::new(Arc::new(registry))
                .with_limits(state.limits.clone())
                .with_config(state.config.clone()),
        );
        state.engine = Some(Arc::clone(&engine));
        Ok(engine)
    }

    /// The plan compiled, or the problems as an `InvalidPlanError`.
    fn compile(engine: &Engine, plan: &str) -> PyResult<Plan> {
        engine.compile(plan).map_err(|e| invalid(&e))
    }

    /// A query plan compiled into a tool plan whose branches call the tool `synthesizer`, with its
    /// root's step id; or the problems as an `InvalidPlanError`.
    fn compile_query(engine: &Engine, plan: &str, synthesizer: &str) -> PyResult<(Plan, String)> {
        query_plan(engine, plan, synthesizer)
            .map(|q| (q.plan, q.root))
            .map_err(|e| invalid(&e))
    }

    /// Starts `plan` on the runtime; see `start`.
    fn spawn(
        engine: Arc<Engine>,
        plan: Plan,
        event_loop: Py<PyAny>,
        on_done: Py<PyAny>,
    ) -> PyResult<RunHandle> {
        let cancel = CancellationToken::new();
        let control = RunControl {
            extension: Some(RunExtension::new(EventLoop(Python::attach(|py| {
                event_loop.clone_ref(py)
            })))),
            ..RunControl::with_cancel(cancel.clone())
        };
        runtime()?.spawn(async move {
            let run = engine.run(&plan, control).await;
            let max_depth = engine.config().max_value_depth;
            Python::attach(|py| {
                // A loop closed in the meantime has no one waiting: nothing to tell.
                let _ = Py::new(py, NativeRun::new(run, max_depth)).and_then(|run| {
                    event_loop
                        .bind(py)
                        .call_method1("call_soon_threadsafe", (on_done, run))
                });
            });
        });
        Ok(RunHandle { cancel })
    }

    /// Runs `plan` while the calling thread waits; see `run_blocking`.
    fn block(py: Python<'_>, engine: &Engine, plan: &Plan) -> PyResult<NativeRun> {
        let cancel = CancellationToken::new();
        let control = RunControl::with_cancel(cancel.clone());
        let run = block_on_interruptible(py, &cancel, engine.run(plan, control))?;
        Ok(NativeRun::new(run, engine.config().max_value_depth))
    }
}

fn problems(e: &InvalidPlan) -> Vec<String> {
    e.problems.iter().map(ToString::to_string).collect()
}

/// What `validate` answers: every problem, none for a plan that compiled.
fn problems_of<T>(compiled: Result<T, InvalidPlan>) -> Vec<String> {
    compiled.err().map(|e| problems(&e)).unwrap_or_default()
}

/// A query plan compiled against the engine's tools, its branches calling `synthesizer`.
fn query_plan(engine: &Engine, plan: &str, synthesizer: &str) -> Result<QueryPlan, InvalidPlan> {
    toolplan_query::compile_plan(plan, engine.tools(), synthesizer, engine.limits())
}

fn invalid(e: &InvalidPlan) -> PyErr {
    InvalidPlanError::new_err(problems(e))
}

#[pymethods]
impl NativeEngine {
    /// An engine with the CLI's defaults for every setting not given.
    #[new]
    #[pyo3(signature = (*, max_concurrency=None, step_timeout=None, deadline=None, max_steps=None,
                        max_plan_bytes=None, max_argument_bytes=None, max_output_bytes=None,
                        max_value_depth=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        max_concurrency: Option<usize>,
        step_timeout: Option<f64>,
        deadline: Option<f64>,
        max_steps: Option<usize>,
        max_plan_bytes: Option<usize>,
        max_argument_bytes: Option<usize>,
        max_output_bytes: Option<usize>,
        max_value_depth: Option<usize>,
    ) -> PyResult<Self> {
        let mut limits = Limits::default();
        let mut config = RunConfig::default();
        config.concurrency = count("max_concurrency", max_concurrency, config.concurrency)?;
        config.step_timeout = seconds("step_timeout", step_timeout)?;
        config.deadline = seconds("deadline", deadline)?;
        config.max_output_bytes = count(
            "max_output_bytes",
            max_output_bytes,
            config.max_output_bytes,
        )?;
        config.max_value_depth = count("max_value_depth", max_value_depth, config.max_value_depth)?;
        if config.max_value_depth > MAX_DEPTH_CEILING {
            return Err(PyValueError::new_err(format!(
                "max_value_depth must be at most {MAX_DEPTH_CEILING} (Python's own recursion limit)"
            )));
        }
        limits.max_steps = count("max_steps", max_steps, limits.max_steps)?;
        limits.max_plan_bytes = count("max_plan_bytes", max_plan_bytes, limits.max_plan_bytes)?;
        limits.max_argument_bytes = count(
            "max_argument_bytes",
            max_argument_bytes,
            limits.max_argument_bytes,
        )?;
        Ok(Self {
            state: Mutex::new(State {
                limits,
                config,
                tools: Vec::new(),
                engine: None,
            }),
        })
    }

    /// Registers a Python function as a tool; returns the warnings about its schema (a schema that
    /// contradicts itself is read one consistent way). Raises `ValueError` for a name already
    /// taken or a schema that is not one.
    #[pyo3(signature = (name, description, parameters, func, *, is_async, read_only=None,
                        idempotent=None, destructive=None))]
    #[allow(clippy::too_many_arguments)]
    fn register(
        &self,
        name: String,
        description: String,
        parameters: &str,
        func: Py<PyAny>,
        is_async: bool,
        read_only: Option<bool>,
        idempotent: Option<bool>,
        destructive: Option<bool>,
    ) -> PyResult<Vec<String>> {
        let parameters: Value = serde_json::from_str(parameters)
            .map_err(|e| PyValueError::new_err(format!("parameters of '{name}': {e}")))?;
        let max_depth = self.state()?.config.max_value_depth;
        let tool: Arc<dyn Tool> = Arc::new(PyTool {
            name: name.clone(),
            description,
            parameters,
            annotations: ToolAnnotations {
                read_only,
                idempotent,
                destructive,
                ..ToolAnnotations::default()
            },
            is_async,
            pace: Arc::default(),
            max_depth,
            func: Arc::new(func),
        });
        let mut state = self.state()?;
        if state.tools.iter().any(|t| t.name() == name) {
            return Err(PyValueError::new_err(format!(
                "a tool named '{name}' is already registered"
            )));
        }
        // Checked alone now, so that a bad schema fails here and not at the next run.
        let mut alone = ToolRegistry::new();
        alone
            .register(Arc::clone(&tool))
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let warnings = alone
            .warnings()
            .map(|(_, w)| w.to_owned())
            .collect::<Vec<_>>();
        state.tools.push(tool);
        state.engine = None;
        Ok(warnings)
    }

    /// The registered tools' names, in the order they were registered.
    fn tool_names(&self) -> PyResult<Vec<String>> {
        Ok(self
            .state()?
            .tools
            .iter()
            .map(|t| t.name().to_owned())
            .collect())
    }

    /// Every problem of a plan (JSON text), empty when it is sound.
    fn validate(&self, plan: &str) -> PyResult<Vec<String>> {
        Ok(problems_of(self.engine()?.compile(plan)))
    }

    /// Runs a plan (JSON text) while the calling thread waits without the GIL; Ctrl-C cancels it.
    /// Returns what the run did. Raises `InvalidPlanError` before anything runs.
    fn run_blocking(&self, py: Python<'_>, plan: &str) -> PyResult<NativeRun> {
        let engine = self.engine()?;
        let plan = Self::compile(&engine, plan)?;
        Self::block(py, &engine, &plan)
    }

    /// Starts a plan (JSON text) on the runtime and returns its handle. When the run ends,
    /// `on_done(run)` is called on `event_loop` (`call_soon_threadsafe`), whose
    /// `async` tools it awaits there. Raises `InvalidPlanError` before anything runs.
    fn start(&self, plan: &str, event_loop: Py<PyAny>, on_done: Py<PyAny>) -> PyResult<RunHandle> {
        let engine = self.engine()?;
        let plan = Self::compile(&engine, plan)?;
        Self::spawn(engine, plan, event_loop, on_done)
    }

    /// Every problem of a query plan (LlamaIndex's `QueryPlan` format, JSON text) whose branches
    /// call the registered tool `synthesizer`; empty when it is sound.
    fn validate_query_plan(&self, plan: &str, synthesizer: &str) -> PyResult<Vec<String>> {
        Ok(problems_of(query_plan(&*self.engine()?, plan, synthesizer)))
    }

    /// Runs a query plan as `run_blocking` runs a tool plan; returns what the run did and the root
    /// node's step id.
    fn run_query_plan_blocking(
        &self,
        py: Python<'_>,
        plan: &str,
        synthesizer: &str,
    ) -> PyResult<(NativeRun, String)> {
        let engine = self.engine()?;
        let (plan, root) = Self::compile_query(&engine, plan, synthesizer)?;
        Ok((Self::block(py, &engine, &plan)?, root))
    }

    /// Starts a query plan as `start` starts a tool plan; returns the handle and the root node's
    /// step id.
    fn start_query_plan(
        &self,
        plan: &str,
        synthesizer: &str,
        event_loop: Py<PyAny>,
        on_done: Py<PyAny>,
    ) -> PyResult<(RunHandle, String)> {
        let engine = self.engine()?;
        let (plan, root) = Self::compile_query(&engine, plan, synthesizer)?;
        Ok((Self::spawn(engine, plan, event_loop, on_done)?, root))
    }
}
