//! The integration tests of toolplan-planner, one binary: the `execute_tool_plan` tool, what a model
//! reads (pinned word for word), the plan schemas, and a property test that the tool takes anything.
#![allow(clippy::unwrap_used)]

mod execute_tool_plan;
mod never_panics;
mod schema;
mod snapshots;
