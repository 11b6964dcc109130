//! The integration tests of toolplan-core, one module per subject, in one test binary.
#![allow(clippy::unwrap_used)]

mod approval;
mod execution;
mod output_schemas;
mod prop_parser;
mod prop_scheduler;
mod references;
mod repeats;
mod scheduler;
mod schemas;
mod streaming;
mod validation;
mod written_order;
