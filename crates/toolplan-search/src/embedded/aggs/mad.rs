//! `median_absolute_deviation`: the median of the values' distances from their median, computed
//! exactly from a listing of the field's values and their counts (as `percentiles` with `hdr` is;
//! OpenSearch estimates it with a t-digest of `compression` centroids, exact for small sets).
//! `field`, `missing`, `compression` (checked: above 0) and `format`; a script is refused by
//! name.

use serde_json::{Value, json};

use super::percentiles::{listed_values, whole_listing};
use crate::error::SearchError;
use crate::mapping::FieldKind;
use crate::number_format::NumberFormat;

/// A `median_absolute_deviation` request, run as a listing of the field's values.
#[derive(Debug, Clone)]
pub(crate) struct Mad {
    format: Option<NumberFormat>,
    /// Where the request is, for messages.
    path: String,
}

impl PartialEq for Mad {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path
    }
}

/// The options of a `median_absolute_deviation` request.
const OPTIONS: &[&str] = &["field", "missing", "compression", "format"];

impl Mad {
    /// Checks a request `body` at `path` (named `name`) on a field of kind `kind` (`None` when the
    /// mapping lacks it), taking out what tantivy does not read.
    pub(crate) fn take(
        body: &mut Value,
        name: &str,
        path: &str,
        kind: Option<&FieldKind>,
    ) -> Result<Mad, SearchError> {
        let Value::Object(o) = body else {
            return Err(SearchError::dsl(
                path,
                "median_absolute_deviation must be an object",
            ));
        };
        if let Some(other) = o.keys().find(|k| !OPTIONS.contains(&k.as_str())) {
            return Err(SearchError::Unsupported {
                path: format!("{path}.{other}"),
                clause: if other == "script" {
                    "script".to_owned()
                } else {
                    format!("median_absolute_deviation option {other}")
                },
            });
        }
        if let Some(c) = o.remove("compression") {
            let Some(c) = c.as_f64() else {
                return Err(SearchError::dsl(
                    format!("{path}.compression"),
                    format!("[compression] must be a number, found {c}"),
                ));
            };
            if c <= 0.0 {
                return Err(SearchError::dsl(
                    path,
                    format!(
                        "[compression] must be greater than 0. Found [{}] in [{name}]",
                        super::response::java_double(c)
                    ),
                ));
            }
        }
        let format = match o.remove("format") {
            None => None,
            Some(Value::String(pattern)) => Some(
                NumberFormat::parse(&pattern)
                    .map_err(|e| SearchError::dsl(format!("{path}.format"), e.to_string()))?,
            ),
            Some(other) => {
                return Err(SearchError::dsl(
                    format!("{path}.format"),
                    format!("a format is text, found {other}"),
                ));
            }
        };
        if let Some(kind @ (FieldKind::Keyword | FieldKind::Text | FieldKind::Ip)) = kind {
            let field = o.get("field").and_then(Value::as_str).unwrap_or_default();
            return Err(super::not_for_aggregation(
                field,
                kind,
                "median_absolute_deviation",
                path,
            ));
        }
        Ok(Mad {
            format,
            path: path.to_owned(),
        })
    }

    /// Puts the listing tantivy made into the shape of the result: `{"value": …}` (`null`
    /// without values).
    pub(crate) fn shape(&self, v: &mut Value) -> Result<(), SearchError> {
        whole_listing(v, "median_absolute_deviation", &self.path)?;
        let mut values = listed_values(v);
        values.sort_by(|a, b| a.0.total_cmp(&b.0));
        let value = median(&values).and_then(|m| {
            let mut deviations: Vec<(f64, u64)> =
                values.iter().map(|&(x, n)| ((x - m).abs(), n)).collect();
            deviations.sort_by(|a, b| a.0.total_cmp(&b.0));
            median(&deviations)
        });
        *v = match (value, &self.format) {
            (Some(x), Some(f)) => json!({"value": x, "value_as_string": f.write(x)}),
            (Some(x), None) => json!({ "value": x }),
            (None, _) => json!({ "value": null }),
        };
        Ok(())
    }
}

/// The median of sorted values with counts: the middle one, or the mean of the two middle ones.
fn median(values: &[(f64, u64)]) -> Option<f64> {
    let total: u64 = values.iter().map(|(_, n)| n).sum();
    if total == 0 {
        return None;
    }
    // The values at ranks `lower` and `upper` (0-based) of the multiset.
    let (lower, upper) = if total % 2 == 1 {
        (total / 2, total / 2)
    } else {
        (total / 2 - 1, total / 2)
    };
    let at = |rank: u64| {
        let mut seen = 0;
        values.iter().find_map(|&(x, n)| {
            seen += n;
            (rank < seen).then_some(x)
        })
    };
    Some((at(lower)? + at(upper)?) / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_a_multiset_and_of_its_deviations() {
        assert_eq!(median(&[(100.0, 1), (200.0, 1), (300.0, 1)]), Some(200.0));
        assert_eq!(median(&[(1.0, 3), (5.0, 1)]), Some(1.0));
        assert_eq!(median(&[(1.0, 1), (5.0, 1)]), Some(3.0));
        assert_eq!(median(&[]), None);
        let mad = Mad {
            format: None,
            path: "aggs.m".into(),
        };
        let mut v = json!({"buckets": [{"key": 1000.0, "doc_count": 1}, {"key": 2000.0, "doc_count": 1},
                                        {"key": 3000.0, "doc_count": 1}]});
        mad.shape(&mut v).unwrap();
        assert_eq!(v, json!({"value": 1000.0}));
    }
}
