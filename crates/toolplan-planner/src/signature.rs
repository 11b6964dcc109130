//! Tools as one-line signatures for a planner's description
//! (`get_weather(location: string): Current weather …`).
//!
//! A signature costs a tenth of the tokens of the JSON Schema it is read from, so a description that
//! lists every tool stays short.

use serde_json::Value;

/// A tool's one-line signature: `name(arg: type, optional?: type): description`.
///
/// Argument types come from each property's `type` (`string`, `integer`, …; a union as
/// `string|null`), `enum` (`"a"|"b"`) or `const`; a property without one is `any`. A schema that is
/// not an object with `properties` gives `name(…)` (any arguments object).
pub fn tool_signature(name: &str, description: &str, schema: &Value) -> String {
    let arguments = match schema.get("properties") {
        Some(Value::Object(props)) => {
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            props
                .iter()
                .map(|(field, prop)| {
                    let optional = if required.contains(&field.as_str()) {
                        ""
                    } else {
                        "?"
                    };
                    format!("{field}{optional}: {}", type_of(prop))
                })
                .collect::<Vec<_>>()
                .join(", ")
        }
        _ => "…".to_owned(),
    };
    let description = description.trim();
    if description.is_empty() {
        format!("{name}({arguments})")
    } else {
        format!("{name}({arguments}): {description}")
    }
}

/// The short type of one property schema.
fn type_of(schema: &Value) -> String {
    if let Some(Value::Array(values)) = schema.get("enum") {
        return values
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("|");
    }
    if let Some(value) = schema.get("const") {
        return value.to_string();
    }
    match schema.get("type") {
        Some(Value::String(t)) if t == "array" => match schema.get("items") {
            Some(items) if items.is_object() => format!("{}[]", type_of(items)),
            _ => "array".to_owned(),
        },
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("|"),
        _ => "any".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn signatures_show_names_types_and_optional_fields() {
        let schema = json!({"type": "object", "properties": {
            "location": {"type": "string", "description": "City."},
            "days": {"type": "integer"},
            "units": {"enum": ["metric", "imperial"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "extra": {},
            "maybe": {"type": ["string", "null"]}},
            "required": ["location"]});
        assert_eq!(
            tool_signature("forecast", " Weather ahead. ", &schema),
            r#"forecast(location: string, days?: integer, units?: "metric"|"imperial", tags?: string[], extra?: any, maybe?: string|null): Weather ahead."#
        );
        assert_eq!(tool_signature("ping", "", &json!({})), "ping(…)");
        assert_eq!(
            tool_signature(
                "noop",
                "Nothing.",
                &json!({"type": "object", "properties": {}})
            ),
            "noop(): Nothing."
        );
    }
}
