//! Plans that start running while the model writes them (issue 22).
//!
//! With a planner offered and streaming on ([`AgentBuilder::stream_plans`](crate::AgentBuilder::stream_plans)),
//! the model's reply is read as it is written ([`ChatModel::chat_streamed`]): when an
//! `execute_tool_plan` call begins, its arguments' text goes to the engine as it comes
//! ([`Engine::run_streamed_pieces`]), which starts each step on a read-only tool as soon as its
//! text and the steps it refers to are complete. Nothing else changes: when the reply is done the
//! agent reads it as always (completes the plan's answer step, checks it against the question,
//! answers a repeated call from memory), and then either hands the engine the plan as it will run
//! ([`PlanPiece::Whole`]: the steps that started early go on where the plan keeps them) or drops
//! the early run (it is cancelled; its steps were read-only). The reply's first plan starts early;
//! it goes on only when it is the reply's one call and the agent runs it, and any other reply runs
//! as it always did. Its timings (and the interaction's) include the time the model spent writing.
//!
//! A tool that takes its arguments as they are written ([`toolplan_core::Tool::begin_streamed`]:
//! the query-plan tool, whose nodes start as they are written) is followed the same way: its
//! call begins with the reply, and the call the agent then makes with the same arguments goes on
//! from it. A call the agent does not make (sent back, answered from memory) is stopped.

use std::sync::Arc;
use tokio::time::Instant;

use futures::channel::mpsc;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use toolplan_core::{
    EXECUTE_TOOL_PLAN, Engine, InvalidPlan, PlanPiece, PlanRun, Problem, RunControl, StreamedStart,
};
use toolplan_llm::{ChatModel, ChatRequest, ChatResponse, LlmError, ReplyDelta};
use toolplan_planner::ExecuteToolPlan;

/// A plan the engine runs while the model writes it.
pub(crate) struct StreamedPlan {
    /// The call's place in the reply.
    index: usize,
    /// Where its text goes.
    pieces: mpsc::UnboundedSender<PlanPiece>,
    /// The run.
    run: JoinHandle<Result<PlanRun, InvalidPlan>>,
    /// Stops the run when the plan is dropped.
    cancel: CancellationToken,
    /// When the run started (its steps' start times count from here).
    pub(crate) began: Instant,
}

impl StreamedPlan {
    /// Starts the run of the plan that call `index` writes.
    fn start(engine: Arc<Engine>, index: usize, cancel: &CancellationToken) -> Self {
        let (pieces, text) = mpsc::unbounded();
        let cancel = cancel.child_token();
        let control = RunControl::with_cancel(cancel.clone());
        let began = Instant::now();
        let run = tokio::spawn(async move { engine.run_streamed_pieces(text, control).await });
        Self {
            index,
            pieces,
            run,
            cancel,
            began,
        }
    }

    /// Whether this is the plan of the reply whose calls are `calls`: its one call, a plan.
    pub(crate) fn is_the_plan_of(&self, calls: &[toolplan_llm::ToolCall]) -> bool {
        self.index == 0 && calls.len() == 1 && calls[0].name == EXECUTE_TOOL_PLAN
    }

    /// Runs `plan`, the whole plan as the agent has it run, on what started early: the run's
    /// result. The plan runs anew by `planner` when the early run had already ended (its text
    /// passed the plan size limit, which the plan given may not) or failed outright.
    pub(crate) async fn finish(
        mut self,
        plan: Value,
        planner: &ExecuteToolPlan,
        control: RunControl,
    ) -> Result<PlanRun, InvalidPlan> {
        if self
            .pieces
            .unbounded_send(PlanPiece::Whole(plan.clone()))
            .is_ok()
        {
            self.pieces.close_channel();
            match (&mut self.run).await {
                // The text passed the size limit before the plan was given: the plan given is
                // judged on its own, as a plan that is not streamed is.
                Ok(Err(invalid))
                    if invalid
                        .problems
                        .iter()
                        .all(|p| matches!(p, Problem::PlanTooLarge { .. })) => {}
                Ok(result) => return result,
                Err(_) => {}
            }
        }
        planner.execute(plan, control).await
    }
}

impl Drop for StreamedPlan {
    fn drop(&mut self) {
        // A plan the agent did not run (sent back, answered from memory, the call failed) stops;
        // after a finished run this is a no-op.
        self.cancel.cancel();
    }
}

/// One model call whose reply is followed as it is written: the response, the plan that started
/// running from it if the reply began an `execute_tool_plan` call (and `engine`, the planner's, is
/// given; only the reply's first plan is followed), and the calls begun of tools that take their
/// arguments as they are written (`begin`: a query-plan tool; [`toolplan_core::Tool::begin_streamed`]),
/// their text complete, each with its call's place in the reply. Keep those until the turn's calls
/// have run; drop at once those whose call will not be made.
pub(crate) async fn ask(
    model: &dyn ChatModel,
    request: &ChatRequest,
    engine: Option<&Arc<Engine>>,
    begin: &(dyn Fn(&str) -> Option<StreamedStart> + Sync),
    cancel: &CancellationToken,
) -> (
    Result<ChatResponse, LlmError>,
    Option<StreamedPlan>,
    Vec<(usize, StreamedStart)>,
) {
    let (sink, mut deltas) = tokio::sync::mpsc::unbounded_channel();
    let (done, mut call_ended) = tokio::sync::oneshot::channel::<()>();
    let chat = async move {
        let response = model.chat_streamed(request, &sink, cancel).await;
        // A provider may still hold a copy of the sink (a local model's worker stopping between
        // tokens): the loop below ends with the call, not with the last copy.
        let _ = done.send(());
        response
    };
    let mut plan: Option<StreamedPlan> = None;
    let mut starts: Vec<(usize, StreamedStart)> = Vec::new();
    let mut take = |delta: ReplyDelta| match delta {
        ReplyDelta::CallStart { index, name } if name == EXECUTE_TOOL_PLAN => {
            if let Some(engine) = engine.filter(|_| plan.is_none()) {
                plan = Some(StreamedPlan::start(Arc::clone(engine), index, cancel));
            }
        }
        ReplyDelta::CallStart { index, name } => {
            if let Some(start) = begin(&name) {
                starts.push((index, start));
            }
        }
        ReplyDelta::Arguments { index, text } => {
            if let Some(p) = plan.as_ref().filter(|p| p.index == index) {
                // A run that ended already (a plan too large) reads no more.
                let _ = p.pieces.unbounded_send(PlanPiece::Text(text));
            } else if let Some((_, start)) = starts.iter().find(|(i, _)| *i == index) {
                start.push(text);
            }
        }
        _ => {}
    };
    let follow = async {
        loop {
            tokio::select! {
                biased;
                delta = deltas.recv() => match delta {
                    Some(delta) => take(delta),
                    None => break,
                },
                _ = &mut call_ended => {
                    deltas.close();
                    while let Ok(delta) = deltas.try_recv() {
                        take(delta);
                    }
                    break;
                }
            }
        }
    };
    let (response, ()) = tokio::join!(chat, follow);
    for (_, start) in &mut starts {
        start.end();
    }
    (response, plan, starts)
}
