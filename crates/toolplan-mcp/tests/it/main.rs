//! The integration tests of toolplan-mcp, in one test binary (linked once): `servers` runs plans
//! over real MCP servers, which `common` locates and configures; `annotations` checks that what a
//! server says of its tools (annotations, output schemas) changes how plans are checked and run.

mod annotations;
mod common;
mod servers;
