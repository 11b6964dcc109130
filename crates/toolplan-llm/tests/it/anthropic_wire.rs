//! The Anthropic provider against a loopback server: the requests it sends, the answers it
//! understands, and how it fails.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolplan_llm::provider::{AnthropicConfig, AnthropicModel};
use toolplan_llm::{
    CallPolicy, ChatModel, ChatRequest, Message, StopReason, ToolCall, ToolChoice, Usage,
};

use crate::common::{self, MockServer, Reply, bounded};

pub(crate) fn model(base: &str, policy: CallPolicy) -> AnthropicModel {
    AnthropicModel::new(AnthropicConfig {
        base_url: base.to_owned(),
        api_key: Some("sk-ant-test".into()),
        model: "claude-3-5-haiku-20241022".into(),
        policy,
        max_tokens: 1024,
    })
    .unwrap()
}

fn make(base: &str, policy: CallPolicy) -> Arc<dyn ChatModel> {
    Arc::new(model(base, policy))
}

fn tool_use_answer() -> Value {
    json!({
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-3-5-haiku-20241022",
        "content": [
            {"type": "text", "text": "I'll look up both cities."},
            {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather",
             "input": {"location": "Tokyo"}},
            {"type": "tool_use", "id": "toolu_01B19q90qw90lq917835lq8", "name": "get_weather",
             "input": {"location": "Paris"}}
        ],
        "stop_reason": "tool_use",
        "stop_sequence": null,
        "usage": {"input_tokens": 412, "output_tokens": 96,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    })
}

fn text_answer() -> Value {
    json!({
        "id": "msg_01Aq9w938a90dw8q",
        "type": "message",
        "role": "assistant",
        "model": "claude-3-5-haiku-20241022",
        "content": [{"type": "text", "text": "Tokyo: 22°C, sunny. Paris: unavailable."}],
        "stop_reason": "end_turn",
        "stop_sequence": null,
        "usage": {"input_tokens": 530, "output_tokens": 18,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    })
}

#[tokio::test]
async fn multi_turn_tool_conversation() {
    let server = MockServer::start(vec![
        Reply::Json(200, tool_use_answer()),
        Reply::Json(200, text_answer()),
    ])
    .await;
    let model = model(&server.base, common::fast_policy(0));
    assert_eq!(model.name(), "anthropic:claude-3-5-haiku-20241022");
    let cancel = CancellationToken::new();

    let mut request = ChatRequest {
        messages: vec![
            Message::system("You are a weather bot."),
            Message::user("Weather in Tokyo and Paris?"),
        ],
        tools: vec![common::weather_tool()],
        tool_choice: ToolChoice::Auto,
        max_tokens: None,
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
            input_tokens: 412,
            output_tokens: 96
        }
    );
    assert_eq!(first.message.content, "I'll look up both cities.");
    assert_eq!(
        first.message.tool_calls,
        vec![
            ToolCall {
                id: "toolu_01A09q90qw90lq917835lq9".into(),
                name: "get_weather".into(),
                arguments: json!({"location": "Tokyo"})
            },
            ToolCall {
                id: "toolu_01B19q90qw90lq917835lq8".into(),
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
    request.tool_choice = ToolChoice::None;
    request.max_tokens = Some(300);
    let second = bounded(model.chat(&request, &cancel)).await.unwrap();
    assert_eq!(second.stop, StopReason::EndTurn);
    assert_eq!(
        second.message.content,
        "Tokyo: 22°C, sunny. Paris: unavailable."
    );
    assert_eq!(second.usage.output_tokens, 18);

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!(r.method, "POST");
        assert_eq!(r.path, "/v1/messages");
        assert_eq!(r.header("x-api-key"), Some("sk-ant-test"));
        assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.header("authorization"), None);
    }
    let tools = json!([{
        "name": "get_weather",
        "description": "Current weather of a city",
        "input_schema": {"type": "object",
                         "properties": {"location": {"type": "string", "description": "City name"}},
                         "required": ["location"]}
    }]);
    assert_eq!(
        requests[0].json(),
        json!({
            "model": "claude-3-5-haiku-20241022",
            "max_tokens": 1024,
            "system": "You are a weather bot.",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Weather in Tokyo and Paris?"}]}],
            "tools": tools,
            "tool_choice": {"type": "auto"},
            "temperature": 0.5
        })
    );
    let second_body = requests[1].json();
    assert_eq!(second_body["max_tokens"], 300);
    assert_eq!(second_body["tools"], tools);
    assert_eq!(second_body["tool_choice"], json!({"type": "none"}));
    assert_eq!(
        second_body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Weather in Tokyo and Paris?"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "I'll look up both cities."},
                {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather",
                 "input": {"location": "Tokyo"}},
                {"type": "tool_use", "id": "toolu_01B19q90qw90lq917835lq8", "name": "get_weather",
                 "input": {"location": "Paris"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
                 "content": "{\"temp\": 22, \"condition\": \"sunny\"}"},
                {"type": "tool_result", "tool_use_id": "toolu_01B19q90qw90lq917835lq8",
                 "content": "service unavailable", "is_error": true}
            ]}
        ])
    );
}

#[tokio::test]
async fn overloaded_529_is_retried() {
    let server = MockServer::start(vec![
        Reply::Json(
            529,
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
        Reply::Json(200, text_answer()),
    ])
    .await;
    let model = model(&server.base, common::fast_policy(1));
    let r = bounded(model.chat(&common::simple_request(), &CancellationToken::new())).await;
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn retries_429() {
    common::check_retries_429(make, text_answer()).await;
}

#[tokio::test]
async fn does_not_retry_400() {
    common::check_no_retry_on_400(make, "anthropic").await;
}

#[tokio::test]
async fn an_endless_body_fails_at_the_size_limit() {
    common::check_endless_body(make, "anthropic").await;
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
    common::check_malformed(make, json!({"type": "message", "content": "not blocks"})).await;
}

#[tokio::test]
async fn connection_refused() {
    common::check_connection_refused(make).await;
}
