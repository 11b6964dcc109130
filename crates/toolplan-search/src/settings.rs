//! The settings of an index, as a create-index body gives them (`{"settings": {…}}`, keys with
//! or without `index.`, nested or dotted). The embedded engine reads those that bound requests
//! (`max_result_window`, `max_inner_result_window`, `max_docvalue_fields_search`,
//! `max_script_fields`, `max_regex_length`, `max_terms_count`, `max_rescore_window`): each lowers
//! the backend's own limit of that name for the index, never raises it. Shard and refresh
//! settings (`number_of_shards`, `number_of_replicas`, `number_of_routing_shards`,
//! `refresh_interval`, `auto_expand_replicas`) are accepted and kept: one embedded index is one
//! shard, refreshed after every write, so they change no answer. Custom normalizers
//! (`analysis.normalizer.NAME`: `type: custom`, a `filter` list of `lowercase` and `asciifolding`,
//! no `char_filter`) are read, for keyword fields to name ([`IndexSettings::normalizers`]). Any
//! other setting, custom analyzers among them, is refused by name rather than ignored.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::error::SearchError;
use crate::limits::SearchLimits;

/// Settings that change nothing an embedded index answers.
const NO_EFFECT: &[&str] = &[
    "number_of_shards",
    "number_of_replicas",
    "number_of_routing_shards",
    "refresh_interval",
    "auto_expand_replicas",
];

/// Settings that lower a search limit, with the limit's name in [`SearchLimits`].
const BOUNDS: &[(&str, &str)] = &[
    ("max_result_window", "max_result_window"),
    ("max_inner_result_window", "max_inner_result_window"),
    ("max_docvalue_fields_search", "max_docvalue_fields"),
    ("max_script_fields", "max_script_fields"),
    ("max_regex_length", "max_pattern_length"),
    ("max_terms_count", "max_terms_count"),
    ("max_rescore_window", "max_rescore_window"),
];

/// An index's settings: the keys (without `index.`) and their values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexSettings(Map<String, Value>);

impl IndexSettings {
    /// Reads the `settings` of a create-index body (an object, or `None` for none).
    pub fn parse(settings: Option<&Value>) -> Result<IndexSettings, SearchError> {
        let mut flat = Map::new();
        match settings {
            None | Some(Value::Null) => {}
            Some(Value::Object(o)) => flatten(o, "", &mut flat),
            Some(other) => {
                return Err(SearchError::InvalidParameter(format!(
                    "index settings must be an object, found {other}"
                )));
            }
        }
        let mut out = Map::new();
        for (key, value) in flat {
            let key = key.strip_prefix("index.").unwrap_or(&key).to_owned();
            if let Some(rest) = key.strip_prefix("analysis.normalizer.") {
                check_normalizer_key(rest, &value)?;
                out.insert(key, value);
                continue;
            }
            if NO_EFFECT.contains(&key.as_str()) {
                out.insert(key, value);
                continue;
            }
            if BOUNDS.iter().any(|(name, _)| *name == key) {
                let number = match &value {
                    Value::Number(n) => n.as_u64(),
                    Value::String(s) => s.trim().parse::<u64>().ok(),
                    _ => None,
                };
                let Some(number) = number else {
                    return Err(SearchError::InvalidParameter(format!(
                        "Failed to parse value [{}] for setting [index.{key}]: a whole number not below 0",
                        value
                            .as_str()
                            .map_or_else(|| value.to_string(), str::to_owned)
                    )));
                };
                out.insert(key, Value::from(number));
                continue;
            }
            return Err(SearchError::Unsupported {
                path: format!("settings.index.{key}"),
                clause: format!("index setting [index.{key}]"),
            });
        }
        Ok(IndexSettings(out))
    }

    /// The custom normalizers (`analysis.normalizer.NAME`), by name, each with its filters in
    /// order (none: the value as it is).
    pub fn normalizers(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (key, value) in &self.0 {
            let Some(rest) = key.strip_prefix("analysis.normalizer.") else {
                continue;
            };
            let Some((name, option)) = rest.split_once('.') else {
                continue;
            };
            let filters = out.entry(name.to_owned()).or_default();
            if option == "filter" {
                filters.extend(filter_names(value));
            }
        }
        out
    }

    /// The settings as an object of `index.`-less keys (what `mapping.json`'s neighbour
    /// `settings.json` holds).
    pub fn to_json(&self) -> Value {
        Value::Object(self.0.clone())
    }

    /// The limits for a search of this index: `backend`'s, each lowered by the setting of its
    /// name.
    pub fn limits(&self, backend: &SearchLimits) -> SearchLimits {
        let mut limits = backend.clone();
        for (setting, limit) in BOUNDS {
            let Some(n) = self.0.get(*setting).and_then(Value::as_u64) else {
                continue;
            };
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            let slot = match *limit {
                "max_result_window" => &mut limits.max_result_window,
                "max_inner_result_window" => &mut limits.max_inner_result_window,
                "max_docvalue_fields" => &mut limits.max_docvalue_fields,
                "max_script_fields" => &mut limits.max_script_fields,
                "max_pattern_length" => &mut limits.max_pattern_length,
                "max_terms_count" => &mut limits.max_terms_count,
                _ => &mut limits.max_rescore_window,
            };
            *slot = (*slot).min(n);
        }
        limits
    }
}

/// The token filters a custom normalizer can use.
pub const NORMALIZER_FILTERS: &[&str] = &["lowercase", "asciifolding"];

/// A filter list's names: a list of names, or one name.
fn filter_names(value: &Value) -> Vec<String> {
    match value {
        Value::String(one) => vec![one.clone()],
        Value::Array(list) => list
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// Checks one key of a custom normalizer (`NAME.option`, after `analysis.normalizer.`) and its
/// value.
fn check_normalizer_key(rest: &str, value: &Value) -> Result<(), SearchError> {
    let refuse = |what: String| {
        Err(SearchError::Unsupported {
            path: format!("settings.index.analysis.normalizer.{rest}"),
            clause: what,
        })
    };
    let Some((name, option)) = rest.split_once('.') else {
        return refuse(format!("normalizer [{rest}] without a definition"));
    };
    if name.is_empty() || name.starts_with("tp_") {
        return refuse(format!("the normalizer name [{name}]"));
    }
    match option {
        "type" if value.as_str() == Some("custom") => Ok(()),
        "type" => refuse(format!(
            "normalizer [{name}] of type [{}] (custom only)",
            value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned)
        )),
        "filter" => {
            if !matches!(value, Value::String(_) | Value::Array(_))
                || value
                    .as_array()
                    .is_some_and(|l| l.iter().any(|f| !f.is_string()))
            {
                return Err(SearchError::InvalidParameter(format!(
                    "normalizer [{name}]: [filter] must be a list of filter names"
                )));
            }
            match filter_names(value)
                .into_iter()
                .find(|f| !NORMALIZER_FILTERS.contains(&f.as_str()))
            {
                Some(f) => refuse(format!(
                    "the token filter [{f}] in normalizer [{name}] (the embedded engine has {})",
                    NORMALIZER_FILTERS.join(", ")
                )),
                None => Ok(()),
            }
        }
        "char_filter" if value.as_array().is_some_and(Vec::is_empty) => Ok(()),
        other => refuse(format!(
            "the normalizer option [{other}] in normalizer [{name}]"
        )),
    }
}

/// `o`'s leaves under dotted keys (`{"index": {"a": 1}}` and `{"index.a": 1}` alike).
fn flatten(o: &Map<String, Value>, prefix: &str, out: &mut Map<String, Value>) {
    for (k, v) in o {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Value::Object(inner) if !inner.is_empty() => flatten(inner, &key, out),
            leaf => {
                out.insert(key, leaf.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn settings_lower_the_limits_and_unknown_ones_are_refused() {
        let s = IndexSettings::parse(Some(&json!({
            "index": {"max_result_window": "50", "number_of_shards": 3},
            "index.max_docvalue_fields_search": 2,
            "max_terms_count": 1_000_000
        })))
        .unwrap();
        let limits = s.limits(&SearchLimits::default());
        assert_eq!(limits.max_result_window, 50);
        assert_eq!(limits.max_docvalue_fields, 2);
        // Never above the backend's own.
        assert_eq!(limits.max_terms_count, 65_536);
        let err = IndexSettings::parse(Some(&json!({"analysis": {"analyzer": {}}})));
        assert!(err.is_err());
        let err = IndexSettings::parse(Some(&json!({"index": {"max_result_window": -1}})))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("Failed to parse value [-1] for setting [index.max_result_window]"),
            "{err}"
        );
    }
}
