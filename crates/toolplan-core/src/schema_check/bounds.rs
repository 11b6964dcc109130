//! Rules 4 and 5 of [`reconcile`](super::reconcile): constraints no value can meet — `required`
//! names that can never be given, and lower and upper bounds that allow no value.

use serde_json::{Map, Value};

use super::Walk;
use super::show::{show, show_all};

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

impl Walk {
    /// Rule 4.
    pub(super) fn required(&mut self, map: &mut Map<String, Value>, pointer: &str) {
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
    pub(super) fn bounds(&mut self, map: &mut Map<String, Value>, pointer: &str) {
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
