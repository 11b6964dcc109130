//! The runner's assertions, with the Java runner's rules: paths (`hits.hits.0._source.x`, `\.` for a
//! dot inside a key, `$stash` segments), `match` (a `/regex/` found in a string; numbers of
//! different kinds compared as doubles at the top only; maps and lists exactly), `length`,
//! truthiness on the value's text, ordering on numbers, `contains`.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::suite::Order;

/// Values stashed by `set` (and `$body`, the last response).
#[derive(Debug, Default, Clone)]
pub struct Stash {
    values: HashMap<String, Value>,
}

impl Stash {
    /// Stashes `value` as `$name`.
    pub fn set(&mut self, name: &str, value: Value) {
        self.values.insert(name.to_owned(), value);
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.values.clear();
    }

    /// The stashed value `key` stands for (`$name` or `${name}`), if it is one.
    pub fn get(&self, key: &str) -> Option<&Value> {
        let name = key
            .strip_prefix("${")
            .and_then(|k| k.strip_suffix('}'))
            .or_else(|| key.strip_prefix('$'))?;
        self.values.get(name)
    }

    /// `value` with stashed values put in: strings that are `$name`, and `${name}` inside strings.
    pub fn replace(&self, value: &Value) -> Value {
        match value {
            Value::String(s) => {
                if let Some(v) = self.get(s) {
                    return v.clone();
                }
                let mut out = s.clone();
                for (name, v) in &self.values {
                    let placeholder = format!("${{{name}}}");
                    if out.contains(&placeholder) {
                        out = out.replace(&placeholder, &text(v));
                    }
                }
                Value::String(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(|i| self.replace(i)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| {
                        let key = self.get(k).map_or_else(|| k.clone(), text);
                        (key, self.replace(v))
                    })
                    .collect::<Map<_, _>>(),
            ),
            other => other.clone(),
        }
    }
}

/// A value's text as Java's `toString` would give it for these purposes.
pub fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "null".to_owned(),
        other => other.to_string(),
    }
}

/// The segments of a path: split at `.`, a `\` keeping the next `.` in the key.
pub fn segments(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut escape = false;
    for c in path.chars() {
        match c {
            '\\' => escape = true,
            '.' if escape => {
                escape = false;
                current.push('.');
            }
            '.' => {
                if !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The value at `path` of `response` (a stashed value when `path` is one): `Ok(None)` when a key
/// is missing, an error for a bad list index or a step into a scalar.
pub fn lookup(response: &Value, path: &str, stash: &Stash) -> Result<Option<Value>, String> {
    if let Some(v) = stash.get(path) {
        return Ok(Some(v.clone()));
    }
    let mut at = response;
    for segment in segments(path) {
        let key = stash.get(&segment).map_or(segment, text);
        at = match at {
            // `_arbitrary_key_` is the map's first key itself.
            Value::Object(map) if key == "_arbitrary_key_" => {
                return Ok(map.keys().next().map(|k| Value::String(k.clone())));
            }
            Value::Object(map) => match map.get(&key) {
                Some(v) if !v.is_null() => v,
                _ => return Ok(None),
            },
            Value::Array(items) => {
                let i: usize = key
                    .parse()
                    .map_err(|_| format!("[{key}] is not a list index (path {path})"))?;
                items.get(i).ok_or_else(|| {
                    format!(
                        "index [{i}] is past the list's {} items (path {path})",
                        items.len()
                    )
                })?
            }
            other => {
                return Err(format!(
                    "no object found for [{key}] within {other} (path {path})"
                ));
            }
        };
    }
    Ok(Some(at.clone()))
}

/// `match`.
pub fn matches(actual: Option<&Value>, expected: &Value) -> Result<(), String> {
    if let Value::String(s) = expected {
        let t = s.trim();
        if t.len() > 2 && t.starts_with('/') && t.ends_with('/') {
            let Some(Value::String(actual)) = actual else {
                return Err(format!("expected a string to match {t}, found {actual:?}"));
            };
            let re = regex::RegexBuilder::new(&t[1..t.len() - 1])
                .ignore_whitespace(true)
                .build()
                .map_err(|e| format!("bad regex {t}: {e}"))?;
            return if re.is_match(actual) {
                Ok(())
            } else {
                Err(format!("{actual:?} does not match {t}"))
            };
        }
    }
    match (actual, expected) {
        (None, Value::Null) => Ok(()),
        (None, _) => Err(format!("missing, expected {expected}")),
        (Some(a), e) if e.is_null() => Err(format!("expected null, found {a}")),
        (Some(Value::Number(a)), Value::Number(e)) => {
            let (x, y) = (
                a.as_f64().unwrap_or(f64::NAN),
                e.as_f64().unwrap_or(f64::NAN),
            );
            if x == y {
                Ok(())
            } else {
                Err(format!("{a} is not {e}"))
            }
        }
        (Some(a), e) => {
            if strictly_equal(a, e) {
                Ok(())
            } else {
                Err(format!("{a} is not {e}"))
            }
        }
    }
}

/// Java's `equals` on parsed JSON: maps with the same keys, lists in order, numbers of the same
/// kind (whole or not) and value.
fn strictly_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let whole = |n: &serde_json::Number| n.is_i64() || n.is_u64();
            whole(x) == whole(y) && x.as_f64() == y.as_f64()
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| strictly_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| strictly_equal(v, w)))
        }
        (x, y) => x == y,
    }
}

/// `length`.
pub fn length(actual: Option<&Value>, expected: &Value) -> Result<(), String> {
    let want: usize = match expected {
        Value::Number(n) => n.as_u64().and_then(|n| usize::try_from(n).ok()),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
    .ok_or_else(|| format!("length {expected} is not a count"))?;
    let have = match actual {
        Some(Value::String(s)) => s.encode_utf16().count(),
        Some(Value::Array(a)) => a.len(),
        Some(Value::Object(m)) => m.len(),
        other => return Err(format!("length of {other:?}")),
    };
    if have == want {
        Ok(())
    } else {
        Err(format!("length {have}, expected {want}"))
    }
}

/// Whether a value is true for `is_true` (false for `is_false`): on its text, `""`, `false` and
/// `0` are false, as is a missing value.
pub fn truthy(actual: Option<&Value>) -> bool {
    match actual {
        None | Some(Value::Null) => false,
        Some(v) => {
            let t = text(v);
            !(t.is_empty() || t.eq_ignore_ascii_case("false") || t == "0")
        }
    }
}

/// `gt`, `gte`, `lt`, `lte`: numbers as doubles when either is fractional, else as whole
/// numbers; strings by their text.
pub fn compare(order: Order, actual: Option<&Value>, expected: &Value) -> Result<(), String> {
    let Some(actual) = actual else {
        return Err(format!(
            "missing, expected a value to compare with {expected}"
        ));
    };
    let ordering = match (actual, expected) {
        (Value::Number(a), Value::Number(b)) => {
            if a.is_f64() || b.is_f64() {
                a.as_f64().partial_cmp(&b.as_f64())
            } else {
                a.as_i64()
                    .zip(b.as_i64())
                    .map(|(x, y)| x.cmp(&y))
                    .or_else(|| a.as_f64().partial_cmp(&b.as_f64()))
            }
        }
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        _ => None,
    }
    .ok_or_else(|| format!("cannot compare {actual} with {expected}"))?;
    let ok = match order {
        Order::Gt => ordering.is_gt(),
        Order::Gte => ordering.is_ge(),
        Order::Lt => ordering.is_lt(),
        Order::Lte => ordering.is_le(),
    };
    if ok {
        Ok(())
    } else {
        Err(format!("{actual} is not {order:?} {expected}"))
    }
}

/// `contains`: some object of the list has every entry of `expected`.
pub fn contains(actual: Option<&Value>, expected: &Value) -> Result<(), String> {
    let (Some(Value::Array(items)), Value::Object(want)) = (actual, expected) else {
        return Err("'contains' only supports checking an object against a list of objects".into());
    };
    let found = items.iter().any(|item| {
        item.as_object().is_some_and(|have| {
            want.iter()
                .all(|(k, v)| have.get(k).is_some_and(|h| strictly_equal(h, v)))
        })
    });
    if found {
        Ok(())
    } else {
        Err(format!("no item has {expected}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_java_runners_rules() {
        let r = json!({"hits": {"total": 2, "hits": [{"_id": "1", "_source": {"a.b": 1.0}}]},
                       "aggs": {"p": {"values": {"50.0": 3}}}, "empty": {}, "zero": 0.0});
        let stash = Stash::default();
        let at = |p: &str| lookup(&r, p, &stash).unwrap();
        assert_eq!(matches(at("hits.total").as_ref(), &json!(2.0)), Ok(()));
        assert!(matches(at("hits.hits.0._id").as_ref(), &json!(1)).is_err());
        assert_eq!(
            matches(at("hits.hits.0._source.a\\.b").as_ref(), &json!(1.0)),
            Ok(())
        );
        assert!(matches(at("hits.hits.0._source").as_ref(), &json!({"a.b": 1})).is_err());
        assert_eq!(
            matches(at("aggs.p.values.50\\.0").as_ref(), &json!(3)),
            Ok(())
        );
        assert_eq!(matches(at("nothing").as_ref(), &json!(null)), Ok(()));
        assert_eq!(
            matches(at("hits.hits.0._id").as_ref(), &json!("/^\\d$/")),
            Ok(())
        );
        assert!(lookup(&r, "hits.hits.3", &stash).is_err());
        assert!(truthy(at("empty").as_ref()));
        assert!(truthy(at("zero").as_ref()));
        assert!(!truthy(at("nothing").as_ref()));
        assert_eq!(length(at("hits.hits").as_ref(), &json!(1)), Ok(()));
        assert_eq!(
            compare(Order::Gte, at("hits.total").as_ref(), &json!(2)),
            Ok(())
        );
        assert!(compare(Order::Gt, at("hits.total").as_ref(), &json!(2.5)).is_err());
        assert_eq!(
            contains(at("hits.hits").as_ref(), &json!({"_id": "1"})),
            Ok(())
        );
        let mut stash = Stash::default();
        stash.set("id", json!("1"));
        assert_eq!(
            stash.replace(&json!({"ids": ["$id", "x${id}"]})),
            json!({"ids": ["1", "x1"]})
        );
        assert_eq!(
            lookup(&r, "hits.hits.0._id", &stash).unwrap(),
            Some(json!("1"))
        );
    }
}
