//! The JSON Schema types ([`Kind`]) and their values: what a `type` name means, whether a value has
//! a type and the value of a type it spells, and values compared as JSON Schema compares them.

use serde_json::{Number, Value};

/// The JSON Schema types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Null,
    Boolean,
    Object,
    Array,
    Number,
    Integer,
    String,
}

impl Kind {
    pub(super) const ALL: [Kind; 7] = [
        Kind::Null,
        Kind::Boolean,
        Kind::Object,
        Kind::Array,
        Kind::Number,
        Kind::Integer,
        Kind::String,
    ];

    pub(super) fn name(self) -> &'static str {
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
    pub(super) fn admits(self, value: &Value) -> bool {
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
    pub(super) fn convert(self, value: &Value) -> Option<Value> {
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
pub(super) enum TypeName {
    /// A JSON Schema type, spelled as JSON Schema spells it.
    Exact(Kind),
    /// Another spelling of a JSON Schema type (`dict`, `String`).
    Alias(Kind),
    /// `any`: no constraint.
    Any,
    /// Nothing known.
    Unknown,
}

pub(super) fn type_name(name: &str) -> TypeName {
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
pub(super) fn same(a: &Value, b: &Value) -> bool {
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
pub(super) fn scalar_key(value: &Value) -> Option<String> {
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
