//! The OpenSearch `_bulk` body: NDJSON of action lines, each `index` / `create` followed by the
//! document, `delete` alone.
//!
//! ```text
//! {"index": {"_index": "iris-index", "_id": "1"}}
//! {"sepal_length_in_cm": 5.1, "species": "setosa"}
//! ```
//!
//! An action line may also carry `version` and `version_type` (`internal`, `external`,
//! `external_gte`), `if_seq_no` and `if_primary_term` (optimistic concurrency control), and
//! `routing` (one shard: nothing to route); any other key fails the body, as OpenSearch answers it.

use serde_json::{Map, Value};

use crate::error::SearchError;

/// What one action does.
#[derive(Debug, Clone, PartialEq)]
pub enum BulkOp {
    /// Add or replace a document.
    Index(Map<String, Value>),
    /// Add a document; fails when the id exists.
    Create(Map<String, Value>),
    /// Remove a document.
    Delete,
}

/// One action of a bulk body.
#[derive(Debug, Clone, PartialEq)]
pub struct BulkAction {
    /// 1-based line of the action line (for messages).
    pub line: usize,
    /// `_index` of the action, if given (else the request's index).
    pub index: Option<String>,
    /// `_id`, if given (else one is generated).
    pub id: Option<String>,
    /// What to do.
    pub op: BulkOp,
    /// How the write is versioned.
    pub versioning: Versioning,
}

/// How a write's version is decided and checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Versioning {
    /// The index counts versions: 1 when made, one more at each write.
    #[default]
    Internal,
    /// The writer gives the version: the write happens only if it is higher than the stored one.
    External(u64),
    /// As `External`, when it is at least the stored one.
    ExternalGte(u64),
    /// The write happens only if the document's sequence number and primary term are these.
    IfSeqNo {
        /// `if_seq_no`.
        seq_no: u64,
        /// `if_primary_term`.
        primary_term: u64,
    },
}

/// The keys an action line may hold.
const ACTION_KEYS: &[&str] = &[
    "_index",
    "_id",
    "version",
    "version_type",
    "if_seq_no",
    "if_primary_term",
    "routing",
];

/// The versioning an action's metadata (or a single write's parameters) asks for, or why it is
/// refused (in OpenSearch's words).
pub fn versioning(
    version: Option<&Value>,
    version_type: Option<&str>,
    if_seq_no: Option<&Value>,
    if_primary_term: Option<&Value>,
) -> Result<Versioning, String> {
    let number = |v: Option<&Value>, name: &str| -> Result<Option<u64>, String> {
        match v {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) if n.as_u64().is_some() => Ok(n.as_u64()),
            Some(Value::String(s)) if s.trim().parse::<u64>().is_ok() => Ok(s.trim().parse().ok()),
            Some(other) => Err(format!(
                "[{name}] must be a whole number of at least 0, found {other}"
            )),
        }
    };
    let version = number(version, "version")?;
    let seq_no = number(if_seq_no, "if_seq_no")?;
    let primary_term = number(if_primary_term, "if_primary_term")?;
    if seq_no.is_some() || primary_term.is_some() {
        if version.is_some() || version_type.is_some_and(|t| t != "internal") {
            return Err("compare and write operations can not use versioning".into());
        }
        return match (seq_no, primary_term) {
            (Some(seq_no), Some(primary_term)) if primary_term > 0 => Ok(Versioning::IfSeqNo {
                seq_no,
                primary_term,
            }),
            (Some(_), Some(_)) => Err("ifPrimaryTerm must be greater than 0".into()),
            (Some(_), None) => Err("ifSeqNo is set, but primary term is [0]".into()),
            (None, _) => Err("ifPrimaryTerm is set, but ifSeqNo is not".into()),
        };
    }
    match (version_type.unwrap_or("internal"), version) {
        ("internal", None) => Ok(Versioning::Internal),
        ("internal", Some(_)) => Err("internal versioning can not be used for optimistic concurrency control. Please use `if_seq_no` and `if_primary_term` instead".into()),
        ("external", Some(v)) => Ok(Versioning::External(v)),
        ("external_gte", Some(v)) => Ok(Versioning::ExternalGte(v)),
        ("external" | "external_gte", None) => Err("an external version type needs a version".into()),
        (other, _) => Err(format!("No version type match [{other}]")),
    }
}

/// Parses a bulk body. Blank lines are skipped; the first malformed line is an error naming it.
pub fn parse(ndjson: &str) -> Result<Vec<BulkAction>, SearchError> {
    let mut actions = Vec::new();
    let mut lines = ndjson
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty());
    while let Some((line, text)) = lines.next() {
        let err = |message: String| SearchError::Bulk { line, message };
        let action: Value =
            serde_json::from_str(text).map_err(|e| err(format!("not JSON: {e}")))?;
        let Value::Object(action) = action else {
            return Err(err("an action line must be an object".into()));
        };
        let mut entries = action.into_iter();
        let (Some((kind, meta)), None) = (entries.next(), entries.next()) else {
            return Err(err(
                "an action line names exactly one action (index, create or delete)".into(),
            ));
        };
        let meta = meta.as_object().cloned().unwrap_or_default();
        if let Some(unknown) = meta.keys().find(|k| !ACTION_KEYS.contains(&k.as_str())) {
            return Err(err(format!(
                "Action/metadata line [{line}] contains an unknown parameter [{unknown}]"
            )));
        }
        let versioning = versioning(
            meta.get("version"),
            meta.get("version_type").and_then(Value::as_str),
            meta.get("if_seq_no"),
            meta.get("if_primary_term"),
        )
        .map_err(&err)?;
        let index = meta
            .get("_index")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let id = match meta.get("_id") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            Some(_) => return Err(err("_id must be a string or a number".into())),
        };
        let mut source = || -> Result<Map<String, Value>, SearchError> {
            let (doc_line, doc) = lines
                .next()
                .ok_or_else(|| err(format!("the {kind} action has no document line after it")))?;
            match serde_json::from_str::<Value>(doc) {
                Ok(Value::Object(doc)) => Ok(doc),
                Ok(_) => Err(SearchError::Bulk {
                    line: doc_line,
                    message: "a document must be a JSON object".into(),
                }),
                Err(e) => Err(SearchError::Bulk {
                    line: doc_line,
                    message: format!("not JSON: {e}"),
                }),
            }
        };
        let op = match kind.as_str() {
            "index" => BulkOp::Index(source()?),
            "create"
                if matches!(
                    versioning,
                    Versioning::External(_) | Versioning::ExternalGte(_)
                ) =>
            {
                return Err(err(
                    "create operations only support internal versioning. use index instead".into(),
                ));
            }
            "create" => BulkOp::Create(source()?),
            "delete" => {
                if id.is_none() {
                    return Err(err("a delete action needs an _id".into()));
                }
                BulkOp::Delete
            }
            "update" => return Err(err("update actions are not supported; use index".into())),
            other => {
                return Err(err(format!(
                    "unknown action '{other}' (index, create, delete)"
                )));
            }
        };
        actions.push(BulkAction {
            line,
            index,
            id,
            op,
            versioning,
        });
    }
    Ok(actions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn index_create_and_delete_actions() {
        let body = "{\"index\": {\"_index\": \"iris\", \"_id\": \"1\"}}\n{\"species\": \"setosa\"}\n\n\
                    {\"create\": {\"_id\": 2}}\n{\"a\": 1}\n{\"delete\": {\"_id\": \"1\"}}\n";
        let actions = parse(body).expect("parses");
        assert_eq!(actions.len(), 3);
        assert_eq!(actions[0].index.as_deref(), Some("iris"));
        assert_eq!(actions[0].id.as_deref(), Some("1"));
        let mut doc = Map::new();
        doc.insert("species".into(), json!("setosa"));
        assert_eq!(actions[0].op, BulkOp::Index(doc));
        assert_eq!(actions[1].id.as_deref(), Some("2"));
        assert_eq!(actions[2].op, BulkOp::Delete);
        assert_eq!(actions[2].line, 6);
    }

    #[test]
    fn malformed_lines_are_named() {
        let err = parse("{\"index\": {}}\n[1]\n").expect_err("array doc");
        assert_eq!(
            err.to_string(),
            "bulk line 2: a document must be a JSON object"
        );
        let err = parse("{\"index\": {}}").expect_err("no doc");
        assert_eq!(
            err.to_string(),
            "bulk line 1: the index action has no document line after it"
        );
        let err = parse("{\"upsert\": {}}\n{}").expect_err("unknown");
        assert!(err.to_string().contains("unknown action 'upsert'"));
        let err = parse("nope").expect_err("not json");
        assert!(err.to_string().starts_with("bulk line 1: not JSON"));
        let err = parse("{\"index\": {\"_id\": 1, \"pipeline\": \"p\"}}\n{}").expect_err("key");
        assert!(
            err.to_string()
                .contains("contains an unknown parameter [pipeline]"),
            "{err}"
        );
    }

    #[test]
    fn versions_on_action_lines() {
        let actions = parse(
            "{\"index\": {\"_id\": 1, \"version\": 5, \"version_type\": \"external\"}}\n{}\n\
             {\"index\": {\"_id\": 1, \"if_seq_no\": 3, \"if_primary_term\": 1}}\n{}\n\
             {\"delete\": {\"_id\": 1}}\n",
        )
        .expect("parses");
        assert_eq!(actions[0].versioning, Versioning::External(5));
        assert_eq!(
            actions[1].versioning,
            Versioning::IfSeqNo {
                seq_no: 3,
                primary_term: 1
            }
        );
        assert_eq!(actions[2].versioning, Versioning::Internal);
        for (body, message) in [
            (
                "{\"index\": {\"_id\": 1, \"version\": 5}}\n{}",
                "internal versioning can not be used",
            ),
            (
                "{\"index\": {\"_id\": 1, \"version_type\": \"external\"}}\n{}",
                "needs a version",
            ),
            (
                "{\"index\": {\"_id\": 1, \"version\": 2, \"version_type\": \"force\"}}\n{}",
                "No version type match [force]",
            ),
            (
                "{\"create\": {\"_id\": 1, \"version\": 2, \"version_type\": \"external\"}}\n{}",
                "create operations only support internal versioning",
            ),
            (
                "{\"index\": {\"_id\": 1, \"version\": -2, \"version_type\": \"external\"}}\n{}",
                "[version] must be a whole number",
            ),
            (
                "{\"index\": {\"_id\": 1, \"if_seq_no\": 2}}\n{}",
                "primary term is [0]",
            ),
        ] {
            let err = parse(body).expect_err(body);
            assert!(err.to_string().contains(message), "{body}: {err}");
        }
    }
}
