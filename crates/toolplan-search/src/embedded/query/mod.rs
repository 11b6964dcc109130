//! OpenSearch query DSL → tantivy queries.
//!
//! Supported: `match` (operator, fuzziness, minimum_should_match, zero_terms_query), `match_phrase`
//! (slop), `match_phrase_prefix`, `match_bool_prefix`, `multi_match` (best_fields / most_fields /
//! cross_fields / phrase / phrase_prefix / bool_prefix, `field^boost`),
//! `term`, `terms`, `regexp`, `fuzzy`, `range` (numbers, dates with date math and formats, keywords; keywords and
//! patterns through the field's normalizer), `bool` (must / should / filter / must_not,
//! minimum_should_match), `exists`, `prefix`, `wildcard`, `ids`, `match_all`, `match_none`,
//! `constant_score`, `dis_max`, `intervals`, `boost` on any clause. A clause that names a field the mapping does not
//! have matches nothing, as in OpenSearch. Everything else is an error naming the clause and where it
//! is — never ignored; so is an option of a clause that its builder does not read
//! ([`check_options`]). The [`SearchLimits`] bound what a body may ask for (nesting, clauses, terms,
//! slop, pattern length); going over one is an error naming the limit.
//!
//! [`QueryTranslator`] walks the body: this module dispatches each clause by its query type and
//! resolves the field it names; the query families live in their own modules:
//!
//! * [`full_text`] — analysed text: `match`, `match_phrase`, `match_phrase_prefix`, `multi_match`.
//! * [`term_level`] — exact values: `term`, `terms`, `range`, `exists`, `prefix`, `wildcard`, `ids`.
//! * [`regexp`] — patterns over terms: `regexp` (Lucene's syntax), `fuzzy`.
//! * [`intervals`] — `intervals`: rules over the positions of terms, run by a query of its own.
//! * [`query_string`] — `query_string` (Lucene's classic syntax) and `simple_query_string`, read
//!   into the DSL the other modules run.
//! * [`compound`] — clauses of clauses: `bool`, `constant_score`, `dis_max`.

mod compound;
mod full_text;
mod fuzzy;
mod intervals;
mod min_score;
mod query_string;
mod regexp;
mod term_level;

pub(crate) use self::min_score::MinScore;

/// A Lucene regular expression matched whole against `text` (for `include` / `exclude` lists
/// applied outside tantivy).
pub(crate) fn lucene_regex_matches(
    pattern: &str,
    text: &str,
    path: &str,
) -> Result<bool, SearchError> {
    use tantivy_fst::Automaton;
    let regex = regexp::lucene_regex(pattern, None, path)?;
    let automaton = tantivy_fst::Regex::new(&regex).map_err(|e| {
        SearchError::dsl(path, format!("invalid regular expression [{pattern}]: {e}"))
    })?;
    let mut state = automaton.start();
    for byte in text.bytes() {
        state = automaton.accept(&state, byte);
    }
    Ok(automaton.is_match(&state))
}

use std::cell::Cell;

use chrono::{DateTime as ChronoDate, Utc};
use serde_json::{Map, Value};
use tantivy::Index;
use tantivy::query::{AllQuery, BoostQuery, EmptyQuery, Query};
use tantivy::tokenizer::TokenStream;

use super::schema::{IndexSchema, Indexed};
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

/// Translates the query clauses of one search body into tantivy queries, counting what the body
/// asks for against the [`SearchLimits`].
pub(crate) struct QueryTranslator<'a> {
    /// The index (for its tokenizers).
    index: &'a Index,
    /// Its schema.
    schema: &'a IndexSchema,
    /// "now" for date math.
    now: ChronoDate<Utc>,
    /// What a body may ask for.
    limits: &'a SearchLimits,
    /// How deep the clause being translated is.
    depth: Cell<usize>,
    /// Clauses counted so far (against `max_clause_count`).
    clause_count: Cell<usize>,
    /// Whether a phrase query was made (its documents are costly to match).
    made_phrase_query: Cell<bool>,
}

/// A translated query.
pub(crate) type BoxedQuery = Box<dyn Query>;

/// The query that matches no document.
fn match_nothing() -> BoxedQuery {
    Box::new(EmptyQuery)
}

impl<'a> QueryTranslator<'a> {
    /// A translator for searches of `index` at the time `now`.
    pub(crate) fn new(
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
            clause_count: Cell::new(0),
            made_phrase_query: Cell::new(false),
        }
    }

    /// Whether any translated query matches phrases (each of their documents costs position work).
    pub(crate) fn has_phrase_query(&self) -> bool {
        self.made_phrase_query.get()
    }

    /// Counts `n` more clauses against `max_clause_count`.
    fn count_clauses(&self, n: usize, path: &str) -> Result<(), SearchError> {
        let total = self.clause_count.get().saturating_add(n);
        self.clause_count.set(total);
        let max = self.limits.max_clause_count;
        within(total, max, "max_clause_count", path, || {
            format!("too many clauses: the query has more than {max}")
        })
    }

    /// Translates a query clause found at `path`.
    pub(crate) fn translate(&self, clause: &Value, path: &str) -> Result<BoxedQuery, SearchError> {
        let depth = self.depth.get() + 1;
        let max = self.limits.max_nested_depth;
        within(depth, max, "max_nested_depth", path, || {
            format!("the query nests more than {max} levels deep")
        })?;
        self.depth.set(depth);
        let query = self.translate_by_type(clause, path);
        self.depth.set(depth - 1);
        query
    }

    /// One clause, `{"<query type>": body}`, handed to the builder of its query type.
    fn translate_by_type(&self, clause: &Value, path: &str) -> Result<BoxedQuery, SearchError> {
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
        let query = match name.as_str() {
            "match_all" => with_boost(Box::new(AllQuery), body),
            "match_none" => match_nothing(),
            "bool" => self.bool_query(body, &here)?,
            "match" => self.field_clause(body, &here, "query", |field, options, at| {
                self.match_query(field, options, at)
            })?,
            "match_phrase" => self.field_clause(body, &here, "query", |field, options, at| {
                self.match_phrase(field, options, at, false)
            })?,
            "match_phrase_prefix" => {
                self.field_clause(body, &here, "query", |field, options, at| {
                    self.match_phrase(field, options, at, true)
                })?
            }
            "match_bool_prefix" => {
                self.field_clause(body, &here, "query", |field, options, at| {
                    self.match_bool_prefix(field, options, at)
                })?
            }
            "multi_match" => self.multi_match(body, &here)?,
            "term" => self.field_clause(body, &here, "value", |field, options, at| {
                check_options("term", options, &[&["value", "case_insensitive"]], at)?;
                self.term_query(field, options, at)
            })?,
            "terms" => self.terms_query(body, &here)?,
            "range" => self.field_clause(body, &here, "", |field, options, at| {
                self.range_query(field, options, at)
            })?,
            "exists" => self.exists_query(body, &here)?,
            "prefix" => self.field_clause(body, &here, "value", |field, options, at| {
                self.prefix_or_wildcard(field, options, at, true)
            })?,
            "wildcard" => self.field_clause(body, &here, "value", |field, options, at| {
                self.prefix_or_wildcard(field, options, at, false)
            })?,
            "regexp" => self.field_clause(body, &here, "value", |field, options, at| {
                self.regexp_query(field, options, at)
            })?,
            "fuzzy" => self.field_clause(body, &here, "value", |field, options, at| {
                self.fuzzy_query(field, options, at)
            })?,
            "query_string" => {
                let dsl = self.query_string_dsl(body, &here)?;
                self.translate(&dsl, &here)?
            }
            "simple_query_string" => {
                let dsl = self.simple_query_string_dsl(body, &here)?;
                self.translate(&dsl, &here)?
            }
            "ids" => self.ids_query(body, &here)?,
            "intervals" => self.intervals_query(body, &here)?,
            "constant_score" => self.constant_score_query(body, &here)?,
            "dis_max" => self.dis_max_query(body, &here)?,
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
        Ok(query)
    }

    /// `{"field": value}` or `{"field": {"<main>": value, …options}}`: resolves the field and calls
    /// `build` with the options object (the short form becomes `{"<main>": value}`).
    fn field_clause(
        &self,
        body: &Value,
        path: &str,
        main: &str,
        build: impl Fn(&Indexed, &Map<String, Value>, &str) -> Result<BoxedQuery, SearchError>,
    ) -> Result<BoxedQuery, SearchError> {
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
        match self.indexed_field(name, &here)? {
            Some(field) => Ok(with_boost(
                build(field, &options, &here)?,
                &Value::Object(options),
            )),
            None => Ok(match_nothing()),
        }
    }

    /// `text` as a keyword field holds it: through the field's normalizer when it has one
    /// (`lowercase`), as OpenSearch normalizes the values of term-level queries on such a field.
    fn normalized(&self, indexed: &Indexed, text: &str) -> String {
        let tokenizer = indexed
            .search_tokenizer
            .as_deref()
            .filter(|_| indexed.spec.kind == FieldKind::Keyword)
            .and_then(|name| self.index.tokenizers().get(name));
        let Some(mut analyzer) = tokenizer else {
            return text.to_owned();
        };
        let mut stream = analyzer.token_stream(text);
        let mut out = String::with_capacity(text.len());
        while let Some(token) = stream.next() {
            out.push_str(&token.text);
        }
        out
    }

    /// The indexed field at `name`; `None` when the mapping does not have it (matches nothing). A
    /// field mapped with `index: false` cannot be searched: an error, as in OpenSearch.
    fn indexed_field(&self, name: &str, path: &str) -> Result<Option<&Indexed>, SearchError> {
        if let Some(field) = self.schema.fields.get(name) {
            if !field.spec.searchable {
                return Err(SearchError::dsl(
                    path,
                    format!("Cannot search on field [{name}] since it is not indexed"),
                ));
            }
            return Ok(Some(field));
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
}

/// Refuses an option of a `query` clause that the engine does not implement, as OpenSearch refuses
/// one it does not know (`[match] query does not support [foo]`): an option ignored would change
/// the answer without a word. `allowed` are the options the clause's builder reads, in one or
/// more lists (`boost` is always allowed).
pub(super) fn check_options(
    query: &str,
    options: &Map<String, Value>,
    allowed: &[&[&str]],
    path: &str,
) -> Result<(), SearchError> {
    let allowed: Vec<&str> = allowed
        .iter()
        .flat_map(|list| list.iter().copied())
        .collect();
    match options
        .keys()
        .find(|k| k.as_str() != "boost" && !allowed.contains(&k.as_str()))
    {
        None => Ok(()),
        Some(k) => Err(SearchError::dsl(
            path,
            format!(
                "[{query}] query does not support [{k}] here (supported: {})",
                allowed.join(", ")
            ),
        )),
    }
}

/// A clause or a list of clauses, each with its path.
fn clause_list<'v>(
    v: Option<&'v Value>,
    path: &str,
) -> Result<Vec<(&'v Value, String)>, SearchError> {
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

/// `query` scaled by the `boost` of `body`, when it has one other than 1.
fn with_boost(query: BoxedQuery, body: &Value) -> BoxedQuery {
    match body.get("boost").and_then(Value::as_f64) {
        Some(b) if (b - 1.0).abs() > f64::EPSILON => Box::new(BoostQuery::new(query, b as f32)),
        _ => query,
    }
}
