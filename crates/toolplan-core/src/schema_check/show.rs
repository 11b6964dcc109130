//! How a warning quotes what it is about: values ([`show`], [`show_all`], cut when long or many) and
//! lists of types ([`kinds_text`]).

use std::fmt::Write as _;

use serde_json::Value;

use super::kind::Kind;

/// Values shown in full in a warning; the rest are counted.
const SHOWN_VALUES: usize = 8;
/// Longest value (bytes of JSON text) quoted in a warning.
const SHOWN_VALUE_BYTES: usize = 40;

/// A value as a warning quotes it: its JSON text, or a stand-in when that is long.
pub(super) fn show(value: &Value) -> String {
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
pub(super) fn show_all<'a>(values: impl ExactSizeIterator<Item = &'a Value>) -> String {
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
pub(super) fn kinds_text(kinds: &[Kind]) -> String {
    kinds
        .iter()
        .map(|k| k.name())
        .collect::<Vec<_>>()
        .join(" or ")
}
