//! # toolplan-search
//!
//! Search for toolplan: one [`SearchBackend`] trait over OpenSearch's vocabulary (mappings, `_bulk`
//! bodies, query DSL, OpenSearch-shaped responses), implemented by an embedded on-disk index and by a
//! real OpenSearch cluster, and the query-DSL planner that turns questions into DSL for them.
//!
//! ## How the parts fit
//!
//! * [`mapping`] — OpenSearch mappings flattened into the fields a query can name.
//! * [`bulk`] — the `_bulk` NDJSON body.
//! * [`backend`] — the [`SearchBackend`] trait and index-name rules.
//! * [`error`] — [`SearchError`]: every failure names what and where (`query.bool.must[0].nested`).

pub mod backend;
pub mod bulk;
pub mod error;
pub mod mapping;

pub use backend::{BulkSummary, IndexInfo, SearchBackend};
pub use error::SearchError;
pub use mapping::{FieldKind, FieldSpec, Mapping};
