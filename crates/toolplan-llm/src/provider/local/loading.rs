//! Loading a GGUF model file: llama.cpp's backend is initialised once per process, and each file is
//! loaded once per process and path and shared (through a process-wide cache of weak references) by
//! every [`LocalModel`](super::LocalModel) on it, with its chat template and its KV-cache session.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatTemplate, LlamaModel};
use llama_cpp_2::{LogOptions, send_logs_to_tracing};

use super::files::missing_model;
use super::kv_cache::Session;
use super::prompt;
use super::reply::ReplyMode;
use crate::error::LlmError;
use crate::message::ChatRequest;

/// llama.cpp's backend, initialised once per process (its logs go to `tracing`).
pub(super) fn backend() -> Result<&'static LlamaBackend, LlmError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            send_logs_to_tracing(LogOptions::default());
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| LlmError::Local(format!("cannot initialise llama.cpp: {e}")))
}

/// A loaded model file, shared by every [`LocalModel`](super::LocalModel) on its path.
pub(super) struct Shared {
    /// The file (canonical path).
    pub(super) path: PathBuf,
    /// The model llama.cpp loaded.
    pub(super) model: LlamaModel,
    /// Its chat template (ChatML when the file has none).
    pub(super) template: LlamaChatTemplate,
    /// How long loading took.
    pub(super) load_time: Duration,
    /// The KV cache calls on this model share; one call holds it at a time.
    pub(super) session: Arc<tokio::sync::Mutex<Session>>,
}

impl Shared {
    /// The prompt for `request`: its turns ([`prompt::render`]) through the chat template, with the
    /// assistant's turn opened.
    pub(super) fn prompt(
        &self,
        request: &ChatRequest,
        mode: ReplyMode,
    ) -> Result<String, LlmError> {
        prompt::apply_template(&self.model, &self.template, &prompt::render(request, mode))
    }
}

/// Loads `path`, or returns the model already loaded from it.
pub(super) fn load_shared(path: &Path) -> Result<Arc<Shared>, LlmError> {
    static LOADED: OnceLock<Mutex<HashMap<PathBuf, Weak<Shared>>>> = OnceLock::new();
    let key = std::fs::canonicalize(path).map_err(|_| missing_model(path))?;
    if !key.is_file() {
        return Err(missing_model(path));
    }
    let mut loaded = LOADED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(shared) = loaded.get(&key).and_then(Weak::upgrade) {
        return Ok(shared);
    }
    let backend = backend()?;
    let start = Instant::now();
    let model =
        LlamaModel::load_from_file(backend, &key, &LlamaModelParams::default()).map_err(|e| {
            LlmError::Local(format!(
                "cannot load the GGUF model {}: {e}",
                path.display()
            ))
        })?;
    // The GGUF's own template when it has one; ChatML (the Qwen family's) otherwise.
    let template = model
        .chat_template(None)
        .or_else(|_| LlamaChatTemplate::new("chatml"))
        .map_err(|e| LlmError::Local(format!("no usable chat template: {e}")))?;
    let shared = Arc::new(Shared {
        path: key.clone(),
        model,
        template,
        load_time: start.elapsed(),
        session: Arc::default(),
    });
    loaded.retain(|_, weak| weak.strong_count() > 0);
    loaded.insert(key, Arc::downgrade(&shared));
    Ok(shared)
}
