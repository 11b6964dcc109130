//! The tokio runtime every engine of the process runs on, and the two ways a Python caller waits
//! for a run: [`block_on_interruptible`] (the caller's thread waits without the GIL, and Ctrl-C
//! still stops the run) and [`RunHandle`] (a run started on the runtime, which calls back on the
//! caller's event loop when it ends and is cancelled through the handle).

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use pyo3::prelude::*;
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

static RUNTIME: OnceLock<std::io::Result<Runtime>> = OnceLock::new();

/// How often a blocked caller looks for a signal (Ctrl-C) that Python wants to raise.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// The process's runtime (multi-threaded, as many workers as cores), made on first use.
pub fn runtime() -> PyResult<&'static Runtime> {
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_name("toolplan")
                .build()
        })
        .as_ref()
        .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(format!("no tokio runtime: {e}")))
}

/// Runs `run` to its end on the runtime while the calling thread waits without the GIL. Every
/// [`SIGNAL_POLL`] the thread asks Python for pending signals; if a handler raises (Ctrl-C's
/// `KeyboardInterrupt`), `cancel` is cancelled, the run is awaited to its (prompt) end, and the
/// exception is returned.
pub fn block_on_interruptible<T: Send>(
    py: Python<'_>,
    cancel: &CancellationToken,
    run: impl Future<Output = T> + Send,
) -> PyResult<T> {
    let rt = runtime()?;
    py.detach(|| {
        rt.block_on(async {
            tokio::pin!(run);
            loop {
                tokio::select! {
                    out = &mut run => return Ok(out),
                    () = tokio::time::sleep(SIGNAL_POLL) => {
                        if let Err(e) = Python::attach(|py| py.check_signals()) {
                            cancel.cancel();
                            let _ = run.await;
                            return Err(e);
                        }
                    }
                }
            }
        })
    })
}

/// A run started with `NativeEngine.start`: `cancel()` stops it (running steps are cancelled, the
/// rest skipped); its callback still comes, with the report of what ran.
#[pyclass(frozen, module = "toolplan._toolplan")]
pub struct RunHandle {
    pub(crate) cancel: CancellationToken,
}

#[pymethods]
impl RunHandle {
    /// Cancels the run.
    fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Whether the run was cancelled.
    #[getter]
    fn cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }
}
