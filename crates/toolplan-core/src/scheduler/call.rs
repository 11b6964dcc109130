//! One tool call, run on its own: the schema check of resolved arguments, the step timeout, panic
//! isolation, and the depth and size limits of the output.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use serde_json::Value;

use crate::error::ToolError;
use crate::limits::{drop_deep, json_size, value_depth};
use crate::tool::{RegisteredTool, ToolContext};

/// What a call gives the driver: the output and its size in bytes of JSON text, or the error.
pub(super) type CallResult = Result<(Value, usize), ToolError>;

/// One tool call, with everything it needs to run on its own task.
pub(super) struct Call {
    pub(super) registered: Arc<RegisteredTool>,
    pub(super) check: bool,
    pub(super) arguments: Value,
    pub(super) ctx: ToolContext,
    pub(super) timeout: Option<Duration>,
    pub(super) max_output_bytes: usize,
    pub(super) max_depth: usize,
}

impl Call {
    pub(super) async fn run(self) -> CallResult {
        let Call {
            registered,
            check,
            arguments,
            ctx,
            timeout,
            max_output_bytes,
            max_depth,
        } = self;
        if check {
            registered.check_arguments(&arguments).map_err(|detail| {
                ToolError::InvalidArguments(format!(
                    "arguments do not match the schema of tool '{}': {detail}",
                    registered.tool().name()
                ))
            })?;
        }
        let cancel = ctx.cancel.clone();
        let call = AssertUnwindSafe(registered.tool().call(arguments, ctx)).catch_unwind();
        let caught = match timeout {
            Some(limit) => match tokio::time::timeout(limit, call).await {
                Ok(caught) => caught,
                Err(_) => {
                    cancel.cancel();
                    return Err(ToolError::Timeout(limit));
                }
            },
            None => call.await,
        };
        let output =
            caught.map_err(|payload| ToolError::Panicked(panic_message(payload.as_ref())))??;
        // Depth first: measuring the size walks the value recursively.
        if value_depth(&output, max_depth).is_none() {
            let error = ToolError::Failed(format!(
                "the output nests deeper than the limit of {max_depth} levels (max_value_depth)"
            ));
            drop_deep(output);
            return Err(error);
        }
        let size = json_size(&output);
        if size > max_output_bytes {
            return Err(ToolError::Failed(format!(
                "the output is {size} bytes, more than the limit of {max_output_bytes} bytes (max_output_bytes)"
            )));
        }
        // A declared output is what validation relied on: a tool that breaks it fails its step.
        registered.check_output(&output).map_err(|detail| {
            ToolError::Failed(format!(
                "the output does not match the output schema of tool '{}': {detail}",
                registered.tool().name()
            ))
        })?;
        Ok((output, size))
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-text payload".to_owned()
    }
}
