//! OpenSearch mappings: the `properties` tree flattened into the fields a search can name.
//!
//! `{"properties": {"species": {"type": "text", "fields": {"keyword": {"type": "keyword"}}}}}` gives
//! two fields: `species` (text, analysed) and `species.keyword` (keyword, exact). Objects (a
//! `properties` without `type`, or `"type": "object"`) are flattened into dotted paths. Types the
//! embedded backend does not index (`nested`, `knn_vector`, `semantic` …) are kept as unsupported
//! fields: documents keep them in `_source`, and a query that names them is rejected.
//!
//! A field's options are read or refused, never ignored: `analyzer` / `search_analyzer` (the
//! built-in analyzers of [`ANALYZERS`]), `normalizer` (`lowercase`), `index: false`, a date's
//! `format`, `ignore_malformed` and `ignore_above` change what is indexed and found; options that
//! change neither (`doc_values`, `store`, `norms` …, [`NO_EFFECT_OPTIONS`]) are accepted; any other
//! is an error naming it, as OpenSearch refuses a mapping it cannot apply.

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
    /// The analyzer of a text field (one of [`ANALYZERS`]; `standard` when not given).
    pub analyzer: Option<String>,
    /// The analyzer for query text, when it differs from `analyzer`.
    pub search_analyzer: Option<String>,
    /// The normalizer of a keyword field (one of [`NORMALIZERS`]).
    pub normalizer: Option<String>,
    /// Whether the field can be searched (`index: false` keeps it for aggregations and sorting).
    pub searchable: bool,
    /// A date field's `format` (OpenSearch's date format names and patterns).
    pub format: Option<String>,
    /// Whether a value that does not fit the type is left out of the index instead of failing the
    /// document (`ignore_malformed`).
    pub ignore_malformed: bool,
}

/// The analyzers a mapping can name: OpenSearch's built-in ones this engine has.
pub const ANALYZERS: &[&str] = &[
    "standard",
    "simple",
    "whitespace",
    "keyword",
    "stop",
    "english",
];

/// The normalizers a keyword field can name.
pub const NORMALIZERS: &[&str] = &["lowercase"];

/// Field options that change neither what is indexed nor what a search finds here: how OpenSearch
/// stores or scores a field, or tunes its memory.
pub const NO_EFFECT_OPTIONS: &[&str] = &[
    "doc_values",
    "store",
    "norms",
    "similarity",
    "term_vector",
    "eager_global_ordinals",
    "meta",
    "boost",
    "coerce",
    "index_options",
    "index_phrases",
    "index_prefixes",
    "position_increment_gap",
    "scaling_factor",
    "split_queries_on_whitespace",
    "fielddata",
    "fielddata_frequency_filter",
    "locale",
    "ignore_z_value",
];

/// Options read by [`flatten`] itself.
const READ_OPTIONS: &[&str] = &[
    "type",
    "fields",
    "properties",
    "ignore_above",
    "analyzer",
    "search_analyzer",
    "search_quote_analyzer",
    "normalizer",
    "index",
    "format",
    "ignore_malformed",
];

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
            // An object with `enabled: false` is kept in `_source` and not indexed at all.
            (None | Some("object"), _) if def.get("enabled") == Some(&Value::Bool(false)) => {
                continue;
            }
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
        out.push(field_spec(&path, &path, kind.clone(), def)?);
        // Sub-fields index the same value another way; an unsupported parent keeps none.
        if let (Some(Value::Object(subs)), false) =
            (def.get("fields"), matches!(kind, FieldKind::Unsupported(_)))
        {
            for (sub, sub_def) in subs {
                let sub_type = sub_def.get("type").and_then(Value::as_str).ok_or_else(|| {
                    SearchError::InvalidMapping(format!("sub-field '{path}.{sub}' has no \"type\""))
                })?;
                let empty = Map::new();
                out.push(field_spec(
                    &format!("{path}.{sub}"),
                    &path,
                    FieldKind::from_type(sub_type),
                    sub_def.as_object().unwrap_or(&empty),
                )?);
            }
        }
    }
    Ok(())
}

/// One field's spec from its definition, its options checked.
fn field_spec(
    path: &str,
    source_path: &str,
    kind: FieldKind,
    def: &Map<String, Value>,
) -> Result<FieldSpec, SearchError> {
    let bad = |what: String| SearchError::InvalidMapping(format!("field '{path}': {what}"));
    // A type the engine does not index keeps whatever options it has: nothing reads them.
    if !matches!(kind, FieldKind::Unsupported(_))
        && let Some(option) = def.keys().find(|k| {
            !READ_OPTIONS.contains(&k.as_str()) && !NO_EFFECT_OPTIONS.contains(&k.as_str())
        })
    {
        return Err(bad(format!(
            "the mapping option [{option}] is not supported by the embedded engine"
        )));
    }
    let text = |key: &str| -> Result<Option<String>, SearchError> {
        match def.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(bad(format!("[{key}] must be text, found {v}"))),
        }
    };
    let flag = |key: &str, default: bool| -> Result<bool, SearchError> {
        match def.get(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(Value::String(s)) if s == "true" || s == "false" => Ok(s == "true"),
            Some(v) => Err(bad(format!("[{key}] must be true or false, found {v}"))),
        }
    };
    let analyzer = text("analyzer")?;
    let search_analyzer = text("search_analyzer")?;
    for (key, name) in [
        ("analyzer", &analyzer),
        ("search_analyzer", &search_analyzer),
        ("search_quote_analyzer", &text("search_quote_analyzer")?),
    ] {
        if let Some(name) = name {
            if kind != FieldKind::Text {
                return Err(bad(format!("[{key}] applies to text fields only")));
            }
            if !ANALYZERS.contains(&name.as_str()) {
                return Err(bad(format!(
                    "analyzer [{name}] has not been configured (the embedded engine has {})",
                    ANALYZERS.join(", ")
                )));
            }
        }
    }
    let normalizer = text("normalizer")?;
    if let Some(name) = &normalizer {
        if kind != FieldKind::Keyword {
            return Err(bad("[normalizer] applies to keyword fields only".into()));
        }
        if !NORMALIZERS.contains(&name.as_str()) {
            return Err(bad(format!(
                "normalizer [{name}] has not been configured (the embedded engine has {})",
                NORMALIZERS.join(", ")
            )));
        }
    }
    let format = text("format")?;
    if let Some(f) = &format {
        if kind != FieldKind::Date {
            return Err(bad("[format] applies to date fields only".into()));
        }
        crate::datemath::DateFormat::parse(f).map_err(bad)?;
    }
    Ok(FieldSpec {
        path: path.to_owned(),
        kind,
        source_path: source_path.to_owned(),
        ignore_above: ignore_above(def),
        analyzer,
        search_analyzer,
        normalizer,
        searchable: flag("index", true)?,
        format,
        ignore_malformed: flag("ignore_malformed", false)?,
    })
}

fn ignore_above(def: &Map<String, Value>) -> Option<usize> {
    def.get("ignore_above")
        .and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
}

/// Every value at a dotted path of a document, as OpenSearch indexes them: through objects (`a.b`
/// reads `{"a": {"b": …}}`, or a literal `"a.b"` key) and through arrays of objects, every
/// element's (`commits.message` of `{"commits": [{"message": …}, {"message": …}]}` is both
/// messages), with arrays of values flattened and nulls left out.
pub fn values_at<'v>(doc: &'v Value, path: &str) -> Vec<&'v Value> {
    let mut out = Vec::new();
    collect_values(doc, path, &mut out);
    out
}

fn collect_values<'v>(doc: &'v Value, path: &str, out: &mut Vec<&'v Value>) {
    match doc {
        Value::Array(items) => {
            for item in items {
                collect_values(item, path, out);
            }
        }
        Value::Object(map) => {
            if let Some(v) = map.get(path) {
                flatten_values(v, out);
            }
            for (dot, _) in path.match_indices('.') {
                if let Some(inner) = map.get(&path[..dot]) {
                    collect_values(inner, &path[dot + 1..], out);
                }
            }
        }
        _ => {}
    }
}

fn flatten_values<'v>(v: &'v Value, out: &mut Vec<&'v Value>) {
    match v {
        Value::Array(items) => {
            for item in items {
                flatten_values(item, out);
            }
        }
        Value::Null => {}
        v => out.push(v),
    }
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

    #[test]
    fn every_value_at_a_path_through_arrays_of_objects() {
        let doc = json!({
            "payload": {"commits": [{"message": "one"}, {"message": null}, {"message": "three"}]},
            "tags": ["a", ["b", null]],
            "x.y": 1, "x": {"y": 2},
            "deep": [{"a": [{"b": 1}, {"b": [2, 3]}]}, {"a": {"b": 4}}]
        });
        assert_eq!(
            values_at(&doc, "payload.commits.message"),
            [&json!("one"), &json!("three")]
        );
        assert_eq!(values_at(&doc, "tags"), [&json!("a"), &json!("b")]);
        assert_eq!(values_at(&doc, "x.y"), [&json!(1), &json!(2)]);
        assert_eq!(
            values_at(&doc, "deep.a.b"),
            [&json!(1), &json!(2), &json!(3), &json!(4)]
        );
        assert!(values_at(&doc, "payload.nothing").is_empty());
    }
}
