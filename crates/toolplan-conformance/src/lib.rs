//! # toolplan-conformance
//!
//! Runs OpenSearch's YAML REST tests (the vendored suites in `opensearch-yaml/`: search, search
//! aggregations, count, msearch, mappings) against toolplan's embedded search engine, with the Java
//! runner's matching rules and the tests' expected answers unchanged, and counts what passes.
//!
//! ## How the parts fit
//!
//! * [`yaml`] — the test files as JSON values (scalars typed as the Java runner types them).
//! * [`suite`] — a file's `setup`, `teardown` and tests, each a list of [`suite::Step`]s.
//! * [`api`] — the `do` steps' APIs answered by a search backend in OpenSearch's shapes.
//! * [`mod@assert`] — paths, the stash and the assertions (`match`, `length`, `is_true` …).
//! * [`run`] — one test on a fresh backend, its verdict and step counts; [`report`] sums them per
//!   suite.

pub mod api;
pub mod assert;
pub mod report;
pub mod run;
pub mod suite;
pub mod yaml;

/// What can go wrong reading the tests.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file is not YAML.
    #[error("yaml: {0}")]
    Yaml(String),
    /// A file is YAML but not a test file.
    #[error("test format: {0}")]
    Format(String),
    /// A file or folder could not be read.
    #[error("{path}: {source}")]
    Io {
        /// Which.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}
