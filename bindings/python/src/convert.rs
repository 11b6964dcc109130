//! Values between Rust and Python, as JSON text: `json.loads` / `json.dumps` on the Python side,
//! serde_json on this one. Both bound what they read (serde_json refuses nesting past 128 levels;
//! Python's `json` refuses cycles and raises `RecursionError` on deep nesting), so a tool that
//! returns a self-referencing list or a value nested a million levels deep fails its step with a
//! message instead of crashing the interpreter.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString};
use serde_json::Value;

static LOADS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static DUMPS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static STR: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `json.loads`.
fn loads(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    LOADS.import(py, "json", "loads")
}

/// `json.dumps`.
fn dumps(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    DUMPS.import(py, "json", "dumps")
}

/// The Python value of a JSON value.
pub fn to_python<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    loads(py)?.call1((text,))
}

/// The JSON value of what a Python tool returned: `None` is `null`; a value `json` cannot write
/// (a dataclass, a datetime) becomes its `str()`; a string is itself (not parsed). Errors are
/// messages for the step.
pub fn from_python(obj: &Bound<'_, PyAny>) -> Result<Value, String> {
    let py = obj.py();
    if obj.is_instance_of::<PyString>() {
        return obj
            .extract::<String>()
            .map(Value::String)
            .map_err(|e| describe(py, &e));
    }
    let text: String = (|| -> PyResult<String> {
        let kwargs = PyDict::new(py);
        kwargs.set_item("default", STR.import(py, "builtins", "str")?)?;
        kwargs.set_item("ensure_ascii", false)?;
        dumps(py)?.call((obj,), Some(&kwargs))?.extract()
    })()
    .map_err(|e| format!("the result is not JSON: {}", describe(py, &e)))?;
    serde_json::from_str(&text).map_err(|e| format!("the result is not JSON: {e}"))
}

/// A Python exception as a step's error message: `TypeName: message`.
pub fn describe(py: Python<'_>, err: &PyErr) -> String {
    let name = err
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".to_owned());
    let message = err
        .value(py)
        .str()
        .map(|s| s.to_string())
        .unwrap_or_default();
    if message.is_empty() {
        name
    } else {
        format!("{name}: {message}")
    }
}
