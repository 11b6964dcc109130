//! Where the local models live: the model directory, the files of the default and the small model,
//! and the command that fetches them.

use std::path::{Path, PathBuf};

use crate::error::LlmError;

/// File name of the default model: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M.
pub const DEFAULT_MODEL_FILE: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
/// File name of the small model (for tests): Qwen2.5-Coder-0.5B-Instruct, Q4_K_M.
pub const SMALL_MODEL_FILE: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
/// The environment variable naming the model directory (default `~/.cache/toolplan/models`).
pub const MODEL_DIR_ENV: &str = "TOOLPLAN_MODEL_DIR";

/// The directory the models are fetched into and looked up in: `$TOOLPLAN_MODEL_DIR`, or
/// `~/.cache/toolplan/models`.
pub fn model_dir() -> PathBuf {
    match std::env::var_os(MODEL_DIR_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => std::env::home_dir()
            .unwrap_or_default()
            .join(".cache/toolplan/models"),
    }
}

/// Where the default model ([`DEFAULT_MODEL_FILE`]) is expected.
pub fn default_model_path() -> PathBuf {
    model_dir().join(DEFAULT_MODEL_FILE)
}

/// Where the small model ([`SMALL_MODEL_FILE`]) is expected.
pub fn small_model_path() -> PathBuf {
    model_dir().join(SMALL_MODEL_FILE)
}

/// The command that fetches the model expected at `path`, if it is one of the known ones.
pub fn fetch_command(path: &Path) -> Option<&'static str> {
    match path.file_name().and_then(|n| n.to_str()) {
        Some(DEFAULT_MODEL_FILE) => Some("bash scripts/fetch-model.sh default"),
        Some(SMALL_MODEL_FILE) => Some("bash scripts/fetch-model.sh small"),
        _ => None,
    }
}

/// The error for a model file that is not there, naming the command that fetches it.
pub(super) fn missing_model(path: &Path) -> LlmError {
    let how = match fetch_command(path) {
        Some(command) => format!(
            "fetch it with `{command}` (run in the toolplan repository; it honours ${MODEL_DIR_ENV})"
        ),
        None => "give the path of a GGUF chat model, or fetch the default one with \
                 `bash scripts/fetch-model.sh default` (run in the toolplan repository)"
            .to_owned(),
    };
    LlmError::Config(format!("no local model at {}: {how}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_paths_follow_the_model_dir() {
        assert!(default_model_path().ends_with(DEFAULT_MODEL_FILE));
        assert!(small_model_path().ends_with(SMALL_MODEL_FILE));
        assert_eq!(default_model_path().parent(), Some(model_dir().as_path()));
        assert_eq!(
            fetch_command(&default_model_path()),
            Some("bash scripts/fetch-model.sh default")
        );
        assert_eq!(
            fetch_command(&small_model_path()),
            Some("bash scripts/fetch-model.sh small")
        );
        assert_eq!(fetch_command(Path::new("/x/other.gguf")), None);
    }
}
