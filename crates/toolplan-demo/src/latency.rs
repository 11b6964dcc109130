//! Demo lookups that take the time a remote API takes: [`tools_with_latency`] wraps `get_weather`
//! and `get_user` so that each call waits before it answers (`toolplan.toml`'s `demo_latency`).
//! For trying, and measuring, what runs in parallel and what starts while a plan is still being
//! written; the tools' answers do not change.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use toolplan_core::{Tool, ToolAnnotations, ToolContext, ToolResult};

use crate::{get_user, get_weather, tools};

/// A tool that waits `latency` before each call of the tool it wraps.
struct Slowed {
    inner: Arc<dyn Tool>,
    latency: Duration,
}

#[async_trait]
impl Tool for Slowed {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn description(&self) -> &str {
        self.inner.description()
    }

    fn parameters(&self) -> Value {
        self.inner.parameters()
    }

    async fn call(&self, arguments: Value, ctx: ToolContext) -> ToolResult {
        // A cancelled or timed-out step drops this future, and the wait with it.
        tokio::time::sleep(self.latency).await;
        self.inner.call(arguments, ctx).await
    }

    fn annotations(&self) -> ToolAnnotations {
        self.inner.annotations()
    }

    fn output_schema(&self) -> Option<Value> {
        self.inner.output_schema()
    }
}

/// Every demo tool, with `get_weather` and `get_user` answering after `latency` (the others as in
/// [`tools`]).
pub fn tools_with_latency(latency: Duration) -> Vec<Arc<dyn Tool>> {
    let slowed = [
        get_weather().name().to_owned(),
        get_user().name().to_owned(),
    ];
    tools()
        .into_iter()
        .map(|tool| {
            if slowed.iter().any(|n| n == tool.name()) {
                Arc::new(Slowed {
                    inner: tool,
                    latency,
                }) as Arc<dyn Tool>
            } else {
                tool
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_lookups_answer_the_same_after_the_latency() {
        let tools = tools_with_latency(Duration::from_millis(700));
        let weather = tools.iter().find(|t| t.name() == "get_weather").unwrap();
        let start = tokio::time::Instant::now();
        let out = weather
            .call(json!({"location": "Paris"}), ToolContext::detached())
            .await
            .unwrap();
        assert_eq!(start.elapsed(), Duration::from_millis(700));
        assert_eq!(
            out,
            get_weather()
                .call(json!({"location": "Paris"}), ToolContext::detached())
                .await
                .unwrap()
        );
        assert_eq!(weather.annotations(), get_weather().annotations());
        assert_eq!(weather.output_schema(), get_weather().output_schema());
        // The calculator is not a remote lookup.
        let calculator = tools.iter().find(|t| t.name() == "calculator").unwrap();
        let start = tokio::time::Instant::now();
        calculator
            .call(json!({"expression": "1+1"}), ToolContext::detached())
            .await
            .unwrap();
        assert_eq!(start.elapsed(), Duration::ZERO);
    }
}
