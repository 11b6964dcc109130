//! What a run did, kept on the Rust side until Python reads it: [`NativeRun`] converts only the part
//! asked for (the outputs, the errors, the timings, the CLI's JSON document, the summary), so that a
//! run of ten thousand steps does not build a document of ten thousand entries that nobody reads.

use pyo3::prelude::*;
use serde_json::Value;
use toolplan_core::PlanRun;

use crate::convert::to_python;

/// A finished run (the Python `Report` reads it).
#[pyclass(frozen, module = "toolplan._toolplan")]
pub struct NativeRun {
    run: PlanRun,
    /// How deep a value may nest when it crosses (the engine's `max_value_depth`).
    max_depth: usize,
}

impl NativeRun {
    /// The run, to be read from Python; values nest at most `max_depth` levels.
    pub fn new(run: PlanRun, max_depth: usize) -> Self {
        NativeRun { run, max_depth }
    }
}

#[pymethods]
impl NativeRun {
    /// Output step id → its result.
    fn outputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &Value::Object(self.run.outputs_map()), self.max_depth)
    }

    /// Step id → why it failed or was skipped.
    fn errors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &Value::Object(self.run.errors_map()), self.max_depth)
    }

    /// Step id → seconds it ran, for the steps that started.
    fn timings(&self) -> Vec<(String, f64)> {
        self.run
            .steps
            .iter()
            .filter_map(|s| {
                let started = s.started?;
                Some((
                    s.id.clone(),
                    s.finished.saturating_sub(started).as_secs_f64(),
                ))
            })
            .collect()
    }

    /// How the run ended: `completed`, `cancelled`, `deadline_exceeded` or `declined`.
    #[getter]
    fn outcome(&self) -> String {
        match serde_json::to_value(self.run.outcome) {
            Ok(Value::String(name)) => name,
            _ => format!("{:?}", self.run.outcome),
        }
    }

    /// Wall time of the run, in seconds.
    #[getter]
    fn elapsed(&self) -> f64 {
        self.run.elapsed.as_secs_f64()
    }

    /// The step ids by wave.
    fn waves(&self) -> Vec<Vec<String>> {
        self.run
            .waves
            .iter()
            .map(|w| {
                w.iter()
                    .filter_map(|&i| self.run.steps.get(i).map(|s| s.id.clone()))
                    .collect()
            })
            .collect()
    }

    /// The CLI's `run --json` document.
    fn document(&self) -> String {
        self.run.to_json().to_string()
    }

    /// The text a model reads.
    fn summary(&self) -> String {
        self.run.summary()
    }
}
