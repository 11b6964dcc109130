//! `toolplan.toml`: the model, tools and limits a user wants by default. Command-line flags override
//! it (see [`crate::settings`]).
//!
//! Two rules keep a file from doing harm:
//! * Secrets never live here: API keys, tokens and passwords come from the environment. A value of a
//!   secret-like key (`api_key`, `Authorization`, `--token` in `args` …) must be exactly an environment
//!   reference, possibly after a scheme (`${VAR}`, `Bearer ${VAR}`, `Basic ${VAR}`); values that look
//!   like known key formats (`sk-…`, `ghp_…`, `AKIA…`, `xoxb-…`), credentials in URLs
//!   (`user:pass@`, `?api_key=`) and headers sent over plain http to another machine are refused.
//! * A file found in the current directory (not named with `--config`) may not start the commands
//!   of its `[[mcp_servers]]`, connect to their URLs, or send model requests to a remote `base_url`
//!   unless the user opts in with `--trust-config` or `TOOLPLAN_TRUST_CONFIG=1`: running toolplan in
//!   a cloned repository must not run that repository's commands.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;

mod secrets;

/// The file read when `--config` is not given, if it exists in the current directory.
pub const DEFAULT_CONFIG: &str = "toolplan.toml";

/// The environment variable that trusts a `toolplan.toml` found in the current directory (`1`).
pub const TRUST_ENV: &str = "TOOLPLAN_TRUST_CONFIG";

/// Whether the environment trusts a configuration file found in the current directory
/// (`TOOLPLAN_TRUST_CONFIG=1`, `true` or `yes`).
pub fn trusted_by_env() -> bool {
    std::env::var(TRUST_ENV)
        .map(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
        .unwrap_or(false)
}

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
    /// More system instructions for the agent, added after toolplan's own (never in their place).
    pub instructions: Option<String>,
    /// How long the demo lookups (`get_weather`, `get_user`) take to answer (`"1s"`, `"500ms"`),
    /// as a remote API would: for trying what runs in parallel and what starts while a plan is
    /// still being written. Default: they answer at once.
    pub demo_latency: Option<String>,
    /// Limits on plans and tool calls.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// MCP servers whose tools plans may call (`[[mcp_servers]]`).
    #[serde(default)]
    pub mcp_servers: Vec<toolplan_mcp::McpServerConfig>,
    /// Where the file is, when it was found in the current directory (not named with `--config`)
    /// and the user did not trust it (`--trust-config`, `TOOLPLAN_TRUST_CONFIG=1`): its MCP servers
    /// and a remote `base_url` are then refused.
    #[serde(skip)]
    pub untrusted: Option<PathBuf>,
}

/// `[limits]`. Each is optional: a command-line flag given explicitly wins over it, and it wins
/// over the built-in default.
#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Most tool calls running at once.
    pub concurrency: Option<usize>,
    /// Longest one tool call may take (`30s`, `2m`, `none`).
    pub step_timeout: Option<String>,
    /// Longest one plan may take (`none` by default).
    pub deadline: Option<String>,
    /// Most steps in one plan.
    pub max_steps: Option<usize>,
    /// Largest plan text accepted, in bytes.
    pub max_plan_bytes: Option<usize>,
    /// Largest `arguments` of one step, in bytes of JSON text.
    pub max_argument_bytes: Option<usize>,
    /// Largest output of one step, in bytes of JSON text.
    pub max_output_bytes: Option<usize>,
    /// Most bytes the references of one step's arguments may insert, all together.
    pub max_resolved_argument_bytes: Option<usize>,
    /// Most bytes of outputs one run holds at once.
    pub max_kept_output_bytes: Option<usize>,
    /// Most bytes of the results that failed steps read, kept for the report.
    pub max_failure_input_bytes: Option<usize>,
    /// Deepest nesting of arrays and objects in outputs and resolved arguments.
    pub max_value_depth: Option<usize>,
    /// Longest error message kept for one step, in bytes.
    pub max_error_bytes: Option<usize>,
    /// Longest text one tool or plan result may put into the agent's model context, in bytes.
    pub max_result_bytes: Option<usize>,
    /// Largest response body read from an HTTP model provider, in bytes.
    pub max_response_bytes: Option<usize>,
    /// Longest one model call may take.
    pub model_timeout: Option<String>,
    /// Which plans need approval on the terminal before they run: `never` (the default),
    /// `destructive` or `all`.
    pub confirm: Option<String>,
    /// Longest the terminal waits for an approval; past it the plan is not run (default 5m).
    pub approval_timeout: Option<String>,
}

impl LimitsConfig {
    /// `step_timeout`: `None` when not set, `Some(None)` for `none`.
    pub fn step_timeout(&self) -> anyhow::Result<Option<Option<Duration>>> {
        optional_duration(self.step_timeout.as_deref(), "limits.step_timeout")
    }

    /// `deadline`: `None` when not set, `Some(None)` for `none`.
    pub fn deadline(&self) -> anyhow::Result<Option<Option<Duration>>> {
        optional_duration(self.deadline.as_deref(), "limits.deadline")
    }

    /// `confirm`, when set.
    pub fn confirm(&self) -> anyhow::Result<Option<toolplan_core::approval::Confirm>> {
        self.confirm
            .as_deref()
            .map(|name| {
                toolplan_core::approval::Confirm::parse(name).ok_or_else(|| {
                    anyhow::anyhow!(
                        "limits.confirm: '{name}' is not one of never, destructive, all"
                    )
                })
            })
            .transpose()
    }

    /// `approval_timeout`, when set.
    pub fn approval_timeout(&self) -> anyhow::Result<Option<Duration>> {
        self.approval_timeout
            .as_deref()
            .map(|t| duration(t, "limits.approval_timeout"))
            .transpose()
    }

    /// `model_timeout`, when set.
    pub fn model_timeout(&self) -> anyhow::Result<Option<Duration>> {
        self.model_timeout
            .as_deref()
            .map(|t| duration(t, "limits.model_timeout"))
            .transpose()
    }
}

/// A duration of the file (`30s`, `2m`); `what` names it in the error.
pub fn duration(text: &str, what: &str) -> anyhow::Result<Duration> {
    let d = humantime::parse_duration(text)
        .with_context(|| format!("{what}: '{text}' is not a duration (e.g. 30s, 2m)"))?;
    if d.is_zero() {
        bail!("{what}: must be more than zero (or `none` where no limit is allowed)");
    }
    Ok(d)
}

fn optional_duration(text: Option<&str>, what: &str) -> anyhow::Result<Option<Option<Duration>>> {
    match text {
        None => Ok(None),
        Some(t) if t.trim().eq_ignore_ascii_case("none") => Ok(Some(None)),
        Some(t) => Ok(Some(Some(duration(t, what)?))),
    }
}

impl Config {
    /// Reads `path`, or `./toolplan.toml` when `path` is `None` and that file exists; otherwise the
    /// empty configuration. A file found in the current directory is [`Config::untrusted`] unless
    /// `trust_found` (the user opted in).
    pub fn load(path: Option<&Path>, trust_found: bool) -> anyhow::Result<Config> {
        let (path, named) = match path {
            Some(p) => (p.to_path_buf(), true),
            None => {
                let p = PathBuf::from(DEFAULT_CONFIG);
                if !p.exists() {
                    return Ok(Config::default());
                }
                (p, false)
            }
        };
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read config file '{}'", path.display()))?;
        let mut config =
            Self::parse(&text).with_context(|| format!("in config file '{}'", path.display()))?;
        if !named && !trust_found {
            config.untrusted = Some(std::path::absolute(&path).unwrap_or_else(|_| path.clone()));
        }
        Ok(config)
    }

    /// Parses the text of a configuration file.
    pub fn parse(text: &str) -> anyhow::Result<Config> {
        let raw: toml::Table = toml::from_str(text)?;
        if let Some((key, why)) = secrets::find(&raw) {
            bail!(
                "'{key}' looks like a secret ({why}): secrets come from the environment (OPENAI_API_KEY, ANTHROPIC_API_KEY, AWS_ACCESS_KEY_ID …), never from toolplan.toml; write \"${{VAR}}\" (or \"Bearer ${{VAR}}\") to take it from the environment"
            );
        }
        let config: Config = toml::from_str(text)?;
        config.limits.step_timeout()?;
        config.limits.deadline()?;
        config.limits.model_timeout()?;
        for (i, server) in config.mcp_servers.iter().enumerate() {
            if let Some(url) = &server.url
                && !server.headers.is_empty()
                && let Some(host) = secrets::clear_text_host(url)
            {
                bail!(
                    "mcp_servers[{i}] ('{}'): headers would be sent in clear text to {host}: use https, or a loopback address",
                    server.name
                );
            }
        }
        Ok(config)
    }

    /// Fails when the file is untrusted and declares MCP servers: starting their commands (or
    /// sending their headers) needs the user's opt-in.
    pub fn check_mcp_trusted(&self) -> anyhow::Result<()> {
        let Some(path) = &self.untrusted else {
            return Ok(());
        };
        if self.mcp_servers.is_empty() {
            return Ok(());
        }
        let servers: Vec<String> = self
            .mcp_servers
            .iter()
            .map(|s| match (&s.command, &s.url) {
                (Some(c), _) => {
                    let mut line = format!("{}: {c}", s.name);
                    for a in &s.args {
                        line.push(' ');
                        line.push_str(a);
                    }
                    line
                }
                (None, Some(u)) => format!("{}: {u}", s.name),
                (None, None) => s.name.clone(),
            })
            .collect();
        bail!(
            "{} declares MCP servers ({}); it was found in the current directory, not named with --config: run with --trust-config (or {TRUST_ENV}=1), or --config {DEFAULT_CONFIG}, to start them",
            describe(path),
            servers.join("; ")
        )
    }

    /// `base_url`, refused when the file is untrusted and the URL is not a loopback address:
    /// model requests carry the provider's API key.
    pub fn trusted_base_url(&self) -> anyhow::Result<Option<&str>> {
        let Some(url) = self.base_url.as_deref() else {
            return Ok(None);
        };
        if let Some(path) = &self.untrusted
            && !secrets::is_loopback_url(url)
        {
            bail!(
                "{} sets base_url = \"{url}\"; it was found in the current directory, not named with --config: run with --trust-config (or {TRUST_ENV}=1), or --config {DEFAULT_CONFIG}, to send model requests (and their API key) there",
                describe(path)
            );
        }
        Ok(Some(url))
    }
}

/// "toolplan.toml in /x/y".
fn describe(path: &Path) -> String {
    match (path.file_name(), path.parent()) {
        (Some(name), Some(dir)) => format!("{} in {}", name.to_string_lossy(), dir.display()),
        _ => path.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_untrusted_file_starts_nothing_and_sends_no_key_away() {
        let mut c = Config::parse(
            "[[mcp_servers]]\nname = \"s\"\ncommand = \"sh\"\nargs = [\"-c\", \"touch MARKER\"]\n",
        )
        .unwrap();
        assert!(c.check_mcp_trusted().is_ok());
        c.untrusted = Some(PathBuf::from("/x/y/toolplan.toml"));
        let err = c.check_mcp_trusted().unwrap_err().to_string();
        assert_eq!(
            err,
            "toolplan.toml in /x/y declares MCP servers (s: sh -c touch MARKER); it was found in the current directory, not named with --config: run with --trust-config (or TOOLPLAN_TRUST_CONFIG=1), or --config toolplan.toml, to start them"
        );
        let mut c = Config::parse("base_url = \"https://example.com/v1\"").unwrap();
        assert_eq!(
            c.trusted_base_url().unwrap(),
            Some("https://example.com/v1")
        );
        c.untrusted = Some(PathBuf::from("/x/y/toolplan.toml"));
        assert!(c.trusted_base_url().is_err());
        c.base_url = Some("http://127.0.0.1:11434/v1".into());
        assert!(c.trusted_base_url().is_ok());
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
}
