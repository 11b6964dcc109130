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

pub mod dynamic;
mod update;

use std::collections::BTreeMap;

use serde_json::{Map, Value};

pub use self::dynamic::{Extender, MappingLimits};
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
    /// `ip`: IPv4 and IPv6 addresses, IPv4 kept as IPv4-mapped IPv6 (so `::1` sorts before
    /// `127.0.0.1`, as in OpenSearch).
    Ip,
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
            "ip" => FieldKind::Ip,
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
            FieldKind::Ip => "ip",
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
    /// Whether the field is kept apart from `_source` (`store`): `stored_fields` returns it.
    pub store: bool,
    /// Whether a text field's words can be aggregated on (`fielddata: true`): each word of the
    /// analysed text is a value of the field's column, as OpenSearch's field data loads them.
    pub fielddata: bool,
}

/// The analyzers a mapping can name: OpenSearch's built-in ones this engine has.
pub const ANALYZERS: &[&str] = &[
    "default",
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
    "fielddata",
];

/// The options of an object (a `properties` without a leaf `type`).
const OBJECT_OPTIONS: &[&str] = &["type", "properties", "dynamic", "enabled"];

/// The options of the mapping's root the embedded engine applies: the dynamic mapping rules
/// ([`dynamic`]), and metadata that changes nothing here.
pub const ROOT_OPTIONS: &[&str] = &[
    "properties",
    "dynamic",
    "date_detection",
    "numeric_detection",
    "dynamic_date_formats",
    "_meta",
    "_routing",
];

/// What happens to a field a document has and the mapping does not (OpenSearch's `dynamic`, set
/// on the root and on any object; an object inherits its parent's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dynamic {
    /// Mapped from its value as the document is indexed (the default).
    #[default]
    True,
    /// Kept in `_source`, not indexed, not added to the mapping.
    False,
    /// The document is refused.
    Strict,
}

impl Dynamic {
    /// Reads a `dynamic` value (`true`, `false`, `"strict"`, or those as text).
    pub fn read(value: &Value) -> Option<Dynamic> {
        match value {
            Value::Bool(true) => Some(Dynamic::True),
            Value::Bool(false) => Some(Dynamic::False),
            Value::String(s) => match s.as_str() {
                "true" => Some(Dynamic::True),
                "false" => Some(Dynamic::False),
                "strict" => Some(Dynamic::Strict),
                _ => None,
            },
            _ => None,
        }
    }
}

/// How strictly [`Mapping`] reads a mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// Any OpenSearch mapping (from a cluster): options this engine lacks are skipped.
    Lenient,
    /// A mapping for the embedded engine: an option it cannot apply is an error naming it.
    Strict,
}

/// A parsed mapping: the JSON as given (root options and `properties`), and its fields flattened.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapping {
    root: Map<String, Value>,
    fields: Vec<FieldSpec>,
}

impl Mapping {
    /// Parses `{"mappings": {"properties": …}}`, `{"properties": …}` or a bare properties object,
    /// as any OpenSearch cluster may hold it: options the embedded engine does not apply are
    /// kept and skipped. See [`parse_strict`](Self::parse_strict) for the embedded engine's own
    /// mappings.
    pub fn parse(value: &Value) -> Result<Mapping, SearchError> {
        Self::read(value, Reading::Lenient)
    }

    /// Parses a mapping for the embedded engine: an option, analyzer, normalizer or date format
    /// it cannot apply is an error naming it, as OpenSearch refuses a mapping it cannot apply.
    pub fn parse_strict(value: &Value) -> Result<Mapping, SearchError> {
        Self::read(value, Reading::Strict)
    }

    fn read(value: &Value, reading: Reading) -> Result<Mapping, SearchError> {
        let root = value.get("mappings").unwrap_or(value);
        let root = match root.get("properties") {
            Some(Value::Object(_)) => root.as_object().cloned().unwrap_or_default(),
            Some(_) => {
                return Err(SearchError::InvalidMapping(
                    "\"properties\" must be an object".into(),
                ));
            }
            None => match root {
                // No properties at all: a mapping of root options only (`{"dynamic": "strict"}`)
                // or an empty one.
                Value::Object(p) if p.keys().all(|k| ROOT_OPTIONS.contains(&k.as_str())) => {
                    let mut root = p.clone();
                    root.insert("properties".into(), Value::Object(Map::new()));
                    root
                }
                // A bare properties object, which OpenSearch itself does not take.
                Value::Object(p)
                    if reading == Reading::Lenient
                        && p.values()
                            .all(|v| v.get("type").is_some() || v.get("properties").is_some()) =>
                {
                    let mut root = Map::new();
                    root.insert("properties".into(), Value::Object(p.clone()));
                    root
                }
                _ => {
                    return Err(SearchError::InvalidMapping(
                        "expected {\"mappings\": {\"properties\": {…}}} or {\"properties\": {…}}"
                            .into(),
                    ));
                }
            },
        };
        let mut root = root;
        if reading == Reading::Strict {
            check_root(&root)?;
        }
        if let Some(Value::Object(properties)) = root.get_mut("properties") {
            expand_dots(properties)?;
        }
        let mut fields = Vec::new();
        if let Some(Value::Object(properties)) = root.get("properties") {
            flatten("", properties, reading, &mut fields)?;
        }
        Ok(Mapping { root, fields })
    }

    /// Checks that every normalizer a field names is one there is: built in ([`NORMALIZERS`]) or
    /// among `custom` (the index's own, from its settings).
    pub fn check_normalizers<V>(&self, custom: &BTreeMap<String, V>) -> Result<(), SearchError> {
        for spec in &self.fields {
            let Some(name) = &spec.normalizer else {
                continue;
            };
            if NORMALIZERS.contains(&name.as_str()) || custom.contains_key(name) {
                continue;
            }
            let mut known: Vec<&str> = NORMALIZERS.to_vec();
            known.extend(custom.keys().map(String::as_str));
            return Err(SearchError::InvalidMapping(format!(
                "field '{}': normalizer [{name}] has not been configured (the index has {})",
                spec.path,
                known.join(", ")
            )));
        }
        Ok(())
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

    /// The mapping as OpenSearch returns it: `{"properties": …}` and the root options given (`{}`
    /// for a mapping with neither).
    pub fn to_json(&self) -> Value {
        let mut root = self.root.clone();
        if root
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
        {
            root.remove("properties");
        }
        Value::Object(root)
    }

    /// The mapping's root object (`properties` and the root options).
    pub fn root(&self) -> &Map<String, Value> {
        &self.root
    }

    /// How many mappers the mapping has, counted as OpenSearch counts them against
    /// `index.mapping.total_fields.limit`: every field, sub-field and object.
    pub fn mapper_count(&self) -> usize {
        fn objects(properties: &Map<String, Value>) -> usize {
            properties
                .values()
                .filter_map(|def| match def.get("properties") {
                    Some(Value::Object(children)) if def.as_object().is_some_and(is_object) => {
                        Some(1 + objects(children))
                    }
                    _ => None,
                })
                .sum()
        }
        let object_count = match self.root.get("properties") {
            Some(Value::Object(p)) => objects(p),
            _ => 0,
        };
        self.fields.len() + object_count
    }
}

/// Root options of OpenSearch mappings that the embedded engine does not apply.
const UNAPPLIED_ROOT_OPTIONS: &[&str] = &[
    "dynamic_templates",
    "_source",
    "_field_names",
    "_data_stream_timestamp",
    "_size",
    "runtime",
    "derived",
];

/// Whether a mapping entry is an object: no `type`, or `"type": "object"`.
fn is_object(def: &Map<String, Value>) -> bool {
    def.get("type").is_none_or(|t| t == "object")
}

/// Refuses a root option the embedded engine does not apply, and a `dynamic` it does not know.
fn check_root(root: &Map<String, Value>) -> Result<(), SearchError> {
    for (key, value) in root {
        if !ROOT_OPTIONS.contains(&key.as_str()) && !UNAPPLIED_ROOT_OPTIONS.contains(&key.as_str())
        {
            return Err(SearchError::InvalidMapping(format!(
                "Root mapping definition has unsupported parameters: [{key} : {}]",
                short(value)
            )));
        }
        let ok = match key.as_str() {
            "dynamic" => Dynamic::read(value).is_some(),
            "date_detection" | "numeric_detection" => value.is_boolean(),
            "dynamic_date_formats" => value.as_array().is_some_and(|formats| {
                formats.iter().all(|f| {
                    f.as_str()
                        .is_some_and(|f| crate::datemath::DateFormat::parse(f).is_ok())
                })
            }),
            // `_source` kept whole is what the engine does; `_routing` changes nothing on one node.
            "_source" => value.as_object().is_some_and(|o| {
                o.iter()
                    .all(|(k, v)| k == "enabled" && v == &Value::Bool(true))
            }),
            key => ROOT_OPTIONS.contains(&key),
        };
        if !ok {
            return Err(SearchError::InvalidMapping(format!(
                "the mapping option [{key}] {} is not supported by the embedded engine",
                short(value)
            )));
        }
    }
    Ok(())
}

/// Rewrites dotted field names as the objects they name (`"a.b": {…}` is field `b` of object
/// `a`), as OpenSearch reads a mapping.
fn expand_dots(properties: &mut Map<String, Value>) -> Result<(), SearchError> {
    if properties.keys().any(|k| k.contains('.')) {
        let entries = std::mem::take(properties);
        for (name, def) in entries {
            let Some((head, rest)) = name.split_once('.') else {
                insert_merged(properties, name, def);
                continue;
            };
            if head.is_empty() || rest.is_empty() {
                return Err(SearchError::InvalidMapping(format!(
                    "field name [{name}] has an empty part between dots"
                )));
            }
            let mut inner = Map::new();
            inner.insert(rest.to_owned(), def);
            let mut object = Map::new();
            object.insert("properties".into(), Value::Object(inner));
            insert_merged(properties, head.to_owned(), Value::Object(object));
        }
    }
    for def in properties.values_mut() {
        if let Some(Value::Object(children)) = def.get_mut("properties") {
            expand_dots(children)?;
        }
    }
    Ok(())
}

/// Inserts a field, merging the `properties` of two objects of the same name.
fn insert_merged(properties: &mut Map<String, Value>, name: String, def: Value) {
    match (properties.get_mut(&name), def) {
        (Some(Value::Object(existing)), Value::Object(mut def)) => {
            if let (Some(Value::Object(mine)), Some(Value::Object(theirs))) =
                (existing.get_mut("properties"), def.remove("properties"))
            {
                for (k, v) in theirs {
                    insert_merged(mine, k, v);
                }
            }
            for (k, v) in def {
                existing.entry(k).or_insert(v);
            }
        }
        (_, def) => {
            properties.insert(name, def);
        }
    }
}

/// A value for a message, cut short.
fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

fn flatten(
    prefix: &str,
    properties: &Map<String, Value>,
    reading: Reading,
    out: &mut Vec<FieldSpec>,
) -> Result<(), SearchError> {
    for (name, def) in properties {
        if name.trim().is_empty() {
            // OpenSearch's illegal_argument_exception.
            return Err(SearchError::InvalidParameter(
                "a field name in the mapping cannot be empty".into(),
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
        if matches!(ty, None | Some("object")) {
            if reading == Reading::Strict {
                check_object(&path, def)?;
            }
            match (def.get("properties"), ty) {
                // An object with `enabled: false` is kept in `_source` and not indexed at all.
                _ if def.get("enabled") == Some(&Value::Bool(false)) => {}
                (Some(Value::Object(children)), _) => flatten(&path, children, reading, out)?,
                (Some(_), _) => {
                    return Err(SearchError::InvalidMapping(format!(
                        "field '{path}': \"properties\" must be an object"
                    )));
                }
                // `{"type": "object"}` alone: an object with no fields yet.
                (None, Some(_)) => {}
                (None, None) => {
                    return Err(SearchError::InvalidMapping(format!(
                        "field '{path}' has no \"type\""
                    )));
                }
            }
            continue;
        }
        let kind = FieldKind::from_type(ty.unwrap_or_default());
        out.push(field_spec(&path, &path, kind.clone(), def, reading)?);
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
                    reading,
                )?);
            }
        }
    }
    Ok(())
}

/// Refuses an object option the embedded engine does not apply.
fn check_object(path: &str, def: &Map<String, Value>) -> Result<(), SearchError> {
    let bad = |what: String| SearchError::InvalidMapping(format!("field '{path}': {what}"));
    if let Some(option) = def.keys().find(|k| !OBJECT_OPTIONS.contains(&k.as_str())) {
        return Err(bad(format!(
            "the object option [{option}] is not supported by the embedded engine"
        )));
    }
    if let Some(d) = def.get("dynamic")
        && Dynamic::read(d).is_none()
    {
        return Err(bad(format!(
            "[dynamic] {} is not supported by the embedded engine (true, false or strict)",
            short(d)
        )));
    }
    if let Some(e) = def.get("enabled")
        && !e.is_boolean()
    {
        return Err(bad(format!("[enabled] must be true or false, found {e}")));
    }
    Ok(())
}

/// One field's spec from its definition; read strictly, its options are checked.
fn field_spec(
    path: &str,
    source_path: &str,
    kind: FieldKind,
    def: &Map<String, Value>,
    reading: Reading,
) -> Result<FieldSpec, SearchError> {
    let bad = |what: String| SearchError::InvalidMapping(format!("field '{path}': {what}"));
    let strict = reading == Reading::Strict;
    // A type the engine does not index keeps whatever options it has: nothing reads them.
    if strict
        && !matches!(kind, FieldKind::Unsupported(_))
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
            Some(_) if !strict => Ok(None),
            Some(v) => Err(bad(format!("[{key}] must be text, found {v}"))),
        }
    };
    let flag = |key: &str, default: bool| -> Result<bool, SearchError> {
        match def.get(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(Value::String(s)) if s == "true" || s == "false" => Ok(s == "true"),
            Some(_) if !strict => Ok(default),
            Some(v) => Err(bad(format!("[{key}] must be true or false, found {v}"))),
        }
    };
    let analyzer = text("analyzer")?;
    let search_analyzer = text("search_analyzer")?;
    if strict {
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
    }
    let normalizer = text("normalizer")?;
    // Which names exist depends on the index's settings too (custom normalizers):
    // [`Mapping::check_normalizers`] is asked with them.
    if strict && normalizer.is_some() && kind != FieldKind::Keyword {
        return Err(bad("[normalizer] applies to keyword fields only".into()));
    }
    let fielddata = flag("fielddata", false)?;
    if strict && fielddata && kind != FieldKind::Text {
        return Err(bad("[fielddata] applies to text fields only".into()));
    }
    let format = text("format")?;
    if strict && let Some(f) = &format {
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
        store: flag("store", false)?,
        fielddata,
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
