//! `toolplan.toml`: the model, tools and limits a user wants by default. Command-line flags override
//! it. Secrets never live here: API keys and AWS credentials come from the environment.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;

/// The file read when `--config` is not given, if it exists in the current directory.
pub const DEFAULT_CONFIG: &str = "toolplan.toml";

/// The configuration file.
#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Model spec: `local`, `local:PATH.gguf`, `openai:MODEL`, `anthropic:MODEL`, `bedrock:MODEL_ID`.
    pub model: Option<String>,
    /// Endpoint for `openai`/`anthropic` models (any compatible server).
    pub base_url: Option<String>,
    /// Tool set (`demo`).
    pub tools: Option<String>,
    /// Whether the agent may use `execute_tool_plan` (default true).
    pub planning: Option<bool>,
    /// Most model turns per question.
    pub max_turns: Option<usize>,
    /// System instructions for the agent.
    pub instructions: Option<String>,
    /// Limits on plans and tool calls.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// MCP servers whose tools plans may call (`[[mcp_servers]]`).
    #[serde(default)]
    pub mcp_servers: Vec<toolplan_mcp::McpServerConfig>,
}

/// `[limits]`.
#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Most tool calls running at once.
    pub concurrency: Option<usize>,
    /// Longest one tool call may take (`30s`, `2m`).
    pub step_timeout: Option<String>,
    /// Longest one plan may take.
    pub deadline: Option<String>,
    /// Most steps in one plan.
    pub max_steps: Option<usize>,
    /// Longest one model call may take.
    pub model_timeout: Option<String>,
}

const SECRET_WORDS: [&str; 5] = ["key", "secret", "token", "password", "credential"];

impl Config {
    /// Reads `path`, or `./toolplan.toml` when `path` is `None` and that file exists; otherwise the
    /// empty configuration.
    pub fn load(path: Option<&Path>) -> anyhow::Result<(Config, Option<PathBuf>)> {
        let path = match path {
            Some(p) => p.to_path_buf(),
            None => {
                let p = PathBuf::from(DEFAULT_CONFIG);
                if !p.exists() {
                    return Ok((Config::default(), None));
                }
                p
            }
        };
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read config file '{}'", path.display()))?;
        let config =
            Self::parse(&text).with_context(|| format!("in config file '{}'", path.display()))?;
        Ok((config, Some(path)))
    }

    /// Parses the text of a configuration file.
    pub fn parse(text: &str) -> anyhow::Result<Config> {
        let raw: toml::Table = toml::from_str(text)?;
        if let Some(key) = secret_keys(&raw, "").first() {
            bail!(
                "'{key}' looks like a secret: secrets come from the environment (OPENAI_API_KEY, ANTHROPIC_API_KEY, AWS_ACCESS_KEY_ID …), never from toolplan.toml"
            );
        }
        Ok(toml::from_str(text)?)
    }
}

/// Keys that look like secrets and hold a literal value. A value that only names environment
/// variables (`API_KEY = "${API_KEY}"`, as MCP servers' `env` and `headers` do) is not a secret.
fn secret_keys(table: &toml::Table, prefix: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (k, v) in table {
        let name = format!("{prefix}{k}");
        let lower = k.to_ascii_lowercase();
        let from_env = matches!(v, toml::Value::String(s) if s.contains("${"));
        if SECRET_WORDS.iter().any(|w| lower.contains(w)) && !from_env {
            found.push(name.clone());
        }
        match v {
            toml::Value::Table(t) => found.extend(secret_keys(t, &format!("{name}."))),
            toml::Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    if let toml::Value::Table(t) = item {
                        found.extend(secret_keys(t, &format!("{name}[{i}].")));
                    }
                }
            }
            _ => {}
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_servers_take_secrets_from_the_environment_only() {
        let c = Config::parse(
            r#"
            [[mcp_servers]]
            name = "everything"
            command = "npx"
            args = ["-y", "@modelcontextprotocol/server-everything"]
            env = { API_KEY = "${API_KEY}" }

            [[mcp_servers]]
            name = "remote"
            url = "http://127.0.0.1:3001/mcp"
            headers = { Authorization = "Bearer ${REMOTE_TOKEN}" }
            timeout = "30s"
            "#,
        )
        .unwrap();
        assert_eq!(c.mcp_servers.len(), 2);
        assert_eq!(
            c.mcp_servers[0].args[1],
            "@modelcontextprotocol/server-everything"
        );
        assert_eq!(c.mcp_servers[1].timeout.as_deref(), Some("30s"));
        let err = Config::parse(
            "[[mcp_servers]]\nname = \"x\"\ncommand = \"y\"\nenv = { API_KEY = \"abc\" }\n",
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("'mcp_servers[0].env.API_KEY' looks like a secret"),
            "{err}"
        );
    }

    #[test]
    fn parses_a_full_file() {
        let c = Config::parse(
            r#"
            model = "openai:gpt-4o-mini"
            base_url = "http://127.0.0.1:11434/v1"
            tools = "demo"
            planning = false
            max_turns = 4
            [limits]
            concurrency = 8
            step_timeout = "30s"
            "#,
        )
        .unwrap();
        assert_eq!(c.model.as_deref(), Some("openai:gpt-4o-mini"));
        assert_eq!(c.planning, Some(false));
        assert_eq!(c.limits.concurrency, Some(8));
        assert_eq!(c.limits.step_timeout.as_deref(), Some("30s"));
    }

    #[test]
    fn rejects_secrets_and_unknown_fields() {
        let err = Config::parse("api_key = \"sk-123\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("secrets come from the environment"), "{err}");
        let err = Config::parse("[limits]\naws_secret = \"x\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("limits.aws_secret"), "{err}");
        let err = format!("{:#}", Config::parse("modle = \"local\"").unwrap_err());
        assert!(err.contains("modle"), "{err}");
    }
}
