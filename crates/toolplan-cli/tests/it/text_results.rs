//! Text results (issue 21.4): an MCP tool that answers a Python dict instead of JSON
//! (`fake_mcp_server.py --text`) is read as the JSON it means, so `$ref:u.city` finds the city;
//! a path into text of another shape (a table) fails its step saying what the text looks like,
//! never a silent null.

use serde_json::json;

use crate::common;
use common::fake_mcp::{fake_config, run_plan};

#[test]
fn a_python_dict_is_read_and_a_table_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let config = fake_config(dir.path(), &["--text"]);
    let plan = json!({"steps": [
        {"id": "u", "tool": "pyuser", "arguments": {"name": "Bob"}},
        {"id": "w", "tool": "get_weather", "arguments": {"location": "$ref:u.city"}},
        {"id": "t", "tool": "table", "arguments": {}},
        {"id": "c", "tool": "echo", "arguments": {"text": "$ref:t.city"}}]});
    let out = run_plan(&config, &plan, &[]);
    common::assert_ok(&out);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["outputs"]["u"],
        json!({"name": "Bob", "city": "London", "active": true})
    );
    assert_eq!(report["outputs"]["w"]["city"], "London");
    assert_eq!(
        report["errors"]["c"],
        "'$ref:t.city': the output of step 't' is text (a table of 3 lines with | columns), not JSON, so it has no field 'city'"
    );
}
