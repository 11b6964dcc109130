//! One MCP server as toolplan reaches it: started on first use (a child process over stdio, or a
//! streamable-HTTP session), its tools listed, its tools called with a timeout. A stdio server that
//! exits is started again for the next call; the call it was running fails with the end of its
//! stderr.
//!
//! A stdio server runs in its own process group with a small environment: the variables of
//! [`INHERITED_ENV`] taken from toolplan's, and those its configuration's `env` sets (so an API
//! key in toolplan's environment reaches no server that is not given it). The group is killed
//! when the server is dropped, at once (not on a task that may never run as toolplan exits), and
//! [`kill_all_children`] kills every group still running, for signal handlers.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex as StdMutex, PoisonError};
use std::time::Duration;

use process_wrap::tokio::{CommandWrap, ProcessGroup};
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject, Tool as McpToolDef};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{Peer, RoleClient, ServiceExt};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::Mutex;

use crate::config::{McpServerConfig, Transport};
use crate::error::McpError;

/// Lines of a server's stderr kept for error messages.
const STDERR_LINES: usize = 20;

type Service = RunningService<RoleClient, ()>;

/// The variables of toolplan's environment a stdio server gets, as the MCP SDKs pass by default;
/// it gets others only when its `env` names them (`KEY = "${KEY}"` passes one through).
#[cfg(unix)]
pub const INHERITED_ENV: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR",
];
/// The variables of toolplan's environment a stdio server gets, as the MCP SDKs pass by default;
/// it gets others only when its `env` names them (`KEY = "${KEY}"` passes one through).
#[cfg(not(unix))]
pub const INHERITED_ENV: &[&str] = &[
    "APPDATA",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATH",
    "PATHEXT",
    "PROCESSOR_ARCHITECTURE",
    "PROGRAMFILES",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "TMP",
    "USERNAME",
    "USERPROFILE",
];

/// The process groups of the stdio servers running now.
static GROUPS: StdMutex<Vec<u32>> = StdMutex::new(Vec::new());

/// Kills every stdio server's process group still running (what it started too), at once. For
/// signal handlers, before toolplan exits.
pub fn kill_all_children() {
    let groups = std::mem::take(&mut *GROUPS.lock().unwrap_or_else(PoisonError::into_inner));
    for pgid in groups {
        kill_group(pgid);
    }
}

#[cfg(unix)]
fn kill_group(pgid: u32) {
    if let Ok(raw) = i32::try_from(pgid)
        && raw > 1
    {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(raw),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

#[cfg(not(unix))]
fn kill_group(_pgid: u32) {}

/// A running stdio server's process group, killed when this is dropped.
struct Group(u32);

impl Group {
    fn new(pgid: u32) -> Group {
        GROUPS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(pgid);
        Group(pgid)
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let mut groups = GROUPS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(at) = groups.iter().position(|g| *g == self.0) {
            groups.swap_remove(at);
            drop(groups);
            kill_group(self.0);
        }
    }
}

/// A started server: the MCP service, and for stdio its process group.
struct Started {
    service: Service,
    // Dropped after the service.
    _group: Option<Group>,
}

/// A connection to one MCP server.
pub struct McpServer {
    name: String,
    transport: Transport,
    call_timeout: Duration,
    start_timeout: Duration,
    service: Mutex<Option<Started>>,
    stderr: Arc<StdMutex<VecDeque<String>>>,
    pgid: StdMutex<Option<u32>>,
    skipped: StdMutex<Vec<String>>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.name)
            .finish()
    }
}

impl McpServer {
    /// Starts the server of `config` and completes the MCP handshake; the error names the server
    /// and ends with its stderr.
    pub async fn connect(config: &McpServerConfig) -> Result<Arc<McpServer>, McpError> {
        let server = Arc::new(McpServer {
            name: config.name.clone(),
            transport: config.transport()?,
            call_timeout: config.call_timeout()?,
            start_timeout: config.start_timeout()?,
            service: Mutex::new(None),
            stderr: Arc::new(StdMutex::new(VecDeque::new())),
            pgid: StdMutex::new(None),
            skipped: StdMutex::new(Vec::new()),
        });
        server.peer().await?;
        Ok(server)
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Why tools of this server were left out (one message per tool, naming it and the server):
    /// a tool whose name or input schema cannot be used is skipped, the others still work.
    pub fn skipped_tools(&self) -> Vec<String> {
        self.skipped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records that `tool` is left out, and why.
    pub(crate) fn skip_tool(&self, tool: &str, why: &str) {
        self.skipped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(format!(
                "tool '{tool}' of MCP server '{}' is left out: {why}",
                self.name
            ));
    }

    /// The last lines the server wrote to stderr (stdio servers).
    pub fn stderr_tail(&self) -> Vec<String> {
        self.stderr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }

    fn start_error(&self, message: impl Into<String>) -> McpError {
        McpError::Start {
            server: self.name.clone(),
            message: message.into(),
            stderr: self.stderr_tail(),
        }
    }

    fn call_error(&self, message: impl Into<String>, with_stderr: bool) -> McpError {
        McpError::Call {
            server: self.name.clone(),
            message: message.into(),
            stderr: if with_stderr {
                self.stderr_tail()
            } else {
                Vec::new()
            },
        }
    }

    async fn start(&self) -> Result<Started, McpError> {
        let mut group = None;
        let handshake = match &self.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut cmd = CommandWrap::with_new(command, |c| {
                    c.env_clear();
                    for key in INHERITED_ENV {
                        if let Some(value) = std::env::var_os(key) {
                            c.env(key, value);
                        }
                    }
                    c.args(args).envs(env);
                    if let Some(dir) = cwd {
                        c.current_dir(dir);
                    }
                });
                // Its own process group, so that stopping it reaches what it started (`npx` runs
                // the server as a child of its own).
                cmd.wrap(ProcessGroup::leader());
                let (transport, stderr) = TokioChildProcess::builder(cmd)
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| self.start_error(format!("cannot run '{command}': {e}")))?;
                *self.pgid.lock().unwrap_or_else(PoisonError::into_inner) = transport.id();
                group = transport.id().map(Group::new);
                self.stderr
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clear();
                if let Some(stderr) = stderr {
                    let keep = Arc::clone(&self.stderr);
                    tokio::spawn(async move {
                        let mut lines = BufReader::new(stderr).lines();
                        while let Ok(Some(line)) = lines.next_line().await {
                            let mut k = keep.lock().unwrap_or_else(PoisonError::into_inner);
                            if k.len() == STDERR_LINES {
                                k.pop_front();
                            }
                            k.push_back(line);
                        }
                    });
                }
                tokio::time::timeout(self.start_timeout, ().serve(transport)).await
            }
            Transport::Http { url, headers } => {
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.clone());
                let mut custom = std::collections::HashMap::new();
                for (k, v) in headers {
                    if k.eq_ignore_ascii_case("authorization") {
                        let token = v.strip_prefix("Bearer ").unwrap_or(v);
                        config = config.auth_header(token.to_owned());
                        continue;
                    }
                    let name = http::HeaderName::try_from(k.as_str())
                        .map_err(|e| self.start_error(format!("header {k}: {e}")))?;
                    let value = http::HeaderValue::try_from(v.as_str())
                        .map_err(|e| self.start_error(format!("header {k}: {e}")))?;
                    custom.insert(name, value);
                }
                if !custom.is_empty() {
                    config = config.custom_headers(custom);
                }
                let transport = StreamableHttpClientTransport::from_config(config);
                tokio::time::timeout(self.start_timeout, ().serve(transport)).await
            }
        };
        match handshake {
            Err(_) => Err(self.start_error(format!(
                "no MCP handshake within {} s",
                self.start_timeout.as_secs_f64()
            ))),
            Ok(Err(e)) => {
                // Give the stderr reader a moment to take the server's last words.
                tokio::time::sleep(Duration::from_millis(100)).await;
                Err(self.start_error(e.to_string()))
            }
            Ok(Ok(service)) => Ok(Started {
                service,
                _group: group,
            }),
        }
    }

    /// A peer of the running server, starting it (again) if it is not running.
    async fn peer(&self) -> Result<Peer<RoleClient>, McpError> {
        let mut slot = self.service.lock().await;
        if let Some(s) = slot.as_ref()
            && !s.service.peer().is_transport_closed()
        {
            return Ok(s.service.peer().clone());
        }
        // Dropping a stopped server kills what is left of its process group.
        slot.take();
        let started = self.start().await?;
        let peer = started.service.peer().clone();
        *slot = Some(started);
        Ok(peer)
    }

    /// Every tool the server offers (all pages).
    pub async fn list_tools(&self) -> Result<Vec<McpToolDef>, McpError> {
        let peer = self.peer().await?;
        match tokio::time::timeout(self.call_timeout, peer.list_all_tools()).await {
            Err(_) => Err(self.call_error("listing its tools timed out", false)),
            Ok(Err(e)) => Err(self.call_error(format!("listing its tools failed: {e}"), true)),
            Ok(Ok(tools)) => Ok(tools),
        }
    }

    /// Calls `tool` with `arguments`, within the call timeout. Dropping the future cancels the call
    /// on the server (MCP `notifications/cancelled`).
    pub async fn call(
        &self,
        tool: &str,
        arguments: JsonObject,
    ) -> Result<CallToolResult, McpError> {
        let peer = self.peer().await?;
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        match tokio::time::timeout(self.call_timeout, peer.call_tool(params)).await {
            Err(_) => Err(self.call_error(
                format!(
                    "{tool} timed out after {} s",
                    self.call_timeout.as_secs_f64()
                ),
                false,
            )),
            Ok(Err(ServiceError::TransportClosed)) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                Err(self.call_error(
                    format!("the server exited during the call of {tool}; it is started again for the next call"),
                    true,
                ))
            }
            Ok(Err(ServiceError::McpError(e))) => {
                Err(self.call_error(format!("{tool}: {} (code {})", e.message, e.code.0), false))
            }
            Ok(Err(e)) => Err(self.call_error(format!("{tool}: {e}"), true)),
            Ok(Ok(result)) => Ok(result),
        }
    }

    /// Stops the server (closes its stdin, then terminates its process group) or ends the HTTP
    /// session.
    pub async fn close(&self) {
        if let Some(started) = self.service.lock().await.take() {
            let _ = started.service.cancel().await;
        }
    }

    /// The process group of the running stdio server (its leader's pid), for diagnostics and tests.
    pub fn process_group(&self) -> Option<u32> {
        *self.pgid.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
