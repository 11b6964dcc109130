//! From an OpenSearch mapping to a tantivy schema, and from a JSON document to a tantivy document.
//!
//! Every mapped field gets a tantivy field named `f<N>` (mapping paths may hold characters tantivy
//! field names may not): text → tokenized with positions; keyword → raw, fast; numbers, dates
//! (millisecond precision) and booleans → indexed and fast. Five more fields: `_id` (raw, fast),
//! `_source` (the document's bytes, stored), `_field_names` (every mapped path the document has a
//! value for, which `exists` queries read, as OpenSearch's own `_field_names` does), and after the
//! mapped fields `_version` and `_seq_no` (columns: the document's version, and the sequence
//! number of the write that put it there) and `_ignored`.

use std::collections::HashMap;

use serde_json::{Map, Value};
use tantivy::schema::{
    DateOptions, DateTimePrecision, FAST, Field, INDEXED, IndexRecordOption, STORED, STRING,
    Schema, TextFieldIndexing, TextOptions,
};
use tantivy::{DateTime, TantivyDocument};

use super::analysis::{analyzer_tokenizer, normalizer_tokenizer};
use crate::datemath;
use crate::mapping::{FieldKind, FieldSpec, Mapping, values_at};

/// The id field.
pub const ID: &str = "_id";
/// The stored original document.
pub const SOURCE: &str = "_source";
/// The paths a document has values for.
pub const FIELD_NAMES: &str = "_field_names";
/// The document's version.
pub const VERSION: &str = "_version";
/// The sequence number of the write that made the document.
pub const SEQ_NO: &str = "_seq_no";
/// The fields whose malformed values a document had ignored (`ignore_malformed`): searchable as a
/// keyword, shown in hits.
pub const IGNORED: &str = "_ignored";

/// What a write records beside the document: its version and sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocMeta {
    /// The version: 1 when made, one more at each write under internal versioning, or the
    /// version an external versioning write gave.
    pub version: u64,
    /// The index's count of writes when this one was made (from 0).
    pub seq_no: u64,
}

/// A mapped field and its tantivy field.
#[derive(Debug, Clone)]
pub struct Indexed {
    /// The mapping's field.
    pub spec: FieldSpec,
    /// The tantivy field.
    pub field: Field,
    /// Its tantivy name (`f3`), for aggregations, sorting and `exists`.
    pub name: String,
    /// The tokenizer that analyses query text for it: its search analyzer, else the one it was
    /// indexed with; for a keyword, its normalizer (or none: values are compared as they are).
    pub search_tokenizer: Option<String>,
    /// A date field's format, read.
    pub format: Option<datemath::DateFormat>,
}

/// The schema of one index and how mapping paths reach its fields.
#[derive(Debug, Clone)]
pub struct IndexSchema {
    /// The tantivy schema.
    pub schema: Schema,
    /// The mapping.
    pub mapping: Mapping,
    /// Mapped fields by path (unsupported types are left out).
    pub fields: HashMap<String, Indexed>,
    /// `_id`.
    pub id: Field,
    /// `_source`.
    pub source: Field,
    /// `_field_names`.
    pub field_names: Field,
    /// `_version`.
    pub version: Field,
    /// `_seq_no`.
    pub seq_no: Field,
    /// `_ignored`.
    pub ignored: Field,
}

impl IndexSchema {
    /// The schema for a mapping.
    pub fn build(mapping: Mapping) -> IndexSchema {
        let mut b = Schema::builder();
        let id = b.add_text_field(ID, STRING | FAST | STORED);
        let source = b.add_bytes_field(SOURCE, STORED);
        let field_names = b.add_text_field(FIELD_NAMES, STRING);
        let mut fields = HashMap::new();
        for (i, spec) in mapping.fields().iter().enumerate() {
            let name = format!("f{i}");
            let text_options = |tokenizer: &str, positions: bool| {
                TextOptions::default().set_indexing_options(
                    TextFieldIndexing::default()
                        .set_tokenizer(tokenizer)
                        .set_index_option(if positions {
                            IndexRecordOption::WithFreqsAndPositions
                        } else {
                            IndexRecordOption::Basic
                        }),
                )
            };
            let analyzer = analyzer_tokenizer(spec.analyzer.as_deref().unwrap_or("standard"));
            let normalizer = spec.normalizer.as_deref().map(normalizer_tokenizer);
            let search_tokenizer = match spec.kind {
                FieldKind::Text => Some(
                    spec.search_analyzer
                        .as_deref()
                        .map_or_else(|| analyzer.clone(), analyzer_tokenizer),
                ),
                FieldKind::Keyword => normalizer.clone(),
                _ => None,
            };
            let field = match spec.kind {
                // Field data: the analysed words as a column too, for aggregations.
                FieldKind::Text if spec.fielddata => b.add_text_field(
                    &name,
                    text_options(&analyzer, true).set_fast(analyzer.as_str()),
                ),
                FieldKind::Text => b.add_text_field(&name, text_options(&analyzer, true)),
                FieldKind::Keyword => match &normalizer {
                    Some(n) => b.add_text_field(&name, text_options(n, false).set_fast(n.as_str())),
                    None => b.add_text_field(&name, STRING | FAST),
                },
                FieldKind::Integer => b.add_i64_field(&name, INDEXED | FAST),
                FieldKind::Float => b.add_f64_field(&name, INDEXED | FAST),
                FieldKind::Date => b.add_date_field(
                    &name,
                    DateOptions::from(INDEXED | FAST)
                        .set_precision(DateTimePrecision::Milliseconds),
                ),
                FieldKind::Boolean => b.add_bool_field(&name, INDEXED | FAST),
                FieldKind::Ip => b.add_ip_addr_field(&name, INDEXED | FAST),
                FieldKind::Unsupported(_) => continue,
            };
            fields.insert(
                spec.path.clone(),
                Indexed {
                    spec: spec.clone(),
                    field,
                    name,
                    search_tokenizer,
                    format: spec
                        .format
                        .as_deref()
                        .and_then(|f| datemath::DateFormat::parse(f).ok()),
                },
            );
        }
        // After the mapped fields: an index made before these fields existed has the fields above
        // under the same numbers (and is rebuilt when opened, see `EmbeddedBackend`).
        let version = b.add_u64_field(VERSION, FAST);
        let seq_no = b.add_u64_field(SEQ_NO, FAST);
        let ignored = b.add_text_field(IGNORED, STRING | STORED | FAST);
        // `_ignored` is searched, sorted and aggregated on as a keyword field.
        fields.insert(
            IGNORED.to_owned(),
            Indexed {
                spec: FieldSpec {
                    path: IGNORED.to_owned(),
                    kind: FieldKind::Keyword,
                    source_path: IGNORED.to_owned(),
                    ignore_above: None,
                    analyzer: None,
                    search_analyzer: None,
                    normalizer: None,
                    searchable: true,
                    format: None,
                    ignore_malformed: false,
                    store: false,
                    fielddata: false,
                },
                field: ignored,
                name: IGNORED.to_owned(),
                search_tokenizer: None,
                format: None,
            },
        );
        IndexSchema {
            schema: b.build(),
            mapping,
            fields,
            id,
            source,
            field_names,
            version,
            seq_no,
            ignored,
        }
    }

    /// Whether an index's tantivy schema is the one this build makes for its mapping (an index
    /// made by an earlier build may lack fields added since; it is rebuilt when opened).
    pub fn matches(&self, on_disk: &Schema) -> bool {
        // Each field there, with a column where this build makes one (`fielddata` on an index
        // made before it was read).
        self.schema.fields().all(|(_, entry)| {
            on_disk
                .get_field(entry.name())
                .is_ok_and(|f| on_disk.get_field_entry(f).is_fast() == entry.is_fast())
        })
    }

    /// The fields whose values a document had ignored, as stored.
    pub fn ignored_of(doc: &TantivyDocument, ignored: Field) -> Vec<Value> {
        doc.get_all(ignored)
            .filter_map(|v| tantivy::schema::Value::as_str(&v).map(|s| Value::String(s.to_owned())))
            .collect()
    }

    /// The version and sequence number of document `doc` of a segment, from their columns
    /// (`None` for a document of an index made before they were kept).
    pub fn meta_at(
        segment: &tantivy::SegmentReader,
        doc: tantivy::DocId,
    ) -> Result<Option<DocMeta>, tantivy::TantivyError> {
        let fast = segment.fast_fields();
        let read = |name: &str| -> Result<Option<u64>, tantivy::TantivyError> {
            Ok(fast.column_opt::<u64>(name)?.and_then(|c| c.first(doc)))
        };
        Ok(match (read(VERSION)?, read(SEQ_NO)?) {
            (Some(version), Some(seq_no)) => Some(DocMeta { version, seq_no }),
            _ => None,
        })
    }

    /// Why the field at `path` cannot be used, when the mapping has it with a type the engine
    /// does not index (`ip`, `geo_point` …): an aggregation, sort or collapse on it would
    /// otherwise see no values and answer as if the field were unmapped.
    pub fn not_indexed(&self, path: &str) -> Option<String> {
        if self.fields.contains_key(path) {
            return None;
        }
        self.mapping.field(path).map(|spec| {
            format!(
                "field '{path}' is of type {}, which the embedded backend does not index",
                spec.kind.name()
            )
        })
    }

    /// `" (use 'x.keyword')"` when the text field at `path` has an exact sub-field, for messages
    /// about text fields where a keyword is needed.
    pub fn keyword_hint(&self, path: &str) -> String {
        self.mapping
            .keyword_subfield(path)
            .map(|k| format!(" (use '{}')", k.path))
            .unwrap_or_default()
    }

    /// The tantivy document for `doc` with id `id`, or why a value does not fit its field (as
    /// OpenSearch's mapper_parsing_exception).
    pub fn document(
        &self,
        id: &str,
        doc: &Map<String, Value>,
        meta: DocMeta,
    ) -> Result<TantivyDocument, String> {
        self.convert(id, doc, meta, false)
    }

    /// The tantivy document for a document already in the index, re-indexed under a grown
    /// mapping: a value that does not fit a field mapped since it was indexed is left out of that
    /// field, as if the field had `ignore_malformed`.
    pub fn reindexed(&self, id: &str, doc: &Map<String, Value>, meta: DocMeta) -> TantivyDocument {
        self.convert(id, doc, meta, true).unwrap_or_default()
    }

    fn convert(
        &self,
        id: &str,
        doc: &Map<String, Value>,
        meta: DocMeta,
        skip_malformed: bool,
    ) -> Result<TantivyDocument, String> {
        let mut out = TantivyDocument::new();
        out.add_text(self.id, id);
        out.add_u64(self.version, meta.version);
        out.add_u64(self.seq_no, meta.seq_no);
        let source = Value::Object(doc.clone());
        out.add_bytes(
            self.source,
            serde_json::to_vec(&source).unwrap_or_default().as_slice(),
        );
        let mut ignored: Vec<&str> = Vec::new();
        for indexed in self.fields.values() {
            let spec = &indexed.spec;
            if indexed.field == self.ignored {
                continue;
            }
            let mut any = false;
            for v in values_at(&source, &spec.source_path) {
                let added = match add_value(&mut out, indexed, v) {
                    Err(_) if spec.ignore_malformed => {
                        if !ignored.contains(&spec.path.as_str()) {
                            ignored.push(&spec.path);
                        }
                        false
                    }
                    Err(_) if skip_malformed => false,
                    other => other?,
                };
                if added {
                    any = true;
                }
            }
            if any {
                out.add_text(self.field_names, &spec.path);
            }
        }
        // A field of a type the engine does not index is not searchable, but `exists` still finds
        // the documents that have it.
        for spec in self.mapping.fields() {
            if !matches!(spec.kind, FieldKind::Unsupported(_)) {
                continue;
            }
            let values = values_at(&source, &spec.source_path);
            if !values.is_empty() {
                out.add_text(self.field_names, &spec.path);
            }
        }
        ignored.sort_unstable();
        for path in &ignored {
            out.add_text(self.ignored, path);
        }
        if !ignored.is_empty() {
            out.add_text(self.field_names, IGNORED);
        }
        Ok(out)
    }
}

/// An IPv4 or IPv6 address written as text, as the index keeps it: IPv6, IPv4 mapped into it
/// (`::ffff:192.168.0.1`).
pub fn ip_address(text: &str) -> Option<std::net::Ipv6Addr> {
    text.trim()
        .parse::<std::net::IpAddr>()
        .ok()
        .map(|ip| match ip {
            std::net::IpAddr::V4(v4) => v4.to_ipv6_mapped(),
            std::net::IpAddr::V6(v6) => v6,
        })
}

/// The first and last address of a CIDR block (`192.168.0.0/16`, `::/24`), `None` when `text` is
/// not one (or its prefix is longer than the address).
pub fn ip_block(text: &str) -> Option<(std::net::Ipv6Addr, std::net::Ipv6Addr)> {
    let (address, prefix) = text.trim().split_once('/')?;
    let prefix: u32 = prefix.parse().ok()?;
    let v4 = address.parse::<std::net::Ipv4Addr>().is_ok();
    let prefix = match (v4, prefix) {
        (true, 0..=32) => prefix + 96,
        (false, 0..=128) => prefix,
        _ => return None,
    };
    let base = u128::from(ip_address(address)?);
    let host_bits = u128::MAX.checked_shr(prefix).unwrap_or(0);
    Some(((base & !host_bits).into(), (base | host_bits).into()))
}

/// An address as OpenSearch writes it: IPv4 for an IPv4-mapped address, else IPv6.
pub fn ip_text(ip: std::net::Ipv6Addr) -> String {
    ip.to_ipv4_mapped()
        .map_or_else(|| ip.to_string(), |v4| v4.to_string())
}

/// Adds one value; false when it is skipped (a keyword over `ignore_above`).
fn add_value(doc: &mut TantivyDocument, f: &Indexed, v: &Value) -> Result<bool, String> {
    let bad = |what: &str| {
        format!(
            "failed to parse field [{}] of type [{}]: {what} {v}",
            f.spec.path,
            f.spec.kind.name()
        )
    };
    match f.spec.kind {
        FieldKind::Text => doc.add_text(f.field, scalar_text(v).ok_or_else(|| bad("not text:"))?),
        FieldKind::Keyword => {
            let text = scalar_text(v).ok_or_else(|| bad("not a keyword:"))?;
            if f.spec
                .ignore_above
                .is_some_and(|n| text.chars().count() > n)
            {
                return Ok(false);
            }
            doc.add_text(f.field, text);
        }
        FieldKind::Integer => doc.add_i64(
            f.field,
            integer(v).ok_or_else(|| bad("not a whole number:"))?,
        ),
        FieldKind::Float => doc.add_f64(f.field, float(v).ok_or_else(|| bad("not a number:"))?),
        FieldKind::Date => {
            let d = match &f.format {
                Some(format) => format.read_json(v),
                None => datemath::date_from_json(v),
            }
            .ok_or_else(|| bad("not a date:"))?;
            let stored = stored_date(d.timestamp_millis()).ok_or_else(|| {
                bad("a date outside the years 1677 to 2262 (what the embedded engine stores):")
            })?;
            doc.add_date(f.field, stored);
        }
        FieldKind::Boolean => {
            doc.add_bool(f.field, boolean(v).ok_or_else(|| bad("not a boolean:"))?)
        }
        FieldKind::Ip => {
            let ip = v.as_str().and_then(ip_address).ok_or_else(|| {
                format!(
                    "failed to parse field [{}] of type [ip]: '{}' is not an IP string literal",
                    f.spec.path,
                    scalar_text(v).unwrap_or_else(|| v.to_string())
                )
            })?;
            doc.add_ip_addr(f.field, ip);
        }
        FieldKind::Unsupported(_) => return Ok(false),
    }
    Ok(true)
}

/// The most milliseconds from the epoch a stored date can be: tantivy keeps dates as nanoseconds
/// in an `i64` (about the years 1677 to 2262).
pub const MAX_DATE_MILLIS: i64 = i64::MAX / 1_000_000;

/// A date for the index, `None` outside what it can store ([`MAX_DATE_MILLIS`]).
pub fn stored_date(millis: i64) -> Option<DateTime> {
    (millis.abs() <= MAX_DATE_MILLIS).then(|| DateTime::from_timestamp_millis(millis))
}

/// Text of a scalar (numbers and booleans as written).
pub fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A whole number from a number or numeric text (`"42"`, `42.0`).
pub fn integer(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
                .map(|f| f as i64)
        }),
        Value::String(s) => s.trim().parse::<i64>().ok().or_else(|| {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
                .map(|f| f as i64)
        }),
        _ => None,
    }
}

/// A number from a number or numeric text.
pub fn float(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok().filter(|f| f.is_finite()),
        _ => None,
    }
}

/// A boolean from a boolean or `"true"` / `"false"`.
pub fn boolean(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) if s == "true" => Some(true),
        Value::String(s) if s == "false" => Some(false),
        _ => None,
    }
}
