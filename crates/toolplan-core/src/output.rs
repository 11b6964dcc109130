//! Output schemas: what a `$ref:step.path` into a tool's result can find, known before the plan
//! runs.
//!
//! A tool may declare the JSON Schema of its output ([`Tool::output_schema`](crate::Tool::output_schema);
//! MCP's `outputSchema`). Validation then looks up each reference's path in the output schema of
//! the tool of the step it names ([`lookup`]): a field the schema does not have is a problem of the
//! plan, and so is a whole-value reference whose declared type cannot fit the argument it fills
//! ([`kinds`], [`kinds_meet`]). The scheduler checks each output against its tool's schema, so what
//! validation relied on holds when the plan runs.
//!
//! How a schema is read:
//! * an object schema's `properties` are the fields the tool returns: a path to another field is
//!   missing unless the schema says others may come (`additionalProperties` true or a schema,
//!   `patternProperties`). JSON Schema leaves objects open by default; a declared output is read as
//!   the list of what comes back, since a model can only have meant a field it was shown;
//! * a segment that is an integer (`0`, `-1`) selects an array's item (`prefixItems` entry, else
//!   `items`);
//! * each branch of `anyOf`, `oneOf` and `allOf` is tried: a path is found when some branch has it;
//! * a `$ref`, an object or array schema that does not list its contents, and a schema that says
//!   nothing (`{}`, `true`) let any path through ([`Lookup::Unknown`]).
//!
//! The walk is bounded whatever the schema: at most [`MAX_BRANCHES`] schemas are followed per
//! segment and combinators nest at most [`MAX_COMBINATOR_DEPTH`] deep; beyond either the answer is
//! [`Lookup::Unknown`] (no problem is claimed that the schema may not support).

use serde_json::Value;

/// Most schemas followed for one segment of a path (the branches of `anyOf`/`oneOf`/`allOf`);
/// beyond it the lookup answers [`Lookup::Unknown`].
pub const MAX_BRANCHES: usize = 64;

/// Most levels of `anyOf`/`oneOf`/`allOf` inside each other the lookup follows; beyond it the
/// lookup answers [`Lookup::Unknown`].
pub const MAX_COMBINATOR_DEPTH: usize = 8;

/// What an output schema says of a path into the output.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup<'s> {
    /// The path exists; the schemas of the value there (one per branch that has it).
    Found(Vec<&'s Value>),
    /// The schema does not say what is there: any path may be.
    Unknown,
    /// Segment `at` of the path is not in the schema. `fields` are the fields the value before it
    /// has (empty when that value is not an object).
    Missing {
        /// The index of the first segment that is not there.
        at: usize,
        /// The fields of the value it was looked up in, in the schema's order.
        fields: Vec<String>,
    },
}

/// Looks `path` (the segments after a reference's step id) up in the output schema `schema`.
pub fn lookup<'s, S: AsRef<str>>(schema: &'s Value, path: &[S]) -> Lookup<'s> {
    let mut current = vec![schema];
    for (at, segment) in path.iter().enumerate() {
        let Some(candidates) = expand(&current) else {
            return Lookup::Unknown;
        };
        let mut next = Vec::new();
        let mut fields: Vec<String> = Vec::new();
        for candidate in candidates {
            match step(candidate, segment.as_ref()) {
                Step::Next(schema) => next.push(schema),
                Step::Unknown => return Lookup::Unknown,
                Step::Missing => {
                    if let Some(Value::Object(properties)) = candidate.get("properties") {
                        for key in properties.keys() {
                            if !fields.contains(key) {
                                fields.push(key.clone());
                            }
                        }
                    }
                }
            }
        }
        if next.is_empty() {
            return Lookup::Missing { at, fields };
        }
        current = next;
    }
    Lookup::Found(current)
}

/// The JSON types the values of these schemas may have (`"string"`, `"integer"` …), or `None`
/// when some schema does not say (no `type`, a `$ref`, too many branches).
pub fn kinds<'s>(schemas: &[&'s Value]) -> Option<Vec<&'s str>> {
    let mut kinds = Vec::new();
    for schema in expand(schemas)? {
        match schema.get("type")? {
            Value::String(kind) => kinds.push(kind.as_str()),
            Value::Array(list) => {
                for kind in list {
                    kinds.push(kind.as_str()?);
                }
            }
            _ => return None,
        }
    }
    (!kinds.is_empty()).then_some(kinds)
}

/// Whether a value of one of the types `found` can be a value of one of the types `wanted`: some
/// type is in both, or one is `integer` and the other `number` (an integer is a number, and a
/// number may be whole).
pub fn kinds_meet(found: &[&str], wanted: &[&str]) -> bool {
    found.iter().any(|f| {
        wanted
            .iter()
            .any(|w| f == w || matches!((*f, *w), ("integer", "number") | ("number", "integer")))
    })
}

/// What one segment of a path does in one schema.
enum Step<'s> {
    Next(&'s Value),
    Unknown,
    Missing,
}

/// The schemas that describe a value of `schemas`, their `anyOf`/`oneOf`/`allOf` branches taken
/// apart; `None` when one of them lets anything through (`true`, `{}`, a `$ref`) or the bounds are
/// passed. `false` (nothing allowed) adds nothing.
fn expand<'s>(schemas: &[&'s Value]) -> Option<Vec<&'s Value>> {
    let mut out = Vec::new();
    let mut stack: Vec<(&'s Value, usize)> = schemas.iter().rev().map(|s| (*s, 0)).collect();
    while let Some((schema, depth)) = stack.pop() {
        let object = match schema {
            Value::Bool(false) => continue,
            Value::Object(object) => object,
            _ => return None,
        };
        if object.contains_key("$ref") || object.contains_key("$dynamicRef") {
            return None;
        }
        let mut branched = false;
        for combinator in ["anyOf", "oneOf", "allOf"] {
            if let Some(Value::Array(branches)) = object.get(combinator) {
                if depth + 1 > MAX_COMBINATOR_DEPTH {
                    return None;
                }
                branched = true;
                stack.extend(branches.iter().rev().map(|b| (b, depth + 1)));
            }
        }
        let says = [
            "type",
            "properties",
            "items",
            "prefixItems",
            "additionalProperties",
        ]
        .iter()
        .any(|k| object.contains_key(*k));
        if says {
            out.push(schema);
        } else if !branched {
            // Says nothing of the value's shape (`{}`, or only `description`, `enum` …).
            return None;
        }
        if out.len() + stack.len() > MAX_BRANCHES {
            return None;
        }
    }
    Some(out)
}

/// Segment `segment` of a path in `schema` (an object schema that says something of its shape).
fn step<'s>(schema: &'s Value, segment: &str) -> Step<'s> {
    if let Some(field) = schema.get("properties").and_then(|p| p.get(segment)) {
        return Step::Next(field);
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let says_array = types.contains(&"array")
        || schema.get("items").is_some()
        || schema.get("prefixItems").is_some();
    if says_array && let Ok(index) = segment.parse::<i64>() {
        if let Some(entry) = usize::try_from(index).ok().and_then(|i| {
            schema
                .get("prefixItems")
                .and_then(Value::as_array)
                .and_then(|p| p.get(i))
        }) {
            return Step::Next(entry);
        }
        return match schema.get("items") {
            Some(Value::Bool(false)) => Step::Missing,
            Some(items @ Value::Object(_)) => Step::Next(items),
            _ => Step::Unknown,
        };
    }
    // A value that can only be a list (or null) is entered by index: a name finds nothing in it
    // (`$ref:c.same.temperature`), as references resolve.
    if says_array && !types.is_empty() && types.iter().all(|t| matches!(*t, "array" | "null")) {
        return Step::Missing;
    }
    if schema.get("patternProperties").is_some() {
        return Step::Unknown;
    }
    match schema.get("additionalProperties") {
        Some(Value::Bool(false)) => Step::Missing,
        Some(additional @ Value::Object(_)) => Step::Next(additional),
        Some(_) => Step::Unknown,
        None if schema.get("properties").is_some() => Step::Missing,
        // An object that does not list its fields, or an array that does not say its items.
        None if types.is_empty() || types.contains(&"object") || types.contains(&"array") => {
            Step::Unknown
        }
        // A string, a number, a boolean or null has no fields.
        None => Step::Missing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user() -> Value {
        json!({"type": "object", "properties": {
            "name": {"type": "string"},
            "city": {"type": "string"},
            "team": {"type": "string"},
            "address": {"type": "object", "properties": {"street": {"type": "string"}, "zip": {"type": "string"}}},
            "tags": {"type": "array", "items": {"type": "object", "properties": {"label": {"type": "string"}}}},
            "extra": {"type": "object"}
        }})
    }

    #[test]
    fn listed_fields_are_found_and_others_are_missing() {
        let schema = user();
        assert_eq!(
            lookup(&schema, &["city"]),
            Lookup::Found(vec![&json!({"type": "string"})])
        );
        assert_eq!(
            lookup(&schema, &["cty"]),
            Lookup::Missing {
                at: 0,
                fields: ["name", "city", "team", "address", "tags", "extra"]
                    .map(String::from)
                    .to_vec()
            }
        );
        assert_eq!(
            lookup(&schema, &["address", "town"]),
            Lookup::Missing {
                at: 1,
                fields: vec!["street".into(), "zip".into()]
            }
        );
        // A string has no fields.
        assert_eq!(
            lookup(&schema, &["city", "x"]),
            Lookup::Missing {
                at: 1,
                fields: vec![]
            }
        );
    }

    #[test]
    fn array_indexes_select_items() {
        let schema = user();
        assert!(matches!(
            lookup(&schema, &["tags", "0", "label"]),
            Lookup::Found(_)
        ));
        assert!(matches!(
            lookup(&schema, &["tags", "-1", "label"]),
            Lookup::Found(_)
        ));
        assert!(matches!(
            lookup(&schema, &["tags", "0", "x"]),
            Lookup::Missing { at: 2, .. }
        ));
        let tuple = json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false});
        assert_eq!(
            lookup(&tuple, &["1"]),
            Lookup::Found(vec![&json!({"type": "integer"})])
        );
        assert!(matches!(
            lookup(&tuple, &["2"]),
            Lookup::Missing { at: 0, .. }
        ));
        // A list has items, not named fields; one that may also be an object may have them.
        assert!(matches!(
            lookup(&schema, &["tags", "label"]),
            Lookup::Missing { at: 1, .. }
        ));
        let list = json!({"type": ["array", "null"], "items": {"type": "string"}});
        assert!(matches!(
            lookup(&list, &["x"]),
            Lookup::Missing { at: 0, .. }
        ));
        let either = json!({"type": ["array", "object"], "items": {"type": "string"}});
        assert_eq!(lookup(&either, &["x"]), Lookup::Unknown);
    }

    #[test]
    fn open_schemas_let_any_path_through() {
        let schema = user();
        assert_eq!(lookup(&schema, &["extra", "anything"]), Lookup::Unknown);
        for open in [
            json!(true),
            json!({}),
            json!({"$ref": "#/$defs/x"}),
            json!({"type": "object", "properties": {"a": {}}, "additionalProperties": true}),
            json!({"type": "object", "properties": {"a": {}}, "patternProperties": {"^x": {}}}),
        ] {
            assert_eq!(lookup(&open, &["b", "c"]), Lookup::Unknown, "{open}");
        }
        // A list that does not say its items: any item, anything in it.
        let list = json!({"type": "array"});
        assert_eq!(lookup(&list, &["0", "c"]), Lookup::Unknown);
        let typed_rest = json!({"type": "object", "additionalProperties": {"type": "number"}});
        assert_eq!(
            lookup(&typed_rest, &["b"]),
            Lookup::Found(vec![&json!({"type": "number"})])
        );
    }

    #[test]
    fn branches_are_each_tried() {
        let schema = json!({"anyOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}},
            {"type": "object", "properties": {"b": {"type": "integer"}}}
        ]});
        assert!(matches!(lookup(&schema, &["b"]), Lookup::Found(ref s) if s.len() == 1));
        assert_eq!(
            lookup(&schema, &["c"]),
            Lookup::Missing {
                at: 0,
                fields: vec!["a".into(), "b".into()]
            }
        );
    }

    #[test]
    fn kinds_come_from_type_and_meet_across_integer_and_number() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer"}, "s": {"type": ["string", "null"]}, "u": {"description": "?"}}});
        let Lookup::Found(n) = lookup(&schema, &["n"]) else {
            panic!()
        };
        let Lookup::Found(s) = lookup(&schema, &["s"]) else {
            panic!()
        };
        assert_eq!(kinds(&n), Some(vec!["integer"]));
        assert_eq!(kinds(&s), Some(vec!["string", "null"]));
        assert_eq!(
            lookup(&schema, &["u"]),
            Lookup::Found(vec![&json!({"description": "?"})])
        );
        let Lookup::Found(u) = lookup(&schema, &["u"]) else {
            panic!()
        };
        assert_eq!(kinds(&u), None);
        assert!(kinds_meet(&["integer"], &["number"]));
        assert!(kinds_meet(&["string", "null"], &["string"]));
        assert!(!kinds_meet(&["string"], &["number", "integer"]));
    }

    #[test]
    fn hostile_schemas_are_walked_within_bounds() {
        // Combinators nested past the bound, and more branches than followed: no claim is made.
        let mut deep = json!({"type": "object", "properties": {"a": {}}});
        for _ in 0..(MAX_COMBINATOR_DEPTH + 2) {
            deep = json!({"anyOf": [deep]});
        }
        assert_eq!(lookup(&deep, &["zzz"]), Lookup::Unknown);
        let wide = json!({"anyOf": (0..MAX_BRANCHES * 4)
            .map(|i| json!({"type": "object", "properties": {format!("f{i}"): {}}}))
            .collect::<Vec<_>>()});
        assert_eq!(lookup(&wide, &["zzz"]), Lookup::Unknown);
        // A long path through a self-similar schema stays linear: one schema per segment.
        let list =
            json!({"type": "array", "items": {"type": "array", "items": {"type": "integer"}}});
        let path: Vec<String> = vec!["0".into(); 10_000];
        assert!(matches!(
            lookup(&list, &path),
            Lookup::Missing { at: 2, .. }
        ));
    }
}
