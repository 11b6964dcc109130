//! Plan dialects: each parses one plan format into the [`crate::plan::DraftPlan`] IR, reporting every
//! problem it finds, and leaves graph checks and tool checks to [`crate::plan::validate`]. A new plan
//! format is a new module here that looks like its neighbours.

pub mod tool_plan;
