//! The integration tests of toolplan-mcp, in one test binary (linked once): `servers` runs plans
//! over real MCP servers, which `common` locates and configures.

mod common;
mod servers;
