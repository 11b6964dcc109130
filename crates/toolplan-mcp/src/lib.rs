//! # toolplan-mcp
//!
//! MCP for toolplan, on the official Rust SDK (`rmcp`): the tools of any MCP server become steps
//! plans can call, and toolplan itself is an MCP server, so that any MCP client gets
//! `execute_tool_plan` over all of its tools.
//!
//! ## How the parts fit
//!
//! * [`config`] — `[[mcp_servers]]` of `toolplan.toml`: a command over stdio or a streamable-HTTP
//!   URL, environment and headers from the environment, timeouts.
//! * [`client`] — [`McpServer`]: one server, started on first use, restarted after it exits,
//!   tools listed and called with a timeout; errors name the server and end with its stderr. A
//!   stdio server gets a small environment ([`client::INHERITED_ENV`] plus its `env`), runs in its
//!   own process group, and that group is killed when the server is dropped
//!   ([`client::kill_all_children`] for signal handlers).
//! * [`tool`] — [`connect_all`]: every server tool as a toolplan [`toolplan_core::Tool`]
//!   (`structuredContent` as JSON, text as text, `isError` as a failed step), named
//!   `<server>.<tool>` only where names clash; a tool whose name or input schema cannot be used is
//!   left out, with a message in [`McpServer::skipped_tools`].
//! * [`server`] — [`PlanServer`]: toolplan as an MCP server over stdio or streamable HTTP
//!   (`execute_tool_plan`, optionally the tools themselves, and extra planner tools), with step
//!   progress notifications and cancellation; direct tool calls run as one-step plans; over HTTP
//!   a session cap, idle expiry, `Origin` checks and an optional bearer token
//!   ([`server::HttpOptions`]).
//! * [`error`] — [`McpError`].

pub mod client;
pub mod config;
pub mod error;
pub mod server;
pub mod tool;

pub use client::McpServer;
pub use config::McpServerConfig;
pub use error::McpError;
pub use server::PlanServer;
pub use tool::connect_all;
