//! Full-text queries, which analyse their text with the field's analyzer: `match` (operator,
//! fuzziness, minimum_should_match, zero_terms_query), `match_phrase` (slop),
//! `match_phrase_prefix` (max_expansions), `match_bool_prefix` and `multi_match` (best_fields /
//! most_fields / phrase / bool_prefix, `field^boost`, field patterns like `title*`). On a field that is not analysed text they compare
//! the whole value, as a `term` query does. An option a query does not implement is an error
//! naming it ([`check_options`]).

use serde_json::{Map, Value};
use tantivy::Term;
use tantivy::query::{
    AllQuery, BooleanQuery, BoostQuery, DisjunctionMaxQuery, Occur, PhrasePrefixQuery, PhraseQuery,
    RegexQuery, TermQuery,
};
use tantivy::schema::IndexRecordOption;
use tantivy::tokenizer::TokenStream;

use super::compound::minimum_should_match;
use super::fuzzy::{Fuzziness, FuzzyQuery};
use super::term_level::regex_escape;
use super::{BoxedQuery, QueryTranslator, check_options, match_nothing};
use crate::backend::glob;
use crate::embedded::schema::{Indexed, scalar_text};
use crate::error::SearchError;
use crate::mapping::FieldKind;

impl QueryTranslator<'_> {
    /// The tokens the field's analyzer (or the one named by the query's `analyzer`) makes of
    /// `text`.
    pub(super) fn analyze(
        &self,
        indexed: &Indexed,
        text: &str,
        analyzer: Option<&Value>,
        path: &str,
    ) -> Result<Vec<String>, SearchError> {
        Ok(self
            .analyze_positioned(indexed, text, analyzer, path)?
            .into_iter()
            .map(|(token, _)| token)
            .collect())
    }

    /// The tokens of [`Self::analyze`], each with its position (a stop word removed leaves a
    /// gap; tokens at one position stand for each other).
    pub(super) fn analyze_positioned(
        &self,
        indexed: &Indexed,
        text: &str,
        analyzer: Option<&Value>,
        path: &str,
    ) -> Result<Vec<(String, usize)>, SearchError> {
        let mut analyzer = match analyzer {
            None | Some(Value::Null) => {
                let by_name = indexed
                    .search_tokenizer
                    .as_deref()
                    .and_then(|name| self.index.tokenizers().get(name));
                match by_name {
                    Some(analyzer) => analyzer,
                    None => self
                        .index
                        .tokenizer_for_field(indexed.field)
                        .map_err(|e| SearchError::dsl(path, e.to_string()))?,
                }
            }
            Some(Value::String(name)) => {
                let tokenizer = crate::embedded::analysis::analyzer_tokenizer(name);
                self.index.tokenizers().get(&tokenizer).ok_or_else(|| {
                    SearchError::dsl(
                        format!("{path}.analyzer"),
                        format!("analyzer [{name}] has not been configured in mappings"),
                    )
                })?
            }
            Some(other) => {
                return Err(SearchError::dsl(
                    format!("{path}.analyzer"),
                    format!("[analyzer] must be a name, found {other}"),
                ));
            }
        };
        let mut stream = analyzer.token_stream(text);
        let mut tokens = Vec::new();
        while let Some(t) = stream.next() {
            tokens.push((t.text.clone(), t.position));
        }
        Ok(tokens)
    }

    /// `match`: any (or, with `"operator": "and"`, every) token of the text.
    pub(super) fn match_query(
        &self,
        indexed: &Indexed,
        options: &Map<String, Value>,
        path: &str,
    ) -> Result<BoxedQuery, SearchError> {
        check_options("match", options, &[MATCH_OPTIONS, FUZZY_OPTIONS], path)?;
        let value = options
            .get("query")
            .ok_or_else(|| SearchError::dsl(path, "match needs a query"))?;
        let zero_terms = zero_terms(options, path)?;
        if indexed.spec.kind != FieldKind::Text {
            // On exact fields, match compares the whole value. A value the field cannot hold
            // ("average" on a number field) is an error, as in OpenSearch, unless `lenient`.
            let lenient = options.get("lenient").and_then(Value::as_bool) == Some(true);
            // A keyword's whole value may be matched fuzzily, as OpenSearch does.
            if indexed.spec.kind == FieldKind::Keyword
                && options.contains_key("fuzziness")
                && !options.contains_key("analyzer")
                && let Some(whole) = scalar_text(value)
            {
                let whole = self.normalized(indexed, &whole);
                return self.maybe_fuzzy(indexed, &whole, options, "fuzzy_transpositions", path);
            }
            if let Err(e) = refuse_text_options(options, path) {
                return if lenient { Ok(match_nothing()) } else { Err(e) };
            }
            return self
                .term_query(indexed, options, path)
                .or_else(|e| if lenient { Ok(match_nothing()) } else { Err(e) });
        }
        let text =
            scalar_text(value).ok_or_else(|| SearchError::dsl(path, "query must be text"))?;
        let tokens = self.analyze(indexed, &text, options.get("analyzer"), path)?;
        self.count_clauses(tokens.len(), path)?;
        let parts: Vec<BoxedQuery> = tokens
            .iter()
            .map(|t| self.maybe_fuzzy(indexed, t, options, "fuzzy_transpositions", path))
            .collect::<Result<_, _>>()?;
        if parts.is_empty() {
            // The text analysed to nothing (stop words only, punctuation).
            return Ok(zero_terms);
        }
        combine(parts, options, path)
    }

    /// A term of `indexed`, matched fuzzily when the query's `fuzziness` allows edits
    /// (with `prefix_length`, `max_expansions`, the transpositions option named `transpositions`
    /// and a constant-score `fuzzy_rewrite` or `rewrite`).
    pub(super) fn maybe_fuzzy(
        &self,
        indexed: &Indexed,
        token: &str,
        options: &Map<String, Value>,
        transpositions: &str,
        path: &str,
    ) -> Result<BoxedQuery, SearchError> {
        let term = Term::from_field_text(indexed.field, token);
        let fuzziness = fuzziness_of(options, token, transpositions, path)?;
        if let Some(f) = &fuzziness
            && f.max_expansions != usize::MAX
        {
            let max = self.limits.max_clause_count;
            crate::limits::within(f.max_expansions, max, "max_clause_count", path, || {
                format!(
                    "max_expansions {} is more than {max} terms",
                    f.max_expansions
                )
            })?;
        }
        Ok(match fuzziness {
            None => Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs)),
            Some(f) => Box::new(FuzzyQuery::new(indexed.field, token, f)),
        })
    }

    /// `match_phrase` (the tokens in order, `slop` apart at most) or, with `prefix`,
    /// `match_phrase_prefix` (the last token a prefix).
    pub(super) fn match_phrase(
        &self,
        indexed: &Indexed,
        options: &Map<String, Value>,
        path: &str,
        prefix: bool,
    ) -> Result<BoxedQuery, SearchError> {
        if prefix {
            check_options(
                "match_phrase_prefix",
                options,
                &[PHRASE_PREFIX_OPTIONS],
                path,
            )?;
        } else {
            check_options("match_phrase", options, &[PHRASE_OPTIONS], path)?;
        }
        let text = options
            .get("query")
            .and_then(scalar_text)
            .ok_or_else(|| SearchError::dsl(path, "the phrase must be text"))?;
        let zero_terms = zero_terms(options, path)?;
        if indexed.spec.kind != FieldKind::Text {
            refuse_text_options(options, path)?;
            let mut exact = Map::new();
            exact.insert("value".into(), Value::String(text));
            return self.term_query(indexed, &exact, path);
        }
        let terms: Vec<Term> = self
            .analyze(indexed, &text, options.get("analyzer"), path)?
            .iter()
            .map(|t| Term::from_field_text(indexed.field, t))
            .collect();
        if prefix && self.slop(options.get("slop"), path)?.is_some_and(|s| s > 0) {
            return Err(SearchError::Unsupported {
                path: format!("{path}.slop"),
                clause: "match_phrase_prefix with slop".into(),
            });
        }
        let max_expansions = match options.get("max_expansions") {
            None => None,
            Some(v) => Some(
                v.as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .filter(|n| *n > 0)
                    .ok_or_else(|| {
                        SearchError::dsl(
                            path,
                            format!(
                                "max_expansions must be a whole number of at least 1, found {v}"
                            ),
                        )
                    })?,
            ),
        };
        Ok(match (terms.len(), prefix) {
            (0, _) => zero_terms,
            (1, false) => Box::new(TermQuery::new(
                terms[0].clone(),
                IndexRecordOption::WithFreqs,
            )),
            // The last word stands for its first `max_expansions` completions in term order (50
            // by default, as OpenSearch's), a lone word too.
            (n, true) => {
                if n > 1 {
                    self.made_phrase_query.set(true);
                }
                let mut query = PhrasePrefixQuery::new(terms);
                query.set_max_expansions(max_expansions.unwrap_or(DEFAULT_PHRASE_EXPANSIONS));
                Box::new(query)
            }
            (_, false) => {
                self.made_phrase_query.set(true);
                let mut query = PhraseQuery::new(terms);
                if let Some(slop) = self.slop(options.get("slop"), path)? {
                    query.set_slop(slop);
                }
                Box::new(query)
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

    /// `match_bool_prefix`: a `bool` of the text's tokens, each a `term` but the last, which is a
    /// prefix (OpenSearch's search-as-you-type query); `operator` and `minimum_should_match` as in
    /// `match`.
    pub(super) fn match_bool_prefix(
        &self,
        indexed: &Indexed,
        options: &Map<String, Value>,
        path: &str,
    ) -> Result<BoxedQuery, SearchError> {
        check_options(
            "match_bool_prefix",
            options,
            &[BOOL_PREFIX_OPTIONS, FUZZY_OPTIONS],
            path,
        )?;
        let text = options
            .get("query")
            .and_then(scalar_text)
            .ok_or_else(|| SearchError::dsl(path, "match_bool_prefix needs text"))?;
        if indexed.spec.kind != FieldKind::Text {
            refuse_text_options(options, path)?;
            let mut exact = Map::new();
            exact.insert("value".into(), Value::String(text));
            return self.term_query(indexed, &exact, path);
        }
        let tokens = self.analyze(indexed, &text, options.get("analyzer"), path)?;
        self.count_clauses(tokens.len(), path)?;
        let Some((last, rest)) = tokens.split_last() else {
            return Ok(match_nothing());
        };
        // Fuzziness applies to the terms before the last, which is a prefix.
        let mut parts: Vec<BoxedQuery> = rest
            .iter()
            .map(|t| self.maybe_fuzzy(indexed, t, options, "fuzzy_transpositions", path))
            .collect::<Result<_, _>>()?;
        parts.push(Box::new(
            RegexQuery::from_pattern(&format!("{}.*", regex_escape(last)), indexed.field)
                .map_err(|e| SearchError::dsl(path, e.to_string()))?,
        ));
        combine(parts, options, path)
    }

    /// `multi_match`: a `match` (or `match_phrase`) on each of its fields, the best score
    /// (`best_fields`, plus `tie_breaker` times the others) or their sum (`most_fields`).
    /// `multi_match` of type `cross_fields` over text fields: the query's words, each matched on
    /// whichever of the fields has it (the `dis_max` of the fields for each word), joined by the
    /// `operator` as one `match` joins its words.
    fn cross_fields(
        &self,
        fields: &[(&Indexed, f32)],
        body: &Value,
        query: &Value,
        path: &str,
    ) -> Result<BoxedQuery, SearchError> {
        let text =
            scalar_text(query).ok_or_else(|| SearchError::dsl(path, "query must be text"))?;
        let mut per_field = Vec::with_capacity(fields.len());
        for (indexed, boost) in fields {
            per_field.push((
                *indexed,
                *boost,
                self.analyze(indexed, &text, body.get("analyzer"), path)?,
            ));
        }
        let words = per_field.iter().map(|(_, _, t)| t.len()).max().unwrap_or(0);
        self.count_clauses(words.saturating_mul(fields.len()), path)?;
        let mut parts: Vec<BoxedQuery> = Vec::with_capacity(words);
        for i in 0..words {
            let on_fields: Vec<BoxedQuery> = per_field
                .iter()
                .filter_map(|(indexed, boost, tokens)| {
                    let token = tokens.get(i)?;
                    let term = TermQuery::new(
                        Term::from_field_text(indexed.field, token),
                        IndexRecordOption::WithFreqs,
                    );
                    Some(Box::new(BoostQuery::new(Box::new(term), *boost)) as BoxedQuery)
                })
                .collect();
            let tie = body
                .get("tie_breaker")
                .and_then(Value::as_f64)
                .unwrap_or(0.0) as f32;
            parts.push(Box::new(DisjunctionMaxQuery::with_tie_breaker(
                on_fields, tie,
            )));
        }
        if parts.is_empty() {
            return Ok(match_nothing());
        }
        combine(parts, body.as_object().unwrap_or(&Map::new()), path)
    }

    pub(super) fn multi_match(&self, body: &Value, path: &str) -> Result<BoxedQuery, SearchError> {
        if let Value::Object(options) = body {
            let kind = options.get("type").and_then(Value::as_str);
            if kind == Some("bool_prefix") {
                for key in ["slop", "cutoff_frequency"] {
                    if options.contains_key(key) {
                        return Err(SearchError::dsl(
                            path,
                            format!("[{key}] not allowed for type [bool_prefix]"),
                        ));
                    }
                }
            }
            if kind == Some("cross_fields") && options.contains_key("fuzziness") {
                return Err(SearchError::dsl(
                    path,
                    "Fuzziness not allowed for type [cross_fields]",
                ));
            }
            check_options(
                "multi_match",
                options,
                &[MATCH_OPTIONS, FUZZY_OPTIONS, MULTI_MATCH_OPTIONS],
                path,
            )?;
        }
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
        let bool_prefix = kind == "bool_prefix";
        let phrase_prefix = kind == "phrase_prefix";
        let phrase = match kind {
            "best_fields" | "most_fields" | "bool_prefix" | "cross_fields" => false,
            "phrase" | "phrase_prefix" => true,
            other => {
                return Err(SearchError::Unsupported {
                    path: format!("{path}.type"),
                    clause: format!("multi_match type {other}"),
                });
            }
        };
        let mut parts: Vec<BoxedQuery> = Vec::new();
        // cross_fields: each word, on whichever field has it.
        let mut cross: Vec<(&Indexed, f32)> = Vec::new();
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
                self.schema
                    .mapping
                    .fields()
                    .iter()
                    .map(|f| f.path.clone())
                    .filter(|p| glob(name, p))
                    .collect()
            } else {
                vec![name.to_owned()]
            };
            for n in names {
                let Some(indexed) = self.indexed_field(&n, path)? else {
                    continue;
                };
                self.count_clauses(1, path)?;
                if kind == "cross_fields" && indexed.spec.kind == FieldKind::Text {
                    cross.push((indexed, boost));
                    continue;
                }
                let mut options: Map<String, Value> = body.as_object().cloned().unwrap_or_default();
                options.insert("query".into(), query.clone());
                for key in ["fields", "type", "tie_breaker"] {
                    options.remove(key);
                }
                if phrase && !phrase_prefix {
                    options.remove("max_expansions");
                }
                // `lenient` on the phrase types: a field that cannot hold the text (a number
                // field) matches nothing instead of failing the query.
                let lenient =
                    phrase && options.remove("lenient").and_then(|v| v.as_bool()) == Some(true);
                if phrase {
                    options.remove("auto_generate_synonyms_phrase_query");
                    for key in MATCH_ONLY {
                        if options.contains_key(*key) {
                            return Err(SearchError::dsl(
                                path,
                                format!("[multi_match] of type phrase does not support [{key}]"),
                            ));
                        }
                    }
                } else if options.remove("slop").is_some() {
                    // OpenSearch reads slop only for the phrase types.
                }
                let one = if phrase {
                    match self.match_phrase(indexed, &options, path, phrase_prefix) {
                        Err(_) if lenient && indexed.spec.kind != FieldKind::Text => {
                            match_nothing()
                        }
                        other => other?,
                    }
                } else if bool_prefix {
                    for key in ["lenient", "zero_terms_query"] {
                        if options.contains_key(key) {
                            return Err(SearchError::dsl(
                                path,
                                format!(
                                    "[multi_match] of type bool_prefix does not support [{key}] here"
                                ),
                            ));
                        }
                    }
                    options.remove("auto_generate_synonyms_phrase_query");
                    self.match_bool_prefix(indexed, &options, path)?
                } else {
                    self.match_query(indexed, &options, path)?
                };
                parts.push(if boost == 1.0 {
                    one
                } else {
                    Box::new(BoostQuery::new(one, boost))
                });
            }
        }
        if !cross.is_empty() {
            parts.push(self.cross_fields(&cross, body, query, path)?);
        }
        if parts.is_empty() {
            return Ok(match_nothing());
        }
        Ok(match kind {
            // bool_prefix scores as most_fields does.
            "most_fields" | "bool_prefix" => Box::new(BooleanQuery::new(
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
}

/// Refuses, on a field that is not analysed text (compared whole), the options that only
/// analysed text reads here (`analyzer`, the fuzzy ones).
fn refuse_text_options(options: &Map<String, Value>, path: &str) -> Result<(), SearchError> {
    let text_only = std::iter::once(&"analyzer").chain(FUZZY_OPTIONS);
    if let Some(key) = text_only.into_iter().find(|k| options.contains_key(**k)) {
        return Err(SearchError::Unsupported {
            path: format!("{path}.{key}"),
            clause: format!("{key} on a field that is not text"),
        });
    }
    Ok(())
}

/// The options of `match` this engine implements, beside [`FUZZY_OPTIONS`].
const MATCH_OPTIONS: &[&str] = &[
    "query",
    "analyzer",
    "operator",
    "minimum_should_match",
    "lenient",
    "zero_terms_query",
    // No synonyms are configured, so the phrase queries it would make for them never arise.
    "auto_generate_synonyms_phrase_query",
];

/// The clauses of a `match` (or `match_bool_prefix`) joined as its `operator` (`or` by default,
/// or `and`) and `minimum_should_match` say.
fn combine(
    parts: Vec<BoxedQuery>,
    options: &Map<String, Value>,
    path: &str,
) -> Result<BoxedQuery, SearchError> {
    let and = match options.get("operator").and_then(Value::as_str) {
        None => false,
        Some(op) if op.eq_ignore_ascii_case("or") => false,
        Some(op) if op.eq_ignore_ascii_case("and") => true,
        Some(op) => return Err(SearchError::dsl(path, format!("unknown operator '{op}'"))),
    };
    let n = parts.len();
    let occur = if and { Occur::Must } else { Occur::Should };
    let clauses: Vec<(Occur, BoxedQuery)> = parts.into_iter().map(|q| (occur, q)).collect();
    Ok(match (and, options.get("minimum_should_match")) {
        (false, Some(msm)) => Box::new(BooleanQuery::with_minimum_required_clauses(
            clauses,
            minimum_should_match(msm, n, path)?,
        )),
        _ => Box::new(BooleanQuery::new(clauses)),
    })
}

/// The options of `match_bool_prefix` beside [`FUZZY_OPTIONS`].
const BOOL_PREFIX_OPTIONS: &[&str] = &["query", "analyzer", "operator", "minimum_should_match"];

/// The fuzzy-matching options of `match`, `match_bool_prefix` and `multi_match`.
const FUZZY_OPTIONS: &[&str] = &[
    "fuzziness",
    "fuzzy_transpositions",
    "prefix_length",
    "max_expansions",
    "fuzzy_rewrite",
];

/// How many words the last word of a `match_phrase_prefix` stands for when `max_expansions` is not
/// given (OpenSearch's default).
const DEFAULT_PHRASE_EXPANSIONS: u32 = 50;

/// The options of `match_phrase`.
const PHRASE_OPTIONS: &[&str] = &["query", "analyzer", "slop", "zero_terms_query"];

/// The options of `match_phrase_prefix`.
const PHRASE_PREFIX_OPTIONS: &[&str] = &[
    "query",
    "analyzer",
    "slop",
    "max_expansions",
    "zero_terms_query",
];

/// The options of `multi_match` beside those of `match`.
const MULTI_MATCH_OPTIONS: &[&str] = &["fields", "type", "tie_breaker", "slop", "max_expansions"];

/// `multi_match` options that only its `match` types read.
const MATCH_ONLY: &[&str] = &[
    "operator",
    "minimum_should_match",
    "fuzziness",
    "fuzzy_transpositions",
    "prefix_length",
    "fuzzy_rewrite",
    "lenient",
];

/// What a full-text query whose text analyses to no token matches: `zero_terms_query` `none` (the
/// default: nothing) or `all` (everything).
fn zero_terms(options: &Map<String, Value>, path: &str) -> Result<BoxedQuery, SearchError> {
    match options.get("zero_terms_query").and_then(Value::as_str) {
        None if options.get("zero_terms_query").is_none() => Ok(match_nothing()),
        Some(z) if z.eq_ignore_ascii_case("none") => Ok(match_nothing()),
        Some(z) if z.eq_ignore_ascii_case("all") => Ok(Box::new(AllQuery)),
        _ => Err(SearchError::dsl(
            format!("{path}.zero_terms_query"),
            format!(
                "zero_terms_query must be \"none\" or \"all\", found {}",
                options.get("zero_terms_query").unwrap_or(&Value::Null)
            ),
        )),
    }
}

/// The fuzziness a query's options ask for on `token`: `None` for an exact match (no
/// `fuzziness`, or none left for a token that short).
pub(super) fn fuzziness_of(
    options: &Map<String, Value>,
    token: &str,
    transpositions_key: &str,
    path: &str,
) -> Result<Option<Fuzziness>, SearchError> {
    let distance = fuzzy_distance(options.get("fuzziness"), token, path)?;
    let transpositions = match options.get(transpositions_key) {
        None => true,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            return Err(SearchError::dsl(
                format!("{path}.{transpositions_key}"),
                format!("[{transpositions_key}] must be true or false, found {v}"),
            ));
        }
    };
    let whole = |key: &str, default: usize, least: u64| -> Result<usize, SearchError> {
        match options.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_u64()
                .filter(|n| *n >= least)
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| {
                    SearchError::dsl(
                        format!("{path}.{key}"),
                        format!("[{key}] must be a whole number of at least {least}, found {v}"),
                    )
                }),
        }
    };
    let prefix_length = whole("prefix_length", 0, 0)?;
    let max_expansions = whole("max_expansions", super::fuzzy::DEFAULT_MAX_EXPANSIONS, 1)?;
    let mut max_expansions = max_expansions;
    for key in ["fuzzy_rewrite", "rewrite"] {
        match options.get(key).and_then(Value::as_str) {
            None => {}
            // Constant-score rewrites match every term the automaton accepts.
            Some("constant_score" | "constant_score_boolean" | "constant_score_blended") => {
                max_expansions = usize::MAX;
            }
            Some(other) => {
                return Err(SearchError::Unsupported {
                    path: format!("{path}.{key}"),
                    clause: format!("{key} {other} (fuzzy terms score as constant_score)"),
                });
            }
        }
    }
    if distance == 0 {
        return Ok(None);
    }
    Ok(Some(Fuzziness {
        distance,
        transpositions,
        prefix_length,
        max_expansions,
    }))
}

/// Edit distance for a term under `fuzziness` (`AUTO`, `AUTO:3,6`, 0, 1, 2).
pub(super) fn fuzzy_distance(
    fuzziness: Option<&Value>,
    term: &str,
    path: &str,
) -> Result<u8, SearchError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        assert!(glob("title*", "title.keyword"));
        assert!(glob("*name", "first_name"));
        assert!(!glob("title*", "subtitle"));
    }
}
