//! Term-level queries, which compare exact values without analysing them: `term`
//! (case_insensitive), `terms`, `range` (numbers, dates with date math, keywords), `exists`,
//! `prefix`, `wildcard` and `ids`.

use std::ops::Bound;

use serde_json::{Map, Value};
use tantivy::query::{
    AllQuery, BooleanQuery, ConstScoreQuery, Occur, RangeQuery, RegexQuery, TermQuery,
};
use tantivy::schema::IndexRecordOption;
use tantivy::{DateTime, Term};

use super::{BoxedQuery, QueryTranslator, check_options, match_nothing, with_boost};
use crate::datemath;
use crate::embedded::schema::{
    Indexed, MAX_DATE_MILLIS, boolean, float, integer, ip_address, ip_block, scalar_text,
};
use crate::error::SearchError;
use crate::limits::within;
use crate::mapping::FieldKind;

impl QueryTranslator<'_> {
    /// `term`: documents whose field holds exactly the value.
    pub(super) fn term_query(
        &self,
        indexed: &Indexed,
        options: &Map<String, Value>,
        path: &str,
    ) -> Result<BoxedQuery, SearchError> {
        let v = options
            .get("value")
            .or_else(|| options.get("query"))
            .ok_or_else(|| SearchError::dsl(path, "term needs a value"))?;
        if indexed.spec.kind == FieldKind::Date {
            // Dates are exact to the millisecond only in the fast column: an inclusive range of one.
            let d = self.date_value(v, false, indexed.format.as_ref(), path)?;
            let t = Term::from_field_date(indexed.field, d);
            return Ok(Box::new(RangeQuery::new(
                Bound::Included(t.clone()),
                Bound::Included(t),
            )));
        }
        if indexed.spec.kind == FieldKind::Ip
            && let Some((first, last)) = v.as_str().and_then(ip_block)
        {
            // A CIDR block: every address in it.
            return Ok(Box::new(RangeQuery::new(
                Bound::Included(Term::from_field_ip_addr(indexed.field, first)),
                Bound::Included(Term::from_field_ip_addr(indexed.field, last)),
            )));
        }
        if options.get("case_insensitive").and_then(Value::as_bool) == Some(true)
            && matches!(indexed.spec.kind, FieldKind::Keyword | FieldKind::Text)
        {
            let text = scalar_text(v).unwrap_or_default();
            return Ok(Box::new(
                RegexQuery::from_pattern(&format!("(?i){}", regex_escape(&text)), indexed.field)
                    .map_err(|e| SearchError::dsl(path, e.to_string()))?,
            ));
        }
        match self.exact_term(indexed, v, path)? {
            Some(t) => Ok(Box::new(TermQuery::new(t, IndexRecordOption::WithFreqs))),
            None => Ok(match_nothing()),
        }
    }

    /// The term for an exact value, `None` when the value cannot occur in the field (text in a
    /// number field matches nothing, as a failed conversion would in OpenSearch's lenient mode).
    fn exact_term(
        &self,
        indexed: &Indexed,
        v: &Value,
        path: &str,
    ) -> Result<Option<Term>, SearchError> {
        let field = indexed.field;
        Ok(match indexed.spec.kind {
            FieldKind::Text | FieldKind::Keyword => {
                scalar_text(v).map(|s| Term::from_field_text(field, &self.normalized(indexed, &s)))
            }
            FieldKind::Integer => match integer(v) {
                Some(i) => Some(Term::from_field_i64(field, i)),
                None if float(v).is_some() => None,
                None => return Err(wrong_type(indexed, "number", v, path)),
            },
            FieldKind::Float => match float(v) {
                Some(x) => Some(Term::from_field_f64(field, x)),
                None => return Err(wrong_type(indexed, "number", v, path)),
            },
            FieldKind::Boolean => match boolean(v) {
                Some(b) => Some(Term::from_field_bool(field, b)),
                None => return Err(wrong_type(indexed, "boolean", v, path)),
            },
            FieldKind::Date => Some(Term::from_field_date(
                field,
                self.date_value(v, false, indexed.format.as_ref(), path)?,
            )),
            FieldKind::Ip => Some(Term::from_field_ip_addr(field, ip_value(indexed, v, path)?)),
            FieldKind::Unsupported(_) => None,
        })
    }

    /// A date or date math (`now-30d/d`); `round_up` rounds date math to the end of its unit.
    fn date_value(
        &self,
        v: &Value,
        round_up: bool,
        format: Option<&datemath::DateFormat>,
        path: &str,
    ) -> Result<DateTime, SearchError> {
        let d = match (v, format) {
            (Value::String(s), _) => datemath::eval_with(s, self.now, round_up, format)
                .map_err(|e| SearchError::dsl(path, e))?,
            (Value::Number(n), Some(f)) => f.read_json(v).ok_or_else(|| {
                SearchError::dsl(path, format!("{n} does not match the date format"))
            })?,
            (other, _) => datemath::date_from_json(other)
                .ok_or_else(|| SearchError::dsl(path, format!("{other} is not a date")))?,
        };
        // Past what the index stores, a bound is as good as the furthest stored date.
        let millis = d
            .timestamp_millis()
            .clamp(-MAX_DATE_MILLIS, MAX_DATE_MILLIS);
        Ok(DateTime::from_timestamp_millis(millis))
    }

    /// `terms`: documents whose field holds any of the values (scored 1).
    pub(super) fn terms_query(&self, body: &Value, path: &str) -> Result<BoxedQuery, SearchError> {
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
        self.check_terms_count(values.len(), &here)?;
        let Some(indexed) = self.indexed_field(name, &here)? else {
            return Ok(match_nothing());
        };
        let mut parts: Vec<(Occur, BoxedQuery)> = Vec::new();
        for (i, v) in values.iter().enumerate() {
            let mut options = Map::new();
            options.insert("value".into(), v.clone());
            parts.push((
                Occur::Should,
                self.term_query(indexed, &options, &format!("{here}[{i}]"))?,
            ));
        }
        if parts.is_empty() {
            return Ok(match_nothing());
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
    fn check_terms_count(&self, n: usize, path: &str) -> Result<(), SearchError> {
        let max = self.limits.max_terms_count;
        within(n, max, "max_terms_count", path, || {
            format!("{n} values are more than {max}")
        })
    }

    /// `range`: `gt` / `gte` (`from`) and `lt` / `lte` (`to`) bounds; none, every document with a
    /// value.
    pub(super) fn range_query(
        &self,
        indexed: &Indexed,
        options: &Map<String, Value>,
        path: &str,
    ) -> Result<BoxedQuery, SearchError> {
        let mut lower: Option<(&Value, bool)> = None; // (value, inclusive)
        let mut upper: Option<(&Value, bool)> = None;
        let flag = |key: &str| -> Result<bool, SearchError> {
            match options.get(key) {
                None => Ok(true),
                Some(Value::Bool(b)) => Ok(*b),
                Some(v) => Err(SearchError::dsl(
                    path,
                    format!("{key} must be true or false, found {v}"),
                )),
            }
        };
        let (include_lower, include_upper) = (flag("include_lower")?, flag("include_upper")?);
        for (k, v) in options {
            match k.as_str() {
                "gt" => lower = Some((v, false)),
                "gte" => lower = Some((v, true)),
                "from" if lower.is_none() => lower = Some((v, include_lower)),
                "lt" => upper = Some((v, false)),
                "lte" => upper = Some((v, true)),
                "to" if upper.is_none() => upper = Some((v, include_upper)),
                "from" | "to" | "boost" | "format" | "include_lower" | "include_upper" => {}
                // Only range fields (which this engine does not index) read `relation`.
                "relation" => {}
                "time_zone" => datemath::utc_only(v, "range", path)?,
                other => {
                    return Err(SearchError::dsl(
                        path,
                        format!("unknown range parameter [{other}]"),
                    ));
                }
            }
        }
        let format = match options.get("format") {
            None => None,
            Some(Value::String(f)) if indexed.spec.kind == FieldKind::Date => Some(
                datemath::DateFormat::parse(f)
                    .map_err(|e| SearchError::dsl(format!("{path}.format"), e))?,
            ),
            Some(v) => {
                return Err(SearchError::dsl(
                    format!("{path}.format"),
                    format!("format {v} applies to date fields only, and must be text"),
                ));
            }
        };
        let lower = lower.filter(|(v, _)| !v.is_null());
        let upper = upper.filter(|(v, _)| !v.is_null());
        if lower.is_none() && upper.is_none() {
            // No bounds: every document with a value.
            return Ok(self.has_value(&indexed.spec.path));
        }
        let field = indexed.field;
        let bound =
            |b: Option<(&Value, bool)>, is_lower: bool| -> Result<Bound<Term>, SearchError> {
                let Some((v, inclusive)) = b else {
                    return Ok(Bound::Unbounded);
                };
                let term = match indexed.spec.kind {
                    FieldKind::Integer => {
                        let x = float(v).ok_or_else(|| wrong_type(indexed, "number", v, path))?;
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
                        float(v).ok_or_else(|| wrong_type(indexed, "number", v, path))?,
                    ),
                    // gt and lte round date math up, gte and lt down (OpenSearch's rule).
                    FieldKind::Date => Term::from_field_date(
                        field,
                        self.date_value(
                            v,
                            is_lower != inclusive,
                            format.as_ref().or(indexed.format.as_ref()),
                            path,
                        )?,
                    ),
                    FieldKind::Boolean => Term::from_field_bool(
                        field,
                        boolean(v).ok_or_else(|| wrong_type(indexed, "boolean", v, path))?,
                    ),
                    FieldKind::Keyword | FieldKind::Text => Term::from_field_text(
                        field,
                        &self.normalized(indexed, &scalar_text(v).unwrap_or_default()),
                    ),
                    FieldKind::Ip => Term::from_field_ip_addr(field, ip_value(indexed, v, path)?),
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

    /// Documents with a value in the field at `path` (its entry in the field-names field).
    fn has_value(&self, path: &str) -> BoxedQuery {
        Box::new(TermQuery::new(
            Term::from_field_text(self.schema.field_names, path),
            IndexRecordOption::Basic,
        ))
    }

    /// `exists`: documents with a value in the field, or in any field under an object path.
    pub(super) fn exists_query(&self, body: &Value, path: &str) -> Result<BoxedQuery, SearchError> {
        let name = body
            .get("field")
            .and_then(Value::as_str)
            .ok_or_else(|| SearchError::dsl(path, "exists needs a field"))?;
        // Every document has these.
        if matches!(
            name,
            "_id" | "_index" | "_seq_no" | "_version" | "_primary_term" | "_source"
        ) {
            return Ok(Box::new(AllQuery));
        }
        if name == super::super::schema::IGNORED {
            return Ok(self.has_value(name));
        }
        // An object path (`user`) exists when any field under it does. Fields of types the engine
        // does not index still record that a document has them.
        let under: Vec<&str> = self
            .schema
            .mapping
            .fields()
            .iter()
            .map(|f| f.path.as_str())
            .filter(|p| *p == name || p.starts_with(&format!("{name}.")))
            .collect();
        Ok(match under.as_slice() {
            [] => match_nothing(),
            [one] => self.has_value(one),
            many => Box::new(BooleanQuery::new(
                many.iter()
                    .map(|p| (Occur::Should, self.has_value(p)))
                    .collect(),
            )),
        })
    }

    /// `prefix` (with `prefix`) or `wildcard` (`*` and `?`) on a text or keyword field.
    pub(super) fn prefix_or_wildcard(
        &self,
        indexed: &Indexed,
        options: &Map<String, Value>,
        path: &str,
        prefix: bool,
    ) -> Result<BoxedQuery, SearchError> {
        let (kind, allowed): (&str, &[&str]) = if prefix {
            ("prefix", &["value", "case_insensitive", "rewrite"])
        } else {
            (
                "wildcard",
                &["value", "wildcard", "case_insensitive", "rewrite"],
            )
        };
        check_options(kind, options, &[allowed], path)?;
        let value = options
            .get("value")
            .or_else(|| options.get("wildcard"))
            .and_then(scalar_text)
            .ok_or_else(|| SearchError::dsl(path, "expected a text value"))?;
        let value = self.normalized(indexed, &value);
        self.check_pattern(indexed, &value, kind, path)?;
        let mut regex = if prefix {
            format!("{}.*", regex_escape(&value))
        } else {
            wildcard_regex(&value)
        };
        if options.get("case_insensitive").and_then(Value::as_bool) == Some(true) {
            regex = format!("(?i){regex}");
        }
        Ok(Box::new(
            RegexQuery::from_pattern(&regex, indexed.field)
                .map_err(|e| SearchError::dsl(path, e.to_string()))?,
        ))
    }

    /// `ids`: the documents with these `_id`s (scored 1).
    pub(super) fn ids_query(&self, body: &Value, path: &str) -> Result<BoxedQuery, SearchError> {
        let values = body
            .get("values")
            .and_then(Value::as_array)
            .ok_or_else(|| SearchError::dsl(path, "ids needs \"values\": [..]"))?;
        self.check_terms_count(values.len(), path)?;
        let parts: Vec<(Occur, BoxedQuery)> = values
            .iter()
            .filter_map(scalar_text)
            .map(|id| {
                (
                    Occur::Should,
                    Box::new(TermQuery::new(
                        Term::from_field_text(self.schema.id, &id),
                        IndexRecordOption::Basic,
                    )) as BoxedQuery,
                )
            })
            .collect();
        Ok(if parts.is_empty() {
            match_nothing()
        } else {
            Box::new(ConstScoreQuery::new(
                Box::new(BooleanQuery::new(parts)),
                1.0,
            ))
        })
    }
}

/// The error for a value that cannot be of the field's type.
/// An address for a query on an `ip` field; anything else is refused in OpenSearch's words.
fn ip_value(indexed: &Indexed, v: &Value, path: &str) -> Result<std::net::Ipv6Addr, SearchError> {
    v.as_str().and_then(ip_address).ok_or_else(|| {
        SearchError::dsl(
            path,
            format!(
                "'{}' is not an IP string literal (field '{}' is ip)",
                scalar_text(v).unwrap_or_else(|| v.to_string()),
                indexed.spec.path
            ),
        )
    })
}

fn wrong_type(indexed: &Indexed, what: &str, v: &Value, path: &str) -> SearchError {
    SearchError::dsl(
        path,
        format!(
            "{v} is not a {what}, and field '{}' is {}",
            indexed.spec.path,
            indexed.spec.kind.name()
        ),
    )
}

/// A wildcard pattern as a regular expression, as Lucene reads it: `*` any run of characters, `?`
/// any one character, `\` takes the next character as itself.
pub(super) fn wildcard_regex(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() * 2);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '*' => out.push_str(".*"),
            '?' => out.push('.'),
            '\\' => {
                if let Some(next) = chars.next() {
                    out.push_str(&regex_escape(&next.to_string()));
                } else {
                    out.push_str("\\\\");
                }
            }
            c => out.push_str(&regex_escape(&c.to_string())),
        }
    }
    out
}

/// `s` with the characters tantivy's regular expressions treat as operators escaped (and only
/// those: `\<` and `\>` would be word boundaries).
pub(super) fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::wildcard_regex;

    #[test]
    fn wildcards_read_as_lucene_reads_them() {
        assert_eq!(wildcard_regex("a*b?c"), "a.*b.c");
        assert_eq!(wildcard_regex("a\\?b\\*"), "a\\?b\\*");
        assert_eq!(wildcard_regex("x.y"), "x\\.y");
        assert_eq!(wildcard_regex("end\\"), "end\\\\");
    }
}
