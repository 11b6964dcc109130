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
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;

/// The file read when `--config` is not given, if it exists in the current directory.
pub const DEFAULT_CONFIG: &str = "toolplan.toml";

/// The environment variable that trusts a `toolplan.toml` found in the current directory (`1`).
pub const TRUST_ENV: &str = "TOOLPLAN_TRUST_CONFIG";

static TRUST_FLAG: AtomicBool = AtomicBool::new(false);

/// Trusts a configuration file found in the current directory (`--trust-config`).
pub fn trust_found_config() {
    TRUST_FLAG.store(true, Ordering::Relaxed);
}

/// Whether the user trusts a configuration file found in the current directory.
fn found_config_trusted() -> bool {
    TRUST_FLAG.load(Ordering::Relaxed)
        || std::env::var(TRUST_ENV)
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
    /// System instructions for the agent.
    pub instructions: Option<String>,
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
    /// the user opted in.
    pub fn load(path: Option<&Path>) -> anyhow::Result<(Config, Option<PathBuf>)> {
        let (path, named) = match path {
            Some(p) => (p.to_path_buf(), true),
            None => {
                let p = PathBuf::from(DEFAULT_CONFIG);
                if !p.exists() {
                    return Ok((Config::default(), None));
                }
                (p, false)
            }
        };
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read config file '{}'", path.display()))?;
        let mut config =
            Self::parse(&text).with_context(|| format!("in config file '{}'", path.display()))?;
        if !named && !found_config_trusted() {
            config.untrusted = Some(std::path::absolute(&path).unwrap_or_else(|_| path.clone()));
        }
        Ok((config, Some(path)))
    }

    /// Parses the text of a configuration file.
    pub fn parse(text: &str) -> anyhow::Result<Config> {
        let raw: toml::Table = toml::from_str(text)?;
        let mut found = Vec::new();
        scan_table(&raw, "", &mut found);
        if let Some((key, why)) = found.first() {
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
                && let Some(host) = clear_text_host(url)
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
            && !is_loopback_url(url)
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

/// Words that make a key (or a command-line flag, or a URL query parameter) secret-like.
const SECRET_WORDS: [&str; 8] = [
    "key",
    "secret",
    "token",
    "password",
    "passwd",
    "credential",
    "auth",
    "cookie",
];

/// Flag endings that name where a secret is, not the secret (`--token-env VAR`, `--key-file F`).
const NOT_SECRET_SUFFIXES: [&str; 9] = [
    "file", "path", "dir", "env", "var", "type", "name", "id", "url",
];

/// Prefixes of well-known API key formats, with the fewest characters that follow them.
const KEY_PREFIXES: [(&str, usize); 14] = [
    ("sk-", 16),
    ("sk_live_", 10),
    ("sk_test_", 10),
    ("rk_live_", 10),
    ("ghp_", 20),
    ("gho_", 20),
    ("ghs_", 20),
    ("ghu_", 20),
    ("github_pat_", 20),
    ("glpat-", 16),
    ("xoxb-", 10),
    ("xoxp-", 10),
    ("hf_", 20),
    ("AIza", 30),
];

fn secret_like(name: &str) -> bool {
    let mut lower = name.to_ascii_lowercase();
    // Words that only contain a secret word.
    if !lower.contains("authoriz") {
        for benign in ["keyword", "keyboard", "author"] {
            lower = lower.replace(benign, "");
        }
    }
    SECRET_WORDS.iter().any(|w| lower.contains(w))
}

/// `${VAR}`, or a fixed scheme and `${VAR}` (`Bearer ${VAR}`, `Basic ${VAR}`, `Token ${VAR}`).
fn is_env_reference(value: &str) -> bool {
    let v = value.trim();
    let v = ["Bearer ", "Basic ", "Token "]
        .iter()
        .find_map(|p| {
            v.get(..p.len())
                .filter(|head| head.eq_ignore_ascii_case(p))
                .map(|_| v[p.len()..].trim_start())
        })
        .unwrap_or(v);
    let Some(name) = v.strip_prefix("${").and_then(|r| r.strip_suffix('}')) else {
        return false;
    };
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why a string value looks like a secret whatever its key, if it does.
fn secret_value(value: &str) -> Option<&'static str> {
    let trimmed = value.trim();
    let lower = trimmed.to_ascii_lowercase();
    for scheme in ["bearer ", "basic "] {
        let at = if lower.starts_with(scheme) {
            Some(0)
        } else {
            lower
                .find(&format!("authorization: {scheme}"))
                .map(|i| i + "authorization: ".len())
        };
        if let Some(at) = at
            && !is_env_reference(&trimmed[at..])
        {
            return Some("a literal credential after its scheme");
        }
    }
    let words = value.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'));
    for word in words {
        let known = KEY_PREFIXES
            .iter()
            .any(|(p, n)| word.strip_prefix(p).is_some_and(|rest| rest.len() >= *n));
        let aws = word.len() == 20
            && (word.starts_with("AKIA") || word.starts_with("ASIA"))
            && word
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
        if known || aws {
            return Some("the format of an API key");
        }
    }
    if value.contains("://")
        && let Ok(url) = url::Url::parse(trimmed)
    {
        if !url.username().is_empty() || url.password().is_some() {
            return Some("credentials in the URL");
        }
        if url
            .query_pairs()
            .any(|(k, v)| secret_like(&k) && !is_env_reference(&v))
        {
            return Some("a secret in the URL's query");
        }
    }
    None
}

fn scan_table(table: &toml::Table, prefix: &str, found: &mut Vec<(String, &'static str)>) {
    for (k, v) in table {
        scan(v, &format!("{prefix}{k}"), k, found);
    }
}

/// Secret-like values under `path` (whose last key is `key`).
fn scan(value: &toml::Value, path: &str, key: &str, found: &mut Vec<(String, &'static str)>) {
    match value {
        toml::Value::Table(t) => scan_table(t, &format!("{path}."), found),
        toml::Value::Array(items) if key == "args" => scan_args(items, path, found),
        toml::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                scan(item, &format!("{path}[{i}]"), key, found);
            }
        }
        toml::Value::String(s) => {
            if secret_like(key) && !is_env_reference(s) {
                found.push((path.to_owned(), "a literal value"));
            } else if key != "instructions"
                && let Some(why) = secret_value(s)
            {
                found.push((path.to_owned(), why));
            }
        }
        _ if secret_like(key) => found.push((path.to_owned(), "a literal value")),
        _ => {}
    }
}

/// A command's arguments: a secret-like flag followed by a literal (`--api-key sk-1`,
/// `--token=abc`), or a literal that is a secret by its form.
fn scan_args(items: &[toml::Value], path: &str, found: &mut Vec<(String, &'static str)>) {
    let text = |i: usize| items.get(i).and_then(toml::Value::as_str);
    for i in 0..items.len() {
        let item_path = format!("{path}[{i}]");
        let Some(arg) = text(i) else {
            if let Some(item) = items.get(i) {
                scan(item, &item_path, "args", found);
            }
            continue;
        };
        if let Some(flag) = arg.strip_prefix('-') {
            let (name, inline) = match flag.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (flag, None),
            };
            let name = name.trim_start_matches('-').to_ascii_lowercase();
            let secret_flag =
                secret_like(&name) && !NOT_SECRET_SUFFIXES.iter().any(|s| name.ends_with(s));
            if secret_flag {
                let value = match inline {
                    Some(v) => Some((item_path.clone(), v)),
                    None => text(i + 1)
                        .filter(|next| !next.starts_with('-'))
                        .map(|next| (format!("{path}[{}]", i + 1), next)),
                };
                if let Some((at, v)) = value
                    && !is_env_reference(v)
                {
                    found.push((at, "a literal value after a secret-like flag"));
                    continue;
                }
            }
        }
        if let Some(why) = secret_value(arg) {
            found.push((item_path, why));
        }
    }
}

/// The host of a plain-http URL to another machine (where headers would travel in clear text).
fn clear_text_host(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    (parsed.scheme() == "http" && !is_loopback_url(url))
        .then(|| parsed.host_str().unwrap_or_default().to_owned())
}

/// Whether a URL's host is this machine (`localhost`, 127.0.0.0/8, ::1).
pub fn is_loopback_url(url: &str) -> bool {
    match url::Url::parse(url)
        .ok()
        .and_then(|u| u.host().map(|h| h.to_owned()))
    {
        Some(url::Host::Domain(d)) => {
            let d = d.to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
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

    /// The error of parsing `text`, which must fail.
    fn refused(text: &str) -> String {
        match Config::parse(text) {
            Ok(c) => panic!("accepted {text}: {c:?}"),
            Err(e) => format!("{e:#}"),
        }
    }

    fn server(fields: &str) -> String {
        format!("[[mcp_servers]]\nname = \"s\"\n{fields}\n")
    }

    #[test]
    fn secrets_cannot_hide_in_values_args_or_urls() {
        let cases = [
            // A literal credential after its scheme, under a key that does not look secret.
            (
                r#"url = "https://h.example/mcp"
headers = { Authorization = "Bearer abc" }"#,
                "mcp_servers[0].headers.Authorization",
            ),
            (
                r#"url = "https://h.example/mcp"
headers = { X-Custom = "Bearer abc" }"#,
                "mcp_servers[0].headers.X-Custom",
            ),
            // An environment reference beside a literal.
            (
                r#"command = "x"
env = { API_KEY = "sk-123${X}" }"#,
                "mcp_servers[0].env.API_KEY",
            ),
            // Flags in args.
            (
                r#"command = "x"
args = ["--api-key", "sk-live-123"]"#,
                "mcp_servers[0].args[1]",
            ),
            (
                r#"command = "x"
args = ["serve", "--token=abc"]"#,
                "mcp_servers[0].args[1]",
            ),
            (
                r#"command = "x"
args = ["--password", "hunter2"]"#,
                "mcp_servers[0].args[1]",
            ),
            // Known key formats anywhere.
            (
                r#"command = "x"
args = ["ghp_0123456789abcdefghijABCDEFGHIJ"]"#,
                "mcp_servers[0].args[0]",
            ),
            (
                r#"command = "x"
env = { AWS = "AKIAIOSFODNN7EXAMPLE" }"#,
                "mcp_servers[0].env.AWS",
            ),
            (
                r#"command = "x"
env = { SLACK = "xoxb-1234567890-abc" }"#,
                "mcp_servers[0].env.SLACK",
            ),
            // URLs.
            (
                r#"url = "https://h.example/mcp?api_key=abc""#,
                "mcp_servers[0].url",
            ),
            (
                r#"url = "https://h.example/mcp?x=1&token=abc""#,
                "mcp_servers[0].url",
            ),
            (
                r#"url = "https://user:pw@h.example/mcp""#,
                "mcp_servers[0].url",
            ),
        ];
        for (fields, key) in cases {
            let err = refused(&server(fields));
            assert!(
                err.contains(&format!("'{key}' looks like a secret")),
                "{fields}: {err}"
            );
        }
        assert!(refused("base_url = \"https://u:p@h.example/v1\"").contains("'base_url'"));
    }

    #[test]
    fn environment_references_and_ordinary_values_pass() {
        let c = Config::parse(&server(
            r#"command = "x"
args = ["--api-key", "${API_KEY}", "--token-env", "TOKEN", "--key-file", "k.pem", "--verbose", "--auth=${AUTH}", "sk-learn"]
env = { API_KEY = "${API_KEY}", MODE = "fast" }"#,
        ));
        assert!(c.is_ok(), "{c:?}");
        let c = Config::parse(&server(
            r#"url = "https://h.example/mcp?keyword=rust&page=2&token=${T}"
headers = { Authorization = "Basic ${CREDS}", Accept = "application/json", X-Api-Key = "${K}" }"#,
        ));
        assert!(c.is_ok(), "{c:?}");
        assert!(Config::parse("instructions = \"Bearer of news: be brief.\"").is_ok());
        assert!(is_env_reference("Bearer ${TOKEN}"));
        assert!(!is_env_reference("Bearer ${TOKEN}x"));
        assert!(!is_env_reference("${TOKEN} ${OTHER}"));
        assert!(!is_env_reference("${1X}"));
    }

    #[test]
    fn headers_never_travel_in_clear_text_to_another_machine() {
        let err = refused(&server(
            r#"url = "http://example.com/mcp"
headers = { Authorization = "Bearer ${TOKEN}" }"#,
        ));
        assert!(
            err.contains("headers would be sent in clear text to example.com: use https, or a loopback address"),
            "{err}"
        );
        for url in [
            "https://example.com/mcp",
            "http://127.0.0.1:3001/mcp",
            "http://localhost:3001/mcp",
            "http://[::1]:3001/mcp",
        ] {
            let c = Config::parse(&server(&format!(
                "url = \"{url}\"\nheaders = {{ Authorization = \"Bearer ${{T}}\" }}"
            )));
            assert!(c.is_ok(), "{url}: {c:?}");
        }
        // Without headers there is nothing to leak.
        assert!(Config::parse(&server(r#"url = "http://example.com/mcp""#)).is_ok());
    }

    #[test]
    fn an_untrusted_file_starts_nothing_and_sends_no_key_away() {
        let mut c = Config::parse(&server(
            r#"command = "sh"
args = ["-c", "touch MARKER"]"#,
        ))
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
