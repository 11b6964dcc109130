//! The Bedrock Converse provider against a loopback server: the requests it sends (including
//! their SigV4 signature, checked independently of the signing crate), the answers it
//! understands, and how it fails.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use toolplan_llm::provider::{AwsCredentials, BedrockConfig, BedrockModel};
use toolplan_llm::{
    CallPolicy, ChatModel, ChatRequest, Message, StopReason, ToolCall, ToolChoice, Usage,
};

use crate::common::{self, MockServer, Recorded, Reply, bounded};

const MODEL_ID: &str = "anthropic.claude-3-haiku-20240307-v1:0";
const REGION: &str = "eu-central-1";
const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

pub(crate) fn model(base: &str, session_token: Option<&str>, policy: CallPolicy) -> BedrockModel {
    BedrockModel::new(BedrockConfig {
        base_url: base.to_owned(),
        region: REGION.into(),
        credentials: AwsCredentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: SECRET.into(),
            session_token: session_token.map(str::to_owned),
        },
        model: MODEL_ID.into(),
        policy,
        max_tokens: 2048,
    })
    .unwrap()
}

fn make(base: &str, policy: CallPolicy) -> Arc<dyn ChatModel> {
    Arc::new(model(base, Some("SESSION-TOKEN"), policy))
}

fn tool_use_answer() -> Value {
    json!({
        "output": {"message": {"role": "assistant", "content": [
            {"text": "I'll look up both cities."},
            {"toolUse": {"toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "name": "get_weather",
                         "input": {"location": "Tokyo"}}},
            {"toolUse": {"toolUseId": "tooluse_pQ3bXw8aT0qkLq1yXr7sZg", "name": "get_weather",
                         "input": {"location": "Paris"}}}
        ]}},
        "stopReason": "tool_use",
        "usage": {"inputTokens": 410, "outputTokens": 72, "totalTokens": 482},
        "metrics": {"latencyMs": 1210}
    })
}

fn text_answer() -> Value {
    json!({
        "output": {"message": {"role": "assistant", "content": [
            {"text": "Tokyo: 22°C, sunny. Paris: unavailable."}
        ]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 545, "outputTokens": 19, "totalTokens": 564},
        "metrics": {"latencyMs": 640}
    })
}

/// `YYYYMMDD` of an `x-amz-date` value.
fn day(amz_date: &str) -> &str {
    &amz_date[..8]
}

fn hmac(key: &[u8], data: &str) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    mac.update(data.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// Checks the SigV4 `Authorization` header of a received request by recomputing it from the
/// request as received, following the SigV4 specification (path segments encoded twice, as for
/// every service but S3).
pub(crate) fn assert_signed(r: &Recorded, session_token: Option<&str>) {
    let amz_date = r.header("x-amz-date").expect("x-amz-date");
    assert_eq!(amz_date.len(), 16, "{amz_date}");
    assert!(
        amz_date.ends_with('Z') && amz_date.as_bytes()[8] == b'T',
        "{amz_date}"
    );
    assert_eq!(r.header("x-amz-security-token"), session_token);

    let signed_headers = if session_token.is_some() {
        "content-type;host;x-amz-date;x-amz-security-token"
    } else {
        "content-type;host;x-amz-date"
    };
    let scope = format!("{}/{REGION}/bedrock/aws4_request", day(amz_date));
    let authorization = r.header("authorization").expect("authorization");
    let prefix = format!(
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/{scope}, SignedHeaders={signed_headers}, Signature="
    );
    assert!(authorization.starts_with(&prefix), "{authorization}");
    let signature = &authorization[prefix.len()..];

    let mut canonical_headers = format!(
        "content-type:{}\nhost:{}\nx-amz-date:{amz_date}\n",
        r.header("content-type").unwrap(),
        r.header("host").unwrap()
    );
    if let Some(token) = session_token {
        canonical_headers.push_str(&format!("x-amz-security-token:{token}\n"));
    }
    let canonical_path = r.path.replace('%', "%25");
    let canonical_request = format!(
        "POST\n{canonical_path}\n\n{canonical_headers}\n{signed_headers}\n{}",
        sha256_hex(&r.body)
    );
    let string_to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        sha256_hex(canonical_request.as_bytes())
    );
    let key = hmac(format!("AWS4{SECRET}").as_bytes(), day(amz_date));
    let key = hmac(&key, REGION);
    let key = hmac(&key, "bedrock");
    let key = hmac(&key, "aws4_request");
    assert_eq!(
        signature,
        hex::encode(hmac(&key, &string_to_sign)),
        "signature mismatch"
    );
}

#[tokio::test]
async fn multi_turn_tool_conversation() {
    let server = MockServer::start(vec![
        Reply::Json(200, tool_use_answer()),
        Reply::Json(200, text_answer()),
    ])
    .await;
    let model = model(&server.base, Some("SESSION-TOKEN"), common::fast_policy(0));
    assert_eq!(
        model.name(),
        "bedrock:anthropic.claude-3-haiku-20240307-v1:0"
    );
    let cancel = CancellationToken::new();

    let mut request = ChatRequest {
        messages: vec![
            Message::system("You are a weather bot."),
            Message::user("Weather in Tokyo and Paris?"),
        ],
        tools: vec![common::weather_tool()],
        tool_choice: ToolChoice::Required,
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
            input_tokens: 410,
            output_tokens: 72
        }
    );
    assert_eq!(first.message.content, "I'll look up both cities.");
    assert_eq!(
        first.message.tool_calls,
        vec![
            ToolCall {
                id: "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q".into(),
                name: "get_weather".into(),
                arguments: json!({"location": "Tokyo"})
            },
            ToolCall {
                id: "tooluse_pQ3bXw8aT0qkLq1yXr7sZg".into(),
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
    request.tool_choice = ToolChoice::Auto;
    request.max_tokens = Some(300);
    let second = bounded(model.chat(&request, &cancel)).await.unwrap();
    assert_eq!(second.stop, StopReason::EndTurn);
    assert_eq!(
        second.message.content,
        "Tokyo: 22°C, sunny. Paris: unavailable."
    );
    assert_eq!(second.usage.input_tokens, 545);

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!(r.method, "POST");
        assert_eq!(
            r.path,
            "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse"
        );
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_signed(r, Some("SESSION-TOKEN"));
    }
    let tools = json!([{"toolSpec": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "inputSchema": {"json": {"type": "object",
                                 "properties": {"location": {"type": "string", "description": "City name"}},
                                 "required": ["location"]}}
    }}]);
    assert_eq!(
        requests[0].json(),
        json!({
            "messages": [{"role": "user", "content": [{"text": "Weather in Tokyo and Paris?"}]}],
            "system": [{"text": "You are a weather bot."}],
            "inferenceConfig": {"maxTokens": 2048, "temperature": 0.5},
            "toolConfig": {"tools": tools, "toolChoice": {"any": {}}}
        })
    );
    let second_body = requests[1].json();
    assert_eq!(
        second_body["inferenceConfig"],
        json!({"maxTokens": 300, "temperature": 0.5})
    );
    assert_eq!(second_body["toolConfig"], json!({ "tools": tools }));
    assert_eq!(
        second_body["messages"],
        json!([
            {"role": "user", "content": [{"text": "Weather in Tokyo and Paris?"}]},
            {"role": "assistant", "content": [
                {"text": "I'll look up both cities."},
                {"toolUse": {"toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "name": "get_weather",
                             "input": {"location": "Tokyo"}}},
                {"toolUse": {"toolUseId": "tooluse_pQ3bXw8aT0qkLq1yXr7sZg", "name": "get_weather",
                             "input": {"location": "Paris"}}}
            ]},
            {"role": "user", "content": [
                {"toolResult": {"toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q",
                                "content": [{"json": {"temp": 22, "condition": "sunny"}}]}},
                {"toolResult": {"toolUseId": "tooluse_pQ3bXw8aT0qkLq1yXr7sZg",
                                "content": [{"text": "service unavailable"}], "status": "error"}}
            ]}
        ])
    );
}

#[tokio::test]
async fn signs_without_session_token() {
    let server = MockServer::start(vec![Reply::Json(200, text_answer())]).await;
    let model = model(&server.base, None, common::fast_policy(0));
    bounded(model.chat(&common::simple_request(), &CancellationToken::new()))
        .await
        .unwrap();
    let requests = server.requests();
    assert_signed(&requests[0], None);
}

#[tokio::test]
async fn throttling_is_retried_and_signed_again() {
    let server = MockServer::start(vec![
        Reply::Json(
            429,
            json!({"message": "Too many requests, please wait before trying again."}),
        ),
        Reply::Json(200, text_answer()),
    ])
    .await;
    let model = model(&server.base, Some("SESSION-TOKEN"), common::fast_policy(1));
    bounded(model.chat(&common::simple_request(), &CancellationToken::new()))
        .await
        .unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_signed(r, Some("SESSION-TOKEN"));
    }
}

#[tokio::test]
async fn retries_429() {
    common::check_retries_429(make, text_answer()).await;
}

#[tokio::test]
async fn does_not_retry_400() {
    common::check_no_retry_on_400(make, "bedrock").await;
}

#[tokio::test]
async fn an_endless_body_fails_at_the_size_limit() {
    common::check_endless_body(make, "bedrock").await;
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
    common::check_malformed(
        make,
        json!({"output": {"message": {"content": [{"toolUse": {"name": 1}}]}}}),
    )
    .await;
}

#[tokio::test]
async fn connection_refused() {
    common::check_connection_refused(make).await;
}
