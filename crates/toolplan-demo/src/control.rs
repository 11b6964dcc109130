//! `sleep` and `fail`: tools for trying out timing, timeouts and error handling.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolplan_core::{FnTool, Tool, ToolAnnotations, ToolError};

/// The longest a `sleep` call may ask for, in milliseconds (ten minutes).
pub const MAX_SLEEP_MS: u64 = 600_000;

/// `sleep`: waits, then returns its value.
pub fn sleep() -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "sleep",
        "Waits ms milliseconds, then returns value (null if not given).",
        json!({"type": "object", "properties": {
                 "ms": {"type": "integer", "minimum": 0, "maximum": MAX_SLEEP_MS, "description": "How long to wait."},
                 "value": {"description": "What to return."}},
               "required": ["ms"], "additionalProperties": false}),
        |args: Value, _| async move {
            let ms = args["ms"]
                .as_u64()
                .ok_or_else(|| ToolError::invalid("ms must be a whole number of milliseconds"))?;
            tokio::time::sleep(Duration::from_millis(ms.min(MAX_SLEEP_MS))).await;
            Ok(args.get("value").cloned().unwrap_or(Value::Null))
        },
    )
    .with_annotations(ToolAnnotations::READ_ONLY))
}

/// `fail`: always fails.
pub fn fail() -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "fail",
        "Always fails, with the given message; for trying out error handling.",
        json!({"type": "object", "properties": {"message": {"type": "string", "description": "The error message."}},
               "additionalProperties": false}),
        |args: Value, _| async move {
            Err(ToolError::failed(
                args["message"].as_str().unwrap_or("this tool always fails"),
            ))
        },
    )
    .with_annotations(ToolAnnotations::READ_ONLY))
}
