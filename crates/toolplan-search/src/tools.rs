//! The tools of agentic search, usable in plans and by agents: `list_indices`, `index_mapping`,
//! `count_index`, `multi_search`,
//! `search_index` over any [`SearchBackend`], and `query_planning` (a question → DSL by a model).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use toolplan_core::{FnTool, Tool, ToolContext, ToolError, ToolResult};

use crate::backend::SearchBackend;
use crate::filter_path::FilterPath;
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

/// `search_index`: runs a query DSL body on an index, the response cut to the parts a
/// `filter_path` names (at most `max_filter_paths` paths). The search stops when the call's token
/// is cancelled (or its future dropped).
pub fn search_index(backend: Arc<dyn SearchBackend>, max_filter_paths: usize) -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "search_index",
        "Runs an OpenSearch query DSL body on an index (or several: a,b or logs-*; or an alias): the OpenSearch response (hits.total, hits.hits, aggregations). `q` is the query string shorthand (Lucene syntax: title:fox AND year:>2000). `filter_path` keeps only the parts of the response it names.",
        json!({"type": "object", "properties": {
                   "index": {"type": "string", "description": "The index name."},
                   "query": {"type": "object", "description": "The search body: query, size, sort, aggs …"},
                   "q": {"type": "string", "description": "A query string in Lucene syntax; replaces the body's query."},
                   "filter_path": {"type": "string", "description": "Comma-separated paths of the response to keep (hits.hits._source,hits.total.value), with * and ** wildcards; -path leaves one out."}},
               "required": ["index"], "additionalProperties": false}),
        move |args, ctx| {
            let backend = Arc::clone(&backend);
            async move {
                let index = text_arg(&args, "index")?;
                let body = body_of(&args)?;
                let filter = match args.get("filter_path") {
                    None | Some(Value::Null) => None,
                    Some(spec) => Some(
                        FilterPath::parse(spec, max_filter_paths)
                            .map_err(|e| ToolError::invalid(e.to_string()))?,
                    ),
                };
                let response = tokio::select! {
                    result = backend.search(index, &body) => result.map_err(failed)?,
                    () = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
                };
                Ok(match filter {
                    Some(f) => f.apply(&response),
                    None => response,
                })
            }
        },
    ))
}

/// The body a search tool's arguments give: `query` (a search body), with `q` (a query string)
/// replacing its query.
fn body_of(args: &Value) -> Result<Value, ToolError> {
    let mut body = args.get("query").cloned().unwrap_or(Value::Null);
    match args.get("q") {
        Some(Value::String(q)) => crate::backend::apply_q(&mut body, q, None),
        Some(_) => return Err(ToolError::invalid("q must be text")),
        None if body.is_null() => {
            return Err(ToolError::invalid("give the search body as query, or q"));
        }
        None => {}
    }
    Ok(body)
}

/// `count_index`: how many documents of an index match a query (OpenSearch's `_count`).
pub fn count_index(backend: Arc<dyn SearchBackend>) -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "count_index",
        "Counts the documents of an index (or several: a,b or logs-*) that match a query: JSON {count}. Without query or q, every document.",
        json!({"type": "object", "properties": {
                   "index": {"type": "string", "description": "The index name."},
                   "query": {"type": "object", "description": "A body with the query: {\"query\": {…}}."},
                   "q": {"type": "string", "description": "A query string in Lucene syntax instead."}},
               "required": ["index"], "additionalProperties": false}),
        move |args, ctx| {
            let backend = Arc::clone(&backend);
            async move {
                let index = text_arg(&args, "index")?;
                let mut request = json!({"size": 0, "track_total_hits": true});
                if args.get("query").is_some() || args.get("q").is_some() {
                    let body = body_of(&args)?;
                    if let Some(q) = body.get("query") {
                        request["query"] = q.clone();
                    }
                }
                let response = tokio::select! {
                    result = backend.search(index, &request) => result.map_err(failed)?,
                    () = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
                };
                let count = response["hits"]["total"]["value"]
                    .as_u64()
                    .or_else(|| response["hits"]["total"].as_u64())
                    .unwrap_or(0);
                Ok(json!({ "count": count }))
            }
        },
    ))
}

/// `multi_search`: several searches in one call, run at once (OpenSearch's `_msearch`): one
/// response per search, in order; a search that fails gives its error in its place. At most
/// `max_searches` searches ([`crate::SearchLimits::max_multi_searches`]).
pub fn multi_search(backend: Arc<dyn SearchBackend>, max_searches: usize) -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "multi_search",
        "Runs several searches at once: JSON {responses: [...]}, one OpenSearch response (or {error}) per search, in order.",
        json!({"type": "object", "properties": {
                   "searches": {"type": "array", "description": "The searches.", "items": {
                       "type": "object", "properties": {
                           "index": {"type": "string"},
                           "query": {"type": "object", "description": "The search body."},
                           "q": {"type": "string", "description": "A query string instead of the body's query."}},
                       "required": ["index"], "additionalProperties": false}}},
               "required": ["searches"], "additionalProperties": false}),
        move |args, ctx| {
            let backend = Arc::clone(&backend);
            async move {
                let searches = args
                    .get("searches")
                    .and_then(Value::as_array)
                    .ok_or_else(|| ToolError::invalid("searches must be a list"))?;
                if searches.len() > max_searches {
                    return Err(ToolError::invalid(format!(
                        "{} searches in one call, more than {max_searches} (search limit max_multi_searches)",
                        searches.len()
                    )));
                }
                let runs = searches.iter().map(|s| {
                    let backend = Arc::clone(&backend);
                    async move {
                        let run = async {
                            let index = text_arg(s, "index")?;
                            let body = body_of(s)?;
                            backend.search(index, &body).await.map_err(failed)
                        };
                        match run.await {
                            Ok(response) => response,
                            Err(e) => json!({"error": {"reason": e.to_string()}, "status": 400}),
                        }
                    }
                });
                let responses = tokio::select! {
                    all = futures::future::join_all(runs) => all,
                    () = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
                };
                Ok(json!({ "responses": responses }))
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

/// The model-free tools over a backend: `list_indices`, `index_mapping`, `search_index`,
/// `count_index` and `multi_search` (with the default [`crate::SearchLimits`]).
pub fn backend_tools(backend: Arc<dyn SearchBackend>) -> Vec<Arc<dyn Tool>> {
    backend_tools_with(backend, &crate::SearchLimits::default())
}

/// The model-free tools over a backend, `multi_search` and `search_index`'s `filter_path` bounded
/// by `limits`.
pub fn backend_tools_with(
    backend: Arc<dyn SearchBackend>,
    limits: &crate::SearchLimits,
) -> Vec<Arc<dyn Tool>> {
    vec![
        list_indices(Arc::clone(&backend)),
        index_mapping(Arc::clone(&backend)),
        search_index(Arc::clone(&backend), limits.max_filter_paths),
        count_index(Arc::clone(&backend)),
        multi_search(backend, limits.max_multi_searches),
    ]
}
