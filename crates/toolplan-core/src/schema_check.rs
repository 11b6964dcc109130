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

use std::collections::HashSet;
use std::fmt::Write as _;

use serde_json::{Map, Number, Value};

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

/// Lower and upper bounds that together can allow no value: (lower, upper, whether equal bounds
/// still allow one).
const BOUNDS: [(&str, &str, bool); 8] = [
    ("minimum", "maximum", true),
    ("exclusiveMinimum", "exclusiveMaximum", false),
    ("minimum", "exclusiveMaximum", false),
    ("exclusiveMinimum", "maximum", false),
    ("minLength", "maxLength", true),
    ("minItems", "maxItems", true),
    ("minProperties", "maxProperties", true),
    ("minContains", "maxContains", true),
];

/// Values shown in full in a warning; the rest are counted.
const SHOWN_VALUES: usize = 8;
/// Longest value (bytes of JSON text) quoted in a warning.
const SHOWN_VALUE_BYTES: usize = 40;

/// The JSON Schema types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Null,
    Boolean,
    Object,
    Array,
    Number,
    Integer,
    String,
}

impl Kind {
    const ALL: [Kind; 7] = [
        Kind::Null,
        Kind::Boolean,
        Kind::Object,
        Kind::Array,
        Kind::Number,
        Kind::Integer,
        Kind::String,
    ];

    fn name(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Boolean => "boolean",
            Kind::Object => "object",
            Kind::Array => "array",
            Kind::Number => "number",
            Kind::Integer => "integer",
            Kind::String => "string",
        }
    }

    /// Whether `value` is of this type, as JSON Schema says (`1.0` is an integer).
    fn admits(self, value: &Value) -> bool {
        match (self, value) {
            (Kind::Null, Value::Null)
            | (Kind::Boolean, Value::Bool(_))
            | (Kind::Object, Value::Object(_))
            | (Kind::Array, Value::Array(_))
            | (Kind::Number, Value::Number(_))
            | (Kind::String, Value::String(_)) => true,
            (Kind::Integer, Value::Number(n)) => is_integer(n),
            _ => false,
        }
    }

    /// The value of this type that `value` spells, if it spells one.
    fn convert(self, value: &Value) -> Option<Value> {
        match (self, value) {
            (Kind::Boolean, Value::String(s)) => {
                if s.eq_ignore_ascii_case("true") {
                    Some(Value::Bool(true))
                } else if s.eq_ignore_ascii_case("false") {
                    Some(Value::Bool(false))
                } else {
                    None
                }
            }
            (Kind::Integer, Value::String(s)) => parse_number(s)
                .filter(is_integer)
                .map(|n| Value::Number(integral(n))),
            (Kind::Number, Value::String(s)) => parse_number(s).map(Value::Number),
            (Kind::String, Value::Number(n)) => Some(Value::String(n.to_string())),
            (Kind::String, Value::Bool(b)) => Some(Value::String(b.to_string())),
            _ => None,
        }
    }
}

/// What a `type` name means.
enum TypeName {
    /// A JSON Schema type, spelled as JSON Schema spells it.
    Exact(Kind),
    /// Another spelling of a JSON Schema type (`dict`, `String`).
    Alias(Kind),
    /// `any`: no constraint.
    Any,
    /// Nothing known.
    Unknown,
}

fn type_name(name: &str) -> TypeName {
    if let Some(kind) = Kind::ALL.into_iter().find(|k| k.name() == name) {
        return TypeName::Exact(kind);
    }
    let lower = name.to_ascii_lowercase();
    let kind = match lower.as_str() {
        "dict" => Kind::Object,
        "float" => Kind::Number,
        "int" => Kind::Integer,
        "bool" => Kind::Boolean,
        "str" => Kind::String,
        "list" | "tuple" => Kind::Array,
        "any" => return TypeName::Any,
        other => match Kind::ALL.into_iter().find(|k| k.name() == other) {
            Some(kind) => kind,
            None => return TypeName::Unknown,
        },
    };
    TypeName::Alias(kind)
}

fn is_integer(n: &Number) -> bool {
    n.is_i64()
        || n.is_u64()
        || n.as_f64()
            .is_some_and(|f| f.is_finite() && f.fract() == 0.0)
}

/// `n` written as an integer when it is an integral float that fits (`3.0` → `3`).
fn integral(n: Number) -> Number {
    if n.is_f64()
        && let Some(f) = n.as_f64()
        && f.fract() == 0.0
        && f.abs() < 9.0e15
    {
        // Exact: integral and within f64's 53-bit integers.
        #[allow(clippy::cast_possible_truncation)]
        return Number::from(f as i64);
    }
    n
}

/// The number `s` spells: an integer when it is one, else a finite float.
fn parse_number(s: &str) -> Option<Number> {
    if let Ok(i) = s.parse::<i64>() {
        return Some(Number::from(i));
    }
    if let Ok(u) = s.parse::<u64>() {
        return Some(Number::from(u));
    }
    let f = s.parse::<f64>().ok().filter(|f| f.is_finite())?;
    Number::from_f64(f)
}

/// Whether two values are equal as JSON Schema compares them (`1` equals `1.0`), without
/// recursion.
fn same(a: &Value, b: &Value) -> bool {
    let mut pending = vec![(a, b)];
    while let Some((a, b)) = pending.pop() {
        match (a, b) {
            (Value::Null, Value::Null) => {}
            (Value::Bool(x), Value::Bool(y)) if x == y => {}
            (Value::String(x), Value::String(y)) if x == y => {}
            (Value::Number(x), Value::Number(y)) if same_number(x, y) => {}
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                pending.extend(x.iter().zip(y));
            }
            (Value::Object(x), Value::Object(y)) if x.len() == y.len() => {
                for (k, v) in x {
                    match y.get(k) {
                        Some(w) => pending.push((v, w)),
                        None => return false,
                    }
                }
            }
            _ => return false,
        }
    }
    true
}

fn same_number(x: &Number, y: &Number) -> bool {
    if let (Some(a), Some(b)) = (x.as_i64(), y.as_i64()) {
        return a == b;
    }
    if let (Some(a), Some(b)) = (x.as_u64(), y.as_u64()) {
        return a == b;
    }
    x.as_f64() == y.as_f64()
}

/// A key under which equal scalars are equal (`1` and `1.0` alike); `None` for arrays and objects.
fn scalar_key(value: &Value) -> Option<String> {
    Some(match value {
        Value::Null => "z".to_owned(),
        Value::Bool(b) => format!("b{b}"),
        Value::String(s) => format!("s{s}"),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => format!("n{i}"),
            (None, Some(u), _) => format!("n{u}"),
            (None, None, Some(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => {
                // Exact, as in `integral`.
                #[allow(clippy::cast_possible_truncation)]
                let i = f as i64;
                format!("n{i}")
            }
            _ => format!("f{n}"),
        },
        Value::Array(_) | Value::Object(_) => return None,
    })
}

/// A value as a warning quotes it: its JSON text, or a stand-in when that is long.
fn show(value: &Value) -> String {
    if crate::limits::json_size_within(value, SHOWN_VALUE_BYTES).is_some() {
        return value.to_string();
    }
    match value {
        Value::String(s) => {
            let cut = s
                .char_indices()
                .map(|(i, _)| i)
                .take_while(|&i| i <= SHOWN_VALUE_BYTES)
                .last()
                .unwrap_or(0);
            format!("{}…", Value::from(s.get(..cut).unwrap_or("")))
        }
        Value::Array(items) => format!("[…{} items]", items.len()),
        Value::Object(map) => format!("{{…{} keys}}", map.len()),
        other => other.to_string(),
    }
}

/// Values as a warning lists them: `"a", "b"`, or the first few and how many more.
fn show_all<'a>(values: impl ExactSizeIterator<Item = &'a Value>) -> String {
    let total = values.len();
    let mut text = values
        .take(SHOWN_VALUES)
        .map(show)
        .collect::<Vec<_>>()
        .join(", ");
    if total > SHOWN_VALUES {
        let _ = write!(text, " and {} more", total - SHOWN_VALUES);
    }
    text
}

/// `boolean`, `integer or string`.
fn kinds_text(kinds: &[Kind]) -> String {
    kinds
        .iter()
        .map(|k| k.name())
        .collect::<Vec<_>>()
        .join(" or ")
}

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

    /// Rule 3: reads the `type` names as JSON Schema types. Returns the types the schema then has
    /// (`None`: no type constraint, or a `type` too malformed to read, left for the validator).
    fn type_names(&mut self, map: &mut Map<String, Value>, pointer: &str) -> Option<Vec<Kind>> {
        let names: Vec<&str> = match map.get("type")? {
            Value::String(name) => vec![name.as_str()],
            Value::Array(items) if !items.is_empty() => {
                items.iter().map(Value::as_str).collect::<Option<_>>()?
            }
            _ => return None,
        };
        let single = matches!(map.get("type"), Some(Value::String(_)));
        let mut kinds = Vec::new();
        let mut any = false;
        let mut changed = false;
        for name in &names {
            match type_name(name) {
                TypeName::Exact(kind) => kinds.push(kind),
                TypeName::Alias(kind) => {
                    changed = true;
                    kinds.push(kind);
                }
                TypeName::Any => any = true,
                TypeName::Unknown => changed = true,
            }
        }
        if !changed && !any {
            return Some(kinds);
        }
        let all: Vec<Value> = names
            .iter()
            .map(|n| Value::String((*n).to_owned()))
            .collect();
        let shown = show_all(all.iter());
        let (verb, plural) = if names.len() == 1 {
            ("is", "a JSON Schema type")
        } else {
            ("are", "all JSON Schema types")
        };
        if any {
            map.shift_remove("type");
            let text = if single {
                format!("{shown} allows every value; type removed")
            } else {
                format!("{shown} include one that allows every value; type removed")
            };
            self.warn(pointer, "type", text);
            return None;
        }
        let mut unique: Vec<Kind> = Vec::new();
        for kind in kinds {
            if !unique.contains(&kind) {
                unique.push(kind);
            }
        }
        if unique.is_empty() {
            map.shift_remove("type");
            self.warn(
                pointer,
                "type",
                format_args!("{shown} {verb} not {plural}; type removed"),
            );
            return None;
        }
        let reading = if let (true, [kind]) = (single, unique.as_slice()) {
            Value::String(kind.name().to_owned())
        } else {
            Value::Array(
                unique
                    .iter()
                    .map(|k| Value::String(k.name().to_owned()))
                    .collect(),
            )
        };
        self.warn(
            pointer,
            "type",
            format_args!("{shown} {verb} not {plural}; read as {reading}"),
        );
        map.insert("type".to_owned(), reading);
        Some(unique)
    }

    /// Rule 1 for `enum`.
    fn enum_values(&mut self, map: &mut Map<String, Value>, pointer: &str, kinds: &[Kind]) {
        let Some(Value::Array(values)) = map.get_mut("enum") else {
            return;
        };
        let fits = |v: &Value| kinds.iter().any(|k| k.admits(v));
        if values.iter().all(fits) {
            return;
        }
        let mut misfits = Vec::new();
        let mut kept = Vec::with_capacity(values.len());
        let mut seen = HashSet::new();
        for value in std::mem::take(values) {
            let value = if fits(&value) {
                value
            } else {
                let converted = kinds.iter().find_map(|k| k.convert(&value));
                misfits.push(value);
                match converted {
                    Some(v) => v,
                    None => continue,
                }
            };
            // Scalars are kept once (a converted value may repeat another); arrays and objects are
            // kept as they are.
            if scalar_key(&value).is_none_or(|key| seen.insert(key)) {
                kept.push(value);
            }
        }
        let (noun, verb) = if misfits.len() == 1 {
            ("value", "is")
        } else {
            ("values", "are")
        };
        let head = format!(
            "the {noun} {} {verb} not {}",
            show_all(misfits.iter()),
            kinds_text(kinds)
        );
        if kept.is_empty() {
            map.shift_remove("enum");
            self.warn(
                pointer,
                "enum",
                format_args!("{head}; no value is left, so the enum is removed"),
            );
        } else {
            let reading = format!("[{}]", show_all(kept.iter()));
            *values = kept;
            self.warn(
                pointer,
                "enum",
                format_args!("{head}; read as enum {reading}"),
            );
        }
    }

    /// Rule 1 for `const`.
    fn const_value(&mut self, map: &mut Map<String, Value>, pointer: &str, kinds: &[Kind]) {
        let Some(value) = map.get_mut("const") else {
            return;
        };
        if kinds.iter().any(|k| k.admits(value)) {
            return;
        }
        let head = format!("{} is not {}", show(value), kinds_text(kinds));
        match kinds.iter().find_map(|k| k.convert(value)) {
            Some(converted) => {
                let shown = show(&converted);
                *value = converted;
                self.warn(
                    pointer,
                    "const",
                    format_args!("{head}; read as const {shown}"),
                );
            }
            None => {
                map.shift_remove("const");
                self.warn(pointer, "const", format_args!("{head}; const removed"));
            }
        }
    }

    /// Rule 2.
    fn default_value(
        &mut self,
        map: &mut Map<String, Value>,
        pointer: &str,
        kinds: Option<&[Kind]>,
    ) {
        let Some(default) = map.get("default") else {
            return;
        };
        let enumerated = match map.get("enum") {
            Some(Value::Array(values)) => Some(values),
            _ => None,
        };
        let fits_type = |v: &Value| kinds.is_none_or(|ks| ks.iter().any(|k| k.admits(v)));
        let fits_enum = |v: &Value| enumerated.is_none_or(|vs| vs.iter().any(|e| same(e, v)));
        if fits_type(default) && fits_enum(default) {
            return;
        }
        let (head, converted) = if fits_type(default) {
            (format!("{} is not one of the enum", show(default)), None)
        } else {
            let kinds = kinds.unwrap_or_default();
            let converted = kinds
                .iter()
                .find_map(|k| k.convert(default))
                .filter(|v| fits_enum(v));
            (
                format!("{} is not {}", show(default), kinds_text(kinds)),
                converted,
            )
        };
        match converted {
            Some(value) => {
                let shown = show(&value);
                map.insert("default".to_owned(), value);
                self.warn(
                    pointer,
                    "default",
                    format_args!("{head}; read as default {shown}"),
                );
            }
            None => {
                map.shift_remove("default");
                self.warn(pointer, "default", format_args!("{head}; default removed"));
            }
        }
    }

    /// Rule 4.
    fn required(&mut self, map: &mut Map<String, Value>, pointer: &str) {
        if map.get("additionalProperties") != Some(&Value::Bool(false))
            || map
                .get("patternProperties")
                .is_some_and(|p| p.as_object().is_none_or(|p| !p.is_empty()))
        {
            return;
        }
        let empty = Map::new();
        let properties = match map.get("properties") {
            None => &empty,
            Some(Value::Object(p)) => p,
            Some(_) => return,
        };
        let Some(Value::Array(required)) = map.get("required") else {
            return;
        };
        // Which entries can never be given (strings not among the properties).
        let drop: Vec<bool> = required
            .iter()
            .map(|r| r.as_str().is_some_and(|n| !properties.contains_key(n)))
            .collect();
        let impossible: Vec<&Value> = required
            .iter()
            .zip(&drop)
            .filter_map(|(r, &d)| d.then_some(r))
            .collect();
        if impossible.is_empty() {
            return;
        }
        let (noun, verb, pronoun) = if impossible.len() == 1 {
            ("property", "is", "it")
        } else {
            ("properties", "are", "them")
        };
        let text = format!(
            "the required {noun} {} {verb} not among the properties and additionalProperties is \
             false, so no arguments could have {pronoun}; dropped from required",
            show_all(impossible.into_iter()),
        );
        let mut now_empty = false;
        if let Some(Value::Array(required)) = map.get_mut("required") {
            let mut flags = drop.into_iter();
            required.retain(|_| !flags.next().unwrap_or(false));
            now_empty = required.is_empty();
        }
        if now_empty {
            map.shift_remove("required");
        }
        self.warn(pointer, "required", text);
    }

    /// Rule 5.
    fn bounds(&mut self, map: &mut Map<String, Value>, pointer: &str) {
        for (lower, upper, equal_allowed) in BOUNDS {
            let (Some(low), Some(high)) = (
                map.get(lower).and_then(Value::as_f64),
                map.get(upper).and_then(Value::as_f64),
            ) else {
                continue;
            };
            if low < high || (equal_allowed && low == high) {
                continue;
            }
            let text = format!(
                "{lower} {} and {upper} {} allow no value; both removed",
                show(map.get(lower).unwrap_or(&Value::Null)),
                show(map.get(upper).unwrap_or(&Value::Null)),
            );
            map.shift_remove(lower);
            map.shift_remove(upper);
            self.warn(pointer, lower, text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// The reading and the warnings of `schema`.
    fn reading(schema: Value) -> (Value, Vec<String>) {
        let r = reconcile(schema);
        (r.schema, r.warnings)
    }

    /// Asserts that `schema` is consistent: it comes back as it was, without warnings.
    fn assert_consistent(schema: Value) {
        let (read, warnings) = reading(schema.clone());
        assert!(warnings.is_empty(), "{schema}: {warnings:?}");
        assert_eq!(read, schema);
        // Not even the order of keys changes.
        assert_eq!(read.to_string(), schema.to_string());
    }

    #[test]
    fn a_boolean_with_string_choices_is_a_boolean() {
        let (schema, warnings) = reading(json!({"type": "object", "properties": {
            "has_laundry": {"type": "boolean", "enum": ["True", "False", "dontcare"],
                            "description": "Whether there is laundry."}},
            "required": ["has_laundry"]}));
        assert_eq!(
            schema,
            json!({"type": "object", "properties": {
                "has_laundry": {"type": "boolean", "enum": [true, false],
                                "description": "Whether there is laundry."}},
                "required": ["has_laundry"]})
        );
        assert_eq!(
            warnings,
            [
                r#"/properties/has_laundry/enum: the values "True", "False", "dontcare" are not boolean; read as enum [true, false]"#
            ]
        );
    }

    #[test]
    fn enum_values_convert_to_the_type_or_go() {
        let cases = [
            (
                json!({"type": "integer", "enum": ["3", "2.5", "x", 3, "4.0"]}),
                json!({"type": "integer", "enum": [3, 4]}),
            ),
            (
                json!({"type": "number", "enum": ["2.5", "-1", "1e3", "NaN", "inf"]}),
                json!({"type": "number", "enum": [2.5, -1, 1000.0]}),
            ),
            (
                json!({"type": "string", "enum": [1, true, "a", 2.5, null, "1"]}),
                json!({"type": "string", "enum": ["1", "true", "a", "2.5"]}),
            ),
            (
                json!({"type": "boolean", "enum": ["TRUE", "true", true, "yes"]}),
                json!({"type": "boolean", "enum": [true]}),
            ),
            // With a list of types a value may have any of them; a misfit goes to the first it fits.
            (
                json!({"type": ["integer", "string"], "enum": [1, "a", true, 2.5]}),
                json!({"type": ["integer", "string"], "enum": [1, "a", "true", "2.5"]}),
            ),
            (
                json!({"type": "boolean", "enum": ["dontcare", "maybe"]}),
                json!({"type": "boolean"}),
            ),
            (
                json!({"type": "boolean", "const": "True"}),
                json!({"type": "boolean", "const": true}),
            ),
            (
                json!({"type": "integer", "const": "many"}),
                json!({"type": "integer"}),
            ),
        ];
        for (schema, expected) in cases {
            let (read, warnings) = reading(schema.clone());
            assert_eq!(read, expected, "{schema}");
            assert_eq!(warnings.len(), 1, "{schema}: {warnings:?}");
        }
        let (_, warnings) = reading(json!({"type": "boolean", "enum": ["dontcare"]}));
        assert_eq!(
            warnings,
            [
                r#"/enum: the value "dontcare" is not boolean; no value is left, so the enum is removed"#
            ]
        );
        let (_, warnings) = reading(json!({"type": "integer", "const": "many"}));
        assert_eq!(
            warnings,
            [r#"/const: "many" is not integer; const removed"#]
        );
    }

    #[test]
    fn defaults_follow_the_type_and_the_enum() {
        let cases = [
            (
                json!({"type": "boolean", "default": "False"}),
                json!({"type": "boolean", "default": false}),
                r#"/default: "False" is not boolean; read as default false"#,
            ),
            (
                json!({"type": "boolean", "default": "maybe"}),
                json!({"type": "boolean"}),
                r#"/default: "maybe" is not boolean; default removed"#,
            ),
            (
                json!({"type": "string", "enum": ["a", "b"], "default": "c"}),
                json!({"type": "string", "enum": ["a", "b"]}),
                r#"/default: "c" is not one of the enum; default removed"#,
            ),
            (
                json!({"type": "string", "default": null}),
                json!({"type": "string"}),
                "/default: null is not string; default removed",
            ),
            // Converted, the default must still be one of the enum.
            (
                json!({"type": "integer", "enum": [1, 2], "default": "3"}),
                json!({"type": "integer", "enum": [1, 2]}),
                r#"/default: "3" is not integer; default removed"#,
            ),
            (
                json!({"type": "boolean", "enum": ["True", "False", "dontcare"], "default": "dontcare"}),
                json!({"type": "boolean", "enum": [true, false]}),
                r#"/default: "dontcare" is not boolean; default removed"#,
            ),
        ];
        for (schema, expected, warning) in cases {
            let (read, warnings) = reading(schema.clone());
            assert_eq!(read, expected, "{schema}");
            assert_eq!(
                warnings.last().map(String::as_str),
                Some(warning),
                "{schema}"
            );
        }
        // 1.0 is 1 for JSON Schema.
        assert_consistent(json!({"type": "integer", "enum": [1, 2], "default": 1.0}));
        // Without a type, the enum alone decides.
        let (read, _) = reading(json!({"enum": ["a"], "default": "b"}));
        assert_eq!(read, json!({"enum": ["a"]}));
    }

    #[test]
    fn python_type_names_are_json_schema_types() {
        let (schema, warnings) = reading(json!({"type": "dict", "properties": {
            "a": {"type": "float"},
            "b": {"type": "int", "default": "3"},
            "c": {"type": "any"},
            "d": {"type": "tuple", "items": {"type": "str"}},
            "e": {"type": "bool"},
            "f": {"type": "list"},
            "g": {"type": "String"},
            "h": {"type": "frobnicate"},
            "i": {"type": ["int", "null", "integer"]},
            "j": {"type": ["str", "any"]},
        }}));
        assert_eq!(
            schema,
            json!({"type": "object", "properties": {
                "a": {"type": "number"},
                "b": {"type": "integer", "default": 3},
                "c": {},
                "d": {"type": "array", "items": {"type": "string"}},
                "e": {"type": "boolean"},
                "f": {"type": "array"},
                "g": {"type": "string"},
                "h": {},
                "i": {"type": ["integer", "null"]},
                "j": {},
            }})
        );
        assert_eq!(
            warnings,
            [
                r#"/type: "dict" is not a JSON Schema type; read as "object""#,
                r#"/properties/a/type: "float" is not a JSON Schema type; read as "number""#,
                r#"/properties/b/type: "int" is not a JSON Schema type; read as "integer""#,
                r#"/properties/b/default: "3" is not integer; read as default 3"#,
                r#"/properties/c/type: "any" allows every value; type removed"#,
                r#"/properties/d/type: "tuple" is not a JSON Schema type; read as "array""#,
                r#"/properties/d/items/type: "str" is not a JSON Schema type; read as "string""#,
                r#"/properties/e/type: "bool" is not a JSON Schema type; read as "boolean""#,
                r#"/properties/f/type: "list" is not a JSON Schema type; read as "array""#,
                r#"/properties/g/type: "String" is not a JSON Schema type; read as "string""#,
                r#"/properties/h/type: "frobnicate" is not a JSON Schema type; type removed"#,
                r#"/properties/i/type: "int", "null", "integer" are not all JSON Schema types; read as ["integer","null"]"#,
                r#"/properties/j/type: "str", "any" include one that allows every value; type removed"#,
            ]
        );
        // A type that is not a name at all is the validator's to refuse.
        assert_consistent(json!({"type": 12}));
        assert_consistent(json!({"type": [1, "string"]}));
    }

    #[test]
    fn required_properties_that_cannot_be_given_are_dropped() {
        let (schema, warnings) = reading(json!({"type": "object",
            "properties": {"a": {"type": "string"}}, "required": ["a", "b", "c"],
            "additionalProperties": false}));
        assert_eq!(
            schema,
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
                   "additionalProperties": false})
        );
        assert_eq!(
            warnings,
            [
                r#"/required: the required properties "b", "c" are not among the properties and additionalProperties is false, so no arguments could have them; dropped from required"#
            ]
        );
        let (schema, _) = reading(json!({"required": ["x"], "additionalProperties": false}));
        assert_eq!(schema, json!({"additionalProperties": false}));
        // Other properties may be given: nothing is impossible.
        assert_consistent(
            json!({"properties": {"a": {}}, "required": ["a", "b"], "additionalProperties": true}),
        );
        assert_consistent(json!({"properties": {"a": {}}, "required": ["b"]}));
        assert_consistent(json!({"properties": {"a": {}}, "required": ["b"],
                                  "patternProperties": {"^b$": {}}, "additionalProperties": false}));
    }

    #[test]
    fn bounds_that_allow_nothing_are_removed() {
        let (schema, warnings) = reading(json!({"type": "integer", "minimum": 5, "maximum": 3}));
        assert_eq!(schema, json!({"type": "integer"}));
        assert_eq!(
            warnings,
            ["/minimum: minimum 5 and maximum 3 allow no value; both removed"]
        );
        for (schema, expected) in [
            (
                json!({"exclusiveMinimum": 2, "exclusiveMaximum": 2, "multipleOf": 1}),
                json!({"multipleOf": 1}),
            ),
            (json!({"minimum": 2, "exclusiveMaximum": 2}), json!({})),
            (json!({"exclusiveMinimum": 3, "maximum": 1.5}), json!({})),
            (
                json!({"type": "string", "minLength": 10, "maxLength": 2}),
                json!({"type": "string"}),
            ),
            (
                json!({"minItems": 3, "maxItems": 1, "items": {"type": "string"}}),
                json!({"items": {"type": "string"}}),
            ),
            (json!({"minProperties": 2, "maxProperties": 0}), json!({})),
        ] {
            let (read, warnings) = reading(schema.clone());
            assert_eq!(read, expected, "{schema}");
            assert_eq!(warnings.len(), 1, "{schema}: {warnings:?}");
        }
        assert_consistent(json!({"minimum": 3, "maximum": 3, "minLength": 0, "maxLength": 0}));
        // Draft 4's boolean exclusive bounds are not numbers to compare.
        assert_consistent(json!({"minimum": 1, "maximum": 5, "exclusiveMinimum": true}));
    }

    #[test]
    fn every_kind_of_subschema_is_read() {
        let bad = json!({"type": "boolean", "enum": ["True"]});
        let good = json!({"type": "boolean", "enum": [true]});
        let schema = json!({
            "items": bad, "prefixItems": [bad], "additionalProperties": bad, "not": bad,
            "anyOf": [{}, bad], "oneOf": [bad], "allOf": [bad], "$defs": {"x": bad},
            "definitions": {"y": bad}, "properties": {"a/b~c": bad},
            "patternProperties": {"^p": bad}, "if": bad, "then": bad, "else": bad,
            "contains": bad, "propertyNames": bad, "dependentSchemas": {"d": bad},
        });
        let (read, warnings) = reading(schema);
        let pointers: Vec<&str> = warnings
            .iter()
            .map(|w| w.split(": ").next().unwrap_or(""))
            .collect();
        assert_eq!(
            pointers,
            [
                "/items/enum",
                "/additionalProperties/enum",
                "/not/enum",
                "/contains/enum",
                "/if/enum",
                "/then/enum",
                "/else/enum",
                "/propertyNames/enum",
                "/prefixItems/0/enum",
                "/anyOf/1/enum",
                "/oneOf/0/enum",
                "/allOf/0/enum",
                "/properties/a~1b~0c/enum",
                "/patternProperties/^p/enum",
                "/$defs/x/enum",
                "/definitions/y/enum",
                "/dependentSchemas/d/enum",
            ]
        );
        assert_eq!(read["anyOf"][1], good);
        assert_eq!(read["properties"]["a/b~c"], good);
        // `items` in its array form (draft 4).
        let (read, _) = reading(json!({"items": [bad, {}]}));
        assert_eq!(read, json!({"items": [good, {}]}));
    }

    /// `{"not": {"not": … leaf …}}`, `depth` levels of `not` above `leaf`, built without
    /// recursion.
    fn nested(depth: usize, leaf: Value) -> Value {
        let mut schema = leaf;
        for _ in 0..depth {
            let mut map = Map::new();
            map.insert("not".to_owned(), schema);
            schema = Value::Object(map);
        }
        schema
    }

    #[test]
    fn deep_schemas_are_read_down_to_the_limit() {
        let bad = json!({"type": "boolean", "enum": ["True"]});
        // The deepest level read.
        let (read, warnings) = reading(nested(MAX_SCHEMA_DEPTH - 1, bad.clone()));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        let (_, again) = reading(read);
        assert!(again.is_empty());
        // One level further: left as it is, with one warning.
        let schema = nested(MAX_SCHEMA_DEPTH, bad.clone());
        let (read, warnings) = reading(schema.clone());
        assert_eq!(read, schema);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].ends_with(
                ": the schema nests deeper than 64 levels (MAX_SCHEMA_DEPTH); what is below is read as it is"
            ),
            "{warnings:?}"
        );
        assert!(warnings[0].starts_with("/not/not/"), "{warnings:?}");
        // Far deeper than any stack could recurse: one warning, no crash.
        let deep = nested(200_000, bad);
        let r = reconcile(deep);
        assert_eq!(r.warnings.len(), 1);
        crate::limits::drop_deep(r.schema);
    }

    #[test]
    fn long_values_are_cut_in_warnings() {
        let long = "x".repeat(1000);
        let mut values: Vec<Value> = (0..20).map(|i| json!(format!("v{i}"))).collect();
        values.push(json!(long));
        let (_, warnings) = reading(json!({"type": "integer", "enum": values}));
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].len() < 300, "{}", warnings[0]);
        assert!(warnings[0].contains("and 13 more"), "{}", warnings[0]);
        let (_, warnings) = reading(json!({"type": "integer", "default": long}));
        assert!(warnings[0].len() < 200, "{}", warnings[0]);
        assert!(warnings[0].contains("xxx\"…"), "{}", warnings[0]);
    }

    /// Schemas as tools write them, each consistent.
    #[test]
    fn consistent_schemas_come_back_unchanged() {
        for schema in [
            json!({}),
            json!(true),
            json!({"type": "object", "properties": {}}),
            json!({"type": "object",
                   "properties": {"location": {"type": "string", "description": "A city."},
                                  "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}},
                   "required": ["location"], "additionalProperties": false}),
            json!({"type": "object", "properties": {
                "expression": {"type": "string", "maxLength": 10000},
                "precision": {"type": ["integer", "null"], "minimum": 0, "maximum": 15, "default": null},
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "uniqueItems": true},
                "point": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}]},
                "mode": {"anyOf": [{"const": "fast"}, {"type": "integer", "exclusiveMinimum": 0}]},
                "nested": {"$ref": "#/$defs/node"},
                "flag": {"type": "boolean", "enum": [true, false], "default": false},
                "ratio": {"type": "number", "enum": [0.5, 1, 2.5]},
                "any": {"description": "Anything at all."}},
                   "$defs": {"node": {"type": "object", "additionalProperties": {"type": "integer"}}}}),
            json!({"type": "object", "properties": {"a": {"type": "integer", "enum": [1, 1.0, 2]}}}),
            json!({"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
                   "properties": {"n": {"type": "number", "minimum": 0, "exclusiveMinimum": true}}}),
        ] {
            assert_consistent(schema);
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Idempotence, on schema-shaped JSON with contradictions of every kind
    // ---------------------------------------------------------------------------------------------

    fn scalar() -> BoxedStrategy<Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-5i64..5).prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
            prop::sample::select(vec![
                "True",
                "false",
                "dontcare",
                "3",
                "2.5",
                "-0",
                "1e3",
                "4.0",
                "",
                "NaN",
                "a",
                "b",
                "18446744073709551615",
                "1e400",
            ])
            .prop_map(Value::from),
        ]
        .boxed()
    }

    fn type_value() -> BoxedStrategy<Value> {
        let name = prop::sample::select(vec![
            "string", "integer", "number", "boolean", "null", "object", "array", "dict", "float",
            "int", "bool", "str", "list", "tuple", "any", "String", "frob",
        ])
        .prop_map(Value::from);
        prop_oneof![
            4 => name.clone(),
            1 => prop::collection::vec(name, 0..4).prop_map(Value::Array),
            1 => Just(json!(12)),
        ]
        .boxed()
    }

    fn bound() -> BoxedStrategy<Value> {
        prop_oneof![
            (-3i64..4).prop_map(Value::from),
            any::<bool>().prop_map(Value::Bool)
        ]
        .boxed()
    }

    fn schema() -> impl Strategy<Value = Value> {
        let leaf = (
            prop::option::of(type_value()),
            prop::option::of(prop::collection::vec(scalar(), 0..6)),
            prop::option::of(scalar()),
            prop::option::of(scalar()),
            prop::collection::vec(
                (
                    prop::sample::select(vec![
                        "minimum",
                        "maximum",
                        "exclusiveMinimum",
                        "exclusiveMaximum",
                        "minLength",
                        "maxLength",
                        "minItems",
                        "maxItems",
                        "minProperties",
                        "maxProperties",
                    ]),
                    bound(),
                ),
                0..4,
            ),
        )
            .prop_map(|(ty, en, cst, default, bounds)| {
                let mut map = Map::new();
                if let Some(ty) = ty {
                    map.insert("type".into(), ty);
                }
                if let Some(en) = en {
                    map.insert("enum".into(), Value::Array(en));
                }
                if let Some(c) = cst {
                    map.insert("const".into(), c);
                }
                if let Some(d) = default {
                    map.insert("default".into(), d);
                }
                for (k, v) in bounds {
                    map.insert(k.into(), v);
                }
                Value::Object(map)
            });
        leaf.prop_recursive(4, 32, 4, |inner| {
            (
                prop::collection::btree_map("[a-c/~]{1,2}", inner.clone(), 0..4),
                prop::collection::vec("[a-d]", 0..4),
                prop::option::of(prop_oneof![
                    any::<bool>().prop_map(Value::Bool),
                    inner.clone()
                ]),
                prop::option::of(inner.clone()),
                prop::collection::vec(inner.clone(), 0..3),
                prop::option::of(type_value()),
                prop::option::of(scalar()),
            )
                .prop_map(
                    |(props, required, additional, items, any_of, ty, default)| {
                        let mut map = Map::new();
                        if let Some(ty) = ty {
                            map.insert("type".into(), ty);
                        }
                        if let Some(d) = default {
                            map.insert("default".into(), d);
                        }
                        map.insert(
                            "properties".into(),
                            Value::Object(props.into_iter().collect()),
                        );
                        map.insert(
                            "required".into(),
                            Value::Array(required.into_iter().map(Value::from).collect()),
                        );
                        if let Some(a) = additional {
                            map.insert("additionalProperties".into(), a);
                        }
                        if let Some(i) = items {
                            map.insert("items".into(), i);
                        }
                        if !any_of.is_empty() {
                            map.insert("anyOf".into(), Value::Array(any_of));
                        }
                        Value::Object(map)
                    },
                )
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

        /// Reading a reconciled schema again changes nothing and warns of nothing; a schema read
        /// without warnings is the schema itself.
        #[test]
        fn reconciling_is_idempotent(schema in schema()) {
            let once = reconcile(schema.clone());
            if once.warnings.is_empty() {
                prop_assert_eq!(&once.schema, &schema);
            }
            let twice = reconcile(once.schema.clone());
            prop_assert!(twice.warnings.is_empty(), "{} → {}: {:?}", schema, once.schema, twice.warnings);
            prop_assert_eq!(twice.schema, once.schema);
        }
    }
}
