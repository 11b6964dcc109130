//! [`FnTool`]: a tool defined by its name, description, parameter schema and an async closure, so a
//! tool needs no struct and no `impl Tool` block of its own.

use std::fmt;
use std::future::Future;

use async_trait::async_trait;
use serde_json::Value;

use crate::tool::{Tool, ToolAnnotations, ToolContext, ToolResult};

/// A tool made of a name, a description, a JSON Schema of its arguments and an async closure that
/// serves the calls.
///
/// ```
/// use std::sync::Arc;
/// use serde_json::json;
/// use toolplan_core::{FnTool, Tool, ToolError, ToolRegistry};
///
/// let double = FnTool::new(
///     "double",
///     "Doubles a number.",
///     json!({"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}),
///     |arguments, _ctx| async move {
///         let x = arguments["x"].as_f64().ok_or_else(|| ToolError::invalid("x must be a number"))?;
///         Ok(json!(x * 2.0))
///     },
/// );
/// let mut registry = ToolRegistry::new();
/// registry.register(Arc::new(double)).expect("a valid tool");
/// assert!(registry.contains("double"));
/// ```
pub struct FnTool<F> {
    name: String,
    description: String,
    parameters: Value,
    annotations: ToolAnnotations,
    output_schema: Option<Value>,
    call: F,
}

impl<F, Fut> FnTool<F>
where
    F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ToolResult> + Send + 'static,
{
    /// A tool named `name` (what a plan's `tool` field says), described by `description` (what people
    /// and models read), taking arguments that `parameters` (a JSON Schema) describes, and served by
    /// `call`, which gets the arguments (references resolved, checked against the schema) and the
    /// call's [`ToolContext`].
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        call: F,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters,
            annotations: ToolAnnotations::default(),
            output_schema: None,
            call,
        }
    }

    /// Says what the tool's calls do beyond answering ([`Tool::annotations`]; default: nothing
    /// known).
    pub fn with_annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.annotations = annotations;
        self
    }

    /// Declares the JSON Schema of what the tool returns ([`Tool::output_schema`]): plans are
    /// checked against it before they run, and each output when the tool returns.
    pub fn with_output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }
}

#[async_trait]
impl<F, Fut> Tool for FnTool<F>
where
    F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ToolResult> + Send + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    async fn call(&self, arguments: Value, ctx: ToolContext) -> ToolResult {
        (self.call)(arguments, ctx).await
    }

    fn annotations(&self) -> ToolAnnotations {
        self.annotations
    }

    fn output_schema(&self) -> Option<Value> {
        self.output_schema.clone()
    }
}

impl<F> fmt::Debug for FnTool<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnTool")
            .field("name", &self.name)
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::json;

    use super::*;
    use crate::error::ToolError;
    use crate::tool::ToolRegistry;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
    }

    #[tokio::test]
    async fn serves_calls_with_the_closure() {
        let tool = FnTool::new("shout", "Upper-cases text.", schema(), |a, _| async move {
            let text = a["text"].as_str().unwrap_or_default().to_uppercase();
            Ok(Value::String(text))
        });
        assert_eq!(tool.name(), "shout");
        assert_eq!(tool.description(), "Upper-cases text.");
        assert_eq!(tool.parameters(), schema());
        let out = tool
            .call(json!({"text": "hi"}), ToolContext::detached())
            .await;
        assert_eq!(out, Ok(json!("HI")));
    }

    #[tokio::test]
    async fn passes_the_context_and_errors_through() {
        let tool = FnTool::new("who", "Names its step.", json!({}), |_, ctx| async move {
            Err(ToolError::failed(format!("step {}", ctx.step_id)))
        });
        let ctx = ToolContext {
            step_id: Arc::from("s1"),
            ..ToolContext::detached()
        };
        let err = tool.call(json!({}), ctx).await.unwrap_err();
        assert_eq!(err.to_string(), "step s1");
    }

    #[tokio::test]
    async fn keeps_captured_state_across_calls() {
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&calls);
        let tool = FnTool::new("count", "Counts its calls.", json!({}), move |_, _| {
            let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
            async move { Ok(json!(n)) }
        });
        let mut registry = ToolRegistry::new();
        registry.register(Arc::new(tool)).unwrap();
        let tool = registry.get("count").unwrap().tool();
        assert_eq!(
            tool.call(json!({}), ToolContext::detached()).await,
            Ok(json!(1))
        );
        assert_eq!(
            tool.call(json!({}), ToolContext::detached()).await,
            Ok(json!(2))
        );
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn debug_shows_the_name() {
        let tool = FnTool::new("t", "d", json!({}), |a, _| async move { Ok(a) });
        assert!(format!("{tool:?}").contains("\"t\""));
    }
}
