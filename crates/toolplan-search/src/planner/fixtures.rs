//! What the unit tests of the execution-guided checks and the amendments run against: a small
//! mapping of tickets and flowers, the frequent values of its keyword fields, and a sample document.

use serde_json::{Value, json};

use super::observe::Context;
use super::values::{FieldValues, KeywordValues};
use crate::mapping::Mapping;

/// Text, keyword, number and date fields; `species` has a `.keyword` sub-field.
pub(super) fn mapping() -> Mapping {
    Mapping::parse(&json!({"properties": {
        "subject": {"type": "text"},
        "category": {"type": "keyword"},
        "status": {"type": "keyword"},
        "price": {"type": "float"},
        "sepal_length_in_cm": {"type": "float"},
        "sepal_width_in_cm": {"type": "float"},
        "created_at": {"type": "date"},
        "name": {"type": "text", "fields": {"keyword": {"type": "keyword"}}},
        "species": {"type": "text", "fields": {"keyword": {"type": "keyword"}}}
    }}))
    .expect("mapping")
}

/// The frequent values of `category`, `status` and `species.keyword`.
pub(super) fn values() -> KeywordValues {
    let field = |field: &str, values: &[&str]| FieldValues {
        field: field.into(),
        values: values.iter().map(|v| (*v).to_owned()).collect(),
    };
    KeywordValues {
        fields: vec![
            field("category", &["shipping", "billing", "Garden", "login"]),
            field("status", &["open", "closed", "in-progress", "ok"]),
            field("species.keyword", &["setosa", "virginica"]),
        ],
    }
}

/// The sample document the prompt would show.
pub(super) fn sample() -> Value {
    json!({"subject": "parcel lost", "category": "shipping", "status": "open", "price": 4.99,
           "created_at": "2025-01-01T00:00:00Z", "name": "Ann Lee", "sepal_length_in_cm": 5.1,
           "species": "setosa"})
}

/// Runs `f` with the checks' context for `question` over the mapping, values and sample above.
pub(super) fn with_context<T>(question: &str, f: impl FnOnce(&Context<'_>) -> T) -> T {
    let (m, v, s) = (mapping(), values(), sample());
    f(&Context {
        question,
        mapping: &m,
        values: &v,
        sample: Some(&s),
    })
}
