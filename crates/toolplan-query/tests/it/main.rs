//! The integration tests of toolplan-query, in one test binary.
#![allow(clippy::unwrap_used)]

mod query_plans;
mod streamed;
