//! Synthesizers: how a branch node turns its children's answers into its own answer.
//!
//! Each child is handed over as `Query: <child query>\nResponse: <child answer>`, children separated
//! by a blank line. The LLM-backed modes ask the model to answer from those texts only:
//!
//! * **compact** (default): every child in one prompt. When the texts exceed the context budget they
//!   are packed into chunks; the first chunk is answered, and each later chunk refines that answer.
//! * **tree_summarize**: the chunks are answered in parallel, then those answers are packed and
//!   answered again, level by level, until one answer is left.
//! * **concat**: no model; the children's texts joined, for callers who want the raw answers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolplan_core::{FnTool, Tool, ToolAnnotations, ToolContext, ToolError, value_as_text};
use toolplan_llm::{ChatModel, ChatRequest, Message};

use crate::dialect::{SYNTH_CONTEXT, SYNTH_QUERY};
use crate::error::QueryError;

/// The tool name branch steps call.
pub const SYNTHESIZE: &str = "synthesize";

/// Default context budget, in characters of child text per prompt (about 3,000 tokens).
pub const DEFAULT_CONTEXT_BUDGET: usize = 12_000;

/// Levels of `tree_summarize` before the remaining answers are combined regardless of the budget.
const MAX_TREE_LEVELS: usize = 16;

/// How children's answers are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SynthesisMode {
    /// One prompt with every child; later chunks refine the answer when the budget is exceeded.
    #[default]
    Compact,
    /// Chunks answered in parallel, then their answers combined, level by level.
    TreeSummarize,
    /// The children's texts joined; no model.
    Concat,
}

impl SynthesisMode {
    /// The mode's name as the CLI and configuration write it.
    pub fn as_str(self) -> &'static str {
        match self {
            SynthesisMode::Compact => "compact",
            SynthesisMode::TreeSummarize => "tree_summarize",
            SynthesisMode::Concat => "concat",
        }
    }
}

/// One child of a branch: its question and its answer as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Child {
    /// The child's question.
    pub query: String,
    /// The child's answer.
    pub response: String,
}

impl Child {
    /// The text handed to the synthesizer: `Query: …\nResponse: …`.
    pub fn text(&self) -> String {
        format!("Query: {}\nResponse: {}", self.query, self.response)
    }
}

/// LLM use of a synthesizer: calls and tokens, summed over every call since it was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LlmUsage {
    /// Model calls.
    pub calls: u64,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
}

impl LlmUsage {
    /// What was used since `before`, an earlier reading of the same counters.
    pub fn since(self, before: LlmUsage) -> LlmUsage {
        LlmUsage {
            calls: self.calls.saturating_sub(before.calls),
            input_tokens: self.input_tokens.saturating_sub(before.input_tokens),
            output_tokens: self.output_tokens.saturating_sub(before.output_tokens),
        }
    }
}

#[derive(Default)]
struct Counters {
    calls: AtomicU64,
    input: AtomicU64,
    output: AtomicU64,
}

/// Combines children's answers into a branch's answer.
pub struct Synthesizer {
    mode: SynthesisMode,
    model: Option<Arc<dyn ChatModel>>,
    budget: usize,
    max_tokens: Option<u32>,
    counters: Counters,
}

impl std::fmt::Debug for Synthesizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Synthesizer")
            .field("mode", &self.mode)
            .field("model", &self.model.as_ref().map(|m| m.name().to_owned()))
            .field("budget", &self.budget)
            .finish()
    }
}

impl Synthesizer {
    /// A synthesizer of this mode; `model` is required by every mode but `concat`.
    pub fn new(mode: SynthesisMode, model: Option<Arc<dyn ChatModel>>) -> Self {
        Self {
            mode,
            model,
            budget: DEFAULT_CONTEXT_BUDGET,
            max_tokens: Some(512),
            counters: Counters::default(),
        }
    }

    /// `compact` with this model.
    pub fn compact(model: Arc<dyn ChatModel>) -> Self {
        Self::new(SynthesisMode::Compact, Some(model))
    }

    /// `tree_summarize` with this model.
    pub fn tree_summarize(model: Arc<dyn ChatModel>) -> Self {
        Self::new(SynthesisMode::TreeSummarize, Some(model))
    }

    /// `concat`: no model.
    pub fn concat() -> Self {
        Self::new(SynthesisMode::Concat, None)
    }

    /// Characters of child text per prompt (at least 256; default [`DEFAULT_CONTEXT_BUDGET`]).
    pub fn with_context_budget(mut self, chars: usize) -> Self {
        self.budget = chars.max(256);
        self
    }

    /// Most tokens the model may write per answer (default 512; `None`: the provider's default).
    pub fn with_max_tokens(mut self, max_tokens: Option<u32>) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// The mode.
    pub fn mode(&self) -> SynthesisMode {
        self.mode
    }

    /// Model calls and tokens so far.
    pub fn usage(&self) -> LlmUsage {
        LlmUsage {
            calls: self.counters.calls.load(Ordering::Relaxed),
            input_tokens: self.counters.input.load(Ordering::Relaxed),
            output_tokens: self.counters.output.load(Ordering::Relaxed),
        }
    }

    /// Answers `query` from `children`.
    pub async fn synthesize(
        &self,
        query: &str,
        children: &[Child],
        cancel: &CancellationToken,
    ) -> Result<String, QueryError> {
        let texts: Vec<String> = children.iter().map(Child::text).collect();
        match self.mode {
            SynthesisMode::Concat => Ok(texts.join("\n\n")),
            SynthesisMode::Compact => {
                let chunks = pack(&texts, self.budget);
                let mut chunks = chunks.into_iter();
                let first = chunks.next().unwrap_or_default();
                let mut answer = self.ask(&answer_prompt(query, &first), cancel).await?;
                for chunk in chunks {
                    answer = self
                        .ask(&refine_prompt(query, &answer, &chunk), cancel)
                        .await?;
                }
                Ok(answer)
            }
            SynthesisMode::TreeSummarize => {
                let mut texts = texts;
                for level in 0..MAX_TREE_LEVELS {
                    let mut chunks = pack(&texts, self.budget);
                    if level > 0 && chunks.len() >= texts.len() && texts.len() > 1 {
                        // Answers too long to pack together: combine them two by two.
                        chunks = texts.chunks(2).map(|pair| pair.join("\n\n")).collect();
                    }
                    let answers = futures::future::try_join_all(
                        chunks
                            .iter()
                            .map(|chunk| self.ask_owned(answer_prompt(query, chunk), cancel)),
                    )
                    .await?;
                    if answers.len() <= 1 {
                        return Ok(answers.into_iter().next().unwrap_or_default());
                    }
                    texts = answers;
                }
                // Still several after many levels: one last prompt with all of them.
                self.ask(&answer_prompt(query, &texts.join("\n\n")), cancel)
                    .await
            }
        }
    }

    async fn ask_owned(
        &self,
        prompt: String,
        cancel: &CancellationToken,
    ) -> Result<String, QueryError> {
        self.ask(&prompt, cancel).await
    }

    async fn ask(&self, prompt: &str, cancel: &CancellationToken) -> Result<String, QueryError> {
        let model = self
            .model
            .as_ref()
            .ok_or(QueryError::NoModel(self.mode.as_str()))?;
        let request = ChatRequest {
            messages: vec![Message::system(SYSTEM), Message::user(prompt)],
            max_tokens: self.max_tokens,
            temperature: Some(0.0),
            ..ChatRequest::default()
        };
        let response = model.chat(&request, cancel).await?;
        self.counters.calls.fetch_add(1, Ordering::Relaxed);
        self.counters
            .input
            .fetch_add(response.usage.input_tokens, Ordering::Relaxed);
        self.counters
            .output
            .fetch_add(response.usage.output_tokens, Ordering::Relaxed);
        Ok(response.message.content.trim().to_owned())
    }
}

/// The system message of every synthesis call.
pub const SYSTEM: &str = "You answer questions from the information you are given, not from prior \
knowledge. Answer briefly and directly.";

/// The prompt that answers `query` from `context`.
pub fn answer_prompt(query: &str, context: &str) -> String {
    format!(
        "Information (answers to sub-questions):\n---------------------\n{context}\n---------------------\n\
         Using only the information above, answer the question.\nQuestion: {query}\nAnswer:"
    )
}

/// The prompt that refines `answer` to `query` with more `context`.
pub fn refine_prompt(query: &str, answer: &str, context: &str) -> String {
    format!(
        "Question: {query}\nAnswer so far: {answer}\nMore information:\n---------------------\n{context}\n\
         ---------------------\nImprove the answer so far with the information above where it is relevant; \
         if it is not, repeat the answer so far.\nAnswer:"
    )
}

/// Packs texts, in order, into chunks of at most `budget` characters (a text longer than the budget
/// is split into pieces at character boundaries). Never returns an empty list.
pub fn pack(texts: &[String], budget: usize) -> Vec<String> {
    let budget = budget.max(1);
    let mut chunks: Vec<String> = Vec::new();
    let mut current = String::new();
    for text in texts {
        let pieces = split_chars(text, budget);
        for piece in pieces {
            let extra = if current.is_empty() { 0 } else { 2 };
            if !current.is_empty()
                && current.chars().count() + extra + piece.chars().count() > budget
            {
                chunks.push(std::mem::take(&mut current));
            }
            if !current.is_empty() {
                current.push_str("\n\n");
            }
            current.push_str(&piece);
        }
    }
    if !current.is_empty() || chunks.is_empty() {
        chunks.push(current);
    }
    chunks
}

fn split_chars(text: &str, size: usize) -> Vec<String> {
    if text.chars().count() <= size {
        return vec![text.to_owned()];
    }
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// The synthesizer as the tool branch steps call ([`SYNTHESIZE`]): arguments
/// `{"query": "…", "context": [{"query": "…", "response": <any JSON>}, …]}`, result the answer text.
pub(crate) fn synthesize_tool(synthesizer: Arc<Synthesizer>) -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        SYNTHESIZE,
        "Answers a question from the answers to its sub-questions (the branches of query plans).",
        json!({
            "type": "object",
            "properties": {
                SYNTH_QUERY: {"type": "string"},
                SYNTH_CONTEXT: {"type": "array", "items": {
                    "type": "object",
                    "properties": {"query": {"type": "string"}, "response": {}},
                    "required": ["query", "response"]
                }}
            },
            "required": [SYNTH_QUERY, SYNTH_CONTEXT]
        }),
        move |arguments: Value, ctx: ToolContext| {
            let synthesizer = Arc::clone(&synthesizer);
            async move {
                let query = arguments[SYNTH_QUERY].as_str().unwrap_or_default();
                let children: Vec<Child> = arguments[SYNTH_CONTEXT]
                    .as_array()
                    .map(|items| {
                        items
                            .iter()
                            .map(|c| Child {
                                query: c["query"].as_str().unwrap_or_default().to_owned(),
                                response: response_text(&c["response"]),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                synthesizer
                    .synthesize(query, &children, &ctx.cancel)
                    .await
                    .map(Value::String)
                    .map_err(|e| ToolError::failed(e.to_string()))
            }
        },
    )
    // An answer written from the children's: changes nothing, so branches run side by side.
    .with_annotations(ToolAnnotations::READ_ONLY))
}

/// A child's answer as text: text as it is, anything else as JSON.
fn response_text(value: &Value) -> String {
    value_as_text(value).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(sizes: &[usize]) -> Vec<String> {
        sizes.iter().map(|&n| "x".repeat(n)).collect()
    }

    #[test]
    fn packing_keeps_order_and_budget() {
        assert_eq!(pack(&[], 10), vec![String::new()]);
        let chunks = pack(&texts(&[4, 4, 4]), 10);
        assert_eq!(chunks, vec!["xxxx\n\nxxxx".to_owned(), "xxxx".to_owned()]);
        // A text over the budget is split.
        let chunks = pack(&texts(&[25]), 10);
        assert_eq!(chunks.len(), 3);
        assert!(chunks.iter().all(|c| c.chars().count() <= 10));
        // Multi-byte characters are never cut.
        let chunks = pack(&["ééé".to_owned()], 2);
        assert_eq!(chunks, vec!["éé".to_owned(), "é".to_owned()]);
    }

    #[test]
    fn child_text_is_query_then_response() {
        let c = Child {
            query: "Revenue in March?".into(),
            response: "$10M".into(),
        };
        assert_eq!(c.text(), "Query: Revenue in March?\nResponse: $10M");
        assert_eq!(response_text(&json!("plain")), "plain");
        assert_eq!(response_text(&json!({"a": 1})), r#"{"a":1}"#);
    }

    #[tokio::test]
    async fn concat_needs_no_model_and_others_do() {
        let children = [
            Child {
                query: "a".into(),
                response: "1".into(),
            },
            Child {
                query: "b".into(),
                response: "2".into(),
            },
        ];
        let cancel = CancellationToken::new();
        let out = Synthesizer::concat()
            .synthesize("q", &children, &cancel)
            .await
            .expect("concat");
        assert_eq!(out, "Query: a\nResponse: 1\n\nQuery: b\nResponse: 2");
        let err = Synthesizer::new(SynthesisMode::Compact, None)
            .synthesize("q", &children, &cancel)
            .await
            .expect_err("no model");
        assert_eq!(err.to_string(), "the compact synthesizer needs a model");
    }
}
