//! Approval: a plan that holds calls which may change or destroy something runs only once someone
//! has approved it, shown whole, once (not call by call).
//!
//! [`Confirm`] says which plans need approval: none (the default), those with a step on a tool that
//! may destroy something ([`ToolAnnotations::may_destroy`](crate::ToolAnnotations::may_destroy)), or all. An [`Approver`] is asked with an
//! [`ApprovalRequest`] (every step as written, the ones that made it necessary marked) and answers
//! with an [`Approval`]; the terminal, a library callback and an MCP client's elicitation are
//! approvers. The scheduler asks before the first step starts, under a timeout
//! ([`ApprovalGate::timeout`], default [`DEFAULT_APPROVAL_TIMEOUT`]) and the run's cancellation; a
//! plan that is declined, or whose approval does not come in time, runs no step: each is skipped
//! with the reason, and the run's outcome is [`RunOutcome::Declined`](crate::RunOutcome::Declined).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::plan::Plan;
use crate::reference::Piece;
use crate::template::Template;
use crate::tool::ToolRegistry;

/// How long an approver may take to answer before the plan counts as declined, by default.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(300);

/// Which plans need approval before they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Confirm {
    /// None.
    #[default]
    Never,
    /// Plans with a step on a tool that may destroy something ([`ToolAnnotations::may_destroy`]).
    ///
    /// [`ToolAnnotations::may_destroy`]: crate::ToolAnnotations::may_destroy
    Destructive,
    /// Every plan.
    All,
}

impl Confirm {
    /// The policy named `never`, `destructive` or `all`.
    pub fn parse(name: &str) -> Option<Confirm> {
        match name {
            "never" => Some(Confirm::Never),
            "destructive" => Some(Confirm::Destructive),
            "all" => Some(Confirm::All),
            _ => None,
        }
    }
}

/// One step of a plan waiting for approval, as the plan wrote it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProposedStep {
    /// The step id.
    pub id: String,
    /// The tool it calls.
    pub tool: String,
    /// Its arguments as written, references as `"$ref:step.path"` text.
    pub arguments: Value,
    /// Whether this step is one that makes the plan need approval.
    pub flagged: bool,
}

/// What an approver is asked: the whole plan, every step as written.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    /// The plan's steps, in plan order.
    pub steps: Vec<ProposedStep>,
}

impl ApprovalRequest {
    /// The plan as a person reads it: a line per step (`id = tool({arguments})`), the flagged ones
    /// marked with `!`.
    pub fn describe(&self) -> String {
        self.steps
            .iter()
            .map(|s| {
                format!(
                    "{} {} = {}({})",
                    if s.flagged { "!" } else { " " },
                    s.id,
                    s.tool,
                    s.arguments
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// An approver's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// Run the plan.
    Approved,
    /// Do not run it, and why (shown to whoever reads the run).
    Declined(String),
}

/// Who approves plans: the terminal, a library callback, an MCP client. Asked once per plan that
/// needs approval; the scheduler bounds the wait ([`ApprovalGate::timeout`]) and drops the future
/// when the run is cancelled.
#[async_trait]
pub trait Approver: Send + Sync {
    /// Approves or declines the plan in `request`.
    async fn approve(&self, request: &ApprovalRequest) -> Approval;
}

/// An [`Approver`] made of an async closure (the library's callback).
pub struct FnApprover<F>(pub F);

#[async_trait]
impl<F, Fut> Approver for FnApprover<F>
where
    F: Fn(ApprovalRequest) -> Fut + Send + Sync,
    Fut: std::future::Future<Output = Approval> + Send,
{
    async fn approve(&self, request: &ApprovalRequest) -> Approval {
        (self.0)(request.clone()).await
    }
}

/// Which plans need approval, who approves them, and how long they may take: part of a
/// [`RunConfig`](crate::RunConfig).
#[derive(Clone)]
pub struct ApprovalGate {
    /// Which plans need approval.
    pub confirm: Confirm,
    /// Who is asked.
    pub approver: Arc<dyn Approver>,
    /// Longest wait for an answer; past it the plan is declined.
    pub timeout: Duration,
}

impl ApprovalGate {
    /// A gate that asks `approver` about the plans `confirm` names, with the default timeout.
    pub fn new(confirm: Confirm, approver: Arc<dyn Approver>) -> Self {
        Self {
            confirm,
            approver,
            timeout: DEFAULT_APPROVAL_TIMEOUT,
        }
    }

    /// The same gate with another timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// What to ask about `plan`, or `None` when it needs no approval. A step that only shares an
    /// earlier step's result ([`Step::same_call_as`](crate::Step::same_call_as)) makes no call of its
    /// own, but it is shown like the rest.
    pub fn request(&self, plan: &Plan, tools: &ToolRegistry) -> Option<ApprovalRequest> {
        let flagged = |tool: &str| match self.confirm {
            Confirm::Never => false,
            Confirm::All => true,
            // A tool that is not registered runs nothing: its step fails.
            Confirm::Destructive => tools
                .get(tool)
                .is_some_and(|t| t.tool().annotations().may_destroy()),
        };
        let steps: Vec<ProposedStep> = plan
            .steps()
            .iter()
            .map(|s| ProposedStep {
                id: s.id.clone(),
                tool: s.tool.clone(),
                arguments: as_written(&s.arguments),
                flagged: flagged(&s.tool),
            })
            .collect();
        steps
            .iter()
            .any(|s| s.flagged)
            .then_some(ApprovalRequest { steps })
    }
}

impl fmt::Debug for ApprovalGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApprovalGate")
            .field("confirm", &self.confirm)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl PartialEq for ApprovalGate {
    fn eq(&self, other: &Self) -> bool {
        self.confirm == other.confirm
            && self.timeout == other.timeout
            && Arc::ptr_eq(&self.approver, &other.approver)
    }
}

impl Eq for ApprovalGate {}

/// A step's arguments as the plan wrote them: references as `"$ref:…"` text. The template was
/// compiled from a value within the plan's depth limit, so the recursion is as deep as that.
fn as_written(template: &Template) -> Value {
    match template {
        Template::Literal(v) => v.clone(),
        Template::Ref(r) => Value::String(r.to_string()),
        Template::Interpolated(pieces) => Value::String(
            pieces
                .iter()
                .map(|p| match p {
                    Piece::Text(t) => t.clone(),
                    Piece::Ref(r) => r.to_string(),
                })
                .collect(),
        ),
        Template::Array(items) => Value::Array(items.iter().map(as_written).collect()),
        Template::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, t)| (k.clone(), as_written(t)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{Engine, FnTool, ToolAnnotations};

    fn engine() -> Engine {
        let mut registry = ToolRegistry::new();
        let tool = |name: &str, annotations: ToolAnnotations| {
            Arc::new(
                FnTool::new(name, "t", json!({"type": "object"}), |_, _| async {
                    Ok(json!({"id": 1}))
                })
                .with_annotations(annotations),
            )
        };
        registry
            .register(tool("read", ToolAnnotations::READ_ONLY))
            .unwrap();
        registry
            .register(tool(
                "delete",
                ToolAnnotations {
                    destructive: Some(true),
                    ..Default::default()
                },
            ))
            .unwrap();
        registry
            .register(tool("unsaid", ToolAnnotations::default()))
            .unwrap();
        Engine::new(Arc::new(registry))
    }

    fn gate(confirm: Confirm) -> ApprovalGate {
        ApprovalGate::new(
            confirm,
            Arc::new(FnApprover(|_| async { Approval::Approved })),
        )
    }

    #[test]
    fn the_policy_names_the_plans_that_need_approval() {
        let engine = engine();
        let plan = |tool: &str| {
            engine
                .compile_value(json!({"steps": [
                    {"id": "r", "tool": "read", "arguments": {"q": "x"}},
                    {"id": "d", "tool": tool, "arguments": {"of": "$ref:r.id", "note": "id $ref:r.id"}}]}))
                .unwrap()
        };
        let tools = engine.tools();
        assert_eq!(gate(Confirm::Never).request(&plan("delete"), tools), None);
        assert_eq!(
            gate(Confirm::Destructive).request(&plan("read"), tools),
            None
        );
        // A tool that says nothing may destroy, as MCP's defaults read.
        for tool in ["delete", "unsaid"] {
            let request = gate(Confirm::Destructive)
                .request(&plan(tool), tools)
                .expect("needs approval");
            assert_eq!(
                request.steps.iter().map(|s| s.flagged).collect::<Vec<_>>(),
                [false, true]
            );
            // The whole plan, as written.
            assert_eq!(
                request.steps[1].arguments,
                json!({"of": "$ref:r.id", "note": "id $ref:r.id"})
            );
            assert!(request.describe().contains(&format!("! d = {tool}(")));
        }
        let all = gate(Confirm::All).request(&plan("read"), tools).unwrap();
        assert!(all.steps.iter().all(|s| s.flagged));
    }

    #[test]
    fn policies_parse_by_name() {
        assert_eq!(Confirm::parse("destructive"), Some(Confirm::Destructive));
        assert_eq!(Confirm::parse("all"), Some(Confirm::All));
        assert_eq!(Confirm::parse("never"), Some(Confirm::Never));
        assert_eq!(Confirm::parse("sometimes"), None);
    }
}
