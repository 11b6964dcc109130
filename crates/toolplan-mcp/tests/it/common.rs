//! The real MCP servers the tests run: installed, pinned, by `bash scripts/mcp-servers.sh` (which
//! `scripts/test.sh` and `.ci/run` call) under `~/.cache/toolplan/mcp-servers`, or `$TOOLPLAN_MCP_DIR`.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;

use toolplan_mcp::McpServerConfig;

/// Where the servers are installed.
pub fn servers_dir() -> PathBuf {
    let dir = std::env::var_os("TOOLPLAN_MCP_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/toolplan/mcp-servers")
        });
    assert!(
        dir.join("node_modules/.bin/mcp-server-everything").exists(),
        "the MCP test servers are not installed in {}: run `bash scripts/mcp-servers.sh`",
        dir.display()
    );
    dir
}

fn npm_bin(name: &str) -> String {
    servers_dir()
        .join("node_modules/.bin")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// `@modelcontextprotocol/server-everything` over stdio.
pub fn everything(name: &str) -> McpServerConfig {
    McpServerConfig::stdio(name, npm_bin("mcp-server-everything"), &[])
}

/// `@modelcontextprotocol/server-filesystem`, allowed `dir`.
pub fn filesystem(dir: &std::path::Path) -> McpServerConfig {
    McpServerConfig::stdio(
        "filesystem",
        npm_bin("mcp-server-filesystem"),
        &[&dir.to_string_lossy()],
    )
}

/// `@modelcontextprotocol/server-memory`, storing its graph in `file`.
pub fn memory(file: &std::path::Path) -> McpServerConfig {
    let mut c = McpServerConfig::stdio("memory", npm_bin("mcp-server-memory"), &[]);
    c.env.insert(
        "MEMORY_FILE_PATH".into(),
        file.to_string_lossy().into_owned(),
    );
    c
}

/// `mcp-server-time` from PyPI.
pub fn time() -> McpServerConfig {
    McpServerConfig::stdio(
        "time",
        servers_dir()
            .join("venv/bin/mcp-server-time")
            .to_string_lossy(),
        &[],
    )
}
