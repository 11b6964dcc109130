//! `compare_data`: compares two values field by field.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use toolplan_core::{FnTool, Tool, ToolAnnotations};

use crate::calculator::number;

/// `compare_data`: which fields of two objects are equal and how the others differ (with the numeric
/// difference `a - b`); for anything else, whether the two are equal (and `a - b` for two numbers).
pub fn compare_data() -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "compare_data",
        "Compares data_a with data_b: for objects, which fields are equal and how the others differ (with the numeric difference a - b); otherwise whether they are equal (and a - b for two numbers).",
        json!({"type": "object", "properties": {"data_a": {"description": "First value."}, "data_b": {"description": "Second value."}},
               "required": ["data_a", "data_b"], "additionalProperties": false}),
        |args: Value, _| async move { Ok(compare(&args["data_a"], &args["data_b"])) },
    )
    .with_annotations(ToolAnnotations::READ_ONLY)
    .with_output_schema(json!({"type": "object", "properties": {
            "equal": {"type": "boolean", "description": "Whether data_a equals data_b."},
            "a": {"description": "data_a, when it is not an object."},
            "b": {"description": "data_b, when it is not an object."},
            "difference": {"type": "number", "description": "a - b, when both are numbers."},
            "same": {"type": "array", "items": {"type": "string"},
                     "description": "For two objects: the fields that are equal."},
            "different": {"type": "object", "description": "For two objects: each field that differs, with its a, b and difference.",
                          "additionalProperties": {"type": "object", "properties": {
                              "a": {}, "b": {}, "difference": {"type": "number"}}}}},
        "required": ["equal"], "additionalProperties": false})))
}

fn compare(a: &Value, b: &Value) -> Value {
    let (Value::Object(ma), Value::Object(mb)) = (a, b) else {
        let mut out = json!({"equal": a == b, "a": a, "b": b});
        if let (Some(x), Some(y)) = (a.as_f64(), b.as_f64())
            && let Some(n) = number(x - y)
        {
            out["difference"] = n;
        }
        return out;
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
    json!({"equal": different.is_empty(), "same": same, "different": different})
}
