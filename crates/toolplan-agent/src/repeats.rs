//! The tool calls of one interaction and what they returned, so that a call the model repeats with
//! the same arguments is answered from memory instead of being run again.
//!
//! Small models loop: they call a tool whose result they already have, or a call that failed, with
//! the same arguments, turn after turn. A repeated successful call gets the earlier result, marked as
//! such, when repeating it is harmless: the tool says its calls are read-only or idempotent
//! ([`ToolAnnotations::repeat_is_harmless`](toolplan_core::ToolAnnotations::repeat_is_harmless)).
//! Any other tool runs again (`scroll_down` twice scrolls twice, a page's `next` advances), and so
//! does a plan with a step on such a tool. A failed call may be tried again once (a timeout may
//! pass); after [`FAILED_ATTEMPTS`] failures the same call gets the earlier error instead of a third
//! run, whatever the tool. The agent counts a turn made only of such answers as a turn that brought
//! nothing new.

use toolplan_llm::{Message, ToolCall};

/// Answers a tool call that repeats an earlier successful one; the earlier result follows.
pub const REPEATED_CALL: &str =
    "This exact call was already made; it is not run again. Its result was:";

/// Follows [`REPEATED_CALL`]'s result.
pub const REPEATED_CALL_HINT: &str =
    "Use this result: call the tool the next step needs, or answer.";

/// Answers a tool call that already failed twice with the same arguments; the earlier error
/// follows.
pub const REPEATED_FAILURE: &str =
    "This exact call already failed; it is not run again. Its error was:";

/// Follows [`REPEATED_FAILURE`]'s error.
pub const REPEATED_FAILURE_HINT: &str =
    "Change the arguments, call another tool, or answer from the results you have.";

/// How many times the same call may fail before it is no longer run.
pub const FAILED_ATTEMPTS: usize = 2;

/// One call made, and how it went.
struct Entry {
    call: ToolCall,
    /// The result's text, or the last error's.
    text: String,
    /// Failures so far (0 once it succeeded).
    failures: usize,
    succeeded: bool,
}

/// The tool calls of one interaction, plans (`execute_tool_plan`) included: a corrected plan differs
/// from the one that failed, and is not a repeat; the same plan sent again is (the 1.5B model sent
/// one whose reference could not resolve 8 times in a row, the same error each time).
#[derive(Default)]
pub struct CallMemory {
    entries: Vec<Entry>,
}

impl CallMemory {
    /// An empty memory.
    pub fn new() -> Self {
        Self::default()
    }

    fn position(&self, call: &ToolCall) -> Option<usize> {
        self.entries
            .iter()
            .position(|e| e.call.name == call.name && e.call.arguments == call.arguments)
    }

    /// The answer to `call` when it is not to be run again: the earlier result of the same call when
    /// `harmless` (making it again changes nothing: the tool is read-only or idempotent), or its
    /// error once it has failed [`FAILED_ATTEMPTS`] times.
    pub fn answer(&self, call: &ToolCall, harmless: bool) -> Option<Message> {
        let entry = &self.entries[self.position(call)?];
        if entry.succeeded && harmless {
            Some(Message::tool_result(
                call,
                format!("{REPEATED_CALL}\n{}\n{REPEATED_CALL_HINT}", entry.text),
                false,
            ))
        } else if !entry.succeeded && entry.failures >= FAILED_ATTEMPTS {
            Some(Message::tool_result(
                call,
                format!(
                    "{REPEATED_FAILURE}\n{}\n{REPEATED_FAILURE_HINT}",
                    entry.text
                ),
                true,
            ))
        } else {
            None
        }
    }

    /// Records how a call that ran went (`result` is its tool-result message; a plan failed when any
    /// step did, or when it was not valid).
    pub fn remember(&mut self, call: &ToolCall, result: &Message) {
        let index = self.position(call).unwrap_or_else(|| {
            self.entries.push(Entry {
                call: call.clone(),
                text: String::new(),
                failures: 0,
                succeeded: false,
            });
            self.entries.len() - 1
        });
        let entry = &mut self.entries[index];
        entry.text = result.content.clone();
        if result.is_error {
            entry.failures += 1;
        } else {
            entry.succeeded = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(name: &str, arguments: serde_json::Value) -> ToolCall {
        ToolCall {
            id: "call_0".into(),
            name: name.into(),
            arguments,
        }
    }

    #[test]
    fn a_successful_call_is_answered_from_memory_with_its_result() {
        let mut memory = CallMemory::new();
        let weather = call("get_weather", json!({"location": "Oslo", "unit": "c"}));
        assert!(memory.answer(&weather, true).is_none());
        memory.remember(&weather, &Message::tool_result(&weather, "3 °C", false));
        // Same arguments in another key order: the same call.
        let again = call("get_weather", json!({"unit": "c", "location": "Oslo"}));
        let answer = memory.answer(&again, true).expect("a repeat");
        assert!(!answer.is_error);
        assert_eq!(
            answer.content,
            format!("{REPEATED_CALL}\n3 °C\n{REPEATED_CALL_HINT}")
        );
        // Other arguments, or another tool: not a repeat.
        assert!(
            memory
                .answer(
                    &call("get_weather", json!({"location": "Cairo", "unit": "c"})),
                    true
                )
                .is_none()
        );
        assert!(
            memory
                .answer(
                    &call("get_user", json!({"location": "Oslo", "unit": "c"})),
                    true
                )
                .is_none()
        );
    }

    #[test]
    fn a_failed_call_runs_again_once_then_is_answered_with_its_error() {
        let mut memory = CallMemory::new();
        let sum = call("calculator", json!({"expression": "Tokyo * Paris"}));
        memory.remember(&sum, &Message::tool_result(&sum, "Error: timed out", true));
        assert!(memory.answer(&sum, true).is_none(), "a second try runs");
        memory.remember(
            &sum,
            &Message::tool_result(&sum, "Error: unknown name", true),
        );
        let answer = memory.answer(&sum, true).expect("no third run");
        // Whatever the tool: a call that keeps failing is a loop.
        assert!(memory.answer(&sum, false).is_some());
        assert!(answer.is_error);
        assert_eq!(
            answer.content,
            format!("{REPEATED_FAILURE}\nError: unknown name\n{REPEATED_FAILURE_HINT}")
        );
    }

    #[test]
    fn a_call_that_failed_and_then_worked_is_answered_with_the_result() {
        let mut memory = CallMemory::new();
        let weather = call("get_weather", json!({"location": "Oslo"}));
        memory.remember(
            &weather,
            &Message::tool_result(&weather, "Error: timed out", true),
        );
        memory.remember(&weather, &Message::tool_result(&weather, "3 °C", false));
        let answer = memory.answer(&weather, true).expect("a repeat");
        assert!(!answer.is_error);
        assert!(answer.content.contains("3 °C"));
    }

    #[test]
    fn a_call_whose_repeat_changes_something_runs_again() {
        let mut memory = CallMemory::new();
        let scroll = call("scroll_down", json!({"pixels": 500}));
        memory.remember(&scroll, &Message::tool_result(&scroll, "at 500", false));
        assert!(memory.answer(&scroll, false).is_none());
        memory.remember(&scroll, &Message::tool_result(&scroll, "at 1000", false));
        assert!(memory.answer(&scroll, false).is_none());
    }
}
