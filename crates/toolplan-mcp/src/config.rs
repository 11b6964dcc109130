//! The `[[mcp_servers]]` of `toolplan.toml`: how to reach each MCP server whose tools plans may call.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::error::McpError;

/// Default time one tool call may take.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Default time a server has to start and complete the handshake (`npx -y` may download first).
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(120);

/// One MCP server: a command run over stdio, or a streamable-HTTP URL.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The name used in messages, and as the prefix `<name>.<tool>` when tool names clash.
    pub name: String,
    /// The command to run (stdio transport).
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables; `${VAR}` in a value is taken from toolplan's environment. A stdio
    /// server gets these and [`crate::client::INHERITED_ENV`] (PATH, HOME, …) only, not the rest
    /// of toolplan's environment: `OPENAI_API_KEY = "${OPENAI_API_KEY}"` passes one key on.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Its working directory.
    pub cwd: Option<PathBuf>,
    /// The server's URL (streamable-HTTP transport), e.g. `http://127.0.0.1:3001/mcp`.
    pub url: Option<String>,
    /// HTTP headers; `${VAR}` in a value is taken from the environment (`Authorization = "Bearer ${TOKEN}"`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Longest one tool call may take (`30s`, `2m`; default 60 s).
    pub timeout: Option<String>,
    /// Longest the server may take to start (default 120 s).
    pub start_timeout: Option<String>,
}

/// How a server is reached, checked.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Environment variables, expanded.
        env: BTreeMap<String, String>,
        /// Working directory.
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        /// The endpoint.
        url: String,
        /// Headers, expanded.
        headers: BTreeMap<String, String>,
    },
}

impl McpServerConfig {
    /// A stdio server.
    pub fn stdio(name: impl Into<String>, command: impl Into<String>, args: &[&str]) -> Self {
        McpServerConfig {
            name: name.into(),
            command: Some(command.into()),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            ..McpServerConfig::default()
        }
    }

    /// A streamable-HTTP server.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        McpServerConfig {
            name: name.into(),
            url: Some(url.into()),
            ..McpServerConfig::default()
        }
    }

    fn err(&self, message: impl Into<String>) -> McpError {
        McpError::Config {
            server: self.name.clone(),
            message: message.into(),
        }
    }

    /// The transport, with `${VAR}` references expanded from the environment.
    pub fn transport(&self) -> Result<Transport, McpError> {
        if self.name.trim().is_empty() || self.name.chars().any(char::is_whitespace) {
            return Err(self.err("a server needs a name without spaces"));
        }
        let expand_all =
            |m: &BTreeMap<String, String>| -> Result<BTreeMap<String, String>, McpError> {
                m.iter()
                    .map(|(k, v)| {
                        Ok((
                            k.clone(),
                            expand(v).map_err(|e| self.err(format!("{k}: {e}")))?,
                        ))
                    })
                    .collect()
            };
        match (&self.command, &self.url) {
            (Some(command), None) => Ok(Transport::Stdio {
                command: command.clone(),
                args: self.args.clone(),
                env: expand_all(&self.env)?,
                cwd: self.cwd.clone(),
            }),
            (None, Some(url)) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(
                        self.err(format!("url '{url}' must start with http:// or https://"))
                    );
                }
                Ok(Transport::Http {
                    url: url.clone(),
                    headers: expand_all(&self.headers)?,
                })
            }
            (Some(_), Some(_)) => {
                Err(self.err("give either command (stdio) or url (HTTP), not both"))
            }
            (None, None) => Err(self.err("give a command (stdio) or a url (HTTP)")),
        }
    }

    /// The call timeout.
    pub fn call_timeout(&self) -> Result<Duration, McpError> {
        self.duration(self.timeout.as_deref(), "timeout", DEFAULT_CALL_TIMEOUT)
    }

    /// The start timeout.
    pub fn start_timeout(&self) -> Result<Duration, McpError> {
        self.duration(
            self.start_timeout.as_deref(),
            "start_timeout",
            DEFAULT_START_TIMEOUT,
        )
    }

    fn duration(
        &self,
        text: Option<&str>,
        what: &str,
        default: Duration,
    ) -> Result<Duration, McpError> {
        let Some(text) = text else {
            return Ok(default);
        };
        parse_duration(text).ok_or_else(|| {
            self.err(format!(
                "{what} '{text}' is not a duration (examples: 500ms, 30s, 2m)"
            ))
        })
    }
}

/// `500ms`, `30s`, `2m`, `1h`.
fn parse_duration(text: &str) -> Option<Duration> {
    let t = text.trim();
    let digits = t.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let n: u64 = digits.parse().ok()?;
    let d = match &t[digits.len()..] {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n * 60),
        "h" => Duration::from_secs(n * 3600),
        _ => return None,
    };
    (!d.is_zero()).then_some(d)
}

/// Replaces every `${VAR}` with the variable's value; a variable that is not set is an error.
pub fn expand(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("unclosed ${{ in '{value}'"));
        };
        let var = &after[..end];
        let v = std::env::var(var).map_err(|_| format!("environment variable {var} is not set"))?;
        out.push_str(&v);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transports_are_checked() {
        let s = McpServerConfig::stdio("everything", "npx", &["-y", "x"]);
        assert!(
            matches!(s.transport(), Ok(Transport::Stdio { ref command, .. }) if command == "npx")
        );
        let h = McpServerConfig::http("remote", "http://127.0.0.1:3001/mcp");
        assert!(matches!(h.transport(), Ok(Transport::Http { .. })));
        let both = McpServerConfig {
            url: Some("http://x".into()),
            ..s.clone()
        };
        assert!(
            both.transport()
                .unwrap_err()
                .to_string()
                .contains("not both")
        );
        let neither = McpServerConfig {
            name: "n".into(),
            ..McpServerConfig::default()
        };
        assert!(neither.transport().is_err());
        let bad = McpServerConfig::http("r", "ftp://x");
        assert!(
            bad.transport()
                .unwrap_err()
                .to_string()
                .starts_with("MCP server 'r': url")
        );
    }

    #[test]
    fn variables_come_from_the_environment() {
        assert_eq!(expand("plain").ok().as_deref(), Some("plain"));
        let path = std::env::var("PATH").unwrap_or_default();
        assert_eq!(expand("a ${PATH} b").ok(), Some(format!("a {path} b")));
        assert!(
            expand("${TOOLPLAN_SURELY_UNSET_VAR}")
                .unwrap_err()
                .contains("TOOLPLAN_SURELY_UNSET_VAR")
        );
        assert!(expand("${OPEN").is_err());
    }

    #[test]
    fn durations() {
        let mut s = McpServerConfig::stdio("s", "x", &[]);
        assert_eq!(s.call_timeout().ok(), Some(DEFAULT_CALL_TIMEOUT));
        s.timeout = Some("250ms".into());
        assert_eq!(s.call_timeout().ok(), Some(Duration::from_millis(250)));
        s.timeout = Some("soon".into());
        assert!(s.call_timeout().is_err());
    }
}
