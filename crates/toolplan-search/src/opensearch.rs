//! The OpenSearch backend: the same [`SearchBackend`] over a real cluster's REST API, for data that
//! outgrows one machine. Basic auth or an API key, TLS (rustls; self-signed certificates only when
//! asked), a timeout on every request.
//!
//! | trait method | request |
//! |---|---|
//! | `list_indices` | `GET /_cat/indices?format=json&h=index,docs.count` |
//! | `create_index` | `PUT /<index>` with `{"mappings": …}` |
//! | `delete_index` | `DELETE /<index>` |
//! | `bulk` | `POST /_bulk` (or `/<index>/_bulk`), `application/x-ndjson` |
//! | `get_mapping` | `GET /<index>/_mapping` |
//! | `sample_document` | `POST /<index>/_search` with `{"size": 1}` |
//! | `search` | `POST /<index>/_search` |
//!
//! Index names and script ids are checked ([`check_index_name`], [`check_script_id`]) before any
//! request, and every name put in a path is percent-encoded as one segment ([`segment`]), so no name
//! can reach another path on the cluster (`%2e%2e` is the index `%2e%2e`, never `DELETE /`).

use std::time::Duration;

use async_trait::async_trait;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};

use crate::backend::{
    BulkSummary, IndexInfo, SearchBackend, check_index_expression, check_index_name,
    check_script_id, script_object,
};
use crate::error::SearchError;

/// How a request proves who it is.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum Auth {
    /// No credentials.
    #[default]
    None,
    /// HTTP basic auth.
    Basic {
        /// User name.
        user: String,
        /// Password.
        password: String,
    },
    /// `Authorization: ApiKey <key>` (the base64 `id:key` OpenSearch issues).
    ApiKey(String),
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Secrets never reach logs.
        match self {
            Auth::None => write!(f, "None"),
            Auth::Basic { user, .. } => write!(f, "Basic({user}, ***)"),
            Auth::ApiKey(_) => write!(f, "ApiKey(***)"),
        }
    }
}

/// Connection settings.
#[derive(Debug, Clone)]
pub struct OpenSearchConfig {
    /// The cluster's base URL (`https://localhost:9200`).
    pub url: String,
    /// Credentials.
    pub auth: Auth,
    /// Accept certificates no trusted authority signed (test clusters). Off by default.
    pub accept_invalid_certs: bool,
    /// Longest one request may take.
    pub timeout: Duration,
}

impl OpenSearchConfig {
    /// Settings for `url` without credentials and a 30 s timeout.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            auth: Auth::None,
            accept_invalid_certs: false,
            timeout: Duration::from_secs(30),
        }
    }
}

/// A cluster reached over HTTP.
#[derive(Debug, Clone)]
pub struct OpenSearchBackend {
    base: String,
    auth: Auth,
    client: reqwest::Client,
}

/// Bytes a path segment keeps as they are: letters, digits and `-`, `_`, `.`, `~` (RFC 3986's
/// unreserved characters). Everything else, `%` and `/` included, is percent-encoded.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// `name` as one percent-encoded URL path segment. Names are checked first: `.` and `..` are dot
/// segments however they are written, which no encoding keeps from being resolved.
pub fn segment(name: &str) -> String {
    utf8_percent_encode(name, SEGMENT).to_string()
}

/// How much of an error body is kept.
const MAX_ERROR_BODY: usize = 2000;

impl OpenSearchBackend {
    /// A backend for the cluster `config` describes.
    pub fn new(config: OpenSearchConfig) -> Result<Self, SearchError> {
        let base = config.url.trim_end_matches('/').to_owned();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(SearchError::Transport(format!(
                "'{}' is not an http:// or https:// URL",
                config.url
            )));
        }
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .danger_accept_invalid_certs(config.accept_invalid_certs)
            .user_agent(concat!("toolplan/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| SearchError::Transport(e.to_string()))?;
        Ok(Self {
            base,
            auth: config.auth,
            client,
        })
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let r = self.client.request(method, format!("{}{path}", self.base));
        match &self.auth {
            Auth::None => r,
            Auth::Basic { user, password } => r.basic_auth(user, Some(password)),
            Auth::ApiKey(key) => r.header(reqwest::header::AUTHORIZATION, format!("ApiKey {key}")),
        }
    }

    async fn send(&self, r: reqwest::RequestBuilder) -> Result<Value, SearchError> {
        let response = r
            .send()
            .await
            .map_err(|e| SearchError::Transport(chain(&e)))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| SearchError::Transport(chain(&e)))?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body);
            let mut text: String = text.chars().take(MAX_ERROR_BODY).collect();
            if body.len() > text.len() {
                text.push('…');
            }
            return Err(SearchError::Http {
                status: status.as_u16(),
                body: text,
            });
        }
        serde_json::from_slice(&body).map_err(|e| SearchError::Decode(format!("not JSON: {e}")))
    }
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}

#[async_trait]
impl SearchBackend for OpenSearchBackend {
    fn kind(&self) -> &'static str {
        "opensearch"
    }

    async fn list_indices(&self) -> Result<Vec<IndexInfo>, SearchError> {
        let v = self
            .send(self.request(
                reqwest::Method::GET,
                "/_cat/indices?format=json&h=index,docs.count",
            ))
            .await?;
        let rows = v
            .as_array()
            .ok_or_else(|| SearchError::Decode("_cat/indices did not return a list".into()))?;
        let mut out: Vec<IndexInfo> = rows
            .iter()
            .filter_map(|r| {
                let name = r.get("index")?.as_str()?.to_owned();
                let docs = match r.get("docs.count") {
                    Some(Value::String(s)) => s.parse().unwrap_or(0),
                    Some(Value::Number(n)) => n.as_u64().unwrap_or(0),
                    _ => 0,
                };
                Some(IndexInfo { name, docs })
            })
            // System indices are not the user's.
            .filter(|i| !i.name.starts_with('.'))
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    async fn create_index(&self, name: &str, mapping: &Value) -> Result<(), SearchError> {
        check_index_name(name)?;
        let mappings = mapping
            .get("mappings")
            .cloned()
            .unwrap_or_else(|| mapping.clone());
        let mut body = json!({"mappings": mappings});
        if let Some(settings) = mapping.get("settings") {
            body["settings"] = settings.clone();
        }
        self.send(
            self.request(reqwest::Method::PUT, &format!("/{}", segment(name)))
                .json(&body),
        )
        .await
        .map_err(|e| match e {
            SearchError::Http { status: 400, body }
                if body.contains("resource_already_exists_exception") =>
            {
                SearchError::IndexExists(name.to_owned())
            }
            other => other,
        })?;
        Ok(())
    }

    async fn delete_index(&self, name: &str) -> Result<(), SearchError> {
        check_index_name(name)?;
        self.send(self.request(reqwest::Method::DELETE, &format!("/{}", segment(name))))
            .await
            .map_err(|e| not_found(e, name))?;
        Ok(())
    }

    async fn bulk(&self, index: Option<&str>, ndjson: &str) -> Result<BulkSummary, SearchError> {
        // Checked here so a malformed body fails with its line number before anything is sent.
        let actions = crate::bulk::parse(ndjson)?;
        let path = match index {
            Some(i) => {
                check_index_name(i)?;
                format!("/{}/_bulk", segment(i))
            }
            None => "/_bulk".to_owned(),
        };
        let mut body = ndjson.trim_end().to_owned();
        body.push('\n');
        let v = self
            .send(
                self.request(reqwest::Method::POST, &path)
                    .header(reqwest::header::CONTENT_TYPE, "application/x-ndjson")
                    .body(body),
            )
            .await?;
        let mut summary = BulkSummary::default();
        let items = v
            .get("items")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (i, item) in items.iter().enumerate() {
            let Some((op, result)) = item.as_object().and_then(|o| o.iter().next()) else {
                continue;
            };
            let line = actions.get(i).map_or(0, |a| a.line);
            if let Some(err) = result.get("error") {
                let reason = err
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("failed");
                let kind = err.get("type").and_then(Value::as_str).unwrap_or("error");
                summary
                    .errors
                    .push(format!("line {line}: {kind}: {reason}"));
            } else {
                if op == "delete" {
                    summary.deleted += 1;
                } else {
                    summary.indexed += 1;
                }
                summary.items.push(crate::backend::BulkItem {
                    id: result
                        .get("_id")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    result: result
                        .get("result")
                        .and_then(Value::as_str)
                        .and_then(crate::backend::BulkResult::parse)
                        .unwrap_or(if op == "delete" {
                            crate::backend::BulkResult::Deleted
                        } else {
                            crate::backend::BulkResult::Created
                        }),
                    version: result.get("_version").and_then(Value::as_u64).unwrap_or(0),
                    seq_no: result.get("_seq_no").and_then(Value::as_u64).unwrap_or(0),
                });
            }
        }
        Ok(summary)
    }

    async fn get_mapping(&self, name: &str) -> Result<Value, SearchError> {
        check_index_name(name)?;
        let v = self
            .send(self.request(
                reqwest::Method::GET,
                &format!("/{}/_mapping", segment(name)),
            ))
            .await
            .map_err(|e| not_found(e, name))?;
        v.get(name)
            .and_then(|i| i.get("mappings"))
            .cloned()
            .or_else(|| {
                v.as_object()
                    .and_then(|o| o.values().next())
                    .and_then(|i| i.get("mappings"))
                    .cloned()
            })
            .ok_or_else(|| SearchError::Decode(format!("no mappings for '{name}' in the answer")))
    }

    async fn put_mapping(&self, name: &str, mapping: &Value) -> Result<(), SearchError> {
        check_index_name(name)?;
        let body = mapping.get("mappings").unwrap_or(mapping);
        self.send(
            self.request(
                reqwest::Method::PUT,
                &format!("/{}/_mapping", segment(name)),
            )
            .json(body),
        )
        .await
        .map_err(|e| not_found(e, name))?;
        Ok(())
    }

    async fn put_alias(
        &self,
        index: &str,
        alias: &str,
        options: &Value,
    ) -> Result<(), SearchError> {
        check_index_expression(index)?;
        check_index_name(alias)?;
        // Checked here, so both backends take the same options.
        let options = crate::aliases::AliasOptions::parse(options)?;
        self.send(
            self.request(
                reqwest::Method::PUT,
                &format!("/{}/_alias/{}", segment(index), segment(alias)),
            )
            .json(&options.to_json()),
        )
        .await
        .map_err(|e| not_found(e, index))?;
        Ok(())
    }

    async fn get_aliases(&self, index: &str) -> Result<Value, SearchError> {
        check_index_expression(index)?;
        self.send(self.request(reqwest::Method::GET, &format!("/{}/_alias", segment(index))))
            .await
            .map_err(|e| not_found(e, index))
    }

    async fn delete_alias(&self, index: &str, alias: &str) -> Result<(), SearchError> {
        check_index_expression(index)?;
        check_index_name(alias)?;
        self.send(self.request(
            reqwest::Method::DELETE,
            &format!("/{}/_alias/{}", segment(index), segment(alias)),
        ))
        .await
        .map_err(|e| match e {
            SearchError::Http { status: 404, body } if body.contains("aliases_not_found") => {
                SearchError::NoSuchAlias(alias.to_owned())
            }
            other => not_found(other, index),
        })?;
        Ok(())
    }

    async fn sample_document(&self, name: &str) -> Result<Option<Value>, SearchError> {
        let r = self
            .search(name, &json!({"size": 1, "query": {"match_all": {}}}))
            .await?;
        Ok(r.pointer("/hits/hits/0/_source").cloned())
    }

    async fn put_script(&self, id: &str, script: &Value) -> Result<(), SearchError> {
        check_script_id(id)?;
        let body = json!({"script": script_object(script)?});
        self.send(
            self.request(reqwest::Method::PUT, &format!("/_scripts/{}", segment(id)))
                .json(&body),
        )
        .await?;
        Ok(())
    }

    async fn get_script(&self, id: &str) -> Result<Option<Value>, SearchError> {
        check_script_id(id)?;
        match self
            .send(self.request(reqwest::Method::GET, &format!("/_scripts/{}", segment(id))))
            .await
        {
            Ok(v) if v.get("found") == Some(&Value::Bool(false)) => Ok(None),
            Ok(v) => {
                v.get("script").cloned().map(Some).ok_or_else(|| {
                    SearchError::Decode(format!("no script in the answer for '{id}'"))
                })
            }
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn delete_script(&self, id: &str) -> Result<(), SearchError> {
        check_script_id(id)?;
        self.send(self.request(
            reqwest::Method::DELETE,
            &format!("/_scripts/{}", segment(id)),
        ))
        .await
        .map_err(|e| {
            if is_not_found(&e) {
                SearchError::InvalidParameter(format!("no stored script '{id}'"))
            } else {
                e
            }
        })?;
        Ok(())
    }

    async fn search(&self, name: &str, body: &Value) -> Result<Value, SearchError> {
        check_index_expression(name)?;
        self.send(
            self.request(
                reqwest::Method::POST,
                &format!("/{}/_search", segment(name)),
            )
            .json(body),
        )
        .await
        .map_err(|e| not_found(e, name))
    }
}

fn is_not_found(e: &SearchError) -> bool {
    matches!(e, SearchError::Http { status: 404, .. })
}

fn not_found(e: SearchError, name: &str) -> SearchError {
    match e {
        SearchError::Http { status: 404, body } if body.contains("index_not_found_exception") => {
            SearchError::NoSuchIndex(name.to_owned())
        }
        other => other,
    }
}
