//! The local GGUF provider against a real model: the small Qwen2.5-Coder-0.5B-Instruct (or the model
//! at `$TOOLPLAN_TEST_MODEL`). A missing model fails the tests with the command that fetches it.
//!
//! `cargo test -p toolplan-llm --features local --test it local_model::`
//!
//! Speed (load time, prompt and generation tokens/s) is measured by the `local_speed` example, not
//! here: `cargo run --release -p toolplan-llm --features local --example local_speed`.
#![cfg(feature = "local")]
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;
use toolplan_llm::provider::local::{self, LocalModel, LocalOptions};
use toolplan_llm::{
    CallPolicy, ChatModel, ChatRequest, LlmError, Message, ReplyDelta, ReplyStart, StepReferences,
    StopReason, ToolCall, ToolChoice, ToolDefinition,
};

fn test_model_path() -> PathBuf {
    let path = std::env::var_os("TOOLPLAN_TEST_MODEL")
        .filter(|p| !p.is_empty())
        .map_or_else(local::small_model_path, PathBuf::from);
    assert!(
        path.is_file(),
        "the test model {} is missing: fetch it with `bash scripts/fetch-model.sh small` \
         (from the repository root), or point TOOLPLAN_TEST_MODEL at a GGUF chat model",
        path.display()
    );
    path
}

/// The model, loaded once for every test of this file.
async fn model() -> &'static LocalModel {
    static MODEL: OnceCell<LocalModel> = OnceCell::const_new();
    MODEL
        .get_or_init(|| async {
            let options = LocalOptions {
                context_size: 4096,
                ..LocalOptions::default()
            };
            LocalModel::load(&test_model_path(), options).await.unwrap()
        })
        .await
}

fn weather_tool() -> ToolDefinition {
    ToolDefinition {
        name: "get_weather".into(),
        description: "Get the current weather of a city".into(),
        parameters: json!({
            "type": "object",
            "properties": {"location": {"type": "string", "description": "The city"}},
            "required": ["location"],
        }),
        ..Default::default()
    }
}

fn calculator_tool() -> ToolDefinition {
    ToolDefinition {
        name: "calculator".into(),
        description: "Evaluate an arithmetic expression such as 2*(3+4)".into(),
        parameters: json!({
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        }),
        ..Default::default()
    }
}

fn plan_tool() -> ToolDefinition {
    ToolDefinition {
        name: "execute_tool_plan".into(),
        description:
            "Run several tool calls as one plan. Each step calls one tool; a string argument \
                      \"$ref:ID\" or \"$ref:ID.field\" is replaced by the result of step ID."
                .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "steps": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string", "pattern": "^[A-Za-z0-9_-]+$"},
                            "tool": {"enum": ["get_weather", "calculator"]},
                            "arguments": {"type": "object"},
                        },
                        "required": ["id", "tool", "arguments"],
                        "additionalProperties": false,
                    },
                },
                "output_steps": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["steps"],
            "additionalProperties": false,
        }),
        ..Default::default()
    }
}

fn request(messages: Vec<Message>, tools: Vec<ToolDefinition>, max_tokens: u32) -> ChatRequest {
    ChatRequest {
        messages,
        tools,
        max_tokens: Some(max_tokens),
        ..ChatRequest::default()
    }
}

/// Every call names an offered tool and has arguments valid for its schema.
fn assert_valid_calls(calls: &[ToolCall], tools: &[ToolDefinition]) {
    assert!(!calls.is_empty());
    for call in calls {
        let tool = tools
            .iter()
            .find(|t| t.name == call.name)
            .unwrap_or_else(|| panic!("{} is not an offered tool", call.name));
        let validator = jsonschema::validator_for(&tool.parameters).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&call.arguments)
            .map(|e| e.to_string())
            .collect();
        assert!(
            errors.is_empty(),
            "arguments of {} do not match its schema: {errors:?} in {}",
            call.name,
            call.arguments
        );
        assert!(call.id.starts_with("call_"), "{}", call.id);
    }
}

#[tokio::test]
async fn a_plain_question_gets_a_text_answer() {
    let model = model().await;
    let response = model
        .chat(
            &request(
                vec![Message::user(
                    "What is the capital of France? Answer with one word.",
                )],
                vec![],
                16,
            ),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    println!("{:?}", response);
    assert!(response.message.tool_calls.is_empty());
    assert!(
        response.message.content.contains("Paris"),
        "{}",
        response.message.content
    );
    assert!(matches!(
        response.stop,
        StopReason::EndTurn | StopReason::MaxTokens
    ));
    assert!(response.usage.input_tokens > 10, "{:?}", response.usage);
    assert!(response.usage.output_tokens >= 1, "{:?}", response.usage);
    assert!(model.name().starts_with("local:"));
}

#[tokio::test]
async fn offered_tools_are_called_with_schema_valid_arguments() {
    let model = model().await;
    let tools = vec![weather_tool(), calculator_tool()];
    let response = model
        .chat(
            &request(
                vec![Message::user("What is the weather in Tokyo right now?")],
                tools.clone(),
                64,
            ),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    println!("{:?}", response);
    assert_eq!(response.stop, StopReason::ToolUse, "{response:?}");
    assert_valid_calls(&response.message.tool_calls, &tools);
    assert_eq!(response.message.tool_calls[0].name, "get_weather");
    let location = response.message.tool_calls[0].arguments["location"]
        .as_str()
        .unwrap();
    assert!(location.contains("Tokyo"), "{location}");
}

#[tokio::test]
async fn required_tool_choice_forces_a_call() {
    let model = model().await;
    let tools = vec![weather_tool(), calculator_tool()];
    let mut req = request(
        vec![Message::user("How much is 17 times 23?")],
        tools.clone(),
        64,
    );
    req.tool_choice = ToolChoice::Required;
    let response = model.chat(&req, &CancellationToken::new()).await.unwrap();
    println!("{:?}", response);
    assert_eq!(response.stop, StopReason::ToolUse);
    assert_valid_calls(&response.message.tool_calls, &tools);
}

#[tokio::test]
async fn a_plan_tool_gets_a_valid_plan() {
    let model = model().await;
    let tools = vec![plan_tool()];
    let mut req = request(
        vec![
            Message::system(
                "Answer with one execute_tool_plan call whose steps use the tools get_weather \
                 ({\"location\": city}) and calculator ({\"expression\": text}).",
            ),
            Message::user("Get the weather in Paris and in Tokyo."),
        ],
        tools.clone(),
        160,
    );
    req.tool_choice = ToolChoice::Required;
    let response = model.chat(&req, &CancellationToken::new()).await.unwrap();
    println!("{:?}", response);
    assert_eq!(response.stop, StopReason::ToolUse, "{response:?}");
    assert_valid_calls(&response.message.tool_calls, &tools);
    let plan = &response.message.tool_calls[0].arguments;
    let steps = plan["steps"].as_array().unwrap();
    assert!(!steps.is_empty());
    for step in steps {
        let tool = step["tool"].as_str().unwrap();
        assert!(["get_weather", "calculator"].contains(&tool), "{step}");
    }
}

/// The pieces a streamed call sends, each with when it arrived, and when the call returned.
async fn streamed(
    req: &ChatRequest,
) -> (
    toolplan_llm::ChatResponse,
    Vec<(Instant, ReplyDelta)>,
    Instant,
) {
    let model = model().await;
    let (sink, mut pieces) = tokio::sync::mpsc::unbounded_channel();
    let collect = tokio::spawn(async move {
        let mut got = Vec::new();
        while let Some(piece) = pieces.recv().await {
            got.push((Instant::now(), piece));
        }
        got
    });
    let response = model
        .chat_streamed(req, &sink, &CancellationToken::new())
        .await
        .unwrap();
    let returned = Instant::now();
    drop(sink);
    (response, collect.await.unwrap(), returned)
}

#[tokio::test]
async fn a_streamed_plan_arrives_piece_by_piece_and_adds_up_to_the_reply() {
    let tools = vec![plan_tool()];
    let mut req = request(
        vec![
            Message::system(
                "Answer with one execute_tool_plan call whose steps use the tools get_weather \
                 ({\"location\": city}) and calculator ({\"expression\": text}).",
            ),
            Message::user("Get the weather in Paris and in Tokyo."),
        ],
        tools,
        400,
    );
    req.tool_choice = ToolChoice::Required;
    let (response, pieces, returned) = streamed(&req).await;
    assert_eq!(response.stop, StopReason::ToolUse, "{response:?}");
    let calls = &response.message.tool_calls;
    assert_eq!(calls.len(), 1, "{response:?}");
    assert_eq!(
        pieces.first().map(|p| &p.1),
        Some(&ReplyDelta::CallStart {
            index: 0,
            name: "execute_tool_plan".into()
        })
    );
    let arguments: Vec<&(Instant, ReplyDelta)> = pieces
        .iter()
        .filter(|p| matches!(p.1, ReplyDelta::Arguments { index: 0, .. }))
        .collect();
    let text: String = arguments
        .iter()
        .map(|p| match &p.1 {
            ReplyDelta::Arguments { text, .. } => text.as_str(),
            _ => "",
        })
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        calls[0].arguments
    );
    // Token by token, the first long before the reply was done.
    assert!(arguments.len() > 10, "{} pieces", arguments.len());
    let first = arguments[0].0;
    let last = arguments[arguments.len() - 1].0;
    assert!(first < last && last <= returned);
    assert!(
        last - first > (returned - first) / 2,
        "the pieces came as they were sampled, not at the end"
    );
}

#[tokio::test]
async fn a_streamed_text_answer_is_its_pieces() {
    let req = request(
        vec![Message::user("Say hello in three words.")],
        Vec::new(),
        24,
    );
    let (response, pieces, _) = streamed(&req).await;
    let text: String = pieces
        .iter()
        .map(|p| match &p.1 {
            ReplyDelta::Text(text) => text.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(!text.is_empty());
    assert_eq!(text.trim(), response.message.content.trim());
}

#[tokio::test]
async fn a_reply_cut_before_any_call_is_whole_is_a_cut_off_error_holding_the_reply() {
    let model = model().await;
    let tools = vec![weather_tool()];
    // Eight tokens hold no whole call.
    let mut req = request(
        vec![Message::user("Get the weather in Paris.")],
        tools.clone(),
        8,
    );
    req.tool_choice = ToolChoice::Required;
    let err = model
        .chat(&req, &CancellationToken::new())
        .await
        .unwrap_err();
    match &err {
        LlmError::CutOff { tokens, reply, .. } => {
            assert_eq!(*tokens, 8);
            assert!(reply.starts_with('{') && !reply.is_empty(), "{reply}");
            let text = err.to_string();
            assert!(
                text.contains("cut off at the token limit (8 tokens)")
                    && text.ends_with(reply.as_str()),
                "{text}"
            );
        }
        other => panic!("expected a cut-off error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_plan_that_starts_to_repeat_a_step_is_stopped_there() {
    let model = model().await;
    let mut req = request(
        vec![
            Message::system(
                "Answer with one execute_tool_plan call. Its steps are exactly these six, in this \
                 order: {\"id\": \"a\", \"tool\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}, \
                 {\"id\": \"b\", \"tool\": \"get_weather\", \"arguments\": {\"location\": \"Lima\"}}, \
                 {\"id\": \"c\", \"tool\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}, \
                 {\"id\": \"d\", \"tool\": \"get_weather\", \"arguments\": {\"location\": \"Lima\"}}, \
                 {\"id\": \"e\", \"tool\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}, \
                 {\"id\": \"f\", \"tool\": \"get_weather\", \"arguments\": {\"location\": \"Lima\"}}.",
            ),
            Message::user("Go."),
        ],
        vec![plan_tool()],
        400,
    );
    req.tool_choice = ToolChoice::Required;
    req.parallel_tool_calls = Some(false);
    let response = model.chat(&req, &CancellationToken::new()).await.unwrap();
    let steps = response.message.tool_calls[0].arguments["steps"]
        .as_array()
        .unwrap()
        .clone();
    // Written out, the plan has six steps; the sampler stops at the first repeat (the third step),
    // so the reply holds two different steps and was not cut by the token limit.
    assert_eq!(response.stop, StopReason::ToolUse, "{response:?}");
    assert!(!steps.is_empty() && steps.len() < 6, "{steps:?}");
    let calls: Vec<_> = steps
        .iter()
        .map(|s| (s["tool"].clone(), s["arguments"].clone()))
        .collect();
    for (i, c) in calls.iter().enumerate() {
        assert!(
            !calls[..i].contains(c),
            "a repeated step was kept: {steps:?}"
        );
    }
    assert!(
        response.usage.output_tokens < 150,
        "the reply went on after the repeat: {} tokens",
        response.usage.output_tokens
    );
}

#[tokio::test]
async fn an_array_that_repeats_one_item_is_closed_after_the_limit() {
    let model = model().await;
    let order = ToolDefinition {
        name: "order".into(),
        description: "Order food: one entry in items per piece".into(),
        parameters: json!({
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"type": "string"}}},
            "required": ["items"],
        }),
        ..Default::default()
    };
    let mut req = request(
        vec![
            Message::system(
                "Call order once. Its items list holds the string \"burger\" forty times in a \
                 row and nothing else.",
            ),
            Message::user("Forty burgers."),
        ],
        vec![order],
        600,
    );
    req.tool_choice = ToolChoice::Required;
    let response = model.chat(&req, &CancellationToken::new()).await.unwrap();
    let items = response.message.tool_calls[0].arguments["items"]
        .as_array()
        .unwrap()
        .clone();
    // Written out, forty burgers; the array closes after the limit of one string in a row, and
    // the reply ends there rather than at the token limit.
    assert_eq!(response.stop, StopReason::ToolUse, "{response:?}");
    assert_eq!(items.len(), 4, "{items:?}");
    assert!(items.iter().all(|i| i == "burger"), "{items:?}");
    assert!(
        response.usage.output_tokens < 100,
        "{} tokens",
        response.usage.output_tokens
    );
}

/// The ids of the steps of the first plan in a response.
fn step_ids(response: &toolplan_llm::ChatResponse) -> Vec<String> {
    response.message.tool_calls[0].arguments["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect()
}

/// A request that must answer with one call of `tool` (a plan tool), at most 300 tokens.
fn plan_request(system: &str, user: &str, tool: ToolDefinition) -> ChatRequest {
    let mut req = request(
        vec![Message::system(system), Message::user(user)],
        vec![tool],
        300,
    );
    req.tool_choice = ToolChoice::Required;
    req.parallel_tool_calls = Some(false);
    req
}

#[tokio::test]
async fn unique_values_keep_a_plan_from_repeating_a_step_id() {
    let model = model().await;
    let ask = |tool: ToolDefinition| {
        plan_request(
            "Answer with one execute_tool_plan call whose steps use the tool get_weather \
                     ({\"location\": city}). Every step has the id w, for example \
                     {\"steps\": [{\"id\": \"w\", \"tool\": \"get_weather\", \"arguments\": \
                     {\"location\": \"Rome\"}}, {\"id\": \"w\", \"tool\": \"get_weather\", \
                     \"arguments\": {\"location\": \"Lima\"}}]}.",
            "Get the weather in Paris, in Tokyo and in Oslo.",
            tool,
        )
    };
    let cancel = CancellationToken::new();
    // Told so, the model repeats the id (which the plan's validation would turn down)…
    let mut three_steps = plan_tool();
    three_steps.parameters["properties"]["steps"]["minItems"] = json!(3);
    three_steps.parameters["properties"]["steps"]["maxItems"] = json!(3);
    let free = model
        .chat(&ask(three_steps.clone()), &cancel)
        .await
        .unwrap();
    let ids = step_ids(&free);
    assert!(
        ids.iter().filter(|id| *id == "w").count() > 1,
        "the model no longer repeats ids when told to, so this test shows nothing: {ids:?}"
    );
    // …but not where the tool says step ids are unique: it writes other ids instead.
    let unique = three_steps.with_unique_values("/steps/*/id");
    let held = model.chat(&ask(unique.clone()), &cancel).await.unwrap();
    assert_valid_calls(&held.message.tool_calls, &[unique]);
    let ids = step_ids(&held);
    let distinct: std::collections::HashSet<&String> = ids.iter().collect();
    assert!(ids.len() > 1, "{ids:?}");
    assert_eq!(distinct.len(), ids.len(), "{ids:?}");
}

/// The `$ref:` step ids in a step's arguments.
fn referred_ids(arguments: &serde_json::Value) -> Vec<String> {
    let text = arguments.to_string();
    text.split("$ref:")
        .skip(1)
        .map(|rest| {
            rest.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn step_references_name_only_steps_written_before_them() {
    let model = model().await;
    let ask = |tool: ToolDefinition| {
        plan_request(
            "Answer with one execute_tool_plan call whose steps use the tool get_weather \
                     ({\"location\": city}). Each step takes its location from the step after it, \
                     and output_steps is [\"e\"], for example {\"steps\": [{\"id\": \"w1\", \
                     \"tool\": \"get_weather\", \"arguments\": {\"location\": \"$ref:w2.city\"}}, \
                     {\"id\": \"w2\", \"tool\": \"get_weather\", \"arguments\": {\"location\": \
                     \"$ref:w1.city\"}}], \"output_steps\": [\"e\"]}.",
            "Get the weather in Paris and in Tokyo, each step taking its location from \
                     the other step as in the example, and output_steps as in the example.",
            tool,
        )
    };
    // Whether each step refers only to steps before it, and output_steps names only steps.
    let well_formed = |response: &toolplan_llm::ChatResponse| {
        let plan = &response.message.tool_calls[0].arguments;
        let ids = step_ids(response);
        let steps_ok = plan["steps"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .all(|(i, s)| {
                referred_ids(&s["arguments"])
                    .iter()
                    .all(|r| ids[..i].contains(r))
            });
        let outputs_ok = plan["output_steps"]
            .as_array()
            .is_none_or(|o| o.iter().all(|n| ids.iter().any(|id| n == id)));
        (steps_ok, outputs_ok)
    };
    let cancel = CancellationToken::new();
    // Told so, the model refers to a later step and names a step it never wrote…
    let mut with_outputs = plan_tool();
    with_outputs.parameters["required"] = json!(["steps", "output_steps"]);
    with_outputs.parameters["properties"]["output_steps"]["minItems"] = json!(1);
    let free = model
        .chat(&ask(with_outputs.clone()), &cancel)
        .await
        .unwrap();
    assert_eq!(
        well_formed(&free),
        (false, false),
        "the model no longer copies the bad references when told to, so this test shows nothing: {:?}",
        free.message.tool_calls
    );
    // …but not where the tool says how its steps refer to each other.
    let held_tool = with_outputs.with_step_references(StepReferences::plan());
    let held = model.chat(&ask(held_tool.clone()), &cancel).await.unwrap();
    // (A reply the sampler stopped at a repeated step ends there, output_steps and all: the
    // plain plan schema is the one it must meet.)
    assert_valid_calls(&held.message.tool_calls, &[plan_tool()]);
    assert_eq!(
        well_formed(&held),
        (true, true),
        "{:?}",
        held.message.tool_calls
    );
}

#[tokio::test]
async fn tool_results_lead_to_an_answer_and_reuse_the_cached_prefix() {
    let model = model().await;
    let tools = vec![weather_tool(), calculator_tool()];
    let call = ToolCall {
        id: "call_a".into(),
        name: "get_weather".into(),
        arguments: json!({"location": "Tokyo"}),
    };
    let messages = vec![
        Message::user("What is the weather in Tokyo right now?"),
        Message::assistant("", vec![call.clone()]),
        Message::tool_result(
            &call,
            r#"{"temp": 21, "condition": "sunny", "city": "Tokyo"}"#,
            false,
        ),
    ];
    let req = request(messages, tools, 64);
    let cancel = CancellationToken::new();
    let first = model.chat(&req, &cancel).await.unwrap();
    println!("{:?}", first);
    assert!(first.message.tool_calls.is_empty(), "{first:?}");
    assert_eq!(first.stop, StopReason::EndTurn);
    assert!(
        first.message.content.contains("21"),
        "{}",
        first.message.content
    );
    // The same conversation again: the KV cache of the first call is reused (all but the last
    // prompt token, unless another test's call came in between).
    let again = model.chat(&req, &cancel).await.unwrap();
    assert!(again.message.tool_calls.is_empty(), "{again:?}");
    let stats = model.last_stats().unwrap();
    println!("{stats:?}");
    assert!(stats.cached_tokens > 0, "{stats:?}");
    assert_eq!(stats.prompt_tokens, first.usage.input_tokens);
}

#[tokio::test]
async fn cancellation_and_timeouts_are_honoured() {
    let model = model().await;
    let req = request(vec![Message::user("Count from 1 to 1000.")], vec![], 2000);
    let cancel = CancellationToken::new();
    cancel.cancel();
    assert_eq!(model.chat(&req, &cancel).await, Err(LlmError::Cancelled));

    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        canceller.cancel();
    });
    let started = Instant::now();
    assert_eq!(model.chat(&req, &cancel).await, Err(LlmError::Cancelled));
    assert!(started.elapsed() < Duration::from_secs(30));

    let quick = LocalModel::load(
        model.path(),
        LocalOptions {
            context_size: 4096,
            policy: CallPolicy {
                timeout: Duration::from_millis(200),
                ..CallPolicy::default()
            },
            ..LocalOptions::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(
        quick.chat(&req, &CancellationToken::new()).await,
        Err(LlmError::Timeout(Duration::from_millis(200)))
    );
}

#[tokio::test]
async fn connect_loads_the_model_through_the_spec() {
    let spec: toolplan_llm::ModelSpec = format!("local:{}", test_model_path().display())
        .parse()
        .unwrap();
    let chat = toolplan_llm::connect(&spec, &toolplan_llm::ConnectOptions::default())
        .await
        .unwrap();
    assert!(chat.name().ends_with(".gguf"), "{}", chat.name());
}

#[tokio::test]
async fn without_the_prompt_cache_the_reply_depends_on_the_request_alone() {
    let shared = model().await;
    let cold = LocalModel::load(
        shared.path(),
        LocalOptions {
            context_size: 4096,
            reuse_prompt_cache: false,
            ..LocalOptions::default()
        },
    )
    .await
    .unwrap();
    let req = request(
        vec![Message::user("Name three colours of the rainbow.")],
        vec![],
        24,
    );
    let cancel = CancellationToken::new();
    let first = cold.chat(&req, &cancel).await.unwrap();
    let again = cold.chat(&req, &cancel).await.unwrap();
    assert_eq!(first, again);
    assert_eq!(cold.last_stats().unwrap().cached_tokens, 0);
}

/// The steps of the plan `model` writes for `req`, checked against its tools.
async fn plan_steps(
    model: &LocalModel,
    req: &ChatRequest,
    cancel: &CancellationToken,
) -> Vec<Value> {
    let response = model.chat(req, cancel).await.unwrap();
    assert_valid_calls(&response.message.tool_calls, &req.tools);
    response.message.tool_calls[0].arguments["steps"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn a_reply_start_is_kept_and_the_model_adds_to_it() {
    let model = model().await;
    let cancel = CancellationToken::new();
    let paris = json!({"id": "p", "tool": "get_weather", "arguments": {"location": "Paris"}});
    // A plan open for more steps: the reply keeps the given step and writes at least one more.
    let mut req = plan_request(
        "Answer with one execute_tool_plan call whose steps use the tool get_weather \
         ({\"location\": city}).",
        "Get the weather in Paris, in Tokyo and in Oslo.",
        plan_tool().with_unique_values("/steps/*/id"),
    );
    let plan = ToolCall {
        id: "call_0".into(),
        name: "execute_tool_plan".into(),
        arguments: json!({"steps": [paris.clone()]}),
    };
    req.reply_start = Some(ReplyStart {
        thought: String::new(),
        calls: vec![plan],
        open_in: Some("steps".into()),
        may_end: false,
    });
    let steps = plan_steps(model, &req, &cancel).await;
    assert_eq!(steps[0], paris, "{steps:?}");
    assert!(steps.len() >= 2, "{steps:?}");

    // A start that may be the whole reply: its steps are kept (their odd ids show it was not
    // dropped), and the model may close the plan there.
    let whole: Vec<Value> = [("p7", "Paris"), ("t7", "Tokyo"), ("o7", "Oslo")]
        .iter()
        .map(|(id, city)| json!({"id": id, "tool": "get_weather", "arguments": {"location": city}}))
        .collect();
    req.reply_start = Some(ReplyStart {
        thought: String::new(),
        calls: vec![ToolCall {
            id: "call_0".into(),
            name: "execute_tool_plan".into(),
            arguments: json!({"steps": whole.clone()}),
        }],
        open_in: Some("steps".into()),
        may_end: true,
    });
    let steps = plan_steps(model, &req, &cancel).await;
    assert_eq!(steps[..3], whole[..], "{steps:?}");

    // Direct calls open for one more: the reply has the given call, then others.
    let tools = vec![weather_tool()];
    let mut req = request(
        vec![Message::user("Get the weather in Paris and in Tokyo.")],
        tools.clone(),
        120,
    );
    req.tool_choice = ToolChoice::Required;
    let call = ToolCall {
        id: "call_0".into(),
        name: "get_weather".into(),
        arguments: json!({"location": "Paris"}),
    };
    req.reply_start = Some(ReplyStart {
        thought: String::new(),
        calls: vec![call.clone()],
        open_in: None,
        may_end: false,
    });
    let response = model.chat(&req, &cancel).await.unwrap();
    assert_valid_calls(&response.message.tool_calls, &tools);
    let calls = &response.message.tool_calls;
    assert!(calls.len() >= 2, "{calls:?}");
    assert_eq!(calls[0].arguments, call.arguments);

    // A start the grammar does not take (a tool that is not offered) is dropped: the reply is
    // written whole, and valid.
    req.reply_start = Some(ReplyStart {
        thought: String::new(),
        calls: vec![ToolCall {
            name: "not_offered".into(),
            ..call
        }],
        open_in: None,
        may_end: false,
    });
    let response = model.chat(&req, &cancel).await.unwrap();
    assert_valid_calls(&response.message.tool_calls, &tools);
}
