//! Sorting hits as OpenSearch sorts them, where tantivy's own top-n sort does not reach: `_doc`,
//! `_score` among fields, any number of fields, `missing` (`_last` by default in both directions,
//! `_first`, or a value), `unmapped_type` (a field the mapping lacks sorts as missing), `mode` for
//! fields with several values (`min` ascending and `max` descending by default, `avg`, `sum`,
//! `median`), and `search_after` (only hits strictly after the given sort values).
//!
//! [`SortCollector`] reads each matching document's sort values from the fields' columns and
//! keeps the best `limit` in a bounded heap, so memory is the page, not the matches. Collapsing
//! ([`CollapseOn`]) keeps instead the best document of each value of a field, so memory is the
//! field's distinct values among the matches.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tantivy::collector::{Collector, SegmentCollector};
use tantivy::columnar::{Column, StrColumn};
use tantivy::{DateTime, DocAddress, DocId, Score, SegmentOrdinal, SegmentReader};

use super::schema::IndexSchema;
use crate::error::SearchError;
use crate::mapping::FieldKind;

/// What a sort key reads.
#[derive(Debug, Clone, PartialEq)]
pub enum Key {
    /// The score.
    Score,
    /// Index order.
    Doc,
    /// A field's column (its tantivy name) and what it holds; `None` for a field the mapping
    /// lacks (`unmapped_type`): every document is missing it.
    Field(Option<(String, FieldKind)>),
}

/// Which of a document's several values sorts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Min,
    Max,
    Avg,
    Sum,
    Median,
}

/// Where documents without a value go.
#[derive(Debug, Clone, PartialEq)]
pub enum Missing {
    First,
    Last,
    Value(SortValue),
}

/// One sort key of a request.
#[derive(Debug, Clone, PartialEq)]
pub struct SortSpec {
    pub key: Key,
    pub desc: bool,
    pub missing: Missing,
    pub mode: Mode,
}

/// A document's value for one key.
#[derive(Debug, Clone, PartialEq)]
pub enum SortValue {
    Missing,
    Int(i64),
    Float(f64),
    Text(String),
}

impl SortValue {
    fn cmp_present(&self, other: &SortValue) -> Ordering {
        match (self, other) {
            (SortValue::Int(a), SortValue::Int(b)) => a.cmp(b),
            (SortValue::Text(a), SortValue::Text(b)) => a.cmp(b),
            (a, b) => a.number().total_cmp(&b.number()),
        }
    }

    fn number(&self) -> f64 {
        match self {
            SortValue::Int(n) => *n as f64,
            SortValue::Float(f) => *f,
            _ => f64::NAN,
        }
    }

    /// The value in a hit's `sort` list (a missing number as OpenSearch writes it: the largest or
    /// smallest long, where it sorts).
    fn to_json(&self, spec: &SortSpec) -> Value {
        match self {
            SortValue::Int(n) => json!(n),
            SortValue::Float(f) => json!(f),
            SortValue::Text(t) => json!(t),
            SortValue::Missing => match &spec.key {
                Key::Field(Some((_, kind))) if kind.is_numeric() || *kind == FieldKind::Date => {
                    let last = spec.missing != Missing::First;
                    if last != spec.desc {
                        json!(i64::MAX)
                    } else {
                        json!(i64::MIN)
                    }
                }
                _ => Value::Null,
            },
        }
    }

    /// A `search_after` or `missing` value for a key.
    fn from_json(v: &Value, key: &Key) -> Option<SortValue> {
        match (v, key) {
            (Value::Null, _) => Some(SortValue::Missing),
            (Value::Number(n), _) => Some(match n.as_i64() {
                Some(i) => SortValue::Int(i),
                None => SortValue::Float(n.as_f64()?),
            }),
            (Value::String(s), Key::Field(Some((_, kind)))) if kind.is_numeric() => s
                .parse::<i64>()
                .map(SortValue::Int)
                .ok()
                .or_else(|| s.parse::<f64>().ok().map(SortValue::Float)),
            (Value::String(s), Key::Field(Some((_, FieldKind::Date)))) => {
                crate::datemath::parse_date(s).map(|d| SortValue::Int(d.timestamp_millis()))
            }
            (Value::String(s), _) => Some(SortValue::Text(s.clone())),
            (Value::Bool(b), _) => Some(SortValue::Int(i64::from(*b))),
            _ => None,
        }
    }
}

/// One key of a `sort` as written: its name and options.
pub type SortItem = (String, Map<String, Value>);

/// The keys of a body's `sort` as written: each name (a field, `_score`, `_doc`) with its options
/// (`"desc"` alone is `{"order": "desc"}`).
pub fn items(sort: Option<&Value>) -> Result<Vec<SortItem>, SearchError> {
    let items: Vec<Value> = match sort {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a.clone(),
        Some(other) => vec![other.clone()],
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let path = format!("sort[{i}]");
        out.push(match item {
            Value::String(f) => (f, Map::new()),
            Value::Object(o) if o.len() == 1 => {
                let Some((f, spec)) = o.into_iter().next() else {
                    continue;
                };
                let options = match spec {
                    Value::String(order) => {
                        let mut m = Map::new();
                        m.insert("order".into(), Value::String(order));
                        m
                    }
                    Value::Object(m) => m,
                    _ => return Err(SearchError::dsl(path, "a sort key's options are an object")),
                };
                (f, options)
            }
            _ => {
                return Err(SearchError::dsl(
                    path,
                    "a sort key is a field name or {\"<field>\": {\"order\": …}}",
                ));
            }
        });
    }
    Ok(out)
}

/// Reads a body's `sort` into specs, or why not.
pub fn specs(sort: Option<&Value>, schema: &IndexSchema) -> Result<Vec<SortSpec>, SearchError> {
    let items = items(sort)?;
    let mut specs = Vec::with_capacity(items.len());
    for (i, (name, options)) in items.into_iter().enumerate() {
        let path = format!("sort[{i}]");
        if let Some(option) = options.keys().find(|k| {
            !matches!(
                k.as_str(),
                "order" | "missing" | "unmapped_type" | "mode" | "numeric_type" | "format"
            )
        }) {
            return Err(SearchError::dsl(
                format!("{path}.{name}"),
                format!("[sort] option [{option}] is not supported by the embedded engine"),
            ));
        }
        let key = match name.as_str() {
            "_score" => Key::Score,
            "_doc" => Key::Doc,
            field => match schema.fields.get(field) {
                Some(indexed) if indexed.spec.kind == FieldKind::Text => {
                    let hint = schema.keyword_hint(field);
                    return Err(SearchError::dsl(
                        path,
                        format!(
                            "text field '{field}' cannot be sorted on; sort on a keyword field{hint}"
                        ),
                    ));
                }
                Some(indexed) if indexed.spec.kind == FieldKind::Ip => {
                    return Err(SearchError::Unsupported {
                        path,
                        clause: format!("sorting on the ip field '{field}'"),
                    });
                }
                Some(indexed) => {
                    Key::Field(Some((indexed.name.clone(), indexed.spec.kind.clone())))
                }
                None if let Some(why) = schema.not_indexed(field) => {
                    return Err(SearchError::dsl(&path, why));
                }
                None if options.contains_key("unmapped_type") => Key::Field(None),
                None => {
                    return Err(SearchError::dsl(
                        path,
                        format!("No mapping found for [{field}] in order to sort on"),
                    ));
                }
            },
        };
        let desc = match options.get("order").and_then(Value::as_str) {
            None => key == Key::Score,
            Some(o) if o.eq_ignore_ascii_case("asc") => false,
            Some(o) if o.eq_ignore_ascii_case("desc") => true,
            Some(o) => return Err(SearchError::dsl(path, format!("unknown sort order '{o}'"))),
        };
        let missing = match options.get("missing") {
            None => Missing::Last,
            Some(Value::String(s)) if s == "_last" => Missing::Last,
            Some(Value::String(s)) if s == "_first" => Missing::First,
            Some(v) => Missing::Value(SortValue::from_json(v, &key).ok_or_else(|| {
                SearchError::dsl(&path, format!("missing value {v} does not fit the field"))
            })?),
        };
        let mode = match options.get("mode").and_then(Value::as_str) {
            None if desc => Mode::Max,
            None => Mode::Min,
            Some("min") => Mode::Min,
            Some("max") => Mode::Max,
            Some("avg") => Mode::Avg,
            Some("sum") => Mode::Sum,
            Some("median") => Mode::Median,
            Some(m) => return Err(SearchError::dsl(path, format!("unknown sort mode '{m}'"))),
        };
        specs.push(SortSpec {
            key,
            desc,
            missing,
            mode,
        });
    }
    Ok(specs)
}

/// Reads `search_after`: one value per sort key.
pub fn search_after(value: &Value, specs: &[SortSpec]) -> Result<Vec<SortValue>, SearchError> {
    let Value::Array(values) = value else {
        return Err(SearchError::dsl(
            "search_after",
            "search_after is a list of sort values",
        ));
    };
    if specs.is_empty() {
        return Err(SearchError::dsl(
            "search_after",
            "search_after needs a sort",
        ));
    }
    if values.len() != specs.len() {
        return Err(SearchError::dsl(
            "search_after",
            format!(
                "search_after has {} value(s) and the sort has {} field(s)",
                values.len(),
                specs.len()
            ),
        ));
    }
    values
        .iter()
        .zip(specs)
        .map(|(v, s)| {
            // The value a hit shows for a missing one stands for missing.
            if *v == SortValue::Missing.to_json(s) {
                return Ok(SortValue::Missing);
            }
            SortValue::from_json(v, &s.key)
                .ok_or_else(|| SearchError::dsl("search_after", format!("{v} is not a sort value")))
        })
        .collect()
}

/// Orders two documents' sort values under the specs.
fn compare(a: &[SortValue], b: &[SortValue], specs: &[SortSpec]) -> Ordering {
    for ((x, y), spec) in a.iter().zip(b).zip(specs) {
        let order = match (x, y) {
            (SortValue::Missing, SortValue::Missing) => Ordering::Equal,
            // Missing goes where `missing` says, whatever the direction.
            (SortValue::Missing, _) => {
                if spec.missing == Missing::First {
                    Ordering::Less
                } else {
                    Ordering::Greater
                }
            }
            (_, SortValue::Missing) => {
                if spec.missing == Missing::First {
                    Ordering::Greater
                } else {
                    Ordering::Less
                }
            }
            (x, y) if spec.desc => y.cmp_present(x),
            (x, y) => x.cmp_present(y),
        };
        if order != Ordering::Equal {
            return order;
        }
    }
    Ordering::Equal
}

/// One collected hit.
struct Entry {
    values: Vec<SortValue>,
    score: Score,
    address: DocAddress,
    specs: Arc<Vec<SortSpec>>,
}

impl Entry {
    fn order(&self, other: &Self) -> Ordering {
        compare(&self.values, &other.values, &self.specs).then_with(|| {
            (self.address.segment_ord, self.address.doc_id)
                .cmp(&(other.address.segment_ord, other.address.doc_id))
        })
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.order(other) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        self.order(other)
    }
}

/// A sorted hit.
pub struct Sorted {
    /// Its sort values, as a hit's `sort` shows them.
    pub values: Vec<Value>,
    /// Its score.
    pub score: Score,
    /// Where it is.
    pub address: DocAddress,
    /// When collapsing, the value of its group (`null` for documents without one).
    pub group: Option<Value>,
}

/// Collects the first `limit` matching documents in sort order, after `after` if given; when
/// collapsing, the first `limit` groups, each by its best document.
pub struct SortCollector {
    pub specs: Arc<Vec<SortSpec>>,
    pub limit: usize,
    pub after: Option<Vec<SortValue>>,
    pub collapse: Option<CollapseOn>,
}

/// The field a search collapses on: its column (tantivy name) and kind (a keyword or a number).
#[derive(Debug, Clone, PartialEq)]
pub struct CollapseOn {
    pub column: String,
    pub kind: FieldKind,
    /// Its path, for messages.
    pub path: String,
}

/// The bounded heap of one segment or of all; when collapsing, the best entry of each group
/// (keyed by the group value's JSON text).
pub struct Best {
    heap: BinaryHeap<Entry>,
    limit: usize,
    groups: Option<HashMap<String, (Value, Entry)>>,
    /// A document with several values in the collapse field was seen.
    several_values: bool,
}

impl Best {
    fn new(limit: usize, collapsing: bool) -> Best {
        Best {
            heap: BinaryHeap::new(),
            limit,
            groups: collapsing.then(HashMap::new),
            several_values: false,
        }
    }

    fn push(&mut self, entry: Entry) {
        if self.limit == 0 {
            return;
        }
        if self.heap.len() < self.limit {
            self.heap.push(entry);
        } else if self.heap.peek().is_some_and(|worst| entry < *worst) {
            self.heap.pop();
            self.heap.push(entry);
        }
    }

    /// Keeps `entry` as its group's best if it is better than the one kept.
    fn push_grouped(&mut self, group: Value, entry: Entry) {
        let Some(groups) = self.groups.as_mut() else {
            return;
        };
        match groups.entry(group.to_string()) {
            std::collections::hash_map::Entry::Occupied(mut kept) => {
                if entry < kept.get().1 {
                    kept.insert((group, entry));
                }
            }
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert((group, entry));
            }
        }
    }
}

enum ColumnOf {
    I64(Column<i64>),
    F64(Column<f64>),
    Date(Column<DateTime>),
    Bool(Column<bool>),
    Str(StrColumn),
    None,
}

pub struct SegmentSorter {
    specs: Arc<Vec<SortSpec>>,
    columns: Vec<ColumnOf>,
    segment: SegmentOrdinal,
    after: Option<Vec<SortValue>>,
    best: Best,
    /// When collapsing, the collapse field's column.
    group: Option<ColumnOf>,
}

/// A document's value in the collapse field's column: `null` when it has none; `None` when it
/// has several.
fn group_value(column: &ColumnOf, doc: DocId) -> Option<Value> {
    fn one<T>(mut values: impl Iterator<Item = T>, show: impl Fn(T) -> Value) -> Option<Value> {
        match (values.next(), values.next()) {
            (None, _) => Some(Value::Null),
            (Some(v), None) => Some(show(v)),
            (Some(_), Some(_)) => None,
        }
    }
    match column {
        ColumnOf::I64(c) => one(c.values_for_doc(doc), |v| json!(v)),
        ColumnOf::F64(c) => one(c.values_for_doc(doc), |v| json!(v)),
        ColumnOf::Date(c) => one(c.values_for_doc(doc), |v| json!(v.into_timestamp_millis())),
        ColumnOf::Bool(c) => one(c.values_for_doc(doc), |v| json!(v)),
        ColumnOf::Str(c) => one(c.term_ords(doc), |o| {
            let mut text = String::new();
            match c.ord_to_str(o, &mut text) {
                Ok(true) => Value::String(text),
                _ => Value::Null,
            }
        }),
        ColumnOf::None => Some(Value::Null),
    }
}

fn pick(mut values: Vec<f64>, mode: Mode) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    Some(match mode {
        Mode::Min => values.iter().copied().fold(f64::INFINITY, f64::min),
        Mode::Max => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        Mode::Sum => values.iter().sum(),
        Mode::Avg => values.iter().sum::<f64>() / values.len() as f64,
        Mode::Median => {
            values.sort_by(f64::total_cmp);
            let n = values.len();
            if n % 2 == 1 {
                values[n / 2]
            } else {
                (values[n / 2 - 1] + values[n / 2]) / 2.0
            }
        }
    })
}

impl SegmentSorter {
    fn value(&self, i: usize, doc: DocId, score: Score) -> SortValue {
        let spec = &self.specs[i];
        let whole = |v: Vec<i64>| -> SortValue {
            let as_f: Vec<f64> = v.iter().map(|x| *x as f64).collect();
            match spec.mode {
                Mode::Min => v
                    .into_iter()
                    .min()
                    .map_or(SortValue::Missing, SortValue::Int),
                Mode::Max => v
                    .into_iter()
                    .max()
                    .map_or(SortValue::Missing, SortValue::Int),
                Mode::Sum => SortValue::Int(v.iter().sum()),
                mode => pick(as_f, mode)
                    .map_or(SortValue::Missing, |f| SortValue::Int(f.round() as i64)),
            }
        };
        let value = match (&spec.key, &self.columns[i]) {
            (Key::Score, _) => SortValue::Float(f64::from(score)),
            (Key::Doc, _) => SortValue::Int((i64::from(self.segment) << 32) | i64::from(doc)),
            (_, ColumnOf::I64(c)) => whole(c.values_for_doc(doc).collect()),
            (_, ColumnOf::Date(c)) => whole(
                c.values_for_doc(doc)
                    .map(|d| d.into_timestamp_millis())
                    .collect(),
            ),
            (_, ColumnOf::Bool(c)) => whole(c.values_for_doc(doc).map(i64::from).collect()),
            (_, ColumnOf::F64(c)) => pick(c.values_for_doc(doc).collect(), spec.mode)
                .map_or(SortValue::Missing, SortValue::Float),
            (_, ColumnOf::Str(c)) => {
                let ords = c.term_ords(doc);
                let ord = if spec.desc { ords.max() } else { ords.min() };
                let mut text = String::new();
                match ord {
                    Some(o) if c.ord_to_str(o, &mut text).unwrap_or(false) => SortValue::Text(text),
                    _ => SortValue::Missing,
                }
            }
            (_, ColumnOf::None) => SortValue::Missing,
        };
        match (&value, &spec.missing) {
            (SortValue::Missing, Missing::Value(v)) => v.clone(),
            _ => value,
        }
    }
}

impl SegmentCollector for SegmentSorter {
    type Fruit = Best;

    fn collect(&mut self, doc: DocId, score: Score) {
        let values: Vec<SortValue> = (0..self.specs.len())
            .map(|i| self.value(i, doc, score))
            .collect();
        if let Some(after) = &self.after
            && compare(&values, after, &self.specs) != Ordering::Greater
        {
            return;
        }
        let entry = Entry {
            values,
            score,
            address: DocAddress::new(self.segment, doc),
            specs: Arc::clone(&self.specs),
        };
        match &self.group {
            None => self.best.push(entry),
            Some(column) => match group_value(column, doc) {
                Some(group) => self.best.push_grouped(group, entry),
                None => self.best.several_values = true,
            },
        }
    }

    fn harvest(self) -> Best {
        self.best
    }
}

impl Collector for SortCollector {
    type Fruit = Vec<Sorted>;
    type Child = SegmentSorter;

    fn for_segment(
        &self,
        segment: SegmentOrdinal,
        reader: &SegmentReader,
    ) -> tantivy::Result<SegmentSorter> {
        let fast = reader.fast_fields();
        let mut columns = Vec::with_capacity(self.specs.len());
        for spec in self.specs.iter() {
            columns.push(match &spec.key {
                Key::Field(Some((name, kind))) => match kind {
                    FieldKind::Integer => fast
                        .column_opt::<i64>(name)?
                        .map_or(ColumnOf::None, ColumnOf::I64),
                    FieldKind::Float => fast
                        .column_opt::<f64>(name)?
                        .map_or(ColumnOf::None, ColumnOf::F64),
                    FieldKind::Date => fast
                        .column_opt::<DateTime>(name)?
                        .map_or(ColumnOf::None, ColumnOf::Date),
                    FieldKind::Boolean => fast
                        .column_opt::<bool>(name)?
                        .map_or(ColumnOf::None, ColumnOf::Bool),
                    FieldKind::Keyword => fast.str(name)?.map_or(ColumnOf::None, ColumnOf::Str),
                    _ => ColumnOf::None,
                },
                _ => ColumnOf::None,
            });
        }
        let group = match &self.collapse {
            None => None,
            Some(on) => Some(match on.kind {
                FieldKind::Integer => fast
                    .column_opt::<i64>(&on.column)?
                    .map_or(ColumnOf::None, ColumnOf::I64),
                FieldKind::Float => fast
                    .column_opt::<f64>(&on.column)?
                    .map_or(ColumnOf::None, ColumnOf::F64),
                FieldKind::Keyword => fast.str(&on.column)?.map_or(ColumnOf::None, ColumnOf::Str),
                _ => ColumnOf::None,
            }),
        };
        Ok(SegmentSorter {
            specs: Arc::clone(&self.specs),
            columns,
            segment,
            after: self.after.clone(),
            best: Best::new(self.limit, group.is_some()),
            group,
        })
    }

    fn requires_scoring(&self) -> bool {
        self.specs.iter().any(|s| s.key == Key::Score)
    }

    fn merge_fruits(&self, fruits: Vec<Best>) -> tantivy::Result<Vec<Sorted>> {
        let mut all = Best::new(self.limit, self.collapse.is_some());
        for fruit in fruits {
            all.several_values |= fruit.several_values;
            for entry in fruit.heap {
                all.push(entry);
            }
            for (_, (group, entry)) in fruit.groups.into_iter().flatten() {
                all.push_grouped(group, entry);
            }
        }
        if let (true, Some(on)) = (all.several_values, &self.collapse) {
            return Err(tantivy::TantivyError::InvalidArgument(format!(
                "failed to collapse {}, the collapse field must be single valued",
                on.path
            )));
        }
        let specs = Arc::clone(&self.specs);
        let shown = |e: &Entry| -> Vec<Value> {
            e.values
                .iter()
                .zip(specs.iter())
                .map(|(v, s)| v.to_json(s))
                .collect()
        };
        if let Some(groups) = all.groups {
            let mut best: Vec<(Value, Entry)> = groups.into_values().collect();
            best.sort_by(|a, b| a.1.cmp(&b.1));
            best.truncate(self.limit);
            return Ok(best
                .into_iter()
                .map(|(group, e)| Sorted {
                    values: shown(&e),
                    score: e.score,
                    address: e.address,
                    group: Some(group),
                })
                .collect());
        }
        Ok(all
            .heap
            .into_sorted_vec()
            .into_iter()
            .map(|e| Sorted {
                values: shown(&e),
                score: e.score,
                address: e.address,
                group: None,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(desc: bool, missing: Missing) -> SortSpec {
        SortSpec {
            key: Key::Field(Some(("f0".into(), FieldKind::Integer))),
            desc,
            missing,
            mode: Mode::Min,
        }
    }

    #[test]
    fn missing_values_go_last_in_both_directions_unless_asked() {
        let (one, none) = ([SortValue::Int(1)], [SortValue::Missing]);
        for desc in [false, true] {
            assert_eq!(
                compare(&one, &none, &[spec(desc, Missing::Last)]),
                Ordering::Less
            );
            assert_eq!(
                compare(&one, &none, &[spec(desc, Missing::First)]),
                Ordering::Greater
            );
        }
        let (a, b) = ([SortValue::Int(1)], [SortValue::Int(2)]);
        assert_eq!(
            compare(&a, &b, &[spec(true, Missing::Last)]),
            Ordering::Greater
        );
        assert_eq!(pick(vec![3.0, 1.0, 2.0], Mode::Median), Some(2.0));
        assert_eq!(pick(vec![], Mode::Avg), None);
    }
}
