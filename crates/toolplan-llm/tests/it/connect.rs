//! `connect`: the right provider for each spec, and clear errors.

#![allow(clippy::unwrap_used)]

use toolplan_llm::{ConnectOptions, LlmError, ModelSpec, connect};

#[tokio::test]
async fn connects_openai_compatible_and_anthropic_servers() {
    let options = ConnectOptions {
        base_url: Some("http://127.0.0.1:9/v1".into()),
        ..ConnectOptions::default()
    };
    let model = connect(&"openai:qwen2.5:7b".parse().unwrap(), &options)
        .await
        .unwrap();
    assert_eq!(model.name(), "openai:qwen2.5:7b");
    let options = ConnectOptions {
        base_url: Some("http://127.0.0.1:9".into()),
        ..ConnectOptions::default()
    };
    let model = connect(&"anthropic:claude-x".parse().unwrap(), &options)
        .await
        .unwrap();
    assert_eq!(model.name(), "anthropic:claude-x");
}

#[tokio::test]
async fn rejects_bad_base_urls() {
    let options = ConnectOptions {
        base_url: Some("localhost:11434".into()),
        ..ConnectOptions::default()
    };
    let e = connect(&ModelSpec::OpenAi("m".into()), &options)
        .await
        .err()
        .unwrap();
    assert!(
        matches!(&e, LlmError::Config(m) if m.contains("localhost:11434")),
        "{e}"
    );
}

#[cfg(not(feature = "local"))]
#[tokio::test]
async fn local_needs_the_feature() {
    let e = connect(&ModelSpec::Local(None), &ConnectOptions::default())
        .await
        .err()
        .unwrap();
    assert!(
        matches!(&e, LlmError::Config(m) if m.contains("`local` feature")),
        "{e}"
    );
}
