//! The tools of agentic search, usable in plans and by agents: `list_indices`, `index_mapping`,
//! `search_index` over any [`SearchBackend`], and `query_planning` (a question → DSL by a model).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use toolplan_core::{FnTool, Tool, ToolContext, ToolError, ToolResult};

use crate::backend::SearchBackend;
use crate::params::PlanParameters;
use crate::planner::DslPlanner;

fn text_arg<'a>(args: &'a Value, name: &str) -> Result<&'a str, ToolError> {
    args.get(name)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| ToolError::invalid(format!("{name} must be non-empty text")))
}

fn failed(e: impl std::fmt::Display) -> ToolError {
    ToolError::failed(e.to_string())
}

/// `list_indices`: the indices and their document counts.
pub fn list_indices(backend: Arc<dyn SearchBackend>) -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "list_indices",
        "Lists the search indices: JSON [{index, docs}].",
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
        move |_args, _ctx| {
            let backend = Arc::clone(&backend);
            async move {
                let list = backend.list_indices().await.map_err(failed)?;
                Ok(Value::Array(list.iter().map(|i| i.to_json()).collect()))
            }
        },
    ))
}

/// `index_mapping`: an index's mapping and one sample document.
pub fn index_mapping(backend: Arc<dyn SearchBackend>) -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "index_mapping",
        "The mapping (field names and types) of a search index and one sample document: JSON {mapping, sample_document}.",
        json!({"type": "object", "properties": {"index": {"type": "string", "description": "The index name."}},
               "required": ["index"], "additionalProperties": false}),
        move |args, _ctx| {
            let backend = Arc::clone(&backend);
            async move {
                let index = text_arg(&args, "index")?;
                let mapping = backend.get_mapping(index).await.map_err(failed)?;
                let sample = backend.sample_document(index).await.map_err(failed)?;
                Ok(json!({"mapping": mapping, "sample_document": sample}))
            }
        },
    ))
}

/// `search_index`: runs a query DSL body on an index. The search stops when the call's token is
/// cancelled (or its future dropped).
pub fn search_index(backend: Arc<dyn SearchBackend>) -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "search_index",
        "Runs an OpenSearch query DSL body on an index (or several: a,b or logs-*): the OpenSearch response (hits.total, hits.hits, aggregations). `q` is the query string shorthand (Lucene syntax: title:fox AND year:>2000).",
        json!({"type": "object", "properties": {
                   "index": {"type": "string", "description": "The index name."},
                   "query": {"type": "object", "description": "The search body: query, size, sort, aggs …"},
                   "q": {"type": "string", "description": "A query string in Lucene syntax; replaces the body's query."}},
               "required": ["index"], "additionalProperties": false}),
        move |args, ctx| {
            let backend = Arc::clone(&backend);
            async move {
                let index = text_arg(&args, "index")?;
                let mut body = args.get("query").cloned().unwrap_or(Value::Null);
                match args.get("q") {
                    Some(Value::String(q)) => crate::backend::apply_q(&mut body, q, None),
                    Some(_) => return Err(ToolError::invalid("q must be text")),
                    None if body.is_null() => {
                        return Err(ToolError::invalid("give the search body as query, or q"));
                    }
                    None => {}
                }
                tokio::select! {
                    result = backend.search(index, &body) => result.map_err(failed),
                    () = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
                }
            }
        },
    ))
}

/// The name of the [`QueryPlanning`] tool.
pub const QUERY_PLANNING: &str = "query_planning";

/// `query_planning`: a question → OpenSearch DSL for an index (checked, repaired, or the fallback).
/// The planner carries the registration-time parameters; every argument beside `question` and
/// `index_name` is an execution-time parameter that replaces the registered one.
pub struct QueryPlanning(pub Arc<DslPlanner>);

#[async_trait]
impl Tool for QueryPlanning {
    fn name(&self) -> &str {
        QUERY_PLANNING
    }
    fn description(&self) -> &str {
        "Writes the OpenSearch query DSL that answers a question about an index, checked against its mapping: JSON {dsl, fallback}. Run it with search_index."
    }
    fn parameters(&self) -> Value {
        let text = |d: &str| json!({"type": "string", "description": d});
        json!({"type": "object", "properties": {
                   "question": text("The question, in natural language."),
                   "index_name": text("The index to search."),
                   "query_fields": {"type": "array", "items": {"type": "string"}, "description": "Fields to prefer."},
                   "embedding_model_id": text("Model id for neural search."),
                   "query_planner_system_prompt": text("Replaces the system prompt."),
                   "query_planner_user_prompt": text("Replaces the user prompt."),
                   "template_selection_system_prompt": text("Replaces the template-selection system prompt."),
                   "template_selection_user_prompt": text("Replaces the template-selection user prompt."),
                   "generation_type": {"type": "string", "enum": ["llmGenerated", "user_templates"]},
                   "search_templates": {"type": "array", "items": {"type": "object",
                       "properties": {"template_id": {"type": "string"}, "template_description": {"type": "string"}},
                       "required": ["template_id", "template_description"]}},
                   "response_filter": text("JSONPath selecting the DSL text in the provider's raw response."),
                   "fallback_query": {"type": "object", "description": "Used when no valid DSL comes back."}},
               "required": ["question", "index_name"],
               "additionalProperties": {"type": ["string", "number", "boolean"]}})
    }
    async fn call(&self, args: Value, ctx: ToolContext) -> ToolResult {
        let question = text_arg(&args, "question")?;
        let index = text_arg(&args, "index_name")?;
        let run = args
            .as_object()
            .map(PlanParameters::from_json)
            .transpose()
            .map_err(|e| ToolError::invalid(e.to_string()))?
            .unwrap_or_default();
        let plan = self
            .0
            .plan(question, index, &run, &ctx.cancel)
            .await
            .map_err(failed)?;
        Ok(json!({"dsl": plan.dsl, "fallback": plan.fallback}))
    }
}

/// The three model-free tools over a backend.
pub fn backend_tools(backend: Arc<dyn SearchBackend>) -> Vec<Arc<dyn Tool>> {
    vec![
        list_indices(Arc::clone(&backend)),
        index_mapping(Arc::clone(&backend)),
        search_index(backend),
    ]
}
