//! Tools as one-line signatures for a planner's description
//! (`get_weather(location: string): Current weather …`).
//!
//! A signature costs a tenth of the tokens of the JSON Schema it is read from, so a description that
//! lists every tool stays short.

use serde_json::Value;

/// A tool's one-line signature: `name(arg: type, optional?: type) -> output: description`.
///
/// Argument types come from each property's `type` (`string`, `integer`, …; a union as
/// `string|null`), `enum` (`"a"|"b"`) or `const`; a property without one is `any`. A schema that is
/// not an object with `properties` gives `name(…)` (any arguments object). The output's shape
/// (`-> {name, city}`, `-> number`; see `shape_of`) is shown when the tool declares an output
/// schema: the fields a `$ref:step.field` can name.
pub fn tool_signature(
    name: &str,
    description: &str,
    schema: &Value,
    output: Option<&Value>,
) -> String {
    let arguments = match schema.get("properties") {
        Some(Value::Object(props)) => arguments_of(schema, props, 0),
        _ => "…".to_owned(),
    };
    let returns = match output.map(|o| shape_of(o, 0)) {
        Some(shown) if shown != "any" => format!(" -> {shown}"),
        _ => String::new(),
    };
    let description = description.trim();
    if description.is_empty() {
        format!("{name}({arguments}){returns}")
    } else {
        format!("{name}({arguments}){returns}: {description}")
    }
}

/// `name: type` for each property of an object schema, `name?: type` for optional ones.
fn arguments_of(schema: &Value, props: &serde_json::Map<String, Value>, depth: usize) -> String {
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
            format!("{field}{optional}: {}", type_of(prop, depth))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Deepest nesting of objects and arrays a signature spells out; deeper ones are `object` or
/// `array` (schemas come from MCP servers and configuration files: untrusted).
const MAX_TYPE_DEPTH: usize = 4;

/// The short type of one property schema.
fn type_of(schema: &Value, depth: usize) -> String {
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
            Some(items) if items.is_object() && depth < MAX_TYPE_DEPTH => {
                format!("{}[]", type_of(items, depth + 1))
            }
            _ => "array".to_owned(),
        },
        Some(Value::String(t)) if t == "object" => match schema.get("properties") {
            Some(Value::Object(props)) if !props.is_empty() && depth < MAX_TYPE_DEPTH => {
                format!("{{{}}}", arguments_of(schema, props, depth + 1))
            }
            _ => "object".to_owned(),
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

/// The shape of an output schema as a signature shows it: an object as its field names
/// (`{name, city, team}`, nested objects spelled out: `{address: {street, zip}}`), an array of
/// them as `{…}[]`, anything else as its type (`number`). Only what a `$ref:` path can name; the
/// types of the fields are left out, as a model reads a result by its field names.
fn shape_of(schema: &Value, depth: usize) -> String {
    let nested = |schema: &Value| -> Option<String> {
        let inner = match schema.get("type").and_then(Value::as_str) {
            Some("array") => schema.get("items").filter(|i| i.is_object())?,
            _ => schema,
        };
        let fields = inner.get("properties").and_then(Value::as_object)?;
        if fields.is_empty() || depth >= MAX_TYPE_DEPTH {
            return None;
        }
        let shown = fields
            .iter()
            .map(|(field, prop)| match shape_of(prop, depth + 1) {
                shape if shape.starts_with('{') => format!("{field}: {shape}"),
                _ => field.clone(),
            })
            .collect::<Vec<_>>()
            .join(", ");
        Some(if std::ptr::eq(inner, schema) {
            format!("{{{shown}}}")
        } else {
            format!("{{{shown}}}[]")
        })
    };
    nested(schema).unwrap_or_else(|| type_of(schema, depth))
}

/// A tool's signature with everything its schema tells a model: the one-line signature (nested
/// objects spelled out, defaults as `= value`), then one indented line per argument that has a
/// description, a format, a pattern or bounds. What a model reads of a tool in the native tools
/// list, in about half the tokens of the JSON Schema.
pub fn documented_signature(
    name: &str,
    description: &str,
    schema: &Value,
    output: Option<&Value>,
) -> String {
    let mut text = tool_signature(name, description, schema, output);
    let Some(Value::Object(props)) = schema.get("properties") else {
        return text;
    };
    document_properties(&mut text, props, "", 0);
    text
}

/// Deepest nesting of object properties [`documented_signature`] documents line by line.
const MAX_DOCUMENTED_DEPTH: usize = 3;

/// Appends a line per property of `props` (under `prefix`) that says more than its type, and the
/// lines of its nested properties.
fn document_properties(
    text: &mut String,
    props: &serde_json::Map<String, Value>,
    prefix: &str,
    depth: usize,
) {
    if depth >= MAX_DOCUMENTED_DEPTH {
        return;
    }
    for (field, prop) in props {
        let path = format!("{prefix}{field}");
        let notes = notes_of(prop);
        if !notes.is_empty() {
            text.push_str("\n    ");
            text.push_str(&path);
            text.push_str(": ");
            text.push_str(&notes.join("; "));
        }
        // Nested objects, directly or as array items.
        let inner = match prop.get("items") {
            Some(items) if prop.get("type").and_then(Value::as_str) == Some("array") => items,
            _ => prop,
        };
        if let Some(Value::Object(nested)) = inner.get("properties") {
            let sep = if std::ptr::eq(inner, prop) {
                "."
            } else {
                "[]."
            };
            document_properties(text, nested, &format!("{path}{sep}"), depth + 1);
        }
    }
}

/// What a property schema says beyond its type: description, format, pattern, bounds, default.
fn notes_of(prop: &Value) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(d) = prop.get("description").and_then(Value::as_str) {
        let d = d.trim();
        if !d.is_empty() {
            notes.push(d.to_owned());
        }
    }
    if let Some(f) = prop.get("format").and_then(Value::as_str) {
        notes.push(format!("format {f}"));
    }
    if let Some(p) = prop.get("pattern").and_then(Value::as_str) {
        notes.push(format!("pattern {p}"));
    }
    for (key, word) in [
        ("minimum", ">="),
        ("exclusiveMinimum", ">"),
        ("maximum", "<="),
        ("exclusiveMaximum", "<"),
        ("minLength", "length >="),
        ("maxLength", "length <="),
        ("minItems", "items >="),
        ("maxItems", "items <="),
    ] {
        if let Some(v) = prop.get(key) {
            notes.push(format!("{word} {v}"));
        }
    }
    if let Some(d) = prop.get("default") {
        notes.push(format!("default {d}"));
    }
    notes
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
            tool_signature("forecast", " Weather ahead. ", &schema, None),
            r#"forecast(location: string, days?: integer, units?: "metric"|"imperial", tags?: string[], extra?: any, maybe?: string|null): Weather ahead."#
        );
        assert_eq!(tool_signature("ping", "", &json!({}), None), "ping(…)");
        assert_eq!(
            tool_signature(
                "noop",
                "Nothing.",
                &json!({"type": "object", "properties": {}}),
                None
            ),
            "noop(): Nothing."
        );
    }

    #[test]
    fn signatures_show_the_declared_output() {
        let arguments = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
        let output = json!({"type": "object", "properties": {
            "name": {"type": "string"}, "city": {"type": "string"}, "team": {"type": "string"}},
            "required": ["name", "city"]});
        assert_eq!(
            tool_signature("get_user", "A person.", &arguments, Some(&output)),
            "get_user(name: string) -> {name, city, team}: A person."
        );
        assert_eq!(
            tool_signature("calc", "", &arguments, Some(&json!({"type": "number"}))),
            "calc(name: string) -> number"
        );
        let nested = json!({"type": "object", "properties": {
            "address": {"type": "object", "properties": {"zip": {"type": "string"}}},
            "orders": {"type": "array", "items": {"type": "object", "properties": {"sku": {}}}},
            "tags": {"type": "array", "items": {"type": "string"}}}});
        assert_eq!(
            tool_signature("p", "", &arguments, Some(&nested)),
            "p(name: string) -> {address: {zip}, orders: {sku}[], tags}"
        );
        // An output schema that says nothing of the type adds nothing.
        assert_eq!(
            tool_signature(
                "x",
                "",
                &arguments,
                Some(&json!({"description": "anything"}))
            ),
            "x(name: string)"
        );
    }

    #[test]
    fn documented_signatures_keep_what_the_schema_says() {
        let schema = json!({"type": "object", "properties": {
            "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA. Use the short form for the state."},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
            "days": {"type": "integer", "minimum": 1, "maximum": 14},
            "rate": {"type": "number", "description": "A float.", "format": "float"},
            "stops": {"type": "array", "items": {"type": "object", "properties": {
                "city": {"type": "string", "description": "Where."}, "nights": {"type": "integer"}},
                "required": ["city"]}}},
            "required": ["location"]});
        assert_eq!(
            documented_signature("trip", "Plans a trip.", &schema, None),
            "trip(location: string, unit?: \"celsius\"|\"fahrenheit\", days?: integer, rate?: number, \
             stops?: {city: string, nights?: integer}[]): Plans a trip.\n    \
             location: The city and state, e.g. San Francisco, CA. Use the short form for the state.\n    \
             unit: default \"celsius\"\n    days: >= 1; <= 14\n    rate: A float.; format float\n    \
             stops[].city: Where."
        );
    }

    #[test]
    fn hostile_nesting_is_cut_short() {
        // A schema nested a hundred deep (from an MCP server, say) gives a bounded signature.
        let mut schema = json!({"type": "string", "description": "leaf"});
        for _ in 0..100 {
            schema = json!({"type": "object", "properties": {"a": schema}, "description": "level"});
        }
        let text = documented_signature("deep", "", &schema, None);
        assert!(text.len() < 400, "{text}");
        assert!(
            text.starts_with("deep(a?: {a?: {a?: {a?: {a?: object}}}})"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 4, "{text}");
    }
}
