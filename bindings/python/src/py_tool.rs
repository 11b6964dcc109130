//! A Python callable as a tool. Plain functions run on the module's Python worker threads
//! ([`crate::workers`]: a slow one holds no runtime thread, and the GIL is taken only while Python
//! code runs); `async def` functions are awaited on the event loop of the run that calls them,
//! which the run carries as an [`EventLoop`] extension. Whatever the function raises becomes its
//! step's error.
//!
//! A call crosses threads twice (to a worker, and its result back), and waking a parked thread
//! costs more than a trivial Python function. So a tool whose last [`QUICK_STREAK`] calls each took
//! at most [`QUICK_CALL`] ([`Pace`]) has its result waited for on the thread that made the call, for
//! at most [`QUICK_CALL`], before that thread goes on to other work; and an idle worker looks for
//! the next call for a moment before it parks ([`crate::workers`]). Neither wait is longer than
//! that, so a tool that turns slow costs its caller at most [`QUICK_CALL`] and then runs as any
//! other (the first slow call starts the count again).
//!
//! What a step timeout or a cancelled run can stop: an `async` tool's task is cancelled (the
//! coroutine sees `CancelledError`); a plain function cannot be interrupted, so its step fails at
//! once and the thread finishes the call in the background, its result dropped.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::Value;
use tokio::sync::oneshot;
use toolplan_core::{Tool, ToolAnnotations, ToolContext, ToolError, ToolResult};

use crate::convert::{describe, from_python, to_python};
use crate::workers;

/// The longest call of a plain function that counts as quick, and the longest its caller waits for
/// such a call's result without giving up its thread: a few times what waking a parked thread
/// costs (tens of µs on a 2-core machine).
pub const QUICK_CALL: Duration = Duration::from_micros(200);

/// Quick calls in a row after which a tool's results are waited for on the calling thread.
pub const QUICK_STREAK: u32 = 8;

/// How fast a plain function's recent calls were: where its next call runs.
#[derive(Debug, Default)]
pub struct Pace {
    /// Calls in a row that took at most [`QUICK_CALL`].
    quick: AtomicU32,
}

impl Pace {
    /// Whether the last [`QUICK_STREAK`] calls were quick.
    pub fn proven_quick(&self) -> bool {
        self.quick.load(Ordering::Relaxed) >= QUICK_STREAK
    }

    /// Counts a call that took `took`: a slow one starts the count again.
    pub fn record(&self, took: Duration) {
        if took <= QUICK_CALL {
            let _ = self
                .quick
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                    Some(n.saturating_add(1))
                });
        } else {
            self.quick.store(0, Ordering::Relaxed);
        }
    }
}

/// The event loop a run's `async` tools are awaited on (the loop of `await engine.run(...)`).
pub struct EventLoop(pub Py<PyAny>);

/// A Python function registered as a tool.
pub struct PyTool {
    /// The tool's name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// The JSON Schema of its arguments (an object; the arguments are its keyword arguments).
    pub parameters: Value,
    /// What it says of its effects.
    pub annotations: ToolAnnotations,
    /// Whether it is an `async def` (its call returns a coroutine).
    pub is_async: bool,
    /// How fast its recent calls were.
    pub pace: Arc<Pace>,
    /// How deep its arguments and results may nest (the engine's `max_value_depth`).
    pub max_depth: usize,
    /// The function.
    pub func: Arc<Py<PyAny>>,
}

#[async_trait]
impl Tool for PyTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    fn annotations(&self) -> ToolAnnotations {
        self.annotations
    }

    async fn call(&self, arguments: Value, ctx: ToolContext) -> ToolResult {
        if self.is_async {
            let Some(event_loop) = ctx.extension.as_ref().and_then(|e| e.get::<EventLoop>()) else {
                return Err(ToolError::failed(format!(
                    "'{}' is an async function: run the plan with `await engine.run(plan)` (or \
                     `engine.run_sync`, which starts an event loop for it)",
                    self.name
                )));
            };
            call_async(&self.func, &arguments, event_loop, self.max_depth).await
        } else {
            let func = Arc::clone(&self.func);
            let pace = Arc::clone(&self.pace);
            let max_depth = self.max_depth;
            let (tx, mut rx) = oneshot::channel();
            let quick = self.pace.proven_quick();
            workers::submit(Box::new(move |py| {
                let began = Instant::now();
                let out = call_sync(py, &func, &arguments, max_depth);
                pace.record(began.elapsed());
                let _ = tx.send(out);
            }))
            .map_err(ToolError::Failed)?;
            let result = match quick.then(|| wait_briefly(&mut rx)).flatten() {
                Some(result) => result,
                None => rx.await.map_err(|_| ()),
            };
            result.unwrap_or_else(|_| {
                Err(ToolError::Panicked(
                    "the call ended without a result".into(),
                ))
            })
        }
    }
}

/// A result that comes within [`QUICK_CALL`], waited for without giving up the thread (a parked
/// thread's wake-up costs more than a quick call); `None` when it has not come by then.
fn wait_briefly<T>(rx: &mut oneshot::Receiver<T>) -> Option<Result<T, ()>> {
    workers::spin_until(QUICK_CALL, || match rx.try_recv() {
        Ok(value) => Some(Ok(value)),
        Err(oneshot::error::TryRecvError::Closed) => Some(Err(())),
        Err(oneshot::error::TryRecvError::Empty) => None,
    })
}

/// Calls a plain function with the arguments as keyword arguments.
fn call_sync(py: Python<'_>, func: &Py<PyAny>, arguments: &Value, max_depth: usize) -> ToolResult {
    let kwargs = keyword_arguments(py, arguments, max_depth)?;
    match func.bind(py).call((), Some(&kwargs)) {
        Ok(out) => from_python(&out, max_depth).map_err(ToolError::Failed),
        Err(e) => Err(ToolError::Failed(describe(py, &e))),
    }
}

/// The arguments object as a dict of keyword arguments.
fn keyword_arguments<'py>(
    py: Python<'py>,
    arguments: &Value,
    max_depth: usize,
) -> Result<Bound<'py, PyDict>, ToolError> {
    let value =
        to_python(py, arguments, max_depth).map_err(|e| ToolError::Failed(describe(py, &e)))?;
    value
        .cast_into::<PyDict>()
        .map_err(|_| ToolError::invalid("the arguments are not an object"))
}

/// Told by `concurrent.futures.Future.add_done_callback` that the coroutine has ended.
#[pyclass(frozen)]
struct Done {
    tx: Mutex<Option<oneshot::Sender<()>>>,
}

#[pymethods]
impl Done {
    fn __call__(&self, _future: &Bound<'_, PyAny>) {
        if let Some(tx) = self.tx.lock().ok().and_then(|mut t| t.take()) {
            let _ = tx.send(());
        }
    }
}

/// The `concurrent.futures.Future` of a coroutine scheduled on a loop; dropping it cancels the
/// coroutine's task, so a step that times out or a run that is cancelled stops it.
struct Scheduled(Option<Py<PyAny>>);

impl Drop for Scheduled {
    fn drop(&mut self) {
        if let Some(future) = self.0.take() {
            Python::attach(|py| {
                let _ = future.bind(py).call_method0("cancel");
            });
        }
    }
}

/// Calls an `async def` with the arguments as keyword arguments and awaits the coroutine on the
/// run's event loop (`asyncio.run_coroutine_threadsafe`).
async fn call_async(
    func: &Py<PyAny>,
    arguments: &Value,
    event_loop: &EventLoop,
    max_depth: usize,
) -> ToolResult {
    let (tx, rx) = oneshot::channel();
    let scheduled = Python::attach(|py| -> Result<Py<PyAny>, ToolError> {
        let kwargs = keyword_arguments(py, arguments, max_depth)?;
        let failed = |e: PyErr| ToolError::Failed(describe(py, &e));
        let coroutine = func.bind(py).call((), Some(&kwargs)).map_err(failed)?;
        let future = py
            .import("asyncio")
            .and_then(|asyncio| {
                asyncio.call_method1(
                    "run_coroutine_threadsafe",
                    (coroutine, event_loop.0.bind(py)),
                )
            })
            .map_err(failed)?;
        let done = Done {
            tx: Mutex::new(Some(tx)),
        };
        future
            .call_method1("add_done_callback", (done,))
            .map_err(failed)?;
        Ok(future.unbind())
    })?;
    let mut scheduled = Scheduled(Some(scheduled));
    // The callback is gone without a word only when the loop is closed before the task ends.
    let ended = rx.await.is_ok();
    let Some(future) = scheduled.0.take() else {
        return Err(ToolError::Cancelled);
    };
    Python::attach(|py| {
        let future = future.bind(py);
        if !ended
            && !future
                .call_method0("done")
                .and_then(|d| d.is_truthy())
                .unwrap_or(false)
        {
            let _ = future.call_method0("cancel");
            return Err(ToolError::failed(
                "the event loop stopped before the call ended",
            ));
        }
        match future.call_method0("result") {
            Ok(out) => from_python(&out, max_depth).map_err(ToolError::Failed),
            Err(e) => Err(ToolError::Failed(describe(py, &e))),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_is_quick_after_a_streak_of_quick_calls_and_not_after_a_slow_one() {
        let pace = Pace::default();
        for _ in 0..QUICK_STREAK - 1 {
            pace.record(Duration::from_micros(5));
        }
        assert!(!pace.proven_quick());
        pace.record(QUICK_CALL);
        assert!(pace.proven_quick());
        pace.record(QUICK_CALL + Duration::from_micros(1));
        assert!(!pace.proven_quick());
    }

    #[test]
    fn a_brief_wait_takes_a_result_that_is_there_and_gives_up_on_one_that_is_not() {
        let (tx, mut rx) = oneshot::channel();
        tx.send(7).ok();
        assert_eq!(wait_briefly(&mut rx), Some(Ok(7)));

        let (_tx, mut rx) = oneshot::channel::<i32>();
        let began = Instant::now();
        assert_eq!(wait_briefly(&mut rx), None);
        assert!(began.elapsed() >= QUICK_CALL);

        let (tx, mut rx) = oneshot::channel::<i32>();
        drop(tx);
        assert_eq!(wait_briefly(&mut rx), Some(Err(())));
    }
}
