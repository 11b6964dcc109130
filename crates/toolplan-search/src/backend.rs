//! The search-backend trait: what the query-DSL planner, the agentic-search tools and the CLI need
//! from a search engine. [`crate::embedded`] implements it on an on-disk tantivy index;
//! [`crate::opensearch`] on a real OpenSearch cluster over its REST API.

use async_trait::async_trait;
use serde_json::Value;

use crate::error::SearchError;

/// An index and its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexInfo {
    /// The index name.
    pub name: String,
    /// Documents in it.
    pub docs: u64,
}

impl IndexInfo {
    /// `{"index": name, "docs": n}`, as `toolplan index list --json` and `list_indices` give it.
    pub fn to_json(&self) -> Value {
        serde_json::json!({"index": self.name, "docs": self.docs})
    }
}

/// An index that is there but cannot be read (a damaged directory), and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadableIndex {
    /// The index name.
    pub name: String,
    /// What failed when it was opened.
    pub reason: String,
}

/// The indices a backend has: those it can read, and those it cannot.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IndexListing {
    /// The readable indices, by name.
    pub indices: Vec<IndexInfo>,
    /// The indices that cannot be read, by name (left out of [`SearchBackend::list_indices`]).
    pub unreadable: Vec<UnreadableIndex>,
}

/// What a bulk load did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BulkSummary {
    /// Documents added or replaced.
    pub indexed: u64,
    /// Documents deleted.
    pub deleted: u64,
    /// Actions that failed, with the reason (the rest still applied, as in OpenSearch).
    pub errors: Vec<String>,
    /// The actions that succeeded, in order.
    pub items: Vec<BulkItem>,
}

/// What an action of a bulk load did to its document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkResult {
    /// A new document.
    Created,
    /// A document replaced.
    Updated,
    /// A document removed.
    Deleted,
    /// A delete of a document that was not there.
    NotFound,
    /// Nothing (OpenSearch's `noop`).
    Noop,
}

impl BulkResult {
    /// As OpenSearch names it (`created`, `updated`, `deleted`, `not_found`, `noop`).
    pub fn as_str(self) -> &'static str {
        match self {
            BulkResult::Created => "created",
            BulkResult::Updated => "updated",
            BulkResult::Deleted => "deleted",
            BulkResult::NotFound => "not_found",
            BulkResult::Noop => "noop",
        }
    }

    /// From OpenSearch's name; `None` for another.
    pub fn parse(name: &str) -> Option<BulkResult> {
        Some(match name {
            "created" => BulkResult::Created,
            "updated" => BulkResult::Updated,
            "deleted" => BulkResult::Deleted,
            "not_found" => BulkResult::NotFound,
            "noop" => BulkResult::Noop,
            _ => return None,
        })
    }
}

/// What one action of a bulk load that succeeded did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkItem {
    /// The document's id (generated when the action gave none).
    pub id: String,
    /// What the action did.
    pub result: BulkResult,
    /// The document's version after the action.
    pub version: u64,
    /// The action's sequence number.
    pub seq_no: u64,
}

/// A search engine that speaks OpenSearch: mappings, `_bulk` bodies, query DSL in, OpenSearch-shaped
/// responses out. Dropping a returned future abandons the call (HTTP requests are aborted; an embedded
/// search in progress stops at its next matching document).
#[async_trait]
pub trait SearchBackend: Send + Sync {
    /// `embedded` or `opensearch`, for messages.
    fn kind(&self) -> &'static str;

    /// The indices, by name. An index that cannot be read is left out ([`Self::list_indices_checked`]
    /// says which and why), so one damaged index does not hide the others.
    async fn list_indices(&self) -> Result<Vec<IndexInfo>, SearchError>;

    /// The readable indices and the unreadable ones with the reason. The default has no unreadable
    /// ones: a cluster lists what it serves.
    async fn list_indices_checked(&self) -> Result<IndexListing, SearchError> {
        Ok(IndexListing {
            indices: self.list_indices().await?,
            unreadable: Vec::new(),
        })
    }

    /// Creates an index from an OpenSearch mapping (`{"mappings": {"properties": …}}` or
    /// `{"properties": …}`).
    async fn create_index(&self, name: &str, mapping: &Value) -> Result<(), SearchError>;

    /// Deletes an index and its documents.
    async fn delete_index(&self, name: &str) -> Result<(), SearchError>;

    /// Loads a `_bulk` NDJSON body; actions without `_index` go to `index`.
    async fn bulk(&self, index: Option<&str>, ndjson: &str) -> Result<BulkSummary, SearchError>;

    /// The index's mapping as OpenSearch returns it: `{"properties": …}`.
    async fn get_mapping(&self, name: &str) -> Result<Value, SearchError>;

    /// Adds fields to the index's mapping, or changes its root options (OpenSearch's put-mapping
    /// API): fields it has keep their type. The default refuses: a backend that cannot change a
    /// mapping says so.
    async fn put_mapping(&self, name: &str, mapping: &Value) -> Result<(), SearchError> {
        let _ = mapping;
        Err(SearchError::InvalidParameter(format!(
            "the {} backend cannot change the mapping of '{name}'",
            self.kind()
        )))
    }

    /// Points the alias `alias` at each index `index` names (a name, a list or a pattern) with
    /// `options` (`filter`, `routing`, `index_routing`, `search_routing`, `is_write_index`:
    /// [`crate::aliases::AliasOptions`]). Searches through an alias search its indices, filtered
    /// by its filter; writes through it go to its write index. The default refuses: a backend
    /// without aliases says so.
    async fn put_alias(
        &self,
        index: &str,
        alias: &str,
        options: &Value,
    ) -> Result<(), SearchError> {
        let _ = (index, options);
        Err(SearchError::InvalidParameter(format!(
            "the {} backend cannot make the alias '{alias}'",
            self.kind()
        )))
    }

    /// The aliases of each index `index` names, as OpenSearch's get-alias API answers:
    /// `{"<index>": {"aliases": {"<alias>": {options}}}}`. The default has none.
    async fn get_aliases(&self, index: &str) -> Result<Value, SearchError> {
        let mut out = serde_json::Map::new();
        for name in self.resolve_indices(index).await? {
            out.insert(name, serde_json::json!({"aliases": {}}));
        }
        Ok(Value::Object(out))
    }

    /// Takes the alias `alias` off each index `index` names; [`SearchError::NoSuchAlias`] when
    /// none of them had it.
    async fn delete_alias(&self, index: &str, alias: &str) -> Result<(), SearchError> {
        let _ = index;
        Err(SearchError::NoSuchAlias(alias.to_owned()))
    }

    /// The indices an index expression stands for (a name, an alias, `a,b`, `logs-*`, `_all`,
    /// `-old`), sorted. The default resolves among [`Self::list_indices`], without aliases.
    async fn resolve_indices(&self, expr: &str) -> Result<Vec<String>, SearchError> {
        check_index_expression(expr)?;
        let existing: Vec<String> = self
            .list_indices()
            .await?
            .into_iter()
            .map(|i| i.name)
            .collect();
        resolve_indices(expr, &existing)
    }

    /// One document of the index (its `_source`), if it has any.
    async fn sample_document(&self, name: &str) -> Result<Option<Value>, SearchError>;

    /// Runs a search request body (query DSL) and returns the OpenSearch-shaped response:
    /// `took`, `timed_out`, `hits.total`, `hits.max_score`, `hits.hits[]` (`_index`, `_id`, `_score`,
    /// `_source`) and `aggregations`.
    async fn search(&self, name: &str, body: &Value) -> Result<Value, SearchError>;

    /// Stores a search template under `id` (OpenSearch's `PUT _scripts/<id>`): `script` is
    /// `{"lang": "mustache", "source": …}` (or a body `{"script": {…}}`).
    async fn put_script(&self, id: &str, script: &Value) -> Result<(), SearchError>;

    /// The stored search template `id` (its `{"lang", "source"}`), `None` if there is none.
    async fn get_script(&self, id: &str) -> Result<Option<Value>, SearchError>;

    /// Deletes the stored search template `id`.
    async fn delete_script(&self, id: &str) -> Result<(), SearchError>;

    /// Whether the backend can run `body` on the index: `Ok` if it can, the backend's own complaint
    /// ([`SearchError::is_rejection`]) if it cannot, any other error if the backend could not be asked.
    /// The default runs it with `size: 0` and `terminate_after: 1`, so no hits come back and a cluster
    /// stops after the first match.
    async fn validate(&self, name: &str, body: &Value) -> Result<(), SearchError> {
        let mut dry = body.clone();
        if let Value::Object(o) = &mut dry {
            o.insert("size".into(), Value::from(0));
            o.insert("terminate_after".into(), Value::from(1));
        }
        self.search(name, &dry).await.map(|_| ())
    }
}

/// Checks a stored script's id: 1 to 255 letters, digits, `_`, `-` and `.`, not `.` or `..`.
pub fn check_script_id(id: &str) -> Result<(), SearchError> {
    let ok = !id.is_empty()
        && id.len() <= 255
        && id != "."
        && id != ".."
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err(SearchError::InvalidParameter(format!(
            "invalid script id '{id}': use 1 to 255 letters, digits, _, - and ."
        )))
    }
}

/// The script object of a `put_script` argument: `{"script": {…}}` or `{…}` with a `source`.
pub fn script_object(script: &Value) -> Result<Value, SearchError> {
    let inner = script.get("script").unwrap_or(script);
    if inner.get("source").is_none() {
        return Err(SearchError::InvalidParameter(
            "a stored script needs a \"source\" (the template body)".into(),
        ));
    }
    Ok(inner.clone())
}

/// Checks an index name against OpenSearch's rules.
pub fn check_index_name(name: &str) -> Result<(), SearchError> {
    let bad = |reason| SearchError::InvalidIndexName {
        name: name.to_owned(),
        reason,
    };
    if name.is_empty() {
        return Err(bad("it is empty"));
    }
    if name.len() > 255 {
        return Err(bad("it is longer than 255 bytes"));
    }
    if name != name.to_lowercase() {
        return Err(bad("it must be lower case"));
    }
    if name.starts_with(['-', '_', '+']) || name == "." || name == ".." {
        return Err(bad("it must not start with -, _ or + nor be . or .."));
    }
    if name.chars().any(|c| {
        matches!(
            c,
            '\\' | '/' | '*' | '?' | '"' | '<' | '>' | '|' | ' ' | ',' | '#' | ':'
        ) || c.is_control()
    }) {
        return Err(bad("it must not contain \\ / * ? \" < > | space , # :"));
    }
    Ok(())
}

/// Checks an index expression of a search (one name, or `a,b`, `logs-*`, `_all`, `-old`): each
/// comma-separated part, without its leading `-`, is `_all` or a name whose `*` wildcards aside
/// keeps [`check_index_name`]'s rules.
pub fn check_index_expression(expr: &str) -> Result<(), SearchError> {
    if expr.is_empty() {
        return check_index_name(expr);
    }
    for part in expr.split(',') {
        let name = part.strip_prefix('-').unwrap_or(part);
        if name == "_all" || name == "*" {
            continue;
        }
        check_index_name(&name.replace('*', "x")).map_err(|_| SearchError::InvalidIndexName {
            name: expr.to_owned(),
            reason: "each comma-separated part must be an index name, a pattern with * or _all, optionally after - to leave it out",
        })?;
    }
    Ok(())
}

/// Applies the `q=` shorthand to a search body, as OpenSearch's search API does: the body's query
/// becomes `{"query_string": {"query": q}}` (with `df` as its default field when given).
pub fn apply_q(body: &mut Value, q: &str, df: Option<&str>) {
    let mut query = serde_json::json!({"query_string": {"query": q}});
    if let Some(df) = df {
        query["query_string"]["default_field"] = Value::from(df);
    }
    if !body.is_object() {
        *body = Value::Object(serde_json::Map::new());
    }
    body["query"] = query;
}

/// Whether the index expression `expr` names more than one index or a pattern (`a,b`, `logs-*`,
/// `_all`, `-old`).
pub fn is_multi_index(expr: &str) -> bool {
    expr.contains(',') || expr.contains('*') || expr == "_all" || expr.starts_with('-')
}

/// The index names `expr` stands for among `existing` (sorted, without duplicates). A name
/// without a wildcard must exist; a pattern may match none.
pub fn resolve_indices(expr: &str, existing: &[String]) -> Result<Vec<String>, SearchError> {
    let mut out: Vec<String> = Vec::new();
    for part in expr.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some(excluded) = part.strip_prefix('-') {
            out.retain(|n| !glob(excluded, n));
        } else if part == "_all" || part.contains('*') {
            let pattern = if part == "_all" { "*" } else { part };
            out.extend(existing.iter().filter(|n| glob(pattern, n)).cloned());
        } else if existing.iter().any(|n| n == part) {
            out.push(part.to_owned());
        } else {
            return Err(SearchError::NoSuchIndex(part.to_owned()));
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Whether `name` matches `pattern`, where `*` is any run of characters (index names here, field
/// names in `multi_match`).
pub fn glob(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let [first, middle @ .., last] = parts.as_slice() else {
        return pattern == name;
    };
    if parts.len() == 1 {
        return pattern == name;
    }
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn index_expressions_resolve_as_opensearch_resolves_them() {
        let existing = names(&["logs-1", "logs-2", "logs-old", "users"]);
        assert_eq!(
            resolve_indices("logs-*", &existing).unwrap(),
            names(&["logs-1", "logs-2", "logs-old"])
        );
        assert_eq!(
            resolve_indices("logs-*,-logs-old", &existing).unwrap(),
            names(&["logs-1", "logs-2"])
        );
        assert_eq!(resolve_indices("_all", &existing).unwrap(), existing);
        assert_eq!(
            resolve_indices("users,logs-1,users", &existing).unwrap(),
            names(&["logs-1", "users"])
        );
        assert!(resolve_indices("nope-*", &existing).unwrap().is_empty());
        assert!(
            matches!(resolve_indices("users,nope", &existing), Err(SearchError::NoSuchIndex(n)) if n == "nope")
        );
        assert!(
            is_multi_index("a,b")
                && is_multi_index("a*")
                && is_multi_index("_all")
                && !is_multi_index("a")
        );
    }

    #[test]
    fn index_expressions() {
        for ok in ["a", "logs-*,-logs-old", "_all", "*", "a,b", "x*y"] {
            assert!(check_index_expression(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a,,b", "A", "a b", "a,/etc", "_x"] {
            assert!(check_index_expression(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn index_names_follow_opensearch_rules() {
        assert!(check_index_name("iris-index").is_ok());
        for bad in ["", "Iris", "_x", "a/b", "a b", "..", "a:b"] {
            assert!(check_index_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn script_ids_and_bodies() {
        assert!(check_script_id("flower_species_search_template").is_ok());
        for bad in ["", "..", "a/b", "a b", "ä"] {
            assert!(check_script_id(bad).is_err(), "{bad}");
        }
        let script = serde_json::json!({"lang": "mustache", "source": {"query": {}}});
        assert_eq!(
            script_object(&serde_json::json!({"script": script.clone()})).ok(),
            Some(script.clone())
        );
        assert_eq!(script_object(&script).ok(), Some(script));
        assert!(script_object(&serde_json::json!({"lang": "mustache"})).is_err());
    }
}
