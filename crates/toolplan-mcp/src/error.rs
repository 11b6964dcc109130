//! Errors of the MCP layer.

/// What went wrong talking to an MCP server or serving MCP.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// A server's configuration cannot be used.
    #[error("MCP server '{server}': {message}")]
    Config {
        /// The server's name.
        server: String,
        /// What is wrong.
        message: String,
    },
    /// A server did not start or did not complete the MCP handshake.
    #[error("MCP server '{server}' did not start: {message}{}", stderr_tail(.stderr))]
    Start {
        /// The server's name.
        server: String,
        /// What failed.
        message: String,
        /// The last lines the server wrote to stderr.
        stderr: Vec<String>,
    },
    /// A request to a running server failed.
    #[error("MCP server '{server}': {message}{}", stderr_tail(.stderr))]
    Call {
        /// The server's name.
        server: String,
        /// What failed.
        message: String,
        /// The last lines the server wrote to stderr (when it exited).
        stderr: Vec<String>,
    },
    /// Serving MCP failed.
    #[error("MCP server: {0}")]
    Serve(String),
}

fn stderr_tail(lines: &[String]) -> String {
    if lines.is_empty() {
        String::new()
    } else {
        format!("; its stderr ends:\n  {}", lines.join("\n  "))
    }
}
