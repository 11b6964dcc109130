//! [`PlanServer`] over streamable HTTP at `/mcp`, guarded as [`HttpOptions`] say: at most
//! [`DEFAULT_MAX_SESSIONS`] sessions at once (a new one beyond that is refused with HTTP 503 and a
//! JSON-RPC error), sessions idle for [`DEFAULT_SESSION_IDLE`] are ended, requests from a browser
//! page (`Origin`) are served only for loopback origins and those allowed explicitly (403
//! otherwise), the bearer token is compared in constant time, a session ended with HTTP `DELETE`
//! cancels the plans it is running, and so does a client that closed a call's response stream and
//! did not come back to its session within [`DEFAULT_DISCONNECT_GRACE`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use axum::extract::Request;
use axum::middleware::Next;
use http::StatusCode;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use super::PlanServer;
use super::sessions::SessionGuard;
use crate::error::McpError;

/// Default most sessions an HTTP server keeps open at once.
pub const DEFAULT_MAX_SESSIONS: usize = 64;
/// Default time after which an HTTP session nobody used is ended.
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(600);
/// Default time a call whose client went away (its HTTP response stream closed before the result)
/// goes on, waiting for the client to come back to its session, before it is cancelled.
pub const DEFAULT_DISCONNECT_GRACE: Duration = Duration::from_secs(10);
/// Largest request body the HTTP server reads (as the MCP SDK's own default), in bytes.
pub(super) const MAX_REQUEST_BODY: usize = 4 * 1024 * 1024;
/// The HTTP header carrying a session's id.
pub(super) const SESSION_HEADER: &str = "mcp-session-id";

/// How the streamable-HTTP server guards itself.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// A bearer token every request must carry (`Authorization: Bearer <token>`).
    pub token: Option<String>,
    /// Most sessions open at once; an `initialize` beyond that gets HTTP 503.
    pub max_sessions: usize,
    /// A session without any request for this long is ended; `None`: never.
    pub session_idle: Option<Duration>,
    /// Browser origins served besides loopback ones (`https://app.example.com`, with `:PORT` or
    /// `:*`); a request whose `Origin` is neither gets HTTP 403. Requests without `Origin` (not
    /// from a browser page) are served.
    pub allowed_origins: Vec<String>,
    /// A call whose client closed the response stream before the result is cancelled when no
    /// request of its session came within this time (a client may reconnect and resume, so a
    /// dropped connection alone is not a cancellation); `None`: never.
    pub disconnect_grace: Option<Duration>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            token: None,
            max_sessions: DEFAULT_MAX_SESSIONS,
            session_idle: Some(DEFAULT_SESSION_IDLE),
            allowed_origins: Vec::new(),
            disconnect_grace: Some(DEFAULT_DISCONNECT_GRACE),
        }
    }
}

/// The origins always allowed: pages served from this machine.
const LOOPBACK_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "https://localhost:*",
    "http://127.0.0.1:*",
    "https://127.0.0.1:*",
    "http://[::1]:*",
    "https://[::1]:*",
];

impl PlanServer {
    /// Serves streamable HTTP at `http://ADDR/mcp` until `stop` is cancelled, guarded as `options`
    /// says. Calls `ready` with the bound address.
    pub async fn serve_http(
        self,
        addr: SocketAddr,
        options: HttpOptions,
        stop: CancellationToken,
        ready: impl FnOnce(SocketAddr),
    ) -> Result<(), McpError> {
        if options.max_sessions == 0 {
            return Err(McpError::Serve(
                "the session limit must be at least 1".into(),
            ));
        }
        let mut config = StreamableHttpServerConfig::default()
            .with_cancellation_token(stop.child_token())
            .with_max_request_body_bytes(MAX_REQUEST_BODY)
            .with_allowed_origins(
                LOOPBACK_ORIGINS
                    .iter()
                    .map(|o| (*o).to_owned())
                    .chain(options.allowed_origins.iter().cloned()),
            )
            .enforce_origin_validation();
        if !addr.ip().is_loopback() {
            // The Host check guards loopback servers against DNS rebinding; a server bound
            // elsewhere is reached by other names and is guarded by its token.
            config = config.disable_allowed_hosts();
        }
        let mut sessions = LocalSessionManager::default();
        sessions.session_config.keep_alive = options.session_idle;
        let sessions = Arc::new(sessions);
        let running = Arc::clone(&self.running);
        let service: StreamableHttpService<PlanServer, LocalSessionManager> =
            StreamableHttpService::new(move || Ok(self.clone()), Arc::clone(&sessions), config);
        let guard = Arc::new(SessionGuard {
            sessions,
            max: options.max_sessions,
            opening: tokio::sync::Mutex::new(()),
            running,
            grace: options.disconnect_grace,
            seen: Arc::new(StdMutex::new(HashMap::new())),
        });
        let mut app =
            axum::Router::new()
                .nest_service("/mcp", service)
                .layer(axum::middleware::from_fn(
                    move |req: Request, next: Next| {
                        let guard = Arc::clone(&guard);
                        async move { guard.handle(req, next).await }
                    },
                ));
        if let Some(token) = options.token {
            let expected = Arc::new(format!("Bearer {token}"));
            app = app.layer(axum::middleware::from_fn(
                move |req: Request, next: Next| {
                    let expected = Arc::clone(&expected);
                    async move {
                        let given = req
                            .headers()
                            .get(http::header::AUTHORIZATION)
                            .map(|v| v.as_bytes())
                            .unwrap_or_default();
                        if bool::from(given.ct_eq(expected.as_bytes())) {
                            Ok(next.run(req).await)
                        } else {
                            Err(StatusCode::UNAUTHORIZED)
                        }
                    }
                },
            ));
        }
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| McpError::Serve(format!("cannot listen on {addr}: {e}")))?;
        let bound = listener
            .local_addr()
            .map_err(|e| McpError::Serve(e.to_string()))?;
        ready(bound);
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await
            .map_err(|e| McpError::Serve(e.to_string()))
    }
}
