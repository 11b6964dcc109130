//! The integration tests of the `toolplan` binary, in one test binary (linked once instead of once
//! per file): each module drives the real binary in one area. `common` is what several share: a
//! loopback OpenAI-compatible server, `toolplan mcp --http` started, a hand-written stdio MCP
//! client, the small fake MCP server's configuration and the real MCP servers' install directory.
//! The Python helpers (`fake_mcp_server.py`, `mcp_client.py`) stay in `tests/`.
#![allow(clippy::unwrap_used)]

mod common;

mod ask;
mod ask_local;
mod cli;
mod confirm;
mod hardening_cli;
mod hardening_engine;
mod hardening_search;
mod mcp;
mod mcp_client_hardening;
mod mcp_server_hardening;
mod output_schemas;
mod plan_grammar;
mod query_plan;
mod schemas;
mod search;
mod settings;
mod streamed_run;
mod text_results;
