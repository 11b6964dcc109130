//! OpenSearch mappings: the `properties` tree flattened into the fields a search can name.
//!
//! `{"properties": {"species": {"type": "text", "fields": {"keyword": {"type": "keyword"}}}}}` gives
//! two fields: `species` (text, analysed) and `species.keyword` (keyword, exact). Objects (a
//! `properties` without `type`, or `"type": "object"`) are flattened into dotted paths. Types the
//! embedded backend does not index (`nested`, `knn_vector`, `semantic` …) are kept as unsupported
//! fields: documents keep them in `_source`, and a query that names them is rejected.

use serde_json::{Map, Value};

use crate::error::SearchError;

/// What a field holds, as far as searching it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldKind {
    /// Analysed text (`text`, `match_only_text`).
    Text,
    /// Exact text (`keyword`, `constant_keyword`, `wildcard`).
    Keyword,
    /// Whole numbers (`long`, `integer`, `short`, `byte`, `unsigned_long`).
    Integer,
    /// Decimal numbers (`double`, `float`, `half_float`, `scaled_float`).
    Float,
    /// Dates (`date`, `date_nanos`), stored as epoch milliseconds.
    Date,
    /// `boolean`.
    Boolean,
    /// A type the embedded backend does not index; the mapping's type name.
    Unsupported(String),
}

impl FieldKind {
    fn from_type(t: &str) -> FieldKind {
        match t {
            "text" | "match_only_text" => FieldKind::Text,
            "keyword" | "constant_keyword" | "wildcard" => FieldKind::Keyword,
            "long" | "integer" | "short" | "byte" | "unsigned_long" => FieldKind::Integer,
            "double" | "float" | "half_float" | "scaled_float" => FieldKind::Float,
            "date" | "date_nanos" => FieldKind::Date,
            "boolean" => FieldKind::Boolean,
            other => FieldKind::Unsupported(other.to_owned()),
        }
    }

    /// Whether values are numbers.
    pub fn is_numeric(&self) -> bool {
        matches!(self, FieldKind::Integer | FieldKind::Float)
    }

    /// The mapping type name, for messages.
    pub fn name(&self) -> &str {
        match self {
            FieldKind::Text => "text",
            FieldKind::Keyword => "keyword",
            FieldKind::Integer => "long",
            FieldKind::Float => "double",
            FieldKind::Date => "date",
            FieldKind::Boolean => "boolean",
            FieldKind::Unsupported(t) => t,
        }
    }
}

/// One searchable field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldSpec {
    /// The dotted path (`author.name`, `species.keyword`).
    pub path: String,
    /// What it holds.
    pub kind: FieldKind,
    /// For a sub-field (`species.keyword`): the path of the field whose value it indexes.
    pub source_path: String,
    /// Keyword values longer than this are not indexed (OpenSearch's `ignore_above`).
    pub ignore_above: Option<usize>,
}

/// A parsed mapping: the JSON as given, and its fields flattened.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapping {
    properties: Map<String, Value>,
    fields: Vec<FieldSpec>,
}

impl Mapping {
    /// Parses `{"mappings": {"properties": …}}`, `{"properties": …}` or a bare properties object.
    pub fn parse(value: &Value) -> Result<Mapping, SearchError> {
        let root = value.get("mappings").unwrap_or(value);
        let properties = match root.get("properties") {
            Some(Value::Object(p)) => p.clone(),
            Some(_) => {
                return Err(SearchError::InvalidMapping(
                    "\"properties\" must be an object".into(),
                ));
            }
            None => match root {
                Value::Object(p)
                    if p.values()
                        .all(|v| v.get("type").is_some() || v.get("properties").is_some()) =>
                {
                    p.clone()
                }
                _ => {
                    return Err(SearchError::InvalidMapping(
                        "expected {\"mappings\": {\"properties\": {…}}} or {\"properties\": {…}}"
                            .into(),
                    ));
                }
            },
        };
        let mut fields = Vec::new();
        flatten("", &properties, &mut fields)?;
        Ok(Mapping { properties, fields })
    }

    /// The fields, in mapping order, sub-fields after their parent.
    pub fn fields(&self) -> &[FieldSpec] {
        &self.fields
    }

    /// The field at `path`.
    pub fn field(&self, path: &str) -> Option<&FieldSpec> {
        self.fields.iter().find(|f| f.path == path)
    }

    /// The `.keyword`-style exact sub-field of a text field, if it has one.
    pub fn keyword_subfield(&self, path: &str) -> Option<&FieldSpec> {
        self.fields
            .iter()
            .find(|f| f.source_path == path && f.path != path && f.kind == FieldKind::Keyword)
    }

    /// The mapping as OpenSearch returns it: `{"properties": …}`.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("properties".into(), Value::Object(self.properties.clone()));
        Value::Object(m)
    }
}

fn flatten(
    prefix: &str,
    properties: &Map<String, Value>,
    out: &mut Vec<FieldSpec>,
) -> Result<(), SearchError> {
    for (name, def) in properties {
        if name.is_empty() {
            return Err(SearchError::InvalidMapping(
                "a field has an empty name".into(),
            ));
        }
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        let Value::Object(def) = def else {
            return Err(SearchError::InvalidMapping(format!(
                "field '{path}' must be an object with a \"type\""
            )));
        };
        let ty = def.get("type").and_then(Value::as_str);
        match (ty, def.get("properties")) {
            (None | Some("object"), Some(Value::Object(children))) => {
                flatten(&path, children, out)?;
                continue;
            }
            (None, _) => {
                return Err(SearchError::InvalidMapping(format!(
                    "field '{path}' has no \"type\""
                )));
            }
            _ => {}
        }
        let kind = FieldKind::from_type(ty.unwrap_or_default());
        out.push(FieldSpec {
            path: path.clone(),
            kind: kind.clone(),
            source_path: path.clone(),
            ignore_above: ignore_above(def),
        });
        // Sub-fields index the same value another way; an unsupported parent keeps none.
        if let (Some(Value::Object(subs)), false) =
            (def.get("fields"), matches!(kind, FieldKind::Unsupported(_)))
        {
            for (sub, sub_def) in subs {
                let sub_type = sub_def.get("type").and_then(Value::as_str).ok_or_else(|| {
                    SearchError::InvalidMapping(format!("sub-field '{path}.{sub}' has no \"type\""))
                })?;
                out.push(FieldSpec {
                    path: format!("{path}.{sub}"),
                    kind: FieldKind::from_type(sub_type),
                    source_path: path.clone(),
                    ignore_above: sub_def.as_object().and_then(ignore_above),
                });
            }
        }
    }
    Ok(())
}

fn ignore_above(def: &Map<String, Value>) -> Option<usize> {
    def.get("ignore_above")
        .and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
}

/// The value at a dotted path of a document (`a.b` reads `{"a": {"b": …}}`, or a literal `"a.b"` key).
pub fn value_at<'v>(doc: &'v Value, path: &str) -> Option<&'v Value> {
    if let Some(v) = doc.get(path) {
        return Some(v);
    }
    let (head, rest) = path.split_once('.')?;
    match doc.get(head)? {
        Value::Array(items) => items.iter().find_map(|item| value_at(item, rest)),
        inner => value_at(inner, rest),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn iris_mapping_flattens_with_its_keyword_subfield() {
        let m = Mapping::parse(&json!({"mappings": {"properties": {
            "petal_length_in_cm": {"type": "float"},
            "species": {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}}
        }}}))
        .expect("parses");
        let paths: Vec<&str> = m.fields().iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["petal_length_in_cm", "species", "species.keyword"]);
        let kw = m.keyword_subfield("species").expect("subfield");
        assert_eq!(kw.path, "species.keyword");
        assert_eq!(kw.source_path, "species");
        assert_eq!(kw.ignore_above, Some(256));
        assert_eq!(
            m.field("petal_length_in_cm").map(|f| &f.kind),
            Some(&FieldKind::Float)
        );
        assert_eq!(m.to_json()["properties"]["species"]["type"], "text");
    }

    #[test]
    fn objects_flatten_and_unknown_types_are_kept_unsupported() {
        let m = Mapping::parse(&json!({"properties": {
            "user": {"properties": {"name": {"type": "keyword"}, "age": {"type": "integer"}}},
            "author": {"type": "nested", "properties": {"first": {"type": "text"}}},
            "v": {"type": "knn_vector", "dimension": 3}
        }}))
        .expect("parses");
        assert_eq!(
            m.field("user.age").map(|f| &f.kind),
            Some(&FieldKind::Integer)
        );
        assert_eq!(
            m.field("author").map(|f| &f.kind),
            Some(&FieldKind::Unsupported("nested".into()))
        );
        assert_eq!(m.field("v").map(|f| f.kind.name()), Some("knn_vector"));
    }

    #[test]
    fn bad_mappings_say_what_is_wrong() {
        let err =
            Mapping::parse(&json!({"properties": {"a": {"fields": {}}}})).expect_err("no type");
        assert_eq!(
            err.to_string(),
            "invalid mapping: field 'a' has no \"type\""
        );
        let err = Mapping::parse(&json!({"properties": []})).expect_err("array");
        assert!(err.to_string().contains("must be an object"));
        assert!(Mapping::parse(&json!(3)).is_err());
    }

    #[test]
    fn values_at_dotted_paths() {
        let doc = json!({"a": {"b": 1}, "c.d": 2, "e": [{"f": 3}]});
        assert_eq!(value_at(&doc, "a.b"), Some(&json!(1)));
        assert_eq!(value_at(&doc, "c.d"), Some(&json!(2)));
        assert_eq!(value_at(&doc, "e.f"), Some(&json!(3)));
        assert_eq!(value_at(&doc, "a.x"), None);
    }
}
