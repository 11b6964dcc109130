//! Errors of the search layer.

use std::path::PathBuf;
use std::time::Duration;

/// What went wrong in a search backend or the query-DSL planner.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    /// The index does not exist.
    #[error("no such index '{0}'")]
    NoSuchIndex(String),
    /// The alias does not exist (on the indices named).
    #[error("alias '{0}' missing")]
    NoSuchAlias(String),
    /// An index of that name exists already.
    #[error("index '{0}' exists already")]
    IndexExists(String),
    /// The index name breaks OpenSearch's rules.
    #[error("invalid index name '{name}': {reason}")]
    InvalidIndexName {
        /// The name as given.
        name: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// The mapping cannot be used.
    #[error("invalid mapping: {0}")]
    InvalidMapping(String),
    /// A parameter (of the planner, a tool, a stored script) cannot be used.
    #[error("{0}")]
    InvalidParameter(String),
    /// A `_bulk` body line is malformed.
    #[error("bulk line {line}: {message}")]
    Bulk {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The query DSL is malformed, or asks for something this backend does not do. `path` is where in
    /// the request body (`query.bool.must[0].nested`).
    #[error("{path}: {message}")]
    Dsl {
        /// Where in the request body.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A clause the embedded backend does not support (nested, neural, knn, script …).
    #[error("{path}: the {clause} clause is not supported by the embedded backend")]
    Unsupported {
        /// Where in the request body.
        path: String,
        /// The clause.
        clause: String,
    },
    /// An index is there but cannot be read (its directory is damaged); other indices still work.
    #[error("index '{name}' cannot be read: {reason}")]
    Unreadable {
        /// The index name.
        name: String,
        /// What failed.
        reason: String,
    },
    /// A search ran longer than the backend's time budget ([`crate::limits::SearchLimits::timeout`])
    /// and was stopped.
    #[error(
        "the search on '{index}' ran longer than the search time budget of {budget:?} and was stopped (ask for less, or set a shorter \"timeout\" in the body to get the hits found so far; the budget is the search limit timeout)"
    )]
    TimedOut {
        /// The index searched.
        index: String,
        /// The budget.
        budget: Duration,
    },
    /// The search was cancelled by its caller.
    #[error("the search on '{0}' was cancelled")]
    Cancelled(String),
    /// The embedded index failed.
    #[error("embedded index: {0}")]
    Index(String),
    /// A file or folder could not be read or written.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The OpenSearch cluster answered with an error.
    #[error("OpenSearch answered HTTP {status}: {body}")]
    Http {
        /// HTTP status.
        status: u16,
        /// The response body (cut to a readable length).
        body: String,
    },
    /// The OpenSearch cluster could not be reached.
    #[error("OpenSearch request failed: {0}")]
    Transport(String),
    /// A backend answer that is not what OpenSearch sends.
    #[error("unexpected response: {0}")]
    Decode(String),
}

impl SearchError {
    /// Whether this is the backend refusing a request body (malformed or unsupported DSL, HTTP 400),
    /// as opposed to the backend failing or being unreachable.
    pub fn is_rejection(&self) -> bool {
        matches!(
            self,
            SearchError::Dsl { .. }
                | SearchError::Unsupported { .. }
                | SearchError::Http { status: 400, .. }
        )
    }

    /// A DSL error at `path`.
    pub fn dsl(path: impl Into<String>, message: impl Into<String>) -> Self {
        SearchError::Dsl {
            path: path.into(),
            message: message.into(),
        }
    }
}
