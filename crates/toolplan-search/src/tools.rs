//! The tools of agentic search, usable in plans and by agents: `list_indices`, `index_mapping`,
//! `search_index` over any [`SearchBackend`], and `query_planning` (a question → DSL by a model).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use toolplan_core::{Tool, ToolContext, ToolError, ToolResult};

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
pub struct ListIndices(pub Arc<dyn SearchBackend>);

#[async_trait]
impl Tool for ListIndices {
    fn name(&self) -> &str {
        "list_indices"
    }
    fn description(&self) -> &str {
        "Lists the search indices: JSON [{index, docs}]."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}, "additionalProperties": false})
    }
    async fn call(&self, _args: Value, _ctx: ToolContext) -> ToolResult {
        let list = self.0.list_indices().await.map_err(failed)?;
        Ok(Value::Array(list.iter().map(|i| i.to_json()).collect()))
    }
}

/// `index_mapping`: an index's mapping and one sample document.
pub struct IndexMapping(pub Arc<dyn SearchBackend>);

#[async_trait]
impl Tool for IndexMapping {
    fn name(&self) -> &str {
        "index_mapping"
    }
    fn description(&self) -> &str {
        "The mapping (field names and types) of a search index and one sample document: JSON {mapping, sample_document}."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"index": {"type": "string", "description": "The index name."}},
               "required": ["index"], "additionalProperties": false})
    }
    async fn call(&self, args: Value, _ctx: ToolContext) -> ToolResult {
        let index = text_arg(&args, "index")?;
        let mapping = self.0.get_mapping(index).await.map_err(failed)?;
        let sample = self.0.sample_document(index).await.map_err(failed)?;
        Ok(json!({"mapping": mapping, "sample_document": sample}))
    }
}

/// `search_index`: runs a query DSL body on an index.
pub struct SearchIndex(pub Arc<dyn SearchBackend>);

#[async_trait]
impl Tool for SearchIndex {
    fn name(&self) -> &str {
        "search_index"
    }
    fn description(&self) -> &str {
        "Runs an OpenSearch query DSL body on an index: the OpenSearch response (hits.total, hits.hits, aggregations)."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
                   "index": {"type": "string", "description": "The index name."},
                   "query": {"type": "object", "description": "The search body: query, size, sort, aggs …"}},
               "required": ["index", "query"], "additionalProperties": false})
    }
    /// The search stops when the call's token is cancelled (or its future dropped).
    async fn call(&self, args: Value, ctx: ToolContext) -> ToolResult {
        let index = text_arg(&args, "index")?;
        let body = args.get("query").cloned().unwrap_or(Value::Null);
        tokio::select! {
            result = self.0.search(index, &body) => result.map_err(failed),
            () = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
        }
    }
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
        Arc::new(ListIndices(Arc::clone(&backend))),
        Arc::new(IndexMapping(Arc::clone(&backend))),
        Arc::new(SearchIndex(backend)),
    ]
}
