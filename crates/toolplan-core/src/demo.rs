//! The demo tool set (`--tools demo`): small, deterministic tools for trying plans out, for examples and
//! for benchmarks. None of them touches the network or the file system.
//!
//! | tool | arguments | result |
//! |---|---|---|
//! | `echo` | `{text}` | the text (JSON text comes back as JSON) |
//! | `concat` | `{a, b}` | `a` followed by `b`, as text |
//! | `sleep` | `{ms, value}` | `value`, after `ms` milliseconds |
//! | `fail` | `{message?}` | always an error |
//! | `get_weather` | `{location}` | `{"temp", "condition", "city"}` from a fixed table |
//! | `get_user` | `{name}` | `{"name", "city", "team"}` from a fixed directory (data a model cannot know) |
//! | `calculator` | `{expression}` | the number |
//! | `compare_data` | `{data_a, data_b}` | which fields are equal and how the others differ |

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use crate::error::ToolError;
use crate::tool::{Tool, ToolContext, ToolRegistry, ToolResult, output_from_text, value_as_text};

/// Every demo tool.
pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(Echo),
        Arc::new(Concat),
        Arc::new(Sleep),
        Arc::new(Fail),
        Arc::new(GetWeather),
        Arc::new(GetUser),
        Arc::new(Calculator),
        Arc::new(CompareData),
    ]
}

/// A registry holding every demo tool.
pub fn registry() -> ToolRegistry {
    let mut r = ToolRegistry::new();
    for t in tools() {
        // The demo tools have distinct names and valid schemas; a failure here is a bug caught by tests.
        if let Err(e) = r.register(t) {
            debug_assert!(false, "demo tool failed to register: {e}");
        }
    }
    r
}

/// `echo`: returns its text.
pub struct Echo;

#[async_trait]
impl Tool for Echo {
    fn name(&self) -> &str {
        "echo"
    }
    fn description(&self) -> &str {
        "Returns the given text unchanged (text that is JSON comes back as JSON)."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"text": {"description": "The text (or any JSON value) to return."}},
               "required": ["text"], "additionalProperties": false})
    }
    async fn call(&self, args: Value, _ctx: ToolContext) -> ToolResult {
        Ok(match &args["text"] {
            Value::String(s) => output_from_text(s.as_str()),
            other => other.clone(),
        })
    }
}

/// `concat`: joins two values as text.
pub struct Concat;

#[async_trait]
impl Tool for Concat {
    fn name(&self) -> &str {
        "concat"
    }
    fn description(&self) -> &str {
        "Concatenates a and b into one text (values that are not text are written as JSON)."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"a": {"description": "First part."}, "b": {"description": "Second part."}},
               "required": ["a", "b"], "additionalProperties": false})
    }
    async fn call(&self, args: Value, _ctx: ToolContext) -> ToolResult {
        Ok(Value::String(
            value_as_text(&args["a"]).into_owned() + &value_as_text(&args["b"]),
        ))
    }
}

/// `sleep`: waits, then returns its value.
pub struct Sleep;

/// The longest a `sleep` call may ask for, in milliseconds (ten minutes).
pub const MAX_SLEEP_MS: u64 = 600_000;

#[async_trait]
impl Tool for Sleep {
    fn name(&self) -> &str {
        "sleep"
    }
    fn description(&self) -> &str {
        "Waits ms milliseconds, then returns value (null if not given)."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
                 "ms": {"type": "integer", "minimum": 0, "maximum": MAX_SLEEP_MS, "description": "How long to wait."},
                 "value": {"description": "What to return."}},
               "required": ["ms"], "additionalProperties": false})
    }
    async fn call(&self, args: Value, _ctx: ToolContext) -> ToolResult {
        let ms = args["ms"]
            .as_u64()
            .ok_or_else(|| ToolError::invalid("ms must be a whole number of milliseconds"))?;
        tokio::time::sleep(Duration::from_millis(ms.min(MAX_SLEEP_MS))).await;
        Ok(args.get("value").cloned().unwrap_or(Value::Null))
    }
}

/// `fail`: always fails.
pub struct Fail;

#[async_trait]
impl Tool for Fail {
    fn name(&self) -> &str {
        "fail"
    }
    fn description(&self) -> &str {
        "Always fails, with the given message; for trying out error handling."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"message": {"type": "string", "description": "The error message."}},
               "additionalProperties": false})
    }
    async fn call(&self, args: Value, _ctx: ToolContext) -> ToolResult {
        Err(ToolError::failed(
            args["message"].as_str().unwrap_or("this tool always fails"),
        ))
    }
}

/// `get_weather`: the weather of a city, from a fixed table.
pub struct GetWeather;

const WEATHER: &[(&str, i64, &str)] = &[
    ("Tokyo", 18, "sunny"),
    ("London", 12, "rainy"),
    ("Paris", 15, "cloudy"),
    ("New York", 21, "clear"),
    ("Sydney", 24, "sunny"),
    ("Berlin", 10, "overcast"),
    ("Oslo", 3, "snow"),
    ("Cairo", 31, "clear"),
];

#[async_trait]
impl Tool for GetWeather {
    fn name(&self) -> &str {
        "get_weather"
    }
    fn description(&self) -> &str {
        "Current weather of a city: JSON {temp (°C), condition, city}. Known cities: Tokyo, London, Paris, New York, Sydney, Berlin, Oslo, Cairo."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"location": {"type": "string", "description": "City name."}},
               "required": ["location"], "additionalProperties": false})
    }
    async fn call(&self, args: Value, _ctx: ToolContext) -> ToolResult {
        let location = args["location"].as_str().unwrap_or_default().trim();
        WEATHER
            .iter()
            .find(|(city, ..)| city.eq_ignore_ascii_case(location))
            .map(|(city, temp, condition)| json!({"temp": temp, "condition": condition, "city": city}))
            .ok_or_else(|| {
                // A person's name where a city belongs: say which tool knows where they live.
                if let Some((name, ..)) = USERS.iter().find(|(n, ..)| n.eq_ignore_ascii_case(location)) {
                    return ToolError::failed(format!(
                        "'{name}' is a person, not a city: call get_user with name '{name}' to find the city where {name} lives, then get_weather with that city"
                    ));
                }
                let known: Vec<&str> = WEATHER.iter().map(|w| w.0).collect();
                ToolError::failed(format!(
                    "no weather data for '{location}' (known cities: {})",
                    known.join(", ")
                ))
            })
    }
}

/// `get_user`: a person of a small fixed directory. Where a person lives is nothing a model can know,
/// so questions about it need the lookup first and the weather after it: a chain of dependent calls.
pub struct GetUser;

const USERS: &[(&str, &str, &str)] = &[
    ("Alice", "Tokyo", "research"),
    ("Bob", "London", "sales"),
    ("Carol", "Paris", "design"),
    ("Dave", "Oslo", "support"),
    ("Erin", "Cairo", "engineering"),
    ("Frank", "Sydney", "marketing"),
    ("Grace", "Berlin", "engineering"),
    ("Heidi", "New York", "finance"),
];

#[async_trait]
impl Tool for GetUser {
    fn name(&self) -> &str {
        "get_user"
    }
    fn description(&self) -> &str {
        "A person in the company directory: JSON {name, city (where they live), team}."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"name": {"type": "string", "description": "First name."}},
               "required": ["name"], "additionalProperties": false})
    }
    async fn call(&self, args: Value, _ctx: ToolContext) -> ToolResult {
        let name = args["name"].as_str().unwrap_or_default().trim();
        USERS
            .iter()
            .find(|(n, ..)| n.eq_ignore_ascii_case(name))
            .map(|(name, city, team)| json!({"name": name, "city": city, "team": team}))
            .ok_or_else(|| ToolError::failed(format!("no user named '{name}' in the directory")))
    }
}

/// `calculator`: evaluates an arithmetic expression.
pub struct Calculator;

#[async_trait]
impl Tool for Calculator {
    fn name(&self) -> &str {
        "calculator"
    }
    fn description(&self) -> &str {
        "Evaluates an arithmetic expression (+ - * / ^, parentheses, sqrt, abs, sin, cos, ln, exp …) and returns the number."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"expression": {"type": "string", "maxLength": MAX_EXPRESSION_CHARS,
                 "description": "For example \"(18 + 12) / 2\"."}},
               "required": ["expression"], "additionalProperties": false})
    }
    async fn call(&self, args: Value, _ctx: ToolContext) -> ToolResult {
        let expression = args["expression"].as_str().unwrap_or_default();
        check_expression(expression)?;
        if expression.len() <= INLINE_EXPRESSION_BYTES {
            return evaluate(expression);
        }
        // Parsing a long expression takes real CPU time: off the runtime's threads, so that the
        // step timeout and the plan deadline can abandon it.
        let owned = expression.to_owned();
        tokio::task::spawn_blocking(move || evaluate(&owned))
            .await
            .map_err(|e| ToolError::failed(format!("the calculator stopped: {e}")))?
    }
}

/// Longest expression the calculator takes, in characters (its schema's `maxLength`).
pub const MAX_EXPRESSION_CHARS: usize = 10_000;
/// Deepest nesting of parentheses the calculator takes (the parser recurses into each level).
pub const MAX_EXPRESSION_NESTING: usize = 64;
/// Expressions up to this many bytes are evaluated on the spot (microseconds); longer ones on a
/// blocking thread.
const INLINE_EXPRESSION_BYTES: usize = 256;

/// The calculator's own checks, also for callers that skip the schema.
fn check_expression(expression: &str) -> Result<(), ToolError> {
    let chars = expression.chars().count();
    if chars > MAX_EXPRESSION_CHARS {
        return Err(ToolError::invalid(format!(
            "the expression is {chars} characters, more than the limit of {MAX_EXPRESSION_CHARS}"
        )));
    }
    let mut depth = 0usize;
    for c in expression.chars() {
        match c {
            '(' => {
                depth += 1;
                if depth > MAX_EXPRESSION_NESTING {
                    return Err(ToolError::invalid(format!(
                        "the expression nests parentheses deeper than the limit of {MAX_EXPRESSION_NESTING}"
                    )));
                }
            }
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

fn evaluate(expression: &str) -> ToolResult {
    // Quoted in errors, at most 200 bytes of it.
    let shown = || {
        let mut shown = format!("{expression:?}");
        crate::limits::truncate_string(&mut shown, 200);
        shown
    };
    let value = exmex::eval_str::<f64>(expression)
        .map_err(|e| ToolError::failed(format!("cannot evaluate {}: {e}", shown())))?;
    number(value)
        .ok_or_else(|| ToolError::failed(format!("{} has no finite result ({value})", shown())))
}

/// A finite number as JSON, whole numbers as integers; `None` for NaN and infinities.
fn number(v: f64) -> Option<Value> {
    if !v.is_finite() {
        return None;
    }
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        return Some(json!(v as i64));
    }
    serde_json::Number::from_f64(v).map(Value::Number)
}

/// `compare_data`: compares two values field by field.
pub struct CompareData;

#[async_trait]
impl Tool for CompareData {
    fn name(&self) -> &str {
        "compare_data"
    }
    fn description(&self) -> &str {
        "Compares data_a with data_b: for objects, which fields are equal and how the others differ (with the numeric difference a - b); otherwise whether they are equal (and a - b for two numbers)."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"data_a": {"description": "First value."}, "data_b": {"description": "Second value."}},
               "required": ["data_a", "data_b"], "additionalProperties": false})
    }
    async fn call(&self, args: Value, _ctx: ToolContext) -> ToolResult {
        let (a, b) = (&args["data_a"], &args["data_b"]);
        let (Value::Object(ma), Value::Object(mb)) = (a, b) else {
            let mut out = json!({"equal": a == b, "a": a, "b": b});
            if let (Some(x), Some(y)) = (a.as_f64(), b.as_f64())
                && let Some(n) = number(x - y)
            {
                out["difference"] = n;
            }
            return Ok(out);
        };
        let mut same = Vec::new();
        let mut different = Map::new();
        for (key, va) in ma {
            let vb = mb.get(key).unwrap_or(&Value::Null);
            if va == vb {
                same.push(Value::String(key.clone()));
                continue;
            }
            let mut d = json!({"a": va, "b": vb});
            if let (Some(x), Some(y)) = (va.as_f64(), vb.as_f64())
                && let Some(n) = number(x - y)
            {
                d["difference"] = n;
            }
            different.insert(key.clone(), d);
        }
        for (key, vb) in mb {
            if !ma.contains_key(key) {
                different.insert(key.clone(), json!({"a": null, "b": vb}));
            }
        }
        Ok(json!({"equal": different.is_empty(), "same": same, "different": different}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn call(name: &str, args: Value) -> ToolResult {
        let r = registry();
        let t = r.get(name).unwrap();
        t.check_arguments(&args)
            .map_err(ToolError::InvalidArguments)?;
        t.tool().call(args, ToolContext::detached()).await
    }

    #[tokio::test]
    async fn all_register() {
        assert_eq!(registry().len(), 8);
    }

    #[tokio::test]
    async fn echo_and_concat() {
        assert_eq!(
            call("echo", json!({"text": "hi"})).await.unwrap(),
            json!("hi")
        );
        assert_eq!(
            call("echo", json!({"text": "{\"a\":1}"})).await.unwrap(),
            json!({"a": 1})
        );
        assert_eq!(
            call("concat", json!({"a": "x", "b": 2})).await.unwrap(),
            json!("x2")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn sleep_returns_value_after_delay() {
        let t0 = tokio::time::Instant::now();
        assert_eq!(
            call("sleep", json!({"ms": 250, "value": [1]}))
                .await
                .unwrap(),
            json!([1])
        );
        assert_eq!(t0.elapsed(), Duration::from_millis(250));
        assert!(call("sleep", json!({"ms": -1})).await.is_err());
    }

    #[tokio::test]
    async fn fail_fails() {
        assert_eq!(
            call("fail", json!({})).await,
            Err(ToolError::failed("this tool always fails"))
        );
        assert_eq!(
            call("fail", json!({"message": "boom"})).await,
            Err(ToolError::failed("boom"))
        );
    }

    #[tokio::test]
    async fn weather_table() {
        assert_eq!(
            call("get_weather", json!({"location": "tokyo"}))
                .await
                .unwrap(),
            json!({"temp": 18, "condition": "sunny", "city": "Tokyo"})
        );
        let err = call("get_weather", json!({"location": "Atlantis"}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("Atlantis"));
        // A person's name where a city belongs: the error names the tool that knows the city.
        let err = call("get_weather", json!({"location": "alice"}))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("'Alice' is a person") && err.contains("get_user"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn user_directory() {
        assert_eq!(
            call("get_user", json!({"name": " erin "})).await.unwrap(),
            json!({"name": "Erin", "city": "Cairo", "team": "engineering"})
        );
        let err = call("get_user", json!({"name": "Mallory"}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("Mallory"), "{err}");
        // Every user lives in a city with weather data, so lookups chain into get_weather.
        for (_, city, _) in USERS {
            assert!(WEATHER.iter().any(|(c, ..)| c == city), "{city}");
        }
    }

    #[tokio::test]
    async fn calculator() {
        assert_eq!(
            call("calculator", json!({"expression": "(18 + 12) / 2"}))
                .await
                .unwrap(),
            json!(15)
        );
        assert_eq!(
            call("calculator", json!({"expression": "7/2"}))
                .await
                .unwrap(),
            json!(3.5)
        );
        assert_eq!(
            call("calculator", json!({"expression": "2^10"}))
                .await
                .unwrap(),
            json!(1024)
        );
        assert!(
            call("calculator", json!({"expression": "1/0"}))
                .await
                .is_err()
        );
        assert!(
            call("calculator", json!({"expression": "2 +* x("}))
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn compare() {
        let out = call(
            "compare_data",
            json!({"data_a": {"temp": 18, "city": "Tokyo", "x": 1}, "data_b": {"temp": 12, "city": "London", "x": 1}}),
        )
        .await
        .unwrap();
        assert_eq!(out["equal"], json!(false));
        assert_eq!(out["same"], json!(["x"]));
        assert_eq!(out["different"]["temp"]["difference"], json!(6));
        let out = call("compare_data", json!({"data_a": 1, "data_b": 1}))
            .await
            .unwrap();
        assert_eq!(out["equal"], json!(true));
        let out = call("compare_data", json!({"data_a": 31, "data_b": 3}))
            .await
            .unwrap();
        assert_eq!(
            out,
            json!({"equal": false, "a": 31, "b": 3, "difference": 28})
        );
        let out = call("compare_data", json!({"data_a": "x", "data_b": 3}))
            .await
            .unwrap();
        assert_eq!(out, json!({"equal": false, "a": "x", "b": 3}));
    }
}
