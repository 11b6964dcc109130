//! The tool trait every tool source implements (built-in, MCP, search, LLM-backed), and the registry
//! that plans are validated and run against.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::{RegistryError, ToolError};

/// What a tool returns: JSON (text that is not JSON is a JSON string), or an error.
pub type ToolResult = Result<Value, ToolError>;

/// What a tool knows about the call it is serving.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The id of the plan step being run (empty outside plans).
    pub step_id: Arc<str>,
    /// Cancelled when the plan is cancelled or the step times out. Tools that start work outside their
    /// own future (a subprocess, a remote job) watch it to stop that work; work inside the future is
    /// stopped by dropping the future.
    pub cancel: CancellationToken,
    /// What the caller attached to this run for its tools
    /// ([`RunControl::extension`](crate::RunControl::extension)); `None` when nothing was.
    pub extension: Option<RunExtension>,
}

impl ToolContext {
    /// A context for a call outside any plan.
    pub fn detached() -> Self {
        Self {
            step_id: Arc::from(""),
            cancel: CancellationToken::new(),
            extension: None,
        }
    }
}

/// Data a caller attaches to one run for the tools it calls: what a tool needs that differs from
/// run to run and is not an argument (the Python binding's event loop, on which the run's `async`
/// tools are awaited). Tools read it from [`ToolContext::extension`] by its type.
#[derive(Clone)]
pub struct RunExtension(Arc<dyn std::any::Any + Send + Sync>);

impl RunExtension {
    /// Attaches `value`.
    pub fn new<T: std::any::Any + Send + Sync>(value: T) -> Self {
        Self(Arc::new(value))
    }

    /// The value, if it is a `T`.
    pub fn get<T: std::any::Any>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }
}

impl fmt::Debug for RunExtension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RunExtension(..)")
    }
}

/// A tool that plans can call. Object-safe: registries hold `Arc<dyn Tool>`.
///
/// Tools are async; a tool that must block a thread should use `tokio::task::spawn_blocking` so that
/// timeouts and cancellation keep working for the rest of the plan.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The name plans use in a step's `tool` field.
    fn name(&self) -> &str;
    /// What the tool does, for people and for LLMs.
    fn description(&self) -> &str;
    /// The JSON Schema of the arguments object. Arguments are validated against it (after references are
    /// resolved) before `call` is made.
    fn parameters(&self) -> Value;
    /// Runs the tool.
    async fn call(&self, arguments: Value, ctx: ToolContext) -> ToolResult;
    /// What the tool says of its calls' effects (default: nothing known).
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::default()
    }
    /// The JSON Schema of what the tool returns, when it declares one (MCP's `outputSchema`;
    /// default: none). Plans are then checked against it before they run: a `$ref:step.path`
    /// into this tool's result must name a field the schema has ([`crate::output`]), and each
    /// output is checked against it when the tool returns.
    fn output_schema(&self) -> Option<Value> {
        None
    }
    /// Begins a call from its arguments' JSON text while a model is still writing them, for a
    /// tool that can use part of it (a planner: a query plan's first nodes start before the rest
    /// is written). The text goes through the returned [`StreamedStart`]; a later
    /// [`call`](Self::call) whose arguments are that text's JSON goes on from the work begun, and
    /// gives what a call of the whole arguments gives. Default: `None` (a call waits for its whole
    /// arguments).
    fn begin_streamed(&self) -> Option<StreamedStart> {
        None
    }
    /// Whether [`begin_streamed`](Self::begin_streamed) begins calls (inside a tokio runtime):
    /// a caller that would have to read a model's reply as it is written only for this tool asks
    /// first. Default: false.
    fn begins_streamed(&self) -> bool {
        false
    }
}

/// A call begun while its arguments are still being written ([`Tool::begin_streamed`]): where the
/// text goes. [`end`](Self::end) says the text is complete. Dropping it stops the work begun, so
/// keep it until the call that takes the work up has returned; drop it at once when no call will
/// (the model's call was sent back, or answered from memory).
pub struct StreamedStart {
    /// Takes each piece of the text; dropped when the text ends.
    push: Option<Box<dyn Fn(String) + Send + Sync>>,
    /// Stops the work begun; run when the start is dropped.
    stop: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl fmt::Debug for StreamedStart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamedStart")
            .field("ended", &self.push.is_none())
            .finish()
    }
}

impl StreamedStart {
    /// A start whose text `push` takes a piece at a time, as it is written (the text ends when
    /// `push` is dropped), and whose work `stop` stops when the start is dropped (a tool whose
    /// call took the work up leaves it running).
    pub fn new(
        push: impl Fn(String) + Send + Sync + 'static,
        stop: impl FnOnce() + Send + Sync + 'static,
    ) -> Self {
        Self {
            push: Some(Box::new(push)),
            stop: Some(Box::new(stop)),
        }
    }

    /// The next piece of the arguments' text (after [`end`](Self::end) it goes nowhere).
    pub fn push(&self, chunk: String) {
        if let Some(push) = &self.push {
            push(chunk);
        }
    }

    /// The arguments' text is complete.
    pub fn end(&mut self) {
        self.push = None;
    }
}

impl Drop for StreamedStart {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop();
        }
    }
}

/// What a tool says of its calls' effects, as MCP's tool annotations do (`readOnlyHint`,
/// `idempotentHint`, `destructiveHint`, `openWorldHint`): hints from the tool's author, `None` where
/// it says nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ToolAnnotations {
    /// Calls change nothing.
    pub read_only: Option<bool>,
    /// A call made again with the same arguments changes nothing more.
    pub idempotent: Option<bool>,
    /// Calls may destroy or overwrite something.
    pub destructive: Option<bool>,
    /// Calls reach beyond the tool (the web, other systems).
    pub open_world: Option<bool>,
}

impl ToolAnnotations {
    /// A tool whose calls change nothing (and so may be repeated freely).
    pub const READ_ONLY: ToolAnnotations = ToolAnnotations {
        read_only: Some(true),
        idempotent: Some(true),
        destructive: Some(false),
        open_world: None,
    };

    /// Whether making the same call twice is the same as making it once: the tool says its calls
    /// are read-only or idempotent.
    pub fn repeat_is_harmless(&self) -> bool {
        self.read_only == Some(true) || self.idempotent == Some(true)
    }

    /// Whether a call may destroy or overwrite something, read as MCP reads the hints: a tool
    /// that says it is destructive, or that says neither that it is read-only nor that it is not
    /// destructive (MCP's `destructiveHint` defaults to true for a tool that is not read-only).
    pub fn may_destroy(&self) -> bool {
        match self.destructive {
            Some(destructive) => destructive && self.read_only != Some(true),
            None => self.read_only != Some(true),
        }
    }
}

/// Turns a tool's text output into its JSON value: text that is valid JSON is JSON; a Python
/// literal dict or list (`{'city': 'London', 'ok': True}`) is the JSON it means
/// ([`crate::text_shapes::read_python_literal`]); anything else is a JSON string holding the text.
/// Empty output is the empty string.
pub fn output_from_text(text: impl Into<String>) -> Value {
    let text = text.into();
    let trimmed = text.trim();
    if !trimmed.is_empty()
        && let Ok(v) = serde_json::from_str::<Value>(trimmed)
    {
        return v;
    }
    if let Some(v) = crate::text_shapes::read_python_literal(trimmed) {
        return v;
    }
    Value::String(text)
}

/// A JSON value as the text a model or a template reads: a string as it is, anything else as compact
/// JSON (`{"a":[1]}`, `1.5`, `null`). The inverse of [`output_from_text`] for text that is not JSON.
pub fn value_as_text(value: &Value) -> Cow<'_, str> {
    match value {
        Value::String(s) => Cow::Borrowed(s),
        other => Cow::Owned(other.to_string()),
    }
}

/// Values longer than this (bytes of JSON text) are not quoted in schema errors.
const SHOWN_VALUE_BYTES: usize = 200;

/// A registered tool with what the registry derived from it once: its schema (reconciled), the
/// warnings that reading gave, and the compiled validator.
pub struct RegisteredTool {
    tool: Arc<dyn Tool>,
    schema: Value,
    warnings: Vec<String>,
    validator: jsonschema::Validator,
    /// The output schema as read at registration, with its validator.
    output: Option<(Value, jsonschema::Validator)>,
}

impl RegisteredTool {
    /// The tool.
    pub fn tool(&self) -> &Arc<dyn Tool> {
        &self.tool
    }

    /// The tool's parameter schema as the registry reads it: the tool's own at registration, with
    /// its contradictions settled by [`crate::reconcile`]. Arguments are checked against this
    /// schema, and everything that shows the tool to a model reads it, so the two agree.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// What reconciling the tool's schema changed, one line per contradiction (empty for a
    /// consistent schema): `/properties/x/enum: the value "dontcare" is not boolean; read as enum
    /// [true, false]`.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The tool's output schema as the registry reads it ([`Tool::output_schema`], its
    /// contradictions settled by [`crate::reconcile`]), when it declares one.
    pub fn output_schema(&self) -> Option<&Value> {
        self.output.as_ref().map(|(schema, _)| schema)
    }

    /// Checks arguments against the tool's schema. The error lists every violation with its JSON pointer
    /// (`/location: 5 is not of type "string"`).
    pub fn check_arguments(&self, arguments: &Value) -> Result<(), String> {
        violations(&self.validator, arguments)
    }

    /// Checks an output against the tool's output schema (always fine for a tool that declares
    /// none); the error is as [`check_arguments`](Self::check_arguments)'s.
    pub fn check_output(&self, output: &Value) -> Result<(), String> {
        match &self.output {
            Some((_, validator)) => violations(validator, output),
            None => Ok(()),
        }
    }
}

/// Every way `value` breaks the schema of `validator`, one per violation with its JSON pointer.
fn violations(validator: &jsonschema::Validator, value: &Value) -> Result<(), String> {
    if validator.is_valid(value) {
        return Ok(());
    }
    let problems: Vec<String> = validator
        .iter_errors(value)
        .map(|e| {
            let path = e.instance_path().to_string();
            // A short value helps whoever wrote it (`5 is not of type "string"`); a long one
            // (a whole document passed by reference) would only bury the reason.
            let text = match crate::limits::json_size_within(e.instance(), SHOWN_VALUE_BYTES) {
                Some(_) => e.to_string(),
                None => {
                    let size = crate::limits::human_bytes(crate::limits::json_size(e.instance()));
                    e.masked_with(format!("the value ({size})")).to_string()
                }
            };
            if path.is_empty() {
                text
            } else {
                format!("{path}: {text}")
            }
        })
        .collect();
    Err(problems.join("; "))
}

impl fmt::Debug for RegisteredTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisteredTool")
            .field("name", &self.tool.name())
            .finish()
    }
}

/// A schema as the registry reads it (a tool's parameters, or its output): refused when nested
/// deeper than [`DEFAULT_MAX_VALUE_DEPTH`](crate::limits::DEFAULT_MAX_VALUE_DEPTH) levels of JSON
/// (neither read nor compiled, since the validator's compiler recurses, and dropped without
/// recursion) or, with `object_only`, when it is not a JSON object; then its contradictions
/// settled ([`crate::reconcile`]) and compiled. The error is the detail for the caller's
/// [`RegistryError`].
fn read_schema(
    schema: Value,
    object_only: bool,
) -> Result<(crate::Reconciled, jsonschema::Validator), String> {
    let max_depth = crate::limits::DEFAULT_MAX_VALUE_DEPTH;
    if crate::limits::value_depth(&schema, max_depth).is_none() {
        crate::limits::drop_deep(schema);
        return Err(format!("it nests deeper than {max_depth} levels"));
    }
    if object_only && !schema.is_object() {
        return Err("it is not a JSON object".into());
    }
    let reconciled = crate::reconcile(schema);
    let validator = jsonschema::validator_for(&reconciled.schema).map_err(|e| e.to_string())?;
    Ok((reconciled, validator))
}

/// Reads tool `name`'s output schema as its parameter schema is read ([`read_schema`]), an object
/// only; its warnings go after the parameters', marked as the output's.
fn read_output_schema(
    name: &str,
    schema: Value,
    warnings: &mut Vec<String>,
) -> Result<(Value, jsonschema::Validator), RegistryError> {
    let (reconciled, validator) =
        read_schema(schema, true).map_err(|detail| RegistryError::InvalidOutputSchema {
            tool: name.to_owned(),
            detail,
        })?;
    warnings.extend(
        reconciled
            .warnings
            .into_iter()
            .map(|w| format!("output schema {w}")),
    );
    Ok((reconciled.schema, validator))
}

/// The tools a plan may call, by name, in registration order.
#[derive(Default, Debug)]
pub struct ToolRegistry {
    tools: HashMap<String, Arc<RegisteredTool>>,
    order: Vec<String>,
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a tool: reads its parameter schema one consistent way ([`crate::reconcile`]; the
    /// warnings are kept, [`RegisteredTool::warnings`]) and compiles it. A schema nested deeper
    /// than [`DEFAULT_MAX_VALUE_DEPTH`](crate::limits::DEFAULT_MAX_VALUE_DEPTH) levels of JSON (more
    /// than any JSON text toolplan parses) or that is still not a valid JSON Schema is refused
    /// ([`RegistryError::InvalidSchema`]).
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let name = tool.name().to_owned();
        if name.is_empty() || name.chars().any(char::is_whitespace) {
            return Err(RegistryError::InvalidName(name));
        }
        if self.tools.contains_key(&name) {
            return Err(RegistryError::DuplicateName(name));
        }
        let (
            crate::Reconciled {
                schema,
                mut warnings,
            },
            validator,
        ) = read_schema(tool.parameters(), false).map_err(|detail| {
            RegistryError::InvalidSchema {
                tool: name.clone(),
                detail,
            }
        })?;
        let output = match tool.output_schema() {
            Some(schema) => Some(read_output_schema(&name, schema, &mut warnings)?),
            None => None,
        };
        self.order.push(name.clone());
        self.tools.insert(
            name,
            Arc::new(RegisteredTool {
                tool,
                schema,
                warnings,
                validator,
                output,
            }),
        );
        Ok(())
    }

    /// Registers several tools; stops at the first that cannot be registered.
    pub fn register_all(
        &mut self,
        tools: impl IntoIterator<Item = Arc<dyn Tool>>,
    ) -> Result<(), RegistryError> {
        tools.into_iter().try_for_each(|t| self.register(t))
    }

    /// The tool with that name.
    pub fn get(&self, name: &str) -> Option<&Arc<RegisteredTool>> {
        self.tools.get(name)
    }

    /// Whether a tool with that name is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }

    /// Tool names in registration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.order.iter().map(String::as_str)
    }

    /// Every warning of [`reconciling`](crate::reconcile) the tools' schemas, as (tool name,
    /// warning), in registration order. Empty when every schema is consistent.
    pub fn warnings(&self) -> impl Iterator<Item = (&str, &str)> {
        self.iter()
            .flat_map(|t| t.warnings.iter().map(move |w| (t.tool.name(), w.as_str())))
    }

    /// Tools in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<RegisteredTool>> {
        self.order.iter().filter_map(|n| self.tools.get(n))
    }

    /// The tools a plan may call, in registration order: every tool but `execute_tool_plan` (no
    /// recursive plans).
    pub fn plan_tools(&self) -> impl Iterator<Item = &Arc<RegisteredTool>> {
        self.iter()
            .filter(|t| t.tool().name() != crate::plan::EXECUTE_TOOL_PLAN)
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether there are no tools.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The registered name closest to `name`, when one is close enough to be a likely typo.
    pub fn closest_name(&self, name: &str) -> Option<&str> {
        closest(self.names(), name)
    }
}

/// The one of `names` closest to `name`, when one is close enough to be a likely typo.
pub(crate) fn closest<'n>(names: impl Iterator<Item = &'n str>, name: &str) -> Option<&'n str> {
    names
        .map(|n| (n, strsim::normalized_damerau_levenshtein(n, name)))
        .filter(|(_, score)| *score >= 0.6)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(n, _)| n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::FnTool;

    /// A tool that returns its arguments.
    fn named(name: &'static str, schema: Value) -> Arc<dyn Tool> {
        Arc::new(FnTool::new(name, "test tool", schema, |a, _| async move {
            Ok(a)
        }))
    }

    fn schema() -> Value {
        json!({"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]})
    }

    #[test]
    fn output_parsing() {
        assert_eq!(output_from_text("{\"a\":1}"), json!({"a": 1}));
        assert_eq!(output_from_text("42"), json!(42));
        assert_eq!(output_from_text("true"), json!(true));
        assert_eq!(output_from_text("hello world"), json!("hello world"));
        assert_eq!(output_from_text(""), json!(""));
        assert_eq!(output_from_text("NaN"), json!("NaN"));
    }

    #[test]
    fn text_rendering() {
        let mut s = String::new();
        s.push_str(&value_as_text(&json!("hi")));
        s.push_str(&value_as_text(&json!(1.5)));
        s.push_str(&value_as_text(&json!({"a": [1]})));
        s.push_str(&value_as_text(&json!(null)));
        assert_eq!(s, "hi1.5{\"a\":[1]}null");
        assert!(matches!(value_as_text(&json!("hi")), Cow::Borrowed("hi")));
    }

    #[test]
    fn registry_rejects_duplicates_and_bad_schemas() {
        let mut r = ToolRegistry::new();
        r.register(named("get_weather", schema())).unwrap();
        assert_eq!(
            r.register(named("get_weather", schema())),
            Err(RegistryError::DuplicateName("get_weather".into()))
        );
        assert!(matches!(
            r.register(named("bad", json!({"type": 12}))),
            Err(RegistryError::InvalidSchema { .. })
        ));
        assert!(matches!(
            r.register(named("a b", schema())),
            Err(RegistryError::InvalidName(_))
        ));
        assert_eq!(r.names().collect::<Vec<_>>(), ["get_weather"]);
    }

    #[test]
    fn argument_check_names_the_field() {
        let mut r = ToolRegistry::new();
        r.register(named("get_weather", schema())).unwrap();
        let t = r.get("get_weather").unwrap();
        assert!(t.check_arguments(&json!({"location": "Oslo"})).is_ok());
        let err = t.check_arguments(&json!({"location": 5})).unwrap_err();
        assert!(err.contains("/location"), "{err}");
        let err = t.check_arguments(&json!({})).unwrap_err();
        assert!(err.contains("location"), "{err}");
    }

    #[test]
    fn suggestions() {
        let mut r = ToolRegistry::new();
        r.register(named("get_weather", schema())).unwrap();
        r.register(named("calculator", schema())).unwrap();
        assert_eq!(r.closest_name("get_wether"), Some("get_weather"));
        assert_eq!(r.closest_name("zzz"), None);
    }
}
