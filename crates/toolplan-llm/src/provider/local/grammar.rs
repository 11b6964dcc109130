//! The reply grammar: the JSON Schema of the allowed replies ([`reply_schema`](reply::reply_schema)) turned into a GBNF
//! grammar by llama.cpp's converter, for constrained decoding. A tool schema llama.cpp cannot convert
//! falls back to any object, so that one odd tool does not leave the reply unconstrained.

use serde_json::Value;

use super::reply::{self, ReplyMode};
use crate::error::LlmError;
use crate::message::{ChatRequest, ToolDefinition};

/// The GBNF grammar for the replies allowed in `mode`, from llama.cpp's JSON-Schema converter. A
/// tool's [`strict_parameters`](ToolDefinition::strict_parameters) are enforced when it has them (and
/// llama.cpp can convert them), its `parameters` otherwise; a tool whose schema llama.cpp cannot
/// convert takes any JSON object as arguments instead.
pub fn reply_grammar(
    tools: &[ToolDefinition],
    mode: ReplyMode,
) -> Result<Option<String>, LlmError> {
    reply_grammar_with(tools, mode, GrammarOptions::default())
}

/// How [`reply_grammar_with`] shapes the replies beyond their mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrammarOptions {
    /// Whether one reply may hold several tool calls ([`ChatRequest::parallel_tool_calls`]).
    pub parallel: bool,
    /// Whether every reply starts with a thought ([`ChatRequest::think_first`]).
    pub think: bool,
}

impl Default for GrammarOptions {
    fn default() -> Self {
        GrammarOptions {
            parallel: true,
            think: false,
        }
    }
}

impl GrammarOptions {
    /// The options `request` asks for.
    pub fn of(request: &ChatRequest) -> Self {
        GrammarOptions {
            parallel: request.parallel_tool_calls != Some(false),
            think: request.think_first,
        }
    }
}

/// [`reply_grammar`], shaped by `options`.
pub fn reply_grammar_with(
    tools: &[ToolDefinition],
    mode: ReplyMode,
    options: GrammarOptions,
) -> Result<Option<String>, LlmError> {
    let converts = |schema: &Value| {
        schema.is_object() && llama_cpp_2::json_schema_to_grammar(&schema.to_string()).is_ok()
    };
    // Each tool's stricter schema when it has one that converts, else its parameters schema, else
    // any object.
    let overrides: Vec<(usize, Value)> = tools
        .iter()
        .enumerate()
        .filter_map(|(i, tool)| match &tool.strict_parameters {
            Some(strict) if converts(strict) => Some((i, strict.clone())),
            _ if tool.parameters.is_object() && !converts(&tool.parameters) => {
                Some((i, reply::any_object_schema()))
            }
            _ => None,
        })
        .collect();
    let Some(mut schema) = reply::reply_schema(tools, mode, &overrides, options.think) else {
        return Ok(None);
    };
    if !options.parallel {
        reply::limit_to_one_call(&mut schema);
    }
    llama_cpp_2::json_schema_to_grammar(&schema.to_string())
        .map(Some)
        .map_err(|e| LlmError::Local(format!("cannot build the reply grammar: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, parameters: Value) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: String::new(),
            parameters,
            ..Default::default()
        }
    }

    #[test]
    fn llama_cpp_turns_reply_schemas_into_grammars() {
        let tools = vec![
            tool(
                "get_weather",
                json!({"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}),
            ),
            tool(
                "execute_tool_plan",
                json!({
                    "type": "object",
                    "properties": {
                        "steps": {"type": "array", "minItems": 1, "items": {
                            "type": "object",
                            "properties": {
                                "id": {"type": "string"},
                                "tool": {"enum": ["get_weather", "calculator"]},
                                "arguments": {"type": ["object", "string"]},
                            },
                            "required": ["id", "tool", "arguments"],
                            "additionalProperties": false,
                        }},
                        "output_steps": {"type": "array", "items": {"type": "string"}},
                        "note": {},
                        "n": {"type": "integer"}, "x": {"type": "number"}, "b": {"type": "boolean"},
                        "z": {"type": "null"}, "c": {"const": 3}, "o": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                    },
                    "required": ["steps"],
                }),
            ),
        ];
        let grammar = reply_grammar(&tools, ReplyMode::AnswerOrTools)
            .expect("converts")
            .expect("constrained");
        assert!(grammar.contains("root ::="), "{grammar}");
        for literal in [
            "get_weather",
            "execute_tool_plan",
            "calculator",
            "tool_calls",
            "answer",
        ] {
            assert!(
                grammar.contains(literal),
                "{literal} missing from\n{grammar}"
            );
        }
        let required = reply_grammar(&tools, ReplyMode::ToolsOnly)
            .expect("converts")
            .expect("constrained");
        assert!(!required.contains("answer"), "{required}");
        assert_eq!(reply_grammar(&tools, ReplyMode::Text), Ok(None));
    }

    #[test]
    fn thinking_grammars_convert_and_start_with_the_thought() {
        let tools = vec![tool(
            "get_weather",
            json!({"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}),
        )];
        let think = GrammarOptions {
            parallel: false,
            think: true,
        };
        for mode in [
            ReplyMode::AnswerOrTools,
            ReplyMode::ToolsOnly,
            ReplyMode::AnswerOnly,
        ] {
            let grammar = reply_grammar_with(&tools, mode, think)
                .expect("converts")
                .expect("constrained");
            assert!(grammar.contains("thought"), "{grammar}");
            let plain = reply_grammar_with(&tools, mode, GrammarOptions::default())
                .expect("converts")
                .expect("constrained");
            assert!(!plain.contains("thought"), "{plain}");
        }
        let request = ChatRequest {
            parallel_tool_calls: Some(false),
            think_first: true,
            ..ChatRequest::default()
        };
        assert_eq!(GrammarOptions::of(&request), think);
        assert_eq!(
            GrammarOptions::of(&ChatRequest::default()),
            GrammarOptions::default()
        );
    }

    #[test]
    fn unconvertible_tool_schemas_fall_back_to_any_object() {
        let tools = vec![tool(
            "odd",
            json!({"type": "object", "properties": {"a": {"$ref": "http://example.com/s"}}}),
        )];
        assert!(llama_cpp_2::json_schema_to_grammar(&tools[0].parameters.to_string()).is_err());
        let grammar = reply_grammar(&tools, ReplyMode::ToolsOnly)
            .expect("falls back")
            .expect("constrained");
        assert!(grammar.contains("odd"), "{grammar}");
    }

    #[test]
    fn strict_parameters_are_enforced_instead_of_the_shown_schema() {
        let shown = json!({"type": "object", "properties": {"steps": {"type": "array"}}});
        let strict = json!({"type": "object", "properties": {"steps": {"type": "array", "items": {
            "type": "object", "properties": {"tool": {"const": "only_this_tool"}}, "required": ["tool"]}}},
            "required": ["steps"]});
        let plain = reply_grammar(&[tool("plan", shown.clone())], ReplyMode::ToolsOnly)
            .expect("converts")
            .expect("constrained");
        assert!(!plain.contains("only_this_tool"), "{plain}");
        let typed = tool("plan", shown).with_strict_parameters(strict);
        let grammar = reply_grammar(std::slice::from_ref(&typed), ReplyMode::ToolsOnly)
            .expect("converts")
            .expect("constrained");
        assert!(grammar.contains("only_this_tool"), "{grammar}");
        // A stricter schema llama.cpp cannot convert leaves the shown one in force.
        let odd = typed.with_strict_parameters(
            json!({"type": "object", "properties": {"a": {"$ref": "http://example.com/s"}}}),
        );
        let fallback = reply_grammar(&[odd], ReplyMode::ToolsOnly)
            .expect("converts")
            .expect("constrained");
        assert!(
            !fallback.contains("only_this_tool") && fallback.contains("steps"),
            "{fallback}"
        );
    }
}
