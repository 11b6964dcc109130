//! # toolplan-search
//!
//! Search for toolplan: one [`SearchBackend`] trait over OpenSearch's vocabulary (mappings, `_bulk`
//! bodies, query DSL, OpenSearch-shaped responses), implemented by an embedded on-disk index and by a
//! real OpenSearch cluster, and the query-DSL planner that turns questions into DSL for them.
//!
//! ## How the parts fit
//!
//! * [`mapping`] — OpenSearch mappings flattened into the fields a query can name; dynamic mapping
//!   of the new fields documents bring ([`mapping::dynamic`]) and put-mapping's merge rules.
//! * [`bulk`] — the `_bulk` NDJSON body.
//! * [`aliases`] — index aliases: other names for indices, with filters and a write index, and
//!   index expressions resolved through them.
//! * [`autofix`] — corrections of generated DSL that need no model (`genre.keyword` → `genre`).
//! * [`check`] — a search body checked against a mapping: unknown fields, `term` on analysed text.
//! * [`datemath`] — dates and date math (`now-30d/d`) as OpenSearch reads them.
//! * [`backend`] — the [`SearchBackend`] trait, index-name rules and index expressions (`a,b`,
//!   `logs-*`, `_all`, `-old`).
//! * [`limits`] — [`SearchLimits`]: what one search may cost the embedded backend (time budget,
//!   result window, slop, nesting, clauses, buckets), each with a default the owner can change.
//! * [`embedded`] — [`EmbeddedBackend`]: tantivy indices on disk, rebuilt when documents grow their
//!   mapping; OpenSearch DSL translated to tantivy queries and aggregations; unsupported clauses are
//!   errors naming where they are.
//! * [`opensearch`] — [`OpenSearchBackend`]: a real OpenSearch cluster over its REST API (basic auth or
//!   API key, TLS, timeouts).
//! * [`params`] — the planner's parameters (registration and execution), templates, response filter.
//! * [`prompts`] and [`planner`] — query-DSL planning: [`DslPlanner`] asks a model for the DSL of a
//!   question (OpenSearch QueryPlanningTool's prompts, plus the frequent values of the keyword
//!   fields: [`planner::values`]), takes the first valid JSON object, checks it against the mapping
//!   and the backend, runs it and compares what came back with the question
//!   ([`planner::observe`]), sends problems and observations back for repair, falls back with a
//!   reason.
//! * [`tools`] — the agentic-search tools for plans and agents: `list_indices`, `index_mapping`,
//!   `search_index`, `query_planning`.
//! * [`filter_path`] — response filtering as OpenSearch's `filter_path` does it.
//! * [`number_format`] — numbers written with a Java `DecimalFormat` pattern (a field's or an
//!   aggregation's `format`).
//! * [`typed_keys`] — aggregation results named `type#name`, as OpenSearch's `typed_keys` asks.
//! * [`eval`] — execution accuracy: whether a search response holds a question's expected answer,
//!   and OpenSearch's plain extraction for comparison (the query-DSL benchmark).
//! * [`error`] — [`SearchError`]: every failure names what and where (`query.bool.must[0].nested`).

pub mod aliases;
pub mod autofix;
pub mod backend;
pub mod bulk;
pub mod check;
pub mod datemath;
pub mod embedded;
pub mod error;
pub mod eval;
pub mod filter_path;
pub mod limits;
pub mod mapping;
pub mod number_format;
pub mod opensearch;
pub mod params;
pub mod planner;
pub mod prompts;
pub mod settings;
pub mod tools;
pub mod typed_keys;

pub use backend::{
    BulkItem, BulkResult, BulkSummary, IndexInfo, IndexListing, SearchBackend, UnreadableIndex,
};
pub use embedded::EmbeddedBackend;
pub use error::SearchError;
pub use limits::SearchLimits;
pub use mapping::{FieldKind, FieldSpec, Mapping};
pub use opensearch::{Auth, OpenSearchBackend, OpenSearchConfig};
pub use params::{GenerationType, PlanParameters, SearchTemplate};
pub use planner::{Attempt, DslPlan, DslPlanner, TemplateChoice};
