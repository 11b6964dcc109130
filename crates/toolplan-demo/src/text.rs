//! `echo` and `concat`: tools that hand text back.

use std::sync::Arc;

use serde_json::{Value, json};
use toolplan_core::{FnTool, Tool, ToolAnnotations, output_from_text, value_as_text};

/// `echo`: returns its text (text that is JSON comes back as JSON).
pub fn echo() -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "echo",
        "Returns the given text unchanged (text that is JSON comes back as JSON).",
        json!({"type": "object", "properties": {"text": {"description": "The text (or any JSON value) to return."}},
               "required": ["text"], "additionalProperties": false}),
        |args: Value, _| async move {
            Ok(match &args["text"] {
                Value::String(s) => output_from_text(s.as_str()),
                other => other.clone(),
            })
        },
    )
    .with_annotations(ToolAnnotations::READ_ONLY))
}

/// `concat`: joins two values as text.
pub fn concat() -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "concat",
        "Concatenates a and b into one text (values that are not text are written as JSON).",
        json!({"type": "object", "properties": {"a": {"description": "First part."}, "b": {"description": "Second part."}},
               "required": ["a", "b"], "additionalProperties": false}),
        |args: Value, _| async move {
            Ok(Value::String(
                value_as_text(&args["a"]).into_owned() + &value_as_text(&args["b"]),
            ))
        },
    )
    .with_annotations(ToolAnnotations::READ_ONLY)
    .with_output_schema(json!({"type": "string"})))
}
