//! Values between Rust and Python. JSON values become Python's `dict`, `list`, `str`, `int`,
//! `float`, `bool` and `None` directly, and a tool's result comes back the same way; a result of
//! another type goes through `json.dumps(…, default=str)`. Both walks stop at the engine's `max_value_depth`
//! levels, so a tool that returns a list containing itself, or a value nested a million levels
//! deep, fails its step with a message instead of crashing the interpreter.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::Value;

static DUMPS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static STR: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `json.dumps`.
fn dumps(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    DUMPS.import(py, "json", "dumps")
}

/// The deepest a value may be allowed to nest when it crosses (the engine's `max_value_depth`,
/// 128 by default, is the limit; it may be raised this far): both walks recurse, and Python's own
/// recursion limit is 1,000.
pub const MAX_DEPTH_CEILING: usize = 1_000;

/// The Python value of a JSON value, built directly; nested deeper than `max_depth` levels it is an
/// error (the engine has already bounded its depth by the same limit).
pub fn to_python<'py>(
    py: Python<'py>,
    value: &Value,
    max_depth: usize,
) -> PyResult<Bound<'py, PyAny>> {
    build(py, value, 0, max_depth)
}

fn build<'py>(
    py: Python<'py>,
    value: &Value,
    depth: usize,
    max_depth: usize,
) -> PyResult<Bound<'py, PyAny>> {
    if depth > max_depth {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "nested deeper than {max_depth} levels (max_value_depth)"
        )));
    }
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(build(py, item, depth + 1, max_depth)?)?;
            }
            list.into_any()
        }
        Value::Object(fields) => {
            let dict = PyDict::new(py);
            for (k, v) in fields {
                dict.set_item(k, build(py, v, depth + 1, max_depth)?)?;
            }
            dict.into_any()
        }
    })
}

/// Why a Python value could not be read directly.
enum Unread {
    /// A type this walk does not know: `json.dumps(…, default=str)` reads it instead.
    Other,
    /// Not JSON whatever reads it.
    Bad(String),
}

/// The JSON value of what a Python tool returned: `None` is `null`; dicts, lists, tuples, strings,
/// numbers and booleans are read directly; anything else (a dataclass, a datetime, a pydantic
/// model) goes through `json.dumps(…, default=str)`, so an object becomes its `str()`. Nesting
/// past `max_depth` levels (a list that contains itself among them), NaN and infinities are
/// errors: messages for the step.
pub fn from_python(obj: &Bound<'_, PyAny>, max_depth: usize) -> Result<Value, String> {
    match read(obj, 0, max_depth) {
        Ok(v) => Ok(v),
        Err(Unread::Bad(why)) => Err(format!("the result is not JSON: {why}")),
        Err(Unread::Other) => through_json(obj),
    }
}

fn read(obj: &Bound<'_, PyAny>, depth: usize, max_depth: usize) -> Result<Value, Unread> {
    if depth > max_depth {
        return Err(Unread::Bad(format!(
            "nested deeper than {max_depth} levels (max_value_depth), or it contains itself"
        )));
    }
    let bad = |e: PyErr| Unread::Bad(describe(obj.py(), &e));
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast_exact::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_exact_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::from(i));
        }
        if let Ok(u) = obj.extract::<u64>() {
            return Ok(Value::from(u));
        }
        let f: f64 = obj.extract().map_err(bad)?;
        return number(f);
    }
    if obj.is_exact_instance_of::<PyFloat>() {
        return number(obj.extract().map_err(bad)?);
    }
    if obj.is_exact_instance_of::<PyString>() {
        return obj.extract::<String>().map(Value::String).map_err(bad);
    }
    if let Ok(list) = obj.cast_exact::<PyList>() {
        let mut out = Vec::with_capacity(list.len());
        for item in list.iter() {
            out.push(read(&item, depth + 1, max_depth)?);
        }
        return Ok(Value::Array(out));
    }
    if let Ok(tuple) = obj.cast_exact::<PyTuple>() {
        let mut out = Vec::with_capacity(tuple.len());
        for item in tuple.iter() {
            out.push(read(&item, depth + 1, max_depth)?);
        }
        return Ok(Value::Array(out));
    }
    if let Ok(dict) = obj.cast_exact::<PyDict>() {
        let mut out = serde_json::Map::new();
        for (k, v) in dict.iter() {
            // As `json.dumps` writes them: string keys as they are, numbers, booleans and None
            // as their JSON text; other keys are not JSON.
            let key = if k.is_exact_instance_of::<PyString>() {
                k.extract::<String>().map_err(bad)?
            } else if k.is_none()
                || k.is_exact_instance_of::<PyBool>()
                || k.is_exact_instance_of::<PyInt>()
                || k.is_exact_instance_of::<PyFloat>()
            {
                read(&k, depth + 1, max_depth)?.to_string()
            } else {
                return Err(Unread::Other);
            };
            out.insert(key, read(&v, depth + 1, max_depth)?);
        }
        return Ok(Value::Object(out));
    }
    Err(Unread::Other)
}

fn number(f: f64) -> Result<Value, Unread> {
    serde_json::Number::from_f64(f)
        .map(Value::Number)
        .ok_or_else(|| Unread::Bad(format!("{f} is not a JSON number")))
}

/// `json.dumps(obj, default=str)` parsed back: for values with types [`read`] does not know.
fn through_json(obj: &Bound<'_, PyAny>) -> Result<Value, String> {
    let py = obj.py();
    let text: String = (|| -> PyResult<String> {
        let kwargs = PyDict::new(py);
        kwargs.set_item("default", STR.import(py, "builtins", "str")?)?;
        kwargs.set_item("ensure_ascii", false)?;
        kwargs.set_item("allow_nan", false)?;
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
