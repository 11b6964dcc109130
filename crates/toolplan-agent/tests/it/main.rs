//! The integration tests of toolplan-agent, one binary: the agent loop with a scripted model (by
//! subject), and what each planning mode shows the model (pinned word for word).
#![allow(clippy::unwrap_used)]

mod answer_in_plan;
mod approval;
mod compact_answer;
mod offers;
mod plan_failures;
mod planning_modes;
mod repeats;
mod replans;
mod results_answer;
mod round_trips;
mod self_checks;
mod streaming;
mod support;
