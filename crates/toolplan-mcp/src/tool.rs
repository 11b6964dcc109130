//! MCP tools as toolplan tools: every tool of every configured server becomes a [`Tool`] plans can
//! call (an [`FnTool`] whose closure calls the server), under its own name — or `<server>.<tool>`
//! where two sources offer the same name.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, Tool as McpToolDef};
use serde_json::Value;
use toolplan_core::{FnTool, Tool, ToolAnnotations, ToolError, ToolResult};

use crate::client::McpServer;
use crate::config::McpServerConfig;
use crate::error::McpError;

/// The tool `def` of `server` as a toolplan tool called `name` in plans; its calls go to the
/// server under the server's own name for it.
fn server_tool(server: &Arc<McpServer>, def: &McpToolDef, name: String) -> Arc<dyn Tool> {
    let server = Arc::clone(server);
    let remote = def.name.to_string();
    let tool = FnTool::new(
        name,
        def.description.as_deref().unwrap_or_default(),
        Value::Object((*def.input_schema).clone()),
        move |arguments, _ctx| {
            let (server, remote) = (Arc::clone(&server), remote.clone());
            async move { call(&server, &remote, arguments).await }
        },
    )
    .with_annotations(annotations(def));
    match &def.output_schema {
        // The server's `structuredContent` is then the step's output (`output`), checked against it.
        Some(schema) => Arc::new(tool.with_output_schema(Value::Object((**schema).clone()))),
        None => Arc::new(tool),
    }
}

/// The hints of an MCP tool definition (`readOnlyHint` …) as toolplan's annotations.
fn annotations(def: &McpToolDef) -> ToolAnnotations {
    let Some(hints) = &def.annotations else {
        return ToolAnnotations::default();
    };
    ToolAnnotations {
        read_only: hints.read_only_hint,
        idempotent: hints.idempotent_hint,
        destructive: hints.destructive_hint,
        open_world: hints.open_world_hint,
    }
}

/// Calls the tool `remote` of `server` with `arguments` (an object, or nothing).
async fn call(server: &McpServer, remote: &str, arguments: Value) -> ToolResult {
    let args = match arguments {
        Value::Object(o) => o,
        Value::Null => serde_json::Map::new(),
        other => {
            return Err(ToolError::invalid(format!(
                "MCP tools take an object of arguments, not {other}"
            )));
        }
    };
    let result = server
        .call(remote, args)
        .await
        .map_err(|e| ToolError::failed(e.to_string()))?;
    output(result)
}

/// A tool result as a step's output: `isError` is a failed step (with the text); otherwise
/// `structuredContent` when there is some, else the text of the text blocks (JSON when the text is
/// JSON, as for every toolplan tool), else the content blocks as JSON.
pub fn output(result: CallToolResult) -> ToolResult {
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| match c {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    if result.is_error == Some(true) {
        let message = if texts.is_empty() {
            "the tool reported an error".to_owned()
        } else {
            texts.join("\n")
        };
        return Err(ToolError::failed(message));
    }
    if let Some(structured) = result.structured_content {
        return Ok(structured);
    }
    if texts.len() == result.content.len() && !texts.is_empty() {
        // As every toolplan tool's text: JSON when it is JSON, else the text.
        return Ok(toolplan_core::output_from_text(texts.join("\n")));
    }
    serde_json::to_value(&result.content)
        .map_err(|e| ToolError::failed(format!("cannot read the tool's content: {e}")))
}

/// The servers of `configs`, started together, and their tools named for plans: a tool keeps its
/// name unless another source — another server, or a name in `taken` (built-in tools) — offers the
/// same name; then it is `<server>.<tool>`.
pub async fn connect_all(
    configs: &[McpServerConfig],
    taken: &[String],
) -> Result<(Vec<Arc<McpServer>>, Vec<Arc<dyn Tool>>), McpError> {
    let mut names = std::collections::HashSet::new();
    for c in configs {
        if !names.insert(c.name.as_str()) {
            return Err(McpError::Config {
                server: c.name.clone(),
                message: "two servers have this name".into(),
            });
        }
    }
    let servers = futures::future::try_join_all(configs.iter().map(McpServer::connect)).await?;
    let listed = futures::future::try_join_all(servers.iter().map(|s| s.list_tools())).await?;
    // A tool that could not be registered would make the whole tool set unusable: it is left out,
    // and the server says why (`McpServer::skipped_tools`).
    let listed: Vec<Vec<McpToolDef>> = servers
        .iter()
        .zip(listed)
        .map(|(server, defs)| {
            defs.into_iter()
                .filter(|d| match unusable(d) {
                    None => true,
                    Some(why) => {
                        server.skip_tool(&d.name, &why);
                        false
                    }
                })
                .collect()
        })
        .collect();
    let mut count: HashMap<String, usize> = HashMap::new();
    for t in taken {
        *count.entry(t.clone()).or_default() += 1;
    }
    for defs in &listed {
        for d in defs {
            *count.entry(d.name.to_string()).or_default() += 1;
        }
    }
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    for (server, defs) in servers.iter().zip(&listed) {
        for d in defs {
            let name = if count.get(d.name.as_ref()).copied().unwrap_or(0) > 1 {
                format!("{}.{}", server.name(), d.name)
            } else {
                d.name.to_string()
            };
            tools.push(server_tool(server, d, name));
        }
    }
    Ok((servers, tools))
}

/// Why a listed tool cannot be offered to plans, if it cannot: a name with spaces, or an input
/// schema that is not a valid JSON Schema.
fn unusable(def: &McpToolDef) -> Option<String> {
    if def.name.trim().is_empty() || def.name.chars().any(char::is_whitespace) {
        return Some("its name is empty or has spaces".into());
    }
    // Read as the registry will read it: a schema that contradicts itself (a Python type name, say)
    // is usable in its consistent reading.
    let schema = toolplan_core::reconcile(Value::Object((*def.input_schema).clone())).schema;
    if let Err(e) = jsonschema::validator_for(&schema) {
        return Some(format!("its input schema is not a valid JSON Schema ({e})"));
    }
    let output = def.output_schema.as_ref()?;
    let schema = toolplan_core::reconcile(Value::Object((**output).clone())).schema;
    jsonschema::validator_for(&schema)
        .err()
        .map(|e| format!("its output schema is not a valid JSON Schema ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tools_that_cannot_be_registered_are_found() {
        let def = |name: &str, schema: Value| {
            let Value::Object(schema) = schema else {
                unreachable!("schemas here are objects")
            };
            McpToolDef::new(name.to_owned(), String::new(), Arc::new(schema))
        };
        assert_eq!(unusable(&def("add", json!({"type": "object"}))), None);
        assert_eq!(unusable(&def("py", json!({"type": "dict"}))), None);
        let bad = unusable(&def("broken", json!({"type": 12}))).unwrap_or_default();
        assert!(bad.contains("input schema"), "{bad}");
        assert!(unusable(&def("two words", json!({"type": "object"}))).is_some());
        let mut typed = def("typed", json!({"type": "object"}));
        typed.output_schema = Some(Arc::new(
            json!({"type": "object", "properties": {"a": {"type": 12}}})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        ));
        let bad = unusable(&typed).unwrap_or_default();
        assert!(bad.contains("output schema"), "{bad}");
    }

    #[test]
    fn hints_come_along() {
        let Value::Object(input) = json!({"type": "object"}) else {
            unreachable!("an object")
        };
        let mut def = McpToolDef::new("lookup".to_owned(), String::new(), Arc::new(input));
        def.annotations = Some(rmcp::model::ToolAnnotations::from_raw(
            None,
            Some(true),
            None,
            Some(true),
            None,
        ));
        let hints = annotations(&def);
        assert_eq!(
            (hints.read_only, hints.idempotent, hints.destructive),
            (Some(true), Some(true), None)
        );
    }

    #[test]
    fn results_become_outputs() {
        let text = CallToolResult::success(vec![ContentBlock::text("Echo: hi")]);
        assert_eq!(output(text).ok(), Some(json!("Echo: hi")));
        let mut structured = CallToolResult::success(vec![ContentBlock::text("{\"t\": 33}")]);
        structured.structured_content = Some(json!({"t": 33}));
        assert_eq!(output(structured).ok(), Some(json!({"t": 33})));
        let failed = CallToolResult::error(vec![ContentBlock::text("no such file")]);
        assert_eq!(
            output(failed).err().map(|e| e.to_string()).as_deref(),
            Some("no such file")
        );
    }
}
