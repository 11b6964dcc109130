//! `toolplan._toolplan`: the native half of the `toolplan` Python package, toolplan's engine
//! in-process for Python programs (LlamaIndex and LangChain agents among them).
//!
//! The Python half (`python/toolplan/`) is the API people use: `Engine`, the `@engine.tool`
//! decorator that reads a schema from type hints, `Report`, and the framework adapters. It hands
//! this module what it has worked out, as JSON text and callables:
//!
//! * `engine.rs`, `NativeEngine` — a `toolplan_core::Engine` with its limits and run settings, and the
//!   tools registered so far; `validate`, `run_blocking` (the caller's thread waits, without the
//!   GIL) and `start` (the run goes on on this module's runtime and calls back when done: how
//!   `await engine.run(plan)` waits without blocking its event loop);
//! * `py_tool.rs`, `PyTool` — a Python callable as a `toolplan_core::Tool`: a plain function runs on
//!   one of the module's Python worker threads (`workers.rs`: threads that stay attached to the
//!   interpreter, so a call costs no thread state; a tool whose calls are quick has its result
//!   waited for briefly on the calling thread, which saves waking it), an `async def` is awaited on the event loop of
//!   the run that calls it (the run's [`RunExtension`](toolplan_core::RunExtension));
//! * `convert.rs` — values cross as Python objects built from serde_json values and back, walked
//!   with a bounded depth (a value that contains itself is an error, not a hang);
//! * `report.rs`, `NativeRun` — a finished run, converted for Python only in the parts it reads.
//!
//! One multi-threaded tokio runtime serves every engine of the process (`runtime.rs`, which also has the two ways a caller waits).

mod convert;
mod engine;
mod py_tool;
mod report;
mod runtime;
mod workers;

use pyo3::prelude::*;

/// Sets the most threads plain Python tools run on, process-wide (256 by default; more calls at
/// once wait in a queue), and returns the former maximum.
#[pyfunction]
fn set_max_worker_threads(max: usize) -> PyResult<usize> {
    if max == 0 {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "max_worker_threads must be at least 1",
        ));
    }
    Ok(workers::set_max_workers(max))
}

/// The module `toolplan._toolplan`.
#[pymodule]
fn _toolplan(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<engine::NativeEngine>()?;
    m.add_class::<runtime::RunHandle>()?;
    m.add_class::<report::NativeRun>()?;
    m.add(
        "InvalidPlanError",
        m.py().get_type::<engine::InvalidPlanError>(),
    )?;
    m.add_function(wrap_pyfunction!(set_max_worker_threads, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
