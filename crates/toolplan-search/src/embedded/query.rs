//! OpenSearch query DSL → tantivy queries.
//!
//! Supported: `match` (operator, fuzziness, minimum_should_match), `match_phrase` (slop),
//! `match_phrase_prefix`, `multi_match` (best_fields / most_fields, `field^boost`), `term`, `terms`,
//! `range` (numbers, dates with date math, keywords), `bool` (must / should / filter / must_not,
//! minimum_should_match), `exists`, `prefix`, `wildcard`, `ids`, `match_all`, `match_none`,
//! `constant_score`, `dis_max`, `boost` on any clause. A clause that names a field the mapping does not
//! have matches nothing, as in OpenSearch. Everything else is an error naming the clause and where it
//! is — never ignored. The [`SearchLimits`] bound what a body may ask for (nesting, clauses, terms,
//! slop, pattern length); going over one is an error naming the limit.

use std::cell::Cell;
use std::ops::Bound;

use chrono::{DateTime as ChronoDate, Utc};
use serde_json::{Map, Value};
use tantivy::query::{
    AllQuery, BooleanQuery, BoostQuery, ConstScoreQuery, DisjunctionMaxQuery, EmptyQuery,
    FuzzyTermQuery, Occur, PhrasePrefixQuery, PhraseQuery, Query, RangeQuery, RegexQuery,
    TermQuery, wildcard_query_to_regex_str,
};
use tantivy::schema::IndexRecordOption;
use tantivy::tokenizer::TokenStream;
use tantivy::{DateTime, Index, Term};

use super::schema::{IndexSchema, Indexed, boolean, float, integer, scalar_text};
use crate::datemath;
use crate::error::SearchError;
use crate::limits::{SearchLimits, within};
use crate::mapping::FieldKind;

/// Clauses OpenSearch has that this backend does not run.
pub const UNSUPPORTED: &[&str] = &[
    "nested",
    "neural",
    "neural_sparse",
    "knn",
    "hybrid",
    "script",
    "script_score",
    "function_score",
    "has_child",
    "has_parent",
    "parent_id",
    "geo_distance",
    "geo_bounding_box",
    "geo_polygon",
    "geo_shape",
    "more_like_this",
    "percolate",
    "rank_feature",
    "distance_feature",
    "wrapper",
    "pinned",
    "intervals",
    "query_string",
    "simple_query_string",
    "regexp",
    "fuzzy",
    "match_bool_prefix",
    "combined_fields",
    "boosting",
    "span_term",
    "span_near",
    "span_or",
    "span_not",
    "span_first",
    "span_multi",
    "span_containing",
    "span_within",
    "field_masking_span",
    "terms_set",
    "type",
];

/// What a translation needs.
pub struct Ctx<'a> {
    /// The index (for its tokenizers).
    pub index: &'a Index,
    /// Its schema.
    pub schema: &'a IndexSchema,
    /// "now" for date math.
    pub now: ChronoDate<Utc>,
    /// What a body may ask for.
    pub limits: &'a SearchLimits,
    /// How deep the clause being translated is.
    depth: Cell<usize>,
    /// Clauses counted so far (against `max_clause_count`).
    clauses: Cell<usize>,
    /// Whether a phrase query was made (its documents are costly to match).
    phrase: Cell<bool>,
}

type Q = Box<dyn Query>;

fn none() -> Q {
    Box::new(EmptyQuery)
}

impl<'a> Ctx<'a> {
    /// A translation context.
    pub fn new(
        index: &'a Index,
        schema: &'a IndexSchema,
        now: ChronoDate<Utc>,
        limits: &'a SearchLimits,
    ) -> Self {
        Self {
            index,
            schema,
            now,
            limits,
            depth: Cell::new(0),
            clauses: Cell::new(0),
            phrase: Cell::new(false),
        }
    }

    /// Whether any translated query matches phrases (each of their documents costs position work).
    pub fn has_phrase(&self) -> bool {
        self.phrase.get()
    }

    /// Counts `n` more clauses against `max_clause_count`.
    fn count_clauses(&self, n: usize, path: &str) -> Result<(), SearchError> {
        let total = self.clauses.get().saturating_add(n);
        self.clauses.set(total);
        let max = self.limits.max_clause_count;
        within(total, max, "max_clause_count", path, || {
            format!("too many clauses: the query has more than {max}")
        })
    }

    /// Translates a query clause found at `path`.
    pub fn query(&self, clause: &Value, path: &str) -> Result<Q, SearchError> {
        let depth = self.depth.get() + 1;
        let max = self.limits.max_nested_depth;
        within(depth, max, "max_nested_depth", path, || {
            format!("the query nests more than {max} levels deep")
        })?;
        self.depth.set(depth);
        let q = self.clause(clause, path);
        self.depth.set(depth - 1);
        q
    }

    fn clause(&self, clause: &Value, path: &str) -> Result<Q, SearchError> {
        let Value::Object(obj) = clause else {
            return Err(SearchError::dsl(path, "a query clause must be an object"));
        };
        let mut entries = obj.iter();
        let (Some((name, body)), None) = (entries.next(), entries.next()) else {
            return Err(SearchError::dsl(
                path,
                format!(
                    "a query clause names exactly one query type, found {}",
                    obj.len()
                ),
            ));
        };
        let here = format!("{path}.{name}");
        let q = match name.as_str() {
            "match_all" => with_boost(Box::new(AllQuery), body),
            "match_none" => none(),
            "bool" => self.bool_query(body, &here)?,
            "match" => {
                self.field_clause(body, &here, "query", |f, v, p| self.match_query(f, v, p))?
            }
            "match_phrase" => {
                self.field_clause(body, &here, "query", |f, v, p| self.phrase(f, v, p, false))?
            }
            "match_phrase_prefix" => {
                self.field_clause(body, &here, "query", |f, v, p| self.phrase(f, v, p, true))?
            }
            "multi_match" => self.multi_match(body, &here)?,
            "term" => {
                self.field_clause(body, &here, "value", |f, v, p| self.term_query(f, v, p))?
            }
            "terms" => self.terms(body, &here)?,
            "range" => self.field_clause(body, &here, "", |f, v, p| self.range(f, v, p))?,
            "exists" => self.exists(body, &here)?,
            "prefix" => {
                self.field_clause(body, &here, "value", |f, v, p| self.pattern(f, v, p, true))?
            }
            "wildcard" => {
                self.field_clause(body, &here, "value", |f, v, p| self.pattern(f, v, p, false))?
            }
            "ids" => self.ids(body, &here)?,
            "constant_score" => {
                let filter = body
                    .get("filter")
                    .ok_or_else(|| SearchError::dsl(&here, "constant_score needs a filter"))?;
                let boost = body.get("boost").and_then(Value::as_f64).unwrap_or(1.0) as f32;
                Box::new(ConstScoreQuery::new(
                    self.query(filter, &format!("{here}.filter"))?,
                    boost,
                ))
            }
            "dis_max" => {
                let queries = clauses(body.get("queries"), &format!("{here}.queries"))?;
                self.count_clauses(queries.len(), &here)?;
                let tie = body
                    .get("tie_breaker")
                    .and_then(Value::as_f64)
                    .unwrap_or(0.0) as f32;
                let parts = queries
                    .iter()
                    .map(|(q, p)| self.query(q, p))
                    .collect::<Result<Vec<_>, _>>()?;
                with_boost(
                    Box::new(DisjunctionMaxQuery::with_tie_breaker(parts, tie)),
                    body,
                )
            }
            n if UNSUPPORTED.contains(&n) => {
                return Err(SearchError::Unsupported {
                    path: here,
                    clause: n.to_owned(),
                });
            }
            other => {
                return Err(SearchError::dsl(path, format!("unknown query [{other}]")));
            }
        };
        Ok(q)
    }

    /// `{"field": value}` or `{"field": {"<main>": value, …options}}`: resolves the field and calls
    /// `build` with the options object (the short form becomes `{"<main>": value}`).
    fn field_clause(
        &self,
        body: &Value,
        path: &str,
        main: &str,
        build: impl Fn(&Indexed, &Map<String, Value>, &str) -> Result<Q, SearchError>,
    ) -> Result<Q, SearchError> {
        let Value::Object(obj) = body else {
            return Err(SearchError::dsl(path, "expected {\"<field>\": …}"));
        };
        let fields: Vec<(&String, &Value)> =
            obj.iter().filter(|(k, _)| k.as_str() != "boost").collect();
        let [(name, value)] = fields.as_slice() else {
            return Err(SearchError::dsl(path, "expected exactly one field"));
        };
        let options = match value {
            Value::Object(o) if !main.is_empty() && !o.contains_key(main) && o.len() == 1 => {
                // `{"value": …}` style with another key name is an error, as in OpenSearch.
                return Err(SearchError::dsl(
                    format!("{path}.{name}"),
                    format!("expected \"{main}\""),
                ));
            }
            Value::Object(o) => o.clone(),
            scalar if !main.is_empty() => {
                let mut o = Map::new();
                o.insert(main.to_owned(), (*scalar).clone());
                o
            }
            _ => {
                return Err(SearchError::dsl(
                    format!("{path}.{name}"),
                    "expected an object of options",
                ));
            }
        };
        let here = format!("{path}.{name}");
        match self.field(name, &here)? {
            Some(field) => Ok(with_boost(
                build(field, &options, &here)?,
                &Value::Object(options),
            )),
            None => Ok(none()),
        }
    }

    /// The indexed field at `name`; `None` when the mapping does not have it (matches nothing).
    fn field(&self, name: &str, path: &str) -> Result<Option<&Indexed>, SearchError> {
        if let Some(f) = self.schema.fields.get(name) {
            return Ok(Some(f));
        }
        match self.schema.mapping.field(name) {
            Some(spec) => Err(SearchError::dsl(
                path,
                format!(
                    "field '{name}' is of type {}, which the embedded backend does not index",
                    spec.kind.name()
                ),
            )),
            None => Ok(None),
        }
    }

    fn analyze(&self, f: &Indexed, text: &str, path: &str) -> Result<Vec<String>, SearchError> {
        let mut analyzer = self
            .index
            .tokenizer_for_field(f.field)
            .map_err(|e| SearchError::dsl(path, e.to_string()))?;
        let mut stream = analyzer.token_stream(text);
        let mut tokens = Vec::new();
        while let Some(t) = stream.next() {
            tokens.push(t.text.clone());
        }
        Ok(tokens)
    }

    fn match_query(
        &self,
        f: &Indexed,
        o: &Map<String, Value>,
        path: &str,
    ) -> Result<Q, SearchError> {
        let value = o
            .get("query")
            .ok_or_else(|| SearchError::dsl(path, "match needs a query"))?;
        if f.spec.kind != FieldKind::Text {
            // On exact fields, match compares the whole value.
            return self.term_query(f, o, path).or_else(|_| Ok(none()));
        }
        let text =
            scalar_text(value).ok_or_else(|| SearchError::dsl(path, "query must be text"))?;
        let tokens = self.analyze(f, &text, path)?;
        self.count_clauses(tokens.len(), path)?;
        let fuzziness = o.get("fuzziness");
        let parts: Vec<Q> = tokens
            .iter()
            .map(|t| -> Result<Q, SearchError> {
                let term = Term::from_field_text(f.field, t);
                Ok(match fuzzy_distance(fuzziness, t, path)? {
                    0 => Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs)),
                    d => Box::new(FuzzyTermQuery::new(term, d, true)),
                })
            })
            .collect::<Result<_, _>>()?;
        let and = match o.get("operator").and_then(Value::as_str) {
            None => false,
            Some(op) if op.eq_ignore_ascii_case("or") => false,
            Some(op) if op.eq_ignore_ascii_case("and") => true,
            Some(op) => return Err(SearchError::dsl(path, format!("unknown operator '{op}'"))),
        };
        let n = parts.len();
        if n == 0 {
            return Ok(none());
        }
        let occur = if and { Occur::Must } else { Occur::Should };
        let clauses: Vec<(Occur, Q)> = parts.into_iter().map(|q| (occur, q)).collect();
        match (and, o.get("minimum_should_match")) {
            (false, Some(msm)) => Ok(Box::new(BooleanQuery::with_minimum_required_clauses(
                clauses,
                minimum_should_match(msm, n, path)?,
            ))),
            _ => Ok(Box::new(BooleanQuery::new(clauses))),
        }
    }

    fn phrase(
        &self,
        f: &Indexed,
        o: &Map<String, Value>,
        path: &str,
        prefix: bool,
    ) -> Result<Q, SearchError> {
        let text = o
            .get("query")
            .and_then(scalar_text)
            .ok_or_else(|| SearchError::dsl(path, "the phrase must be text"))?;
        if f.spec.kind != FieldKind::Text {
            let mut exact = Map::new();
            exact.insert("value".into(), Value::String(text));
            return self.term_query(f, &exact, path);
        }
        let terms: Vec<Term> = self
            .analyze(f, &text, path)?
            .iter()
            .map(|t| Term::from_field_text(f.field, t))
            .collect();
        Ok(match (terms.len(), prefix) {
            (0, _) => none(),
            (1, false) => Box::new(TermQuery::new(
                terms[0].clone(),
                IndexRecordOption::WithFreqs,
            )),
            (1, true) => {
                let t = terms[0].value().as_str().unwrap_or_default().to_owned();
                Box::new(
                    RegexQuery::from_pattern(&format!("{}.*", regex_escape(&t)), f.field)
                        .map_err(|e| SearchError::dsl(path, e.to_string()))?,
                )
            }
            (_, true) => {
                self.phrase.set(true);
                Box::new(PhrasePrefixQuery::new(terms))
            }
            (_, false) => {
                self.phrase.set(true);
                let mut q = PhraseQuery::new(terms);
                if let Some(slop) = self.slop(o.get("slop"), path)? {
                    q.set_slop(slop);
                }
                Box::new(q)
            }
        })
    }

    /// A phrase's `slop`, refused above the limit.
    fn slop(&self, v: Option<&Value>, path: &str) -> Result<Option<u32>, SearchError> {
        let Some(v) = v.filter(|v| !v.is_null()) else {
            return Ok(None);
        };
        let max = self.limits.slop();
        match v.as_u64() {
            Some(slop) if slop <= u64::from(max) => Ok(u32::try_from(slop).ok()),
            Some(slop) => Err(SearchError::dsl(
                format!("{path}.slop"),
                format!("slop {slop} is more than {max} (search limit max_slop)"),
            )),
            None => Err(SearchError::dsl(
                format!("{path}.slop"),
                format!("slop must be a whole number of at least 0, found {v}"),
            )),
        }
    }

    fn multi_match(&self, body: &Value, path: &str) -> Result<Q, SearchError> {
        let query = body
            .get("query")
            .ok_or_else(|| SearchError::dsl(path, "multi_match needs a query"))?;
        let fields: Vec<String> = match body.get("fields") {
            Some(Value::Array(f)) => f
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            Some(Value::String(f)) => vec![f.clone()],
            None => self
                .schema
                .mapping
                .fields()
                .iter()
                .filter(|f| f.kind == FieldKind::Text)
                .map(|f| f.path.clone())
                .collect(),
            Some(_) => {
                return Err(SearchError::dsl(
                    path,
                    "fields must be a list of field names",
                ));
            }
        };
        let kind = body
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("best_fields");
        let phrase = match kind {
            "best_fields" | "most_fields" => false,
            "phrase" => true,
            other => {
                return Err(SearchError::Unsupported {
                    path: format!("{path}.type"),
                    clause: format!("multi_match type {other}"),
                });
            }
        };
        let mut parts: Vec<Q> = Vec::new();
        for spec in &fields {
            let (name, boost) = match spec.split_once('^') {
                Some((n, b)) => (
                    n,
                    b.parse::<f32>()
                        .map_err(|_| SearchError::dsl(path, format!("bad boost in '{spec}'")))?,
                ),
                None => (spec.as_str(), 1.0),
            };
            // Field patterns (`title*`) expand over the mapping.
            let names: Vec<String> = if name.contains('*') {
                let re = wildcard_regex(name);
                self.schema
                    .mapping
                    .fields()
                    .iter()
                    .map(|f| f.path.clone())
                    .filter(|p| re.is_match(p))
                    .collect()
            } else {
                vec![name.to_owned()]
            };
            for n in names {
                let Some(f) = self.field(&n, path)? else {
                    continue;
                };
                self.count_clauses(1, path)?;
                let mut o: Map<String, Value> = body.as_object().cloned().unwrap_or_default();
                o.insert("query".into(), query.clone());
                o.remove("fields");
                let q = if phrase {
                    self.phrase(f, &o, path, false)?
                } else {
                    self.match_query(f, &o, path)?
                };
                parts.push(if boost == 1.0 {
                    q
                } else {
                    Box::new(BoostQuery::new(q, boost))
                });
            }
        }
        if parts.is_empty() {
            return Ok(none());
        }
        Ok(match kind {
            "most_fields" => Box::new(BooleanQuery::new(
                parts.into_iter().map(|q| (Occur::Should, q)).collect(),
            )),
            _ => {
                let tie = body
                    .get("tie_breaker")
                    .and_then(Value::as_f64)
                    .unwrap_or(0.0) as f32;
                Box::new(DisjunctionMaxQuery::with_tie_breaker(parts, tie))
            }
        })
    }

    fn term_query(
        &self,
        f: &Indexed,
        o: &Map<String, Value>,
        path: &str,
    ) -> Result<Q, SearchError> {
        let v = o
            .get("value")
            .or_else(|| o.get("query"))
            .ok_or_else(|| SearchError::dsl(path, "term needs a value"))?;
        if f.spec.kind == FieldKind::Date {
            // Dates are exact to the millisecond only in the fast column: an inclusive range of one.
            let d = self.date(v, false, path)?;
            let t = Term::from_field_date(f.field, d);
            return Ok(Box::new(RangeQuery::new(
                Bound::Included(t.clone()),
                Bound::Included(t),
            )));
        }
        if o.get("case_insensitive").and_then(Value::as_bool) == Some(true)
            && matches!(f.spec.kind, FieldKind::Keyword | FieldKind::Text)
        {
            let text = scalar_text(v).unwrap_or_default();
            return Ok(Box::new(
                RegexQuery::from_pattern(&format!("(?i){}", regex_escape(&text)), f.field)
                    .map_err(|e| SearchError::dsl(path, e.to_string()))?,
            ));
        }
        match self.term(f, v, path)? {
            Some(t) => Ok(Box::new(TermQuery::new(t, IndexRecordOption::WithFreqs))),
            None => Ok(none()),
        }
    }

    /// The term for an exact value, `None` when the value cannot occur in the field (text in a
    /// number field matches nothing, as a failed conversion would in OpenSearch's lenient mode).
    fn term(&self, f: &Indexed, v: &Value, path: &str) -> Result<Option<Term>, SearchError> {
        Ok(match f.spec.kind {
            FieldKind::Text | FieldKind::Keyword => {
                scalar_text(v).map(|s| Term::from_field_text(f.field, &s))
            }
            FieldKind::Integer => match integer(v) {
                Some(i) => Some(Term::from_field_i64(f.field, i)),
                None if float(v).is_some() => None,
                None => return Err(self.not_a(f, "number", v, path)),
            },
            FieldKind::Float => match float(v) {
                Some(x) => Some(Term::from_field_f64(f.field, x)),
                None => return Err(self.not_a(f, "number", v, path)),
            },
            FieldKind::Boolean => match boolean(v) {
                Some(b) => Some(Term::from_field_bool(f.field, b)),
                None => return Err(self.not_a(f, "boolean", v, path)),
            },
            FieldKind::Date => Some(Term::from_field_date(f.field, self.date(v, false, path)?)),
            FieldKind::Unsupported(_) => None,
        })
    }

    fn not_a(&self, f: &Indexed, what: &str, v: &Value, path: &str) -> SearchError {
        SearchError::dsl(
            path,
            format!(
                "{v} is not a {what}, and field '{}' is {}",
                f.spec.path,
                f.spec.kind.name()
            ),
        )
    }

    fn date(&self, v: &Value, round_up: bool, path: &str) -> Result<DateTime, SearchError> {
        let d = match v {
            Value::String(s) => {
                datemath::eval(s, self.now, round_up).map_err(|e| SearchError::dsl(path, e))?
            }
            other => datemath::date_from_json(other)
                .ok_or_else(|| SearchError::dsl(path, format!("{other} is not a date")))?,
        };
        Ok(DateTime::from_timestamp_millis(d.timestamp_millis()))
    }

    fn terms(&self, body: &Value, path: &str) -> Result<Q, SearchError> {
        let Value::Object(obj) = body else {
            return Err(SearchError::dsl(path, "expected {\"<field>\": [values]}"));
        };
        let fields: Vec<(&String, &Value)> =
            obj.iter().filter(|(k, _)| k.as_str() != "boost").collect();
        let [(name, Value::Array(values))] = fields.as_slice() else {
            return Err(SearchError::dsl(
                path,
                "expected exactly one field with an array of values",
            ));
        };
        let here = format!("{path}.{name}");
        self.check_terms(values.len(), &here)?;
        let Some(f) = self.field(name, &here)? else {
            return Ok(none());
        };
        let mut parts: Vec<(Occur, Q)> = Vec::new();
        for (i, v) in values.iter().enumerate() {
            let mut o = Map::new();
            o.insert("value".into(), v.clone());
            parts.push((
                Occur::Should,
                self.term_query(f, &o, &format!("{here}[{i}]"))?,
            ));
        }
        if parts.is_empty() {
            return Ok(none());
        }
        Ok(with_boost(
            Box::new(ConstScoreQuery::new(
                Box::new(BooleanQuery::new(parts)),
                1.0,
            )),
            body,
        ))
    }

    /// Refuses more values than `max_terms_count`.
    fn check_terms(&self, n: usize, path: &str) -> Result<(), SearchError> {
        let max = self.limits.max_terms_count;
        within(n, max, "max_terms_count", path, || {
            format!("{n} values are more than {max}")
        })
    }

    fn range(&self, f: &Indexed, o: &Map<String, Value>, path: &str) -> Result<Q, SearchError> {
        let mut lower: Option<(&Value, bool)> = None; // (value, inclusive)
        let mut upper: Option<(&Value, bool)> = None;
        for (k, v) in o {
            match k.as_str() {
                "gt" => lower = Some((v, false)),
                "gte" | "from" => lower = Some((v, true)),
                "lt" => upper = Some((v, false)),
                "lte" | "to" => upper = Some((v, true)),
                "boost" | "format" | "relation" | "time_zone" | "include_lower"
                | "include_upper" => {}
                other => {
                    return Err(SearchError::dsl(
                        path,
                        format!("unknown range parameter [{other}]"),
                    ));
                }
            }
        }
        let lower = lower.filter(|(v, _)| !v.is_null());
        let upper = upper.filter(|(v, _)| !v.is_null());
        if lower.is_none() && upper.is_none() {
            // No bounds: every document with a value.
            return Ok(self.has_value(&f.spec.path));
        }
        let field = f.field;
        let bound =
            |b: Option<(&Value, bool)>, is_lower: bool| -> Result<Bound<Term>, SearchError> {
                let Some((v, inclusive)) = b else {
                    return Ok(Bound::Unbounded);
                };
                let term = match f.spec.kind {
                    FieldKind::Integer => {
                        let x = float(v).ok_or_else(|| self.not_a(f, "number", v, path))?;
                        // Whole-number bounds of a fractional value: round toward the inside.
                        let (n, inclusive) = if x.fract() == 0.0 {
                            (x, inclusive)
                        } else if is_lower {
                            (x.ceil(), true)
                        } else {
                            (x.floor(), true)
                        };
                        let t = Term::from_field_i64(field, n.clamp(-9.2e18, 9.2e18) as i64);
                        return Ok(if inclusive {
                            Bound::Included(t)
                        } else {
                            Bound::Excluded(t)
                        });
                    }
                    FieldKind::Float => Term::from_field_f64(
                        field,
                        float(v).ok_or_else(|| self.not_a(f, "number", v, path))?,
                    ),
                    // gt and lte round date math up, gte and lt down (OpenSearch's rule).
                    FieldKind::Date => {
                        Term::from_field_date(field, self.date(v, is_lower != inclusive, path)?)
                    }
                    FieldKind::Boolean => Term::from_field_bool(
                        field,
                        boolean(v).ok_or_else(|| self.not_a(f, "boolean", v, path))?,
                    ),
                    FieldKind::Keyword | FieldKind::Text => {
                        Term::from_field_text(field, &scalar_text(v).unwrap_or_default())
                    }
                    FieldKind::Unsupported(_) => return Ok(Bound::Unbounded),
                };
                Ok(if inclusive {
                    Bound::Included(term)
                } else {
                    Bound::Excluded(term)
                })
            };
        let lo = bound(lower, true)?;
        let hi = bound(upper, false)?;
        Ok(Box::new(RangeQuery::new(lo, hi)))
    }

    fn has_value(&self, path: &str) -> Q {
        Box::new(TermQuery::new(
            Term::from_field_text(self.schema.field_names, path),
            IndexRecordOption::Basic,
        ))
    }

    fn exists(&self, body: &Value, path: &str) -> Result<Q, SearchError> {
        let name = body
            .get("field")
            .and_then(Value::as_str)
            .ok_or_else(|| SearchError::dsl(path, "exists needs a field"))?;
        // An object path (`user`) exists when any field under it does.
        let under: Vec<&str> = self
            .schema
            .fields
            .keys()
            .filter(|p| p.as_str() == name || p.starts_with(&format!("{name}.")))
            .map(String::as_str)
            .collect();
        Ok(match under.as_slice() {
            [] => none(),
            [one] => self.has_value(one),
            many => Box::new(BooleanQuery::new(
                many.iter()
                    .map(|p| (Occur::Should, self.has_value(p)))
                    .collect(),
            )),
        })
    }

    fn pattern(
        &self,
        f: &Indexed,
        o: &Map<String, Value>,
        path: &str,
        prefix: bool,
    ) -> Result<Q, SearchError> {
        let value = o
            .get("value")
            .or_else(|| o.get("wildcard"))
            .and_then(scalar_text)
            .ok_or_else(|| SearchError::dsl(path, "expected a text value"))?;
        let max = self.limits.max_pattern_length;
        let length = value.chars().count();
        within(length, max, "max_pattern_length", path, || {
            format!("the pattern is {length} characters long, more than {max}")
        })?;
        if !matches!(f.spec.kind, FieldKind::Keyword | FieldKind::Text) {
            return Err(SearchError::dsl(
                path,
                format!(
                    "field '{}' is {}: prefix and wildcard queries need text or keyword",
                    f.spec.path,
                    f.spec.kind.name()
                ),
            ));
        }
        let mut regex = if prefix {
            format!("{}.*", regex_escape(&value))
        } else {
            wildcard_query_to_regex_str(&value)
        };
        if o.get("case_insensitive").and_then(Value::as_bool) == Some(true) {
            regex = format!("(?i){regex}");
        }
        Ok(Box::new(
            RegexQuery::from_pattern(&regex, f.field)
                .map_err(|e| SearchError::dsl(path, e.to_string()))?,
        ))
    }

    fn ids(&self, body: &Value, path: &str) -> Result<Q, SearchError> {
        let values = body
            .get("values")
            .and_then(Value::as_array)
            .ok_or_else(|| SearchError::dsl(path, "ids needs \"values\": [..]"))?;
        self.check_terms(values.len(), path)?;
        let parts: Vec<(Occur, Q)> = values
            .iter()
            .filter_map(scalar_text)
            .map(|id| {
                (
                    Occur::Should,
                    Box::new(TermQuery::new(
                        Term::from_field_text(self.schema.id, &id),
                        IndexRecordOption::Basic,
                    )) as Q,
                )
            })
            .collect();
        Ok(if parts.is_empty() {
            none()
        } else {
            Box::new(ConstScoreQuery::new(
                Box::new(BooleanQuery::new(parts)),
                1.0,
            ))
        })
    }

    fn bool_query(&self, body: &Value, path: &str) -> Result<Q, SearchError> {
        let Value::Object(obj) = body else {
            return Err(SearchError::dsl(path, "bool must be an object"));
        };
        let mut parts: Vec<(Occur, Q)> = Vec::new();
        let mut shoulds = 0;
        let mut required = 0;
        for (k, v) in obj {
            let here = format!("{path}.{k}");
            match k.as_str() {
                "must" | "filter" | "should" | "must_not" => {
                    let list = clauses(Some(v), &here)?;
                    self.count_clauses(list.len(), &here)?;
                    for (clause, p) in list {
                        let q = self.query(clause, &p)?;
                        match k.as_str() {
                            "must" => {
                                required += 1;
                                parts.push((Occur::Must, q));
                            }
                            "filter" => {
                                required += 1;
                                parts.push((Occur::Must, Box::new(ConstScoreQuery::new(q, 0.0))));
                            }
                            "should" => {
                                shoulds += 1;
                                parts.push((Occur::Should, q));
                            }
                            _ => parts.push((Occur::MustNot, q)),
                        }
                    }
                }
                "minimum_should_match" | "boost" | "_name" | "adjust_pure_negative" => {}
                other => {
                    return Err(SearchError::dsl(
                        path,
                        format!("unknown bool parameter [{other}]"),
                    ));
                }
            }
        }
        if required == 0 && shoulds == 0 {
            // Only must_not (or nothing): everything else matches.
            parts.push((Occur::Must, Box::new(AllQuery)));
        }
        let q: Q = match obj.get("minimum_should_match") {
            Some(msm) if shoulds > 0 => {
                let n = minimum_should_match(msm, shoulds, path)?;
                Box::new(BooleanQuery::with_minimum_required_clauses(parts, n))
            }
            _ => Box::new(BooleanQuery::new(parts)),
        };
        Ok(with_boost(q, body))
    }
}

/// A clause or a list of clauses, each with its path.
fn clauses<'v>(v: Option<&'v Value>, path: &str) -> Result<Vec<(&'v Value, String)>, SearchError> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items
            .iter()
            .enumerate()
            .map(|(i, c)| (c, format!("{path}[{i}]")))
            .collect()),
        Some(obj @ Value::Object(_)) => Ok(vec![(obj, path.to_owned())]),
        Some(_) => Err(SearchError::dsl(
            path,
            "expected a query clause or a list of them",
        )),
    }
}

fn with_boost(q: Q, body: &Value) -> Q {
    match body.get("boost").and_then(Value::as_f64) {
        Some(b) if (b - 1.0).abs() > f64::EPSILON => Box::new(BoostQuery::new(q, b as f32)),
        _ => q,
    }
}

/// OpenSearch's `minimum_should_match` for `n` optional clauses: `2`, `-1`, `"75%"`, `"-25%"`.
pub fn minimum_should_match(v: &Value, n: usize, path: &str) -> Result<usize, SearchError> {
    let bad = || {
        SearchError::dsl(
            path,
            format!("minimum_should_match {v} is not a count or a percentage"),
        )
    };
    let n_i = n as i64;
    let count = match v {
        Value::Number(x) => x.as_i64().ok_or_else(bad)?,
        Value::String(s) => {
            let s = s.trim();
            if let Some(p) = s.strip_suffix('%') {
                let p: i64 = p.trim().parse().map_err(|_| bad())?;
                let k = n_i * p.abs() / 100;
                if p < 0 { n_i - k } else { k }
            } else {
                s.parse::<i64>().map_err(|_| bad())?
            }
        }
        _ => return Err(bad()),
    };
    let count = if count < 0 { n_i + count } else { count };
    Ok(count.clamp(0, n_i) as usize)
}

/// Edit distance for a term under `fuzziness` (`AUTO`, `AUTO:3,6`, 0, 1, 2).
fn fuzzy_distance(fuzziness: Option<&Value>, term: &str, path: &str) -> Result<u8, SearchError> {
    let len = term.chars().count();
    let auto = |low: usize, high: usize| {
        if len < low {
            0
        } else if len < high {
            1
        } else {
            2
        }
    };
    match fuzziness {
        None | Some(Value::Null) => Ok(0),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(d @ 0..=2) => Ok(d as u8),
            _ => Err(SearchError::dsl(path, "fuzziness must be 0, 1, 2 or AUTO")),
        },
        Some(Value::String(s)) if s.eq_ignore_ascii_case("auto") => Ok(auto(3, 6)),
        Some(Value::String(s)) if s.to_ascii_lowercase().starts_with("auto:") => {
            let (lo, hi) = s[5..]
                .split_once(',')
                .and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)))
                .ok_or_else(|| SearchError::dsl(path, format!("bad fuzziness '{s}'")))?;
            Ok(auto(lo, hi))
        }
        Some(Value::String(s)) => match s.parse::<u8>() {
            Ok(d @ 0..=2) => Ok(d),
            _ => Err(SearchError::dsl(
                path,
                format!("fuzziness '{s}' must be 0, 1, 2 or AUTO"),
            )),
        },
        Some(other) => Err(SearchError::dsl(
            path,
            format!("fuzziness {other} must be 0, 1, 2 or AUTO"),
        )),
    }
}

fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$#&-~\"<>@".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A field-name pattern (`title*`) as a matcher.
struct Wildcard(Vec<String>);

impl Wildcard {
    fn is_match(&self, s: &str) -> bool {
        let parts = &self.0;
        let Some((first, rest)) = parts.split_first() else {
            return true;
        };
        let Some(mut tail) = s.strip_prefix(first.as_str()) else {
            return false;
        };
        for (i, part) in rest.iter().enumerate() {
            if i == rest.len() - 1 {
                return tail.ends_with(part.as_str());
            }
            match tail.find(part.as_str()) {
                Some(at) => tail = &tail[at + part.len()..],
                None => return false,
            }
        }
        tail.is_empty()
    }
}

fn wildcard_regex(pattern: &str) -> Wildcard {
    Wildcard(pattern.split('*').map(str::to_owned).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn minimum_should_match_forms() {
        assert_eq!(minimum_should_match(&json!(2), 4, "q").ok(), Some(2));
        assert_eq!(minimum_should_match(&json!(-1), 4, "q").ok(), Some(3));
        assert_eq!(minimum_should_match(&json!("75%"), 4, "q").ok(), Some(3));
        assert_eq!(minimum_should_match(&json!("-25%"), 4, "q").ok(), Some(3));
        assert_eq!(minimum_should_match(&json!(9), 4, "q").ok(), Some(4));
        assert!(minimum_should_match(&json!("3<90%"), 4, "q").is_err());
    }

    #[test]
    fn fuzziness_by_term_length() {
        assert_eq!(
            fuzzy_distance(Some(&json!("AUTO")), "ab", "q").ok(),
            Some(0)
        );
        assert_eq!(
            fuzzy_distance(Some(&json!("AUTO")), "london", "q").ok(),
            Some(2)
        );
        assert_eq!(
            fuzzy_distance(Some(&json!("auto")), "lond", "q").ok(),
            Some(1)
        );
        assert_eq!(fuzzy_distance(Some(&json!(1)), "x", "q").ok(), Some(1));
        assert!(fuzzy_distance(Some(&json!(5)), "x", "q").is_err());
    }

    #[test]
    fn field_patterns() {
        assert!(wildcard_regex("title*").is_match("title.keyword"));
        assert!(wildcard_regex("*name").is_match("first_name"));
        assert!(!wildcard_regex("title*").is_match("subtitle"));
    }
}
