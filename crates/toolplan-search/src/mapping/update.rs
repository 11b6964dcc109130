//! Updating a mapping as OpenSearch's put-mapping API does: new fields and objects are added,
//! sub-fields are added to a field, root options (`dynamic`, `date_detection` …) and an object's
//! `dynamic` are replaced, and the few options OpenSearch lets a field change (`ignore_above`,
//! `search_analyzer`, `ignore_malformed`, `meta` …) take their new value. Anything else a field
//! already has cannot change: its type, analyzer, format, an object becoming a field. The update
//! is then refused whole, naming the field, and the mapping stays as it was
//! ([`SearchError::InvalidParameter`], OpenSearch's illegal_argument_exception).

use serde_json::{Map, Value};

use super::{Mapping, is_object};
use crate::error::SearchError;

/// Field options an update may change.
const UPDATABLE: &[&str] = &[
    "ignore_above",
    "search_analyzer",
    "search_quote_analyzer",
    "ignore_malformed",
    "meta",
    "boost",
    "eager_global_ordinals",
    "fielddata",
    "fielddata_frequency_filter",
];

impl Mapping {
    /// This mapping with `update` (a mapping in any form [`Mapping::parse_strict`] reads) merged
    /// in, or why OpenSearch would refuse the update.
    pub fn updated(&self, update: &Value) -> Result<Mapping, SearchError> {
        let update = Mapping::parse_strict(update)?;
        let mut root = self.root.clone();
        for (key, value) in update.root() {
            if key != "properties" {
                root.insert(key.clone(), value.clone());
            }
        }
        let mut properties = match root.remove("properties") {
            Some(Value::Object(p)) => p,
            _ => Map::new(),
        };
        if let Some(Value::Object(new)) = update.root().get("properties") {
            merge_properties("", &mut properties, new)?;
        }
        root.insert("properties".into(), Value::Object(properties));
        Mapping::parse_strict(&Value::Object(root))
    }
}

fn merge_properties(
    prefix: &str,
    into: &mut Map<String, Value>,
    new: &Map<String, Value>,
) -> Result<(), SearchError> {
    for (name, def) in new {
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        match (into.get_mut(name), def) {
            (None, _) => {
                into.insert(name.clone(), def.clone());
            }
            (Some(Value::Object(old)), Value::Object(def)) => merge_field(&path, old, def)?,
            _ => {
                return Err(SearchError::InvalidMapping(format!(
                    "field '{path}' must be an object"
                )));
            }
        }
    }
    Ok(())
}

fn merge_field(
    path: &str,
    old: &mut Map<String, Value>,
    new: &Map<String, Value>,
) -> Result<(), SearchError> {
    let conflict = |what: String| {
        SearchError::InvalidParameter(format!(
            "Mapper for [{path}] conflicts with existing mapper: {what}"
        ))
    };
    match (is_object(old), is_object(new)) {
        (true, true) => {
            if old.get("enabled").unwrap_or(&Value::Bool(true))
                != new.get("enabled").unwrap_or(&Value::Bool(true))
            {
                return Err(conflict(
                    "the [enabled] parameter can't be updated for an object mapping".into(),
                ));
            }
            if let Some(d) = new.get("dynamic") {
                old.insert("dynamic".into(), d.clone());
            }
            if let Some(Value::Object(children)) = new.get("properties") {
                let mut into = match old.remove("properties") {
                    Some(Value::Object(p)) => p,
                    _ => Map::new(),
                };
                merge_properties(path, &mut into, children)?;
                old.insert("properties".into(), Value::Object(into));
            }
            Ok(())
        }
        (false, false) => {
            let type_of = |d: &Map<String, Value>| d.get("type").cloned().unwrap_or(Value::Null);
            if type_of(old) != type_of(new) {
                return Err(SearchError::InvalidParameter(format!(
                    "mapper [{path}] cannot be changed from type [{}] to [{}]",
                    text(&type_of(old)),
                    text(&type_of(new))
                )));
            }
            let keys: Vec<String> = old.keys().chain(new.keys()).cloned().collect();
            for key in keys {
                if key == "fields" || key == "type" || UPDATABLE.contains(&key.as_str()) {
                    continue;
                }
                let (was, is) = (old.get(&key), new.get(&key));
                if was != is {
                    return Err(conflict(format!(
                        "Cannot update parameter [{key}] from [{}] to [{}]",
                        was.map_or_else(|| "default".to_owned(), text),
                        is.map_or_else(|| "default".to_owned(), text)
                    )));
                }
            }
            let mut fields = match old.remove("fields") {
                Some(Value::Object(f)) => f,
                _ => Map::new(),
            };
            if let Some(Value::Object(subs)) = new.get("fields") {
                merge_properties(path, &mut fields, subs)?;
            }
            *old = new.clone();
            if !fields.is_empty() {
                old.insert("fields".into(), Value::Object(fields));
            }
            Ok(())
        }
        (true, false) | (false, true) => Err(SearchError::InvalidParameter(format!(
            "can't merge a non object mapping [{path}] with an object mapping"
        ))),
    }
}

/// A JSON value as text, strings without quotes.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> Mapping {
        Mapping::parse_strict(&json!({"properties": {
            "title": {"type": "text", "analyzer": "english", "fields": {"raw": {"type": "keyword"}}},
            "user": {"properties": {"name": {"type": "keyword", "ignore_above": 10}}},
            "n": {"type": "long"}
        }}))
        .expect("mapping")
    }

    #[test]
    fn adds_fields_sub_fields_and_replaces_root_options() {
        let m = base()
            .updated(&json!({"dynamic": "strict", "properties": {
                "title": {"type": "text", "analyzer": "english", "fields": {"exact": {"type": "keyword"}}},
                "user": {"properties": {"age": {"type": "integer"},
                                        "name": {"type": "keyword", "ignore_above": 20}}},
                "tags": {"type": "keyword"}
            }}))
            .expect("updates");
        let j = m.to_json();
        assert_eq!(j["dynamic"], "strict");
        let title = &j["properties"]["title"]["fields"];
        assert!(title.get("raw").is_some() && title.get("exact").is_some());
        assert_eq!(
            j["properties"]["user"]["properties"]["age"]["type"],
            "integer"
        );
        assert_eq!(
            j["properties"]["user"]["properties"]["name"]["ignore_above"],
            20
        );
        assert!(m.field("tags").is_some() && m.field("title.exact").is_some());
    }

    #[test]
    fn refuses_what_opensearch_refuses() {
        let cases = [
            (
                json!({"properties": {"n": {"type": "text"}}}),
                "mapper [n] cannot be changed from type [long] to [text]",
            ),
            (
                json!({"properties": {"title": {"type": "text"}}}),
                "Cannot update parameter [analyzer] from [english] to [default]",
            ),
            (
                json!({"properties": {"user": {"type": "keyword"}}}),
                "can't merge a non object mapping [user]",
            ),
            (
                json!({"properties": {"x": {"type": "text", "copy_to": "y"}}}),
                "[copy_to] is not supported",
            ),
        ];
        for (update, expected) in cases {
            let err = base().updated(&update).expect_err("refused").to_string();
            assert!(err.contains(expected), "{err}");
        }
    }
}
