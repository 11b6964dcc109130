//! How an agent offers tool planning ([`Planning`]), and what its system prompt and results then say
//! of plans.

use std::sync::Arc;

use toolplan_core::{Engine, InvalidPlan};

use crate::description::ToolListing;
use crate::execute_tool_plan::ExecuteToolPlan;

/// What the system prompt adds when `execute_tool_plan` is offered beside the tools.
pub const PLANNING_INSTRUCTIONS: &str = "\
Tool planning: when answering needs more than one tool call, do not call the tools one by one. Call \
execute_tool_plan once, with every tool call as a step. Each step has an id, a tool and its arguments; \
a step uses an earlier step's result through \"$ref:<step_id>\" or \"$ref:<step_id>.<field>\"; \
output_steps lists the steps whose results you need. Independent steps run in parallel. For example, \
to look up two things and combine them, call execute_tool_plan with {\"steps\": [{\"id\": \"a\", \
\"tool\": \"lookup\", \"arguments\": {\"query\": \"first thing\"}}, {\"id\": \"b\", \"tool\": \
\"lookup\", \"arguments\": {\"query\": \"second thing\"}}, {\"id\": \"c\", \"tool\": \"combine\", \
\"arguments\": {\"x\": \"$ref:a\", \"y\": \"$ref:b\"}}], \"output_steps\": [\"c\"]}. When the plan's \
results come back, answer the user from them. Call a tool directly only when one call is enough.";

/// What the system prompt adds in plan-only mode, where `execute_tool_plan` is the only tool and its
/// description explains plans.
pub const PLAN_ONLY_INSTRUCTIONS: &str = "\
Use the tools through execute_tool_plan: one plan with every call the answer needs and no other (one \
step when one call answers the question), then answer from its results.";

/// What the system prompt adds when plans may end with their answer.
pub const ANSWER_IN_PLAN_INSTRUCTIONS: &str = "\
A plan's answer, as in the example, goes to the user as it is, with the results inserted.";

/// Follows the summary of a plan in which steps failed: the model may plan again (a replan costs one
/// model call; answering from a broken plan costs the answer). A tool whose error asks to be tried
/// again (a busy service) is a reason to plan again too: told only of plans planned wrong, the 1.5B
/// model answered a busy weather service with a made-up forecast.
pub const REPLAN_HINT: &str = "\nIf a failed step was planned wrong (a missing step, a wrong \
reference or argument) or its error says to try again, call execute_tool_plan again with a plan for \
what failed, which may use the results above by their ids ($ref:<id>) instead of calling those tools \
again; otherwise answer from the results you have and say what could not be found.";

/// Follows the summary of a plan whose failed steps all failed because a reference found no value
/// (a field the producing step's output lacks: a lookup left out, a wrong field), when the agent
/// then asks for a corrected plan: the plan was wrong, not the tools.
pub const FIX_PLAN_HINT: &str = "\nThe failed steps used a result that does not have what they \
refer to, so the plan is wrong: a step is missing or a reference names the wrong field. Call \
execute_tool_plan again with a corrected plan, with a step for every lookup the answer needs.";

/// Follows the summary of a plan whose one failed step is its answer (a choice whose condition
/// could not be evaluated, an answer that inserted a value the results lack): the lookups
/// succeeded, so the model replies from their results instead of planning again.
pub const ANSWER_FAILED_HINT: &str = "\nOnly the plan's answer failed: every lookup succeeded. \
Reply to the user from the results above.";

/// Follows the summary of a plan whose failed steps all failed with an error that asks to try again
/// (a busy service), when the agent then asks for those steps again: the reply starts with them, as
/// the plan wrote them, and their references to the plan's other steps use the results listed.
pub const BUSY_HINT: &str = "\nThe failed steps' tools asked to be tried again. Call \
execute_tool_plan again with the steps that failed or were skipped; their references to the other \
steps use the results above ($ref:<id>), so those tools are not called again.";

/// Follows each result of a turn whose reply was cut off at the output-token limit: only the calls
/// and plan steps written whole ran.
pub const CUT_OFF_NOTE: &str = "\nNote: your reply was cut off at the output-token limit, so only \
the calls and plan steps written in full were run. If more are needed, make them in another, shorter \
call.";

/// What the model reads when its plan was rejected before it ran: every problem, and that it may
/// send the plan again fixed.
pub fn plan_not_run(invalid: &InvalidPlan) -> String {
    format!(
        "Error: the plan was not run. {invalid}. Fix the plan and call execute_tool_plan again."
    )
}

/// Whether and how an agent offers `execute_tool_plan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Planning {
    /// No planner: one model round-trip per tool call.
    #[default]
    Off,
    /// `execute_tool_plan` beside the individual tools; the system prompt says when to use it, and
    /// its description leaves the tools out (the model reads them once, as tools).
    Offered,
    /// [`Offered`](Self::Offered), and plans have an `answer` field whose text, with the results
    /// inserted, is the answer: a plan whose steps all succeed needs no further model call.
    OfferedWithAnswer,
    /// `execute_tool_plan` alone, its description listing every tool as a signature with a line per
    /// argument ([`ToolListing::Documented`]): every tool use is a plan. For models that do not pick the planner on their own when the tools are
    /// also offered one by one.
    Only,
    /// [`Only`](Self::Only), and plans have an `answer` field (see
    /// [`OfferedWithAnswer`](Self::OfferedWithAnswer)).
    OnlyWithAnswer,
}

impl Planning {
    /// Whether `execute_tool_plan` is offered.
    pub fn offers_planner(self) -> bool {
        self != Planning::Off
    }

    /// Whether `execute_tool_plan` is the only tool offered.
    pub fn plan_only(self) -> bool {
        matches!(self, Planning::Only | Planning::OnlyWithAnswer)
    }

    /// Whether plans have an `answer` field.
    pub fn answer_in_plan(self) -> bool {
        matches!(self, Planning::OfferedWithAnswer | Planning::OnlyWithAnswer)
    }

    /// The `execute_tool_plan` tool this mode offers over `engine` (none when planning is off).
    pub fn execute_tool_plan(self, engine: Arc<Engine>) -> Option<ExecuteToolPlan> {
        if !self.offers_planner() {
            return None;
        }
        let listing = if self.plan_only() {
            // Each tool's arguments with what its schema says of them (descriptions, formats,
            // bounds, defaults): what a model offered the tools natively reads.
            ToolListing::Documented
        } else {
            // The tools are offered one by one beside the planner: no need to list them again.
            ToolListing::Omitted
        };
        let tool = ExecuteToolPlan::new(engine).listing(listing);
        Some(if self.answer_in_plan() {
            tool.with_answer_field()
        } else {
            tool
        })
    }

    /// What this mode adds to the system prompt (none when planning is off).
    pub fn instructions(self) -> Option<String> {
        if !self.offers_planner() {
            return None;
        }
        // Plan-only: the planner's description already explains plans with an example.
        let mut text = if self.plan_only() {
            PLAN_ONLY_INSTRUCTIONS
        } else {
            PLANNING_INSTRUCTIONS
        }
        .to_owned();
        if self.answer_in_plan() {
            text.push(' ');
            text.push_str(ANSWER_IN_PLAN_INSTRUCTIONS);
        }
        Some(text)
    }
}
