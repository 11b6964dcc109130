//! Speed of the local models on this machine: load time, prompt tokens/s and generated tokens/s for a
//! ~500-token prompt, free text and with tools offered (grammar-constrained), and the next agent turn
//! (served mostly from the prompt cache).
//!
//! `cargo run --release -p toolplan-llm --features local --example local_speed`

use std::time::{Duration, Instant};

use serde_json::json;
use tokio_util::sync::CancellationToken;
use toolplan_llm::provider::local::{self, LocalModel, LocalOptions};
use toolplan_llm::{ChatModel, ChatRequest, Message, ToolDefinition};

fn report(label: &str, model: &LocalModel, call: Duration) {
    let Some(stats) = model.last_stats() else {
        return;
    };
    println!(
        "{label}: prompt {} tokens ({} cached) at {:.0} tok/s; generated {} tokens at {:.1} tok/s; call {:.2}s",
        stats.prompt_tokens,
        stats.cached_tokens,
        stats.prompt_tokens_per_second(),
        stats.generated_tokens,
        stats.generated_tokens_per_second(),
        call.as_secs_f64(),
    );
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let weather = ToolDefinition {
        name: "get_weather".into(),
        description: "Current weather of a city: JSON {temp, condition, city}.".into(),
        parameters: json!({"type": "object", "properties": {"location": {"type": "string"}},
                           "required": ["location"], "additionalProperties": false}),
        ..Default::default()
    };
    for (which, path) in [
        ("small", local::small_model_path()),
        ("default", local::default_model_path()),
    ] {
        if !path.is_file() {
            println!(
                "{which}: {} missing, skipped (fetch: {})",
                path.display(),
                local::fetch_command(&path).unwrap_or("see scripts/fetch-model.sh")
            );
            continue;
        }
        let started = Instant::now();
        let model = LocalModel::load(&path, LocalOptions::default()).await?;
        println!("{which}: loaded in {:.2}s", started.elapsed().as_secs_f64());
        let mut text = String::from("Summarize the following notes in two sentences.\n\n");
        while model.count_tokens(&text) < 480 {
            text.push_str("The scheduler starts a step the moment its last dependency finishes. ");
        }
        let cancel = CancellationToken::new();
        let plain = ChatRequest {
            messages: vec![Message::user(text.clone())],
            max_tokens: Some(128),
            ..ChatRequest::default()
        };
        let t = Instant::now();
        model.chat(&plain, &cancel).await?;
        report(&format!("{which} plain"), &model, t.elapsed());

        let mut messages = vec![Message::user(format!(
            "{text}\nThen tell me the weather in Oslo."
        ))];
        let tooled = ChatRequest {
            messages: messages.clone(),
            tools: vec![weather.clone()],
            max_tokens: Some(128),
            ..ChatRequest::default()
        };
        let t = Instant::now();
        let response = model.chat(&tooled, &cancel).await?;
        report(&format!("{which} tools"), &model, t.elapsed());
        let calls = response.message.tool_calls.clone();
        messages.push(response.message);
        for call in &calls {
            messages.push(Message::tool_result(
                call,
                r#"{"temp": 3, "condition": "snow", "city": "Oslo"}"#,
                false,
            ));
        }
        let next = ChatRequest { messages, ..tooled };
        let t = Instant::now();
        model.chat(&next, &cancel).await?;
        report(&format!("{which} next turn"), &model, t.elapsed());
    }
    Ok(())
}
