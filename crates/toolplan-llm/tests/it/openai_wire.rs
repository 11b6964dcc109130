//! The OpenAI-compatible provider against a loopback server: the requests it sends, the answers it
//! understands, and how it fails.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolplan_llm::provider::{OpenAiConfig, OpenAiModel};
use toolplan_llm::{
    CallPolicy, ChatModel, ChatRequest, Message, StopReason, ToolCall, ToolChoice, Usage,
};

use crate::common::{self, MockServer, Reply, bounded};

pub(crate) fn model(base: &str, api_key: Option<&str>, policy: CallPolicy) -> OpenAiModel {
    OpenAiModel::new(OpenAiConfig {
        base_url: format!("{base}/v1"),
        api_key: api_key.map(str::to_owned),
        model: "gpt-4o-mini".into(),
        policy,
        max_tokens: None,
    })
    .unwrap()
}

fn make(base: &str, policy: CallPolicy) -> Arc<dyn ChatModel> {
    Arc::new(model(base, Some("sk-test"), policy))
}

fn tool_call_answer() -> Value {
    json!({
        "id": "chatcmpl-AbC123",
        "object": "chat.completion",
        "created": 1727000000,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": null,
                "tool_calls": [
                    {"id": "call_tokyo", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"location\": \"Tokyo\"}"}},
                    {"id": "call_paris", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"location\": \"Paris\"}"}}
                ],
                "refusal": null
            },
            "logprobs": null,
            "finish_reason": "tool_calls"
        }],
        "usage": {"prompt_tokens": 82, "completion_tokens": 46, "total_tokens": 128,
                  "prompt_tokens_details": {"cached_tokens": 0},
                  "completion_tokens_details": {"reasoning_tokens": 0}},
        "system_fingerprint": "fp_0ba0d124f1"
    })
}

fn text_answer() -> Value {
    json!({
        "id": "chatcmpl-AbC124",
        "object": "chat.completion",
        "created": 1727000001,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": "Tokyo is 22°C and sunny; Paris could not be checked.", "refusal": null},
            "logprobs": null,
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 160, "completion_tokens": 14, "total_tokens": 174}
    })
}

#[tokio::test]
async fn multi_turn_tool_conversation() {
    let server = MockServer::start(vec![
        Reply::Json(200, tool_call_answer()),
        Reply::Json(200, text_answer()),
    ])
    .await;
    let model = model(&server.base, Some("sk-test"), common::fast_policy(0));
    assert_eq!(model.name(), "openai:gpt-4o-mini");
    let cancel = CancellationToken::new();

    let mut request = ChatRequest {
        messages: vec![
            Message::system("You are a weather bot."),
            Message::user("Weather in Tokyo and Paris?"),
        ],
        tools: vec![common::weather_tool()],
        tool_choice: ToolChoice::Auto,
        max_tokens: Some(256),
        temperature: Some(0.5),
        parallel_tool_calls: None,
        // Hosted models reason on their own: the wire format ignores the thought.
        think_first: true,
        reply_start: common::ignored_reply_start(),
    };
    let first = bounded(model.chat(&request, &cancel)).await.unwrap();
    assert_eq!(first.stop, StopReason::ToolUse);
    assert_eq!(
        first.usage,
        Usage {
            input_tokens: 82,
            output_tokens: 46
        }
    );
    assert_eq!(first.message.content, "");
    assert_eq!(
        first.message.tool_calls,
        vec![
            ToolCall {
                id: "call_tokyo".into(),
                name: "get_weather".into(),
                arguments: json!({"location": "Tokyo"})
            },
            ToolCall {
                id: "call_paris".into(),
                name: "get_weather".into(),
                arguments: json!({"location": "Paris"})
            },
        ]
    );

    let calls = first.message.tool_calls.clone();
    request.messages.push(first.message);
    request.messages.push(Message::tool_result(
        &calls[0],
        r#"{"temp": 22, "condition": "sunny"}"#,
        false,
    ));
    request
        .messages
        .push(Message::tool_result(&calls[1], "service unavailable", true));
    let second = bounded(model.chat(&request, &cancel)).await.unwrap();
    assert_eq!(second.stop, StopReason::EndTurn);
    assert_eq!(
        second.message.content,
        "Tokyo is 22°C and sunny; Paris could not be checked."
    );
    assert!(second.message.tool_calls.is_empty());
    assert_eq!(second.usage.input_tokens, 160);

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!(r.method, "POST");
        assert_eq!(r.path, "/v1/chat/completions");
        assert_eq!(r.header("authorization"), Some("Bearer sk-test"));
        assert_eq!(r.header("content-type"), Some("application/json"));
    }
    let tools = json!([{"type": "function", "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {"type": "object",
                       "properties": {"location": {"type": "string", "description": "City name"}},
                       "required": ["location"]}
    }}]);
    assert_eq!(
        requests[0].json(),
        json!({
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "You are a weather bot."},
                {"role": "user", "content": "Weather in Tokyo and Paris?"}
            ],
            "tools": tools,
            "tool_choice": "auto",
            "max_tokens": 256,
            "temperature": 0.5
        })
    );
    let second_body = requests[1].json();
    assert_eq!(second_body["tools"], tools);
    let messages = second_body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 5);
    assert_eq!(
        messages[2],
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_tokyo", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"location\":\"Tokyo\"}"}},
            {"id": "call_paris", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"location\":\"Paris\"}"}}
        ]})
    );
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "call_tokyo", "content": "{\"temp\": 22, \"condition\": \"sunny\"}"})
    );
    assert_eq!(
        messages[4],
        json!({"role": "tool", "tool_call_id": "call_paris", "content": "Error: service unavailable"})
    );
}

#[tokio::test]
async fn no_key_no_authorization_header() {
    let server = MockServer::start(vec![Reply::Json(200, text_answer())]).await;
    let model = model(&server.base, None, common::fast_policy(0));
    let request = ChatRequest {
        messages: vec![Message::user("hi")],
        tool_choice: ToolChoice::Required,
        ..ChatRequest::default()
    };
    bounded(model.chat(&request, &CancellationToken::new()))
        .await
        .unwrap();
    let requests = server.requests();
    assert_eq!(requests[0].header("authorization"), None);
    let body = requests[0].json();
    // No tools: neither `tools` nor `tool_choice` is sent.
    assert_eq!(
        body,
        json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
    );
}

#[tokio::test]
async fn retries_429() {
    common::check_retries_429(make, text_answer()).await;
}

#[tokio::test]
async fn does_not_retry_400() {
    common::check_no_retry_on_400(make, "openai").await;
}

#[tokio::test]
async fn an_endless_body_fails_at_the_size_limit() {
    common::check_endless_body(make, "openai").await;
}

#[tokio::test]
async fn hung_server_times_out() {
    common::check_timeout(make).await;
}

#[tokio::test]
async fn cancellation() {
    common::check_cancel(make).await;
}

#[tokio::test]
async fn malformed_answers() {
    common::check_malformed(make, json!({"choices": [{"message": 42}]})).await;
}

#[tokio::test]
async fn connection_refused() {
    common::check_connection_refused(make).await;
}
