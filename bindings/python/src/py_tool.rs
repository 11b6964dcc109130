//! A Python callable as a tool. Plain functions run on the module's Python worker threads
//! ([`crate::workers`]: a slow one holds no runtime thread, and the GIL is taken only while Python
//! code runs);
//! `async def` functions are awaited on the event loop of the run that calls them, which the run
//! carries as an [`EventLoop`] extension. Whatever the function raises becomes its step's error.
//!
//! What a step timeout or a cancelled run can stop: an `async` tool's task is cancelled (the
//! coroutine sees `CancelledError`); a plain function cannot be interrupted, so its step fails at
//! once and the thread finishes the call in the background, its result dropped.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::Value;
use tokio::sync::oneshot;
use toolplan_core::{Tool, ToolAnnotations, ToolContext, ToolError, ToolResult};

use crate::convert::{describe, from_python, to_python};
use crate::workers;

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
            call_async(&self.func, &arguments, event_loop).await
        } else {
            let func = Arc::clone(&self.func);
            let (tx, rx) = oneshot::channel();
            workers::submit(Box::new(move |py| {
                let _ = tx.send(call_sync(py, &func, &arguments));
            }))
            .map_err(ToolError::Failed)?;
            rx.await.unwrap_or_else(|_| {
                Err(ToolError::Panicked(
                    "the call ended without a result".into(),
                ))
            })
        }
    }
}

/// Calls a plain function with the arguments as keyword arguments.
fn call_sync(py: Python<'_>, func: &Py<PyAny>, arguments: &Value) -> ToolResult {
    let kwargs = keyword_arguments(py, arguments)?;
    match func.bind(py).call((), Some(&kwargs)) {
        Ok(out) => from_python(&out).map_err(ToolError::Failed),
        Err(e) => Err(ToolError::Failed(describe(py, &e))),
    }
}

/// The arguments object as a dict of keyword arguments.
fn keyword_arguments<'py>(
    py: Python<'py>,
    arguments: &Value,
) -> Result<Bound<'py, PyDict>, ToolError> {
    let value = to_python(py, arguments).map_err(|e| ToolError::Failed(describe(py, &e)))?;
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
async fn call_async(func: &Py<PyAny>, arguments: &Value, event_loop: &EventLoop) -> ToolResult {
    let (tx, rx) = oneshot::channel();
    let scheduled = Python::attach(|py| -> Result<Py<PyAny>, ToolError> {
        let kwargs = keyword_arguments(py, arguments)?;
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
            Ok(out) => from_python(&out).map_err(ToolError::Failed),
            Err(e) => Err(ToolError::Failed(describe(py, &e))),
        }
    })
}
