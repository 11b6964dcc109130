//! Tool parameter schemas that contradict themselves, given one consistent reading.
//!
//! A tool's schema is read by several parts that must agree: the JSON Schema validator that checks
//! arguments, and what a model reads to write them (tool definitions, plan signatures, the decoding
//! grammar of a local model). A schema such as `{"type": "boolean", "enum": ["True", "False",
//! "dontcare"]}` makes them disagree: a grammar built from the `enum` lets the model write
//! `"dontcare"`, which the validator then refuses as not boolean. [`reconcile`] settles every such
//! contradiction one way, with a warning naming where it was, and the registry keeps only that
//! reading ([`crate::RegisteredTool::schema`]).
//!
//! The readings are listed on [`reconcile`].
//!
//! ## Layout
//!
//! * this file — [`reconcile`], [`Reconciled`], [`MAX_SCHEMA_DEPTH`] and the walk over a schema and
//!   its subschemas, which applies the rules to each.
//! * `types` — rules 1 to 3: `type` names read as JSON Schema types, and the `enum`, `const` and
//!   `default` values made to fit them.
//! * `bounds` — rules 4 and 5: `required` names that can never be given, bounds that allow no value.
//! * `kind` — the JSON Schema types and their values: what a type name means, whether a value has a
//!   type, converting a value to one, comparing values as JSON Schema does.
//! * `show` — how a warning quotes values and types.

mod bounds;
mod kind;
mod show;
mod types;

use serde_json::Value;

/// How many levels of nested subschemas [`reconcile`] reads (the root is level 0). A subschema
/// nested deeper is left as it is, with one warning for the whole schema: the walk is bounded, so
/// a schema of any depth is read without exhausting the stack. Real tool schemas nest a handful of
/// levels. (Before reading, [`crate::ToolRegistry::register`] refuses a schema nested deeper than
/// [`crate::limits::DEFAULT_MAX_VALUE_DEPTH`] levels of JSON, which no JSON text toolplan parses
/// can be.)
pub const MAX_SCHEMA_DEPTH: usize = 64;

/// A schema with its contradictions settled ([`reconcile`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Reconciled {
    /// The one consistent reading of the schema (the schema itself when it had no contradiction).
    pub schema: Value,
    /// One line per contradiction that was settled, each starting with the JSON pointer of the
    /// keyword inside the schema: `/properties/has_laundry/enum: the values "True", "False",
    /// "dontcare" are not boolean; read as enum [true, false]`. Empty for a consistent schema.
    pub warnings: Vec<String>,
}

/// Reads `schema` one consistent way.
///
/// The readings, applied to each schema (the root and every subschema, down to
/// [`MAX_SCHEMA_DEPTH`] levels):
///
/// 1. **`type` wins over `enum` and `const`.** A value that is not of the type is converted when it
///    spells a value of it (`"True"`, `"false"` → booleans, in any letter case; `"3"`, `"2.5"` →
///    numbers for `integer` or `number` when they parse as such; numbers and booleans → their text
///    for `string`), else dropped. The `enum` is deduplicated after converting and removed when no
///    value is left; a `const` that cannot be converted is removed. With a list of types, a value
///    is fine when it has any of them, and is converted to the first it converts to.
/// 2. **A `default`** that is not of the type, or not one of the `enum`, is converted as in 1 when
///    that makes it fit, else removed.
/// 3. **Type names of Python-ish tool specs** are read as JSON Schema's: `dict` → `object`,
///    `float` → `number`, `int` → `integer`, `bool` → `boolean`, `str` → `string`, `list` and
///    `tuple` → `array`, and a known name in other letter case (`String`) as itself. `any` and
///    names that mean nothing remove the `type`. (Without this, the validator refuses the schema.)
/// 4. **`required` names that can never be given** — not among the `properties` while
///    `additionalProperties` is `false` (and there are no `patternProperties`) — are dropped.
/// 5. **Bounds that allow no value** (`minimum` above `maximum`, the exclusive bounds likewise,
///    `minLength` above `maxLength`, and so for items, properties and contains) are both removed.
///
/// A schema without contradictions comes back unchanged and without warnings, and reading a
/// reconciled schema again changes nothing and warns of nothing (but that a schema nested deeper
/// than [`MAX_SCHEMA_DEPTH`] says so each time). Keywords that are malformed rather than contradictory
/// (`"type": 12`, an `enum` that is not an array) are left for the validator to refuse.
///
/// Takes the schema by value and changes it in place: nothing is copied, so a schema of any size or
/// depth costs no more than one walk over its first [`MAX_SCHEMA_DEPTH`] levels. Never panics.
///
/// ```
/// use serde_json::json;
/// use toolplan_core::reconcile;
///
/// let r = reconcile(json!({"type": "object", "properties": {
///     "has_laundry": {"type": "boolean", "enum": ["True", "False", "dontcare"]}}}));
/// assert_eq!(r.schema["properties"]["has_laundry"], json!({"type": "boolean", "enum": [true, false]}));
/// assert_eq!(r.warnings, [r#"/properties/has_laundry/enum: the values "True", "False", "dontcare" are not boolean; read as enum [true, false]"#]);
///
/// // A consistent schema is left alone.
/// let r = reconcile(json!({"type": "object", "properties": {"x": {"type": "integer"}}}));
/// assert!(r.warnings.is_empty());
/// ```
pub fn reconcile(schema: Value) -> Reconciled {
    let mut schema = schema;
    let mut walk = Walk {
        warnings: Vec::new(),
        too_deep: false,
    };
    let mut pointer = String::new();
    walk.schema(&mut schema, &mut pointer, 0);
    Reconciled {
        schema,
        warnings: walk.warnings,
    }
}

/// Keywords whose value is one subschema.
const ONE_SCHEMA: [&str; 12] = [
    "items",
    "additionalProperties",
    "additionalItems",
    "not",
    "contains",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
];
/// Keywords whose value is an array of subschemas (`items` too, in its draft-4 array form).
const SCHEMA_ARRAYS: [&str; 5] = ["items", "prefixItems", "anyOf", "oneOf", "allOf"];
/// Keywords whose value is an object of subschemas.
const SCHEMA_MAPS: [&str; 5] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// Appends `/key` (escaped as a JSON pointer) to `pointer`.
fn push_token(pointer: &mut String, key: &str) {
    pointer.push('/');
    for c in key.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

/// One walk over a schema: the warnings so far.
struct Walk {
    warnings: Vec<String>,
    /// Whether the depth warning was given.
    too_deep: bool,
}

impl Walk {
    fn warn(&mut self, pointer: &str, keyword: &str, text: impl std::fmt::Display) {
        let mut at = pointer.to_owned();
        push_token(&mut at, keyword);
        self.warnings.push(format!("{at}: {text}"));
    }

    /// Reconciles the subschema at `pointer`, `depth` levels down, and those under it.
    fn schema(&mut self, schema: &mut Value, pointer: &mut String, depth: usize) {
        let Value::Object(map) = schema else {
            // `true`, `false`, or not a schema at all (the validator says so).
            return;
        };
        if depth >= MAX_SCHEMA_DEPTH {
            if !self.too_deep {
                self.too_deep = true;
                self.warnings.push(format!(
                    "{pointer}: the schema nests deeper than {MAX_SCHEMA_DEPTH} levels (MAX_SCHEMA_DEPTH); \
                     what is below is read as it is"
                ));
            }
            return;
        }
        let kinds = self.type_names(map, pointer);
        if let Some(kinds) = &kinds {
            self.enum_values(map, pointer, kinds);
            self.const_value(map, pointer, kinds);
        }
        self.default_value(map, pointer, kinds.as_deref());
        self.required(map, pointer);
        self.bounds(map, pointer);

        let len = pointer.len();
        for keyword in ONE_SCHEMA {
            if let Some(sub @ Value::Object(_)) = map.get_mut(keyword) {
                push_token(pointer, keyword);
                self.schema(sub, pointer, depth + 1);
                pointer.truncate(len);
            }
        }
        for keyword in SCHEMA_ARRAYS {
            if let Some(Value::Array(subs)) = map.get_mut(keyword) {
                for (i, sub) in subs.iter_mut().enumerate() {
                    push_token(pointer, keyword);
                    push_token(pointer, &i.to_string());
                    self.schema(sub, pointer, depth + 1);
                    pointer.truncate(len);
                }
            }
        }
        for keyword in SCHEMA_MAPS {
            if let Some(Value::Object(subs)) = map.get_mut(keyword) {
                for (name, sub) in subs.iter_mut() {
                    push_token(pointer, keyword);
                    push_token(pointer, name);
                    self.schema(sub, pointer, depth + 1);
                    pointer.truncate(len);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
