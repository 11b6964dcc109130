//! What the agent-loop tests share: an agent over the demo tools with a scripted model, the tool
//! results of a conversation, and the weather plan.

use std::sync::Arc;

use serde_json::{Value, json};
use toolplan_agent::scripted::ScriptedModel;
use toolplan_agent::{Agent, Planning};
use toolplan_demo as demo;
use toolplan_llm::{Message, Role};

pub(crate) fn agent(model: Arc<ScriptedModel>, planning: bool) -> Agent {
    Agent::builder("test")
        .model(model)
        .instructions("You compare data.")
        .tools(demo::tools())
        .planning(if planning {
            Planning::Offered
        } else {
            Planning::Off
        })
        .max_turns(6)
        .build()
        .unwrap()
}

pub(crate) fn tool_messages(messages: &[Message]) -> Vec<&Message> {
    messages.iter().filter(|m| m.role == Role::Tool).collect()
}

pub(crate) const FINAL: &str = "Tokyo is 6 degrees warmer than London.";

pub(crate) fn weather_plan() -> Value {
    json!({
        "steps": [
            {"id": "tokyo", "tool": "get_weather", "arguments": "{\"location\": \"Tokyo\"}"},
            {"id": "london", "tool": "get_weather", "arguments": {"location": "London"}},
            {"id": "cmp", "tool": "compare_data", "arguments": {"data_a": "$ref:tokyo", "data_b": "$ref:london"}}
        ],
        "output_steps": ["cmp"]
    })
}
