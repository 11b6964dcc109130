//! The integration tests of toolplan-search, one module per subject, in one test binary.
#![allow(clippy::unwrap_used)]

mod aggregations;
mod aliases;
mod compat_answers;
mod dsl_eval_set;
mod dsl_examples;
mod dynamic_mapping;
mod fixtures;
mod hardening_search;
mod iris;
mod opensearch;
mod planner;
mod planner_observe;
mod versions_collapse;
