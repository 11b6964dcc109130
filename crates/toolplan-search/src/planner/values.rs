//! What the index knows, for the prompt: the most frequent values of its keyword fields (one `terms`
//! aggregation per field, in one search through [`SearchBackend::search`]), so that the model spells
//! `category: "Garden"` as it is stored, and a compact list of the fields with their types.
//!
//! The values are bounded: the first [`MAX_KEYWORD_FIELDS`] keyword fields of the mapping (in mapping
//! order, `.keyword` sub-fields included), the [`MAX_VALUES_PER_FIELD`] most frequent values of each,
//! each shown cut to [`MAX_VALUE_CHARS`] characters. A field whose shown values each occur in one
//! document while more values exist (identifiers, titles) is left out: a few of its many values say
//! nothing about the value a question names. The prompt shows them as
//! `category: billing, login; status: open, closed`.

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::backend::SearchBackend;
use crate::error::SearchError;
use crate::mapping::{FieldKind, Mapping};

/// At most this many keyword fields are asked about.
pub const MAX_KEYWORD_FIELDS: usize = 20;
/// At most this many values of a field are shown, the most frequent first.
pub const MAX_VALUES_PER_FIELD: usize = 10;
/// A value is shown cut to this many characters (marked with `...`).
pub const MAX_VALUE_CHARS: usize = 50;

/// The frequent values of one keyword field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldValues {
    /// The field's path (`category`, `species.keyword`).
    pub field: String,
    /// Its most frequent values, most frequent first, as stored (not cut).
    pub values: Vec<String>,
}

/// The frequent values of an index's keyword fields.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeywordValues {
    /// One entry per keyword field that has values worth showing, in mapping order.
    pub fields: Vec<FieldValues>,
}

impl KeywordValues {
    /// The keyword fields asked about: the first [`MAX_KEYWORD_FIELDS`] of the mapping.
    pub fn fields_of(mapping: &Mapping) -> Vec<String> {
        mapping
            .fields()
            .iter()
            .filter(|f| f.kind == FieldKind::Keyword)
            .take(MAX_KEYWORD_FIELDS)
            .map(|f| f.path.clone())
            .collect()
    }

    /// The search body that asks for the values of `fields`: no hits, one `terms` aggregation
    /// (`v0`, `v1` …) of [`MAX_VALUES_PER_FIELD`] buckets per field.
    pub fn request(fields: &[String]) -> Value {
        let aggs: Map<String, Value> = fields
            .iter()
            .enumerate()
            .map(|(i, f)| {
                (
                    format!("v{i}"),
                    json!({"terms": {"field": f, "size": MAX_VALUES_PER_FIELD}}),
                )
            })
            .collect();
        json!({"size": 0, "aggs": aggs})
    }

    /// Reads the response to [`Self::request`] for `fields`. Buckets that are not there or not
    /// readable leave their field out.
    pub fn from_response(fields: &[String], response: &Value) -> KeywordValues {
        let mut out = Vec::new();
        for (i, field) in fields.iter().enumerate() {
            let Some(agg) = response.pointer(&format!("/aggregations/v{i}")) else {
                continue;
            };
            let buckets: Vec<(String, u64)> = agg
                .get("buckets")
                .and_then(Value::as_array)
                .map(|b| {
                    b.iter()
                        .filter_map(|b| {
                            let key = b.get("key_as_string").or_else(|| b.get("key"))?;
                            let count = b.get("doc_count").and_then(Value::as_u64).unwrap_or(0);
                            Some((toolplan_core::value_as_text(key).into_owned(), count))
                        })
                        .take(MAX_VALUES_PER_FIELD)
                        .collect()
                })
                .unwrap_or_default();
            let others = agg
                .get("sum_other_doc_count")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let each_once = buckets.iter().all(|(_, n)| *n <= 1);
            if buckets.is_empty() || (each_once && others > 0) {
                continue;
            }
            out.push(FieldValues {
                field: field.clone(),
                values: buckets.into_iter().map(|(k, _)| k).collect(),
            });
        }
        KeywordValues { fields: out }
    }

    /// The values as the prompt shows them: `category: billing, login; status: open, closed`, each
    /// value cut to [`MAX_VALUE_CHARS`] characters; a value holding `,` `;` or `"`, or blank at an
    /// end, is shown as a JSON string. `none` when there are none.
    pub fn prompt_text(&self) -> String {
        if self.fields.is_empty() {
            return "none".into();
        }
        self.fields
            .iter()
            .map(|f| {
                let values: Vec<String> = f.values.iter().map(|v| shown(v)).collect();
                format!("{}: {}", f.field, values.join(", "))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Every (field, value) pair, in order.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.fields
            .iter()
            .flat_map(|f| f.values.iter().map(|v| (f.field.as_str(), v.as_str())))
    }
}

/// One value as the prompt shows it.
fn shown(v: &str) -> String {
    let cut: String = v.chars().take(MAX_VALUE_CHARS).collect();
    let cut = if cut.len() < v.len() {
        format!("{cut}...")
    } else {
        cut
    };
    let plain = !cut.is_empty()
        && !cut.contains([',', ';', '"'])
        && cut.trim() == cut
        && !cut.chars().any(char::is_control);
    if plain {
        cut
    } else {
        Value::String(cut).to_string()
    }
}

/// Asks `backend` for the frequent values of the keyword fields of `index` (one search, bounded as
/// the module says). If the backend rejects that search (a field it cannot aggregate), each field
/// is asked on its own and those it rejects are left out. An index without keyword fields is not
/// searched. Stops when `cancel` fires.
pub async fn keyword_values(
    backend: &dyn SearchBackend,
    index: &str,
    mapping: &Mapping,
    cancel: &CancellationToken,
) -> Result<KeywordValues, SearchError> {
    let fields = KeywordValues::fields_of(mapping);
    if fields.is_empty() {
        return Ok(KeywordValues::default());
    }
    match ask(backend, index, &fields, cancel).await {
        Err(e) if e.is_rejection() => {}
        other => return other,
    }
    let mut out = KeywordValues::default();
    for field in fields {
        match ask(backend, index, std::slice::from_ref(&field), cancel).await {
            Ok(v) => out.fields.extend(v.fields),
            Err(e) if e.is_rejection() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// One search for the values of `fields`.
async fn ask(
    backend: &dyn SearchBackend,
    index: &str,
    fields: &[String],
    cancel: &CancellationToken,
) -> Result<KeywordValues, SearchError> {
    let body = KeywordValues::request(fields);
    let response = tokio::select! {
        biased;
        () = cancel.cancelled() => return Err(SearchError::Cancelled(index.to_owned())),
        r = backend.search(index, &body) => r?,
    };
    Ok(KeywordValues::from_response(fields, &response))
}

/// The fields of a mapping in a compact line, for prompts that name
/// `${parameters.index_fields}`: `price (float), genre (keyword), title (text, title.keyword)` —
/// each field with its mapping type, sub-fields after their parent's type.
pub fn field_list(mapping: &Mapping, mapping_json: &Value) -> String {
    let types = mapping_types(mapping_json);
    let mut out: Vec<String> = Vec::new();
    for f in mapping.fields().iter().filter(|f| f.source_path == f.path) {
        let ty = types
            .iter()
            .find(|(p, _)| *p == f.path)
            .map_or_else(|| f.kind.name().to_owned(), |(_, t)| t.clone());
        let subs: Vec<&str> = mapping
            .fields()
            .iter()
            .filter(|s| s.source_path == f.path && s.path != f.path)
            .map(|s| s.path.as_str())
            .collect();
        let mut parts = vec![ty];
        parts.extend(subs.into_iter().map(str::to_owned));
        out.push(format!("{} ({})", f.path, parts.join(", ")));
    }
    out.join(", ")
}

/// The mapping type names as written (`float`, not the kind `double`), by dotted path.
fn mapping_types(mapping_json: &Value) -> Vec<(String, String)> {
    fn walk(props: &Map<String, Value>, prefix: &str, out: &mut Vec<(String, String)>) {
        for (name, def) in props {
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}.{name}")
            };
            if let Some(t) = def.get("type").and_then(Value::as_str) {
                out.push((path.clone(), t.to_owned()));
            }
            if let Some(Value::Object(children)) = def.get("properties") {
                walk(children, &path, out);
            }
        }
    }
    let root = mapping_json.get("mappings").unwrap_or(mapping_json);
    let mut out = Vec::new();
    if let Some(Value::Object(props)) = root.get("properties") {
        walk(props, "", &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping() -> (Mapping, Value) {
        let json = json!({"properties": {
            "title": {"type": "text", "fields": {"keyword": {"type": "keyword"}}},
            "genre": {"type": "keyword"},
            "price": {"type": "float"},
            "meta": {"properties": {"sku": {"type": "keyword"}}}
        }});
        (Mapping::parse(&json).expect("mapping"), json)
    }

    #[test]
    fn keyword_fields_are_asked_in_one_bounded_request() {
        let (m, _) = mapping();
        let fields = KeywordValues::fields_of(&m);
        assert_eq!(fields, ["title.keyword", "genre", "meta.sku"]);
        let body = KeywordValues::request(&fields);
        assert_eq!(body["size"], 0);
        assert_eq!(
            body["aggs"]["v1"],
            json!({"terms": {"field": "genre", "size": 10}})
        );

        let many: Value = json!({"properties": (0..30)
            .map(|i| (format!("k{i}"), json!({"type": "keyword"})))
            .collect::<Map<String, Value>>()});
        let m = Mapping::parse(&many).expect("mapping");
        assert_eq!(KeywordValues::fields_of(&m).len(), MAX_KEYWORD_FIELDS);
    }

    #[test]
    fn responses_are_read_and_identifier_like_fields_left_out() {
        let fields = vec![
            "title.keyword".to_owned(),
            "genre".to_owned(),
            "x".to_owned(),
        ];
        let response = json!({"aggregations": {
            "v0": {"sum_other_doc_count": 30, "buckets": [{"key": "A", "doc_count": 1}, {"key": "B", "doc_count": 1}]},
            "v1": {"sum_other_doc_count": 0, "buckets": [{"key": "fantasy", "doc_count": 5}, {"key": "a, b", "doc_count": 1}]},
        }});
        let v = KeywordValues::from_response(&fields, &response);
        assert_eq!(
            v.fields,
            [FieldValues {
                field: "genre".into(),
                values: vec!["fantasy".into(), "a, b".into()]
            }]
        );
        assert_eq!(v.prompt_text(), "genre: fantasy, \"a, b\"");
        assert_eq!(
            v.pairs().collect::<Vec<_>>(),
            [("genre", "fantasy"), ("genre", "a, b")]
        );
        assert_eq!(KeywordValues::default().prompt_text(), "none");
        // Few values, each once, but all of them: shown.
        let all = json!({"aggregations": {"v0": {"sum_other_doc_count": 0, "buckets": [{"key": "A", "doc_count": 1}]}}});
        assert_eq!(KeywordValues::from_response(&fields, &all).fields.len(), 1);
    }

    #[test]
    fn long_values_are_cut_in_the_prompt_only() {
        let long = "x".repeat(80);
        let v = KeywordValues {
            fields: vec![FieldValues {
                field: "f".into(),
                values: vec![long.clone(), " padded".into()],
            }],
        };
        let text = v.prompt_text();
        assert_eq!(text, format!("f: {}..., \" padded\"", "x".repeat(50)));
        assert_eq!(v.fields[0].values[0], long);
    }

    /// A backend whose searches reject any aggregation on `bad`, and answer one bucket otherwise.
    struct Picky;

    #[async_trait::async_trait]
    impl SearchBackend for Picky {
        fn kind(&self) -> &'static str {
            "picky"
        }
        async fn list_indices(&self) -> Result<Vec<crate::IndexInfo>, SearchError> {
            Ok(Vec::new())
        }
        async fn create_index(&self, _: &str, _: &Value) -> Result<(), SearchError> {
            Ok(())
        }
        async fn delete_index(&self, _: &str) -> Result<(), SearchError> {
            Ok(())
        }
        async fn bulk(&self, _: Option<&str>, _: &str) -> Result<crate::BulkSummary, SearchError> {
            Ok(crate::BulkSummary::default())
        }
        async fn get_mapping(&self, _: &str) -> Result<Value, SearchError> {
            Ok(json!({}))
        }
        async fn sample_document(&self, _: &str) -> Result<Option<Value>, SearchError> {
            Ok(None)
        }
        async fn search(&self, _: &str, body: &Value) -> Result<Value, SearchError> {
            let aggs = body["aggs"].as_object().cloned().unwrap_or_default();
            if aggs.values().any(|a| a["terms"]["field"] == "bad") {
                return Err(SearchError::dsl("aggs", "cannot aggregate 'bad'"));
            }
            let answer: Map<String, Value> = aggs
                .keys()
                .map(|k| {
                    (
                        k.clone(),
                        json!({"buckets": [{"key": "x", "doc_count": 2}]}),
                    )
                })
                .collect();
            Ok(json!({"aggregations": answer}))
        }
        async fn put_script(&self, _: &str, _: &Value) -> Result<(), SearchError> {
            Ok(())
        }
        async fn get_script(&self, _: &str) -> Result<Option<Value>, SearchError> {
            Ok(None)
        }
        async fn delete_script(&self, _: &str) -> Result<(), SearchError> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_field_the_backend_cannot_aggregate_is_left_out() {
        let m = Mapping::parse(&json!({"properties": {
            "good": {"type": "keyword"}, "bad": {"type": "wildcard"}, "also": {"type": "keyword"}
        }}))
        .expect("mapping");
        let cancel = CancellationToken::new();
        let v = keyword_values(&Picky, "i", &m, &cancel)
            .await
            .expect("values");
        assert_eq!(v.prompt_text(), "good: x; also: x");
        cancel.cancel();
        let err = keyword_values(&Picky, "i", &m, &cancel)
            .await
            .expect_err("cancelled");
        assert!(matches!(err, SearchError::Cancelled(_)));
    }

    #[test]
    fn the_field_list_names_types_and_sub_fields() {
        let (m, json) = mapping();
        assert_eq!(
            field_list(&m, &json),
            "title (text, title.keyword), genre (keyword), price (float), meta.sku (keyword)"
        );
    }
}
