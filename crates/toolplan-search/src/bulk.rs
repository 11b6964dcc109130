//! The OpenSearch `_bulk` body: NDJSON of action lines, each `index` / `create` followed by the
//! document, `delete` alone.
//!
//! ```text
//! {"index": {"_index": "iris-index", "_id": "1"}}
//! {"sepal_length_in_cm": 5.1, "species": "setosa"}
//! ```

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
    }
}
