//! `calculator`: arithmetic by the exmex crate, behind limits of its own on the expression's length
//! and nesting, and off the runtime's threads for long expressions.

use std::sync::Arc;

use serde_json::{Value, json};
use toolplan_core::limits::truncate_string;
use toolplan_core::{FnTool, Tool, ToolAnnotations, ToolError, ToolResult};

/// Longest expression the calculator takes, in characters (its schema's `maxLength`).
pub const MAX_EXPRESSION_CHARS: usize = 10_000;
/// Deepest nesting of parentheses the calculator takes (the parser recurses into each level).
pub const MAX_EXPRESSION_NESTING: usize = 64;
/// Expressions up to this many bytes are evaluated on the spot (microseconds); longer ones on a
/// blocking thread.
const INLINE_EXPRESSION_BYTES: usize = 256;

/// `calculator`: evaluates an arithmetic expression.
pub fn calculator() -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "calculator",
        "Evaluates an arithmetic expression (+ - * / ^, parentheses, sqrt, abs, sin, cos, ln, exp …) and returns the number.",
        json!({"type": "object", "properties": {"expression": {"type": "string", "maxLength": MAX_EXPRESSION_CHARS,
                 "description": "For example \"(18 + 12) / 2\"."}},
               "required": ["expression"], "additionalProperties": false}),
        |args: Value, _| async move {
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
        },
    )
    .with_annotations(ToolAnnotations::READ_ONLY)
    .with_output_schema(json!({"type": "number"})))
}

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
        truncate_string(&mut shown, 200);
        shown
    };
    // An expression that does not parse is a wrong argument (a name where a number belongs, say),
    // which a corrected plan avoids: the tool refuses it.
    let value = exmex::eval_str::<f64>(expression).map_err(|e| {
        let why = not_numbers(expression).unwrap_or_else(|| e.to_string());
        ToolError::invalid(format!("cannot evaluate {}: {why}", shown()))
    })?;
    number(value)
        .ok_or_else(|| ToolError::failed(format!("{} has no finite result ({value})", shown())))
}

/// Why an expression that parses still has no value: the names in it that are not numbers
/// (`Cairo - Oslo`), which a caller must look up first. `None` when it does not parse or names
/// nothing.
fn not_numbers(expression: &str) -> Option<String> {
    use exmex::Express;
    let parsed = exmex::parse::<f64>(expression).ok()?;
    let names: Vec<String> = parsed
        .var_names()
        .iter()
        .take(5)
        .map(|n| {
            let mut n = format!("'{n}'");
            truncate_string(&mut n, 40);
            n
        })
        .collect();
    let (last, first) = names.split_last()?;
    let listed = if first.is_empty() {
        format!("{last} is not a number")
    } else {
        format!("{} and {last} are not numbers", first.join(", "))
    };
    Some(format!(
        "{listed}; the expression takes numbers and operators, so the numbers such names stand \
         for must be looked up first and written in their place"
    ))
}

/// Significant digits a result keeps: binary floating point leaves noise in the last of its 17
/// (`(20 * 9 / 5) + 33.8` is 69.80000000000001), which people and models then repeat.
const SIGNIFICANT_DIGITS: usize = 12;

/// A finite number as JSON, rounded to [`SIGNIFICANT_DIGITS`], whole numbers as integers; `None`
/// for NaN and infinities.
pub(crate) fn number(v: f64) -> Option<Value> {
    if !v.is_finite() {
        return None;
    }
    // Written in scientific notation with the digits kept, then read back: the nearest double,
    // which serde_json writes in its shortest form.
    let v: f64 = format!("{v:.prec$e}", prec = SIGNIFICANT_DIGITS - 1)
        .parse()
        .unwrap_or(v);
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        return Some(json!(v as i64));
    }
    serde_json::Number::from_f64(v).map(Value::Number)
}
