//! Plans approved by the MCP client that sent them: when the server runs such plans only once
//! approved (`toolplan mcp --confirm`), the plan is shown whole to the client's user through MCP
//! elicitation (a form with one yes/no field), once per plan. A client that cannot be asked (it
//! declared no elicitation) gets the plan declined, saying why; nothing runs.

use async_trait::async_trait;
use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::{ElicitationMode, Peer};
use toolplan_core::approval::{Approval, ApprovalRequest, Approver};

/// The form field the client's user answers.
const APPROVE: &str = "approve";

/// Asks the client of one request.
pub(super) struct ClientApprover {
    peer: Peer<RoleServer>,
}

impl ClientApprover {
    pub(super) fn new(peer: Peer<RoleServer>) -> Self {
        Self { peer }
    }
}

#[async_trait]
impl Approver for ClientApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Approval {
        if !self
            .peer
            .supported_elicitation_modes()
            .contains(&ElicitationMode::Form)
        {
            return Approval::Declined(
                "this server runs such plans only once they are approved, and the client cannot \
                 be asked (it does not support MCP elicitation)"
                    .into(),
            );
        }
        let message = format!(
            "toolplan: this plan needs your approval before it runs (! marks the steps that may \
             change or destroy something):\n{}",
            request.describe()
        );
        let schema = ElicitationSchema::builder()
            .required_bool(APPROVE)
            .description("Run this plan?")
            .build_unchecked();
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema: schema,
        };
        match self.peer.create_elicitation(params).await {
            Ok(result) => match result.action {
                ElicitationAction::Accept
                    if result
                        .content
                        .as_ref()
                        .and_then(|c| c.get(APPROVE))
                        .and_then(serde_json::Value::as_bool)
                        == Some(true) =>
                {
                    Approval::Approved
                }
                ElicitationAction::Accept => {
                    Approval::Declined("the client's user answered no".into())
                }
                ElicitationAction::Decline => {
                    Approval::Declined("the client's user declined".into())
                }
                // Cancel, and whatever later protocol versions add.
                _ => Approval::Declined("the client's user cancelled".into()),
            },
            Err(e) => Approval::Declined(format!("the client could not be asked: {e}")),
        }
    }
}
