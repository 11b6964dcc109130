//! What a hit shows besides `_source`: `fields` (the values of the matching mapped fields, read
//! from `_source` as the mapping reads them: numbers as numbers, dates in the field's format or the
//! one asked for), `docvalue_fields` (the same, as the index keeps them for sorting: each field's
//! values sorted and without repeats; a `text` field has none), and `stored_fields` (the fields
//! mapped with `store: true`; `_source` then comes only when named, and `_none_` leaves out the
//! id too).

use serde_json::{Map, Value, json};

use super::schema::{IndexSchema, boolean, float, integer, ip_address, ip_text, scalar_text};
use crate::backend::glob;
use crate::datemath::{self, DateFormat};
use crate::error::SearchError;
use crate::limits::{SearchLimits, within};
use crate::mapping::{FieldKind, FieldSpec, values_at};
use crate::number_format::NumberFormat;

/// One field pattern asked for, and the format its values are written in.
#[derive(Debug, Clone)]
struct Asked {
    pattern: String,
    format: Option<String>,
}

/// What `stored_fields` asks for.
#[derive(Debug, Clone, PartialEq)]
enum Stored {
    /// Not given: `_id` and `_source` as usual.
    Default,
    /// `_none_`: neither the id nor the source.
    Nothing,
    /// These fields (`_source` among them brings the source back).
    Fields(Vec<String>),
}

/// The `fields`, `docvalue_fields` and `stored_fields` of a search body, read.
#[derive(Debug, Clone)]
pub struct Fetch {
    fields: Vec<Asked>,
    docvalues: Vec<Asked>,
    stored: Stored,
}

impl Fetch {
    /// Reads the options from a search body, refusing a `docvalue_fields` on a `text` field and
    /// more of them than `max_docvalue_fields` (in OpenSearch's words).
    pub fn of_body(
        body: &Map<String, Value>,
        schema: &IndexSchema,
        limits: &SearchLimits,
    ) -> Result<Fetch, SearchError> {
        let fields = asked(body.get("fields"), "fields")?;
        let docvalues = asked(body.get("docvalue_fields"), "docvalue_fields")?;
        let max = limits.max_docvalue_fields;
        within(
            docvalues.len(),
            max,
            "max_docvalue_fields",
            "docvalue_fields",
            || {
                format!(
                    "Trying to retrieve too many docvalue_fields. Must be less than or equal to: [{max}] but was [{}]. This limit can be set by changing the [index.max_docvalue_fields_search] index level setting.",
                    docvalues.len()
                )
            },
        )?;
        for a in &docvalues {
            for spec in matching(schema, &a.pattern) {
                if spec.kind == FieldKind::Text && spec.fielddata {
                    return Err(SearchError::Unsupported {
                        path: "docvalue_fields".into(),
                        clause: format!(
                            "docvalue_fields of the text field [{}] (fielddata)",
                            spec.path
                        ),
                    });
                }
                if spec.kind == FieldKind::Text {
                    return Err(SearchError::dsl(
                        "docvalue_fields",
                        format!(
                            "Can't load fielddata on [{}] because fielddata is unsupported on fields of type [text]. Use a keyword field instead.",
                            spec.path
                        ),
                    ));
                }
                check_format(spec, a.format.as_deref())?;
            }
        }
        for a in &fields {
            for spec in matching(schema, &a.pattern) {
                check_format(spec, a.format.as_deref())?;
            }
        }
        let stored = match body.get("stored_fields") {
            None | Some(Value::Null) => Stored::Default,
            Some(Value::String(s)) if s == "_none_" => Stored::Nothing,
            Some(Value::String(s)) => Stored::Fields(vec![s.clone()]),
            Some(Value::Array(list)) => Stored::Fields(
                list.iter()
                    .map(|v| {
                        v.as_str().map(str::to_owned).ok_or_else(|| {
                            SearchError::dsl("stored_fields", "stored_fields lists field names")
                        })
                    })
                    .collect::<Result<_, _>>()?,
            ),
            Some(other) => {
                return Err(SearchError::dsl(
                    "stored_fields",
                    format!("stored_fields must be a name or a list of names, found {other}"),
                ));
            }
        };
        if let Stored::Fields(list) = &stored
            && list.iter().any(|f| f == "_none_")
            && list.len() > 1
        {
            return Err(SearchError::dsl(
                "stored_fields",
                "[stored_fields] cannot be used if [_none_] is used with other fields",
            ));
        }
        Ok(Fetch {
            fields,
            docvalues,
            stored,
        })
    }

    /// Whether hits show `_source`, given whether the body asks for it by `_source`.
    pub fn shows_source(&self, source_asked: bool) -> bool {
        match &self.stored {
            Stored::Default => true,
            Stored::Nothing => false,
            Stored::Fields(list) => source_asked || list.iter().any(|f| f == "_source"),
        }
    }

    /// Whether hits show `_id`.
    pub fn shows_id(&self) -> bool {
        self.stored != Stored::Nothing
    }

    /// The `fields` of a hit whose source is `source`; empty when nothing was asked or found.
    pub fn fields_of(&self, source: &Value, schema: &IndexSchema) -> Map<String, Value> {
        let mut out = Map::new();
        for a in &self.fields {
            for spec in matching(schema, &a.pattern) {
                let values = values(spec, source, a.format.as_deref());
                if !values.is_empty() {
                    out.insert(spec.path.clone(), Value::Array(values));
                }
            }
        }
        for a in &self.docvalues {
            for spec in matching(schema, &a.pattern) {
                let mut values = values(spec, source, a.format.as_deref());
                values.sort_by(super::multi::compare_values);
                values.dedup();
                if !values.is_empty() {
                    out.insert(spec.path.clone(), Value::Array(values));
                }
            }
        }
        if let Stored::Fields(list) = &self.stored {
            for name in list {
                for spec in matching(schema, name).into_iter().filter(|s| s.store) {
                    let values = values(spec, source, None);
                    if !values.is_empty() {
                        out.insert(spec.path.clone(), Value::Array(values));
                    }
                }
            }
        }
        out
    }
}

/// The patterns of a `fields` or `docvalue_fields` option: names (with `*`) or
/// `{"field", "format"}`.
fn asked(v: Option<&Value>, name: &str) -> Result<Vec<Asked>, SearchError> {
    let items: Vec<&Value> = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list.iter().collect(),
        Some(one) => vec![one],
    };
    items
        .into_iter()
        .map(|item| match item {
            Value::String(s) => Ok(Asked {
                pattern: s.clone(),
                format: None,
            }),
            Value::Object(o) => {
                if let Some(other) = o.keys().find(|k| !matches!(k.as_str(), "field" | "format")) {
                    return Err(SearchError::Unsupported {
                        path: format!("{name}.{other}"),
                        clause: format!("{name} option {other}"),
                    });
                }
                let pattern = o.get("field").and_then(Value::as_str).ok_or_else(|| {
                    SearchError::dsl(name, format!("each of {name} needs a [field]"))
                })?;
                Ok(Asked {
                    pattern: pattern.to_owned(),
                    format: o.get("format").and_then(Value::as_str).map(str::to_owned),
                })
            }
            other => Err(SearchError::dsl(
                name,
                format!("{name} lists field names or {{\"field\", \"format\"}}, found {other}"),
            )),
        })
        .collect()
}

/// The mapped fields a pattern names (`*` matches any run of characters).
fn matching<'a>(schema: &'a IndexSchema, pattern: &str) -> Vec<&'a FieldSpec> {
    schema
        .mapping
        .fields()
        .iter()
        .filter(|spec| glob(pattern, &spec.path))
        .collect()
}

/// Refuses a `format` the field's values cannot be written in.
fn check_format(spec: &FieldSpec, format: Option<&str>) -> Result<(), SearchError> {
    // OpenSearch's name for the field's own format.
    let Some(format) = format.filter(|f| *f != "use_field_mapping") else {
        return Ok(());
    };
    let bad = |why: String| SearchError::dsl(format!("fields.{}.format", spec.path), why);
    match spec.kind {
        FieldKind::Date => DateFormat::parse(format).map(drop).map_err(bad),
        FieldKind::Integer | FieldKind::Float => NumberFormat::parse(format)
            .map(drop)
            .map_err(|e| bad(e.to_string())),
        _ => Err(bad(format!(
            "Field [{}] of type [{}] does not support custom formats",
            spec.path,
            spec.kind.name()
        ))),
    }
}

/// The values of a field in a document's source, as the mapping reads them and `format` writes
/// them; values that do not fit the field are left out.
fn values(spec: &FieldSpec, source: &Value, format: Option<&str>) -> Vec<Value> {
    let format = format.filter(|f| *f != "use_field_mapping");
    let number_format = format.and_then(|f| NumberFormat::parse(f).ok());
    let number = |n: f64, whole: bool| -> Value {
        match &number_format {
            Some(f) => json!(f.write(n)),
            None if whole => json!(n as i64),
            None => json!(n),
        }
    };
    let date_format = format
        .or(spec.format.as_deref())
        .and_then(|f| DateFormat::parse(f).ok());
    let read_format = spec
        .format
        .as_deref()
        .and_then(|f| DateFormat::parse(f).ok());
    values_at(source, &spec.source_path)
        .into_iter()
        .filter(|v| !v.is_null())
        .filter_map(|v| match &spec.kind {
            FieldKind::Text => scalar_text(v).map(Value::String),
            FieldKind::Keyword => scalar_text(v)
                .filter(|t| spec.ignore_above.is_none_or(|n| t.chars().count() <= n))
                .map(Value::String),
            FieldKind::Integer => integer(v).map(|n| number(n as f64, true)),
            FieldKind::Float => float(v).map(|n| number(n, false)),
            FieldKind::Boolean => boolean(v).map(Value::Bool),
            FieldKind::Date => {
                let date = match &read_format {
                    Some(f) => f.read_json(v),
                    None => datemath::date_from_json(v),
                }?;
                Some(Value::String(match &date_format {
                    Some(f) => f.write(date),
                    None => datemath::iso_millis(date),
                }))
            }
            // As the index keeps it: `0:0:0:0:0:0:0:1` comes back as `::1`.
            FieldKind::Ip => v.as_str().and_then(ip_address).map(|ip| json!(ip_text(ip))),
            FieldKind::Unsupported(_) => Some(v.clone()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_patterns() {
        assert!(glob("include.*", "include.field1"));
        assert!(glob("*1.keyword", "include.field1.keyword"));
        assert!(glob("a*b*c", "aXbYc"));
        assert!(!glob("a*b*c", "aXcYb"));
        assert!(glob("count", "count"));
        assert!(!glob("count", "counts"));
    }
}
