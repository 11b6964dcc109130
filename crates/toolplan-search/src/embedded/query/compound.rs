//! Compound queries, clauses made of clauses: `bool` (must / should / filter / must_not,
//! minimum_should_match), `constant_score` and `dis_max`.

use serde_json::Value;
use tantivy::query::{AllQuery, BooleanQuery, ConstScoreQuery, DisjunctionMaxQuery, Occur};

use super::{BoxedQuery, QueryTranslator, clause_list, with_boost};
use crate::error::SearchError;

impl QueryTranslator<'_> {
    /// `bool`: its must and filter clauses are required (filters without score), should clauses
    /// optional unless nothing else is required, must_not clauses excluded.
    pub(super) fn bool_query(&self, body: &Value, path: &str) -> Result<BoxedQuery, SearchError> {
        let Value::Object(obj) = body else {
            return Err(SearchError::dsl(path, "bool must be an object"));
        };
        let mut parts: Vec<(Occur, BoxedQuery)> = Vec::new();
        let mut shoulds = 0;
        let mut required = 0;
        for (k, v) in obj {
            let here = format!("{path}.{k}");
            match k.as_str() {
                "must" | "filter" | "should" | "must_not" => {
                    let list = clause_list(Some(v), &here)?;
                    self.count_clauses(list.len(), &here)?;
                    for (clause, p) in list {
                        let query = self.translate(clause, &p)?;
                        match k.as_str() {
                            "must" => {
                                required += 1;
                                parts.push((Occur::Must, query));
                            }
                            "filter" => {
                                required += 1;
                                parts.push((
                                    Occur::Must,
                                    Box::new(ConstScoreQuery::new(query, 0.0)),
                                ));
                            }
                            "should" => {
                                shoulds += 1;
                                parts.push((Occur::Should, query));
                            }
                            _ => parts.push((Occur::MustNot, query)),
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
        let query: BoxedQuery = match obj.get("minimum_should_match") {
            Some(msm) if shoulds > 0 => {
                let n = minimum_should_match(msm, shoulds, path)?;
                Box::new(BooleanQuery::with_minimum_required_clauses(parts, n))
            }
            _ => Box::new(BooleanQuery::new(parts)),
        };
        Ok(with_boost(query, body))
    }

    /// `constant_score`: its filter, every match scored `boost` (default 1).
    pub(super) fn constant_score_query(
        &self,
        body: &Value,
        path: &str,
    ) -> Result<BoxedQuery, SearchError> {
        let filter = body
            .get("filter")
            .ok_or_else(|| SearchError::dsl(path, "constant_score needs a filter"))?;
        let boost = body.get("boost").and_then(Value::as_f64).unwrap_or(1.0) as f32;
        Ok(Box::new(ConstScoreQuery::new(
            self.translate(filter, &format!("{path}.filter"))?,
            boost,
        )))
    }

    /// `dis_max`: the best score of its queries, plus `tie_breaker` times the others'.
    pub(super) fn dis_max_query(
        &self,
        body: &Value,
        path: &str,
    ) -> Result<BoxedQuery, SearchError> {
        let queries = clause_list(body.get("queries"), &format!("{path}.queries"))?;
        self.count_clauses(queries.len(), path)?;
        let tie = body
            .get("tie_breaker")
            .and_then(Value::as_f64)
            .unwrap_or(0.0) as f32;
        let parts = queries
            .iter()
            .map(|(clause, p)| self.translate(clause, p))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(with_boost(
            Box::new(DisjunctionMaxQuery::with_tie_breaker(parts, tie)),
            body,
        ))
    }
}

/// OpenSearch's `minimum_should_match` for `n` optional clauses: `2`, `-1`, `"75%"`, `"-25%"`; more
/// than `n` when it asks for more (nothing then matches).
pub(super) fn minimum_should_match(v: &Value, n: usize, path: &str) -> Result<usize, SearchError> {
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
    // Not cut to `n`, as OpenSearch does not cut it: asking for more than there are matches nothing.
    Ok(count.max(0) as usize)
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
        assert_eq!(minimum_should_match(&json!(9), 4, "q").ok(), Some(9));
        assert_eq!(minimum_should_match(&json!(-9), 4, "q").ok(), Some(0));
        assert!(minimum_should_match(&json!("3<90%"), 4, "q").is_err());
    }
}
