//! The APIs a test's `do` steps call, answered by a [`SearchBackend`] in OpenSearch's shapes:
//! `indices.create` / `indices.delete` / `indices.refresh` / `indices.get_mapping` /
//! `indices.put_mapping` / `indices.exists`, `indices.put_alias` / `indices.get_alias` /
//! `indices.delete_alias` / `indices.exists_alias`, `index`, `bulk`, `search`, `count`, `msearch`, `cluster.health`. Another API
//! is [`Outcome::NotApplicable`]; a parameter an implemented API does not take is an error of the
//! call (the engine lacks it), so that the test counts as failed, not skipped.

use serde_json::{Map, Value, json};
use toolplan_search::backend::apply_q as resolve_q;
use toolplan_search::filter_path::FilterPath;
use toolplan_search::{SearchBackend, SearchError, SearchLimits};

/// What a call gave.
#[derive(Debug)]
pub enum Outcome {
    /// The response body.
    Ok(Value),
    /// An error response: its HTTP status and body (`{"error": {"type", "reason"}, "status"}`).
    Err {
        /// The HTTP status.
        status: u16,
        /// The body.
        body: Value,
    },
    /// This runner does not implement the API (or a part of it that is not the engine's business,
    /// such as HTTP headers): the test is not applicable.
    NotApplicable(String),
}

fn error(status: u16, kind: &str, reason: impl Into<String>) -> Outcome {
    let reason = reason.into();
    Outcome::Err {
        status,
        body: json!({"error": {"root_cause": [{"type": kind, "reason": reason}],
                               "type": kind, "reason": reason}, "status": status}),
    }
}

/// The error response of a backend error.
fn from_search_error(e: &SearchError) -> Outcome {
    let (status, kind) = match e {
        SearchError::NoSuchIndex(_) => (404, "index_not_found_exception"),
        SearchError::NoSuchAlias(_) => (404, "aliases_not_found_exception"),
        SearchError::IndexExists(_) => (400, "resource_already_exists_exception"),
        SearchError::InvalidIndexName { .. } => (400, "invalid_index_name_exception"),
        SearchError::InvalidMapping(_) => (400, "mapper_parsing_exception"),
        SearchError::Dsl { .. } => (400, "parsing_exception"),
        SearchError::Unsupported { .. } => (400, "unsupported_by_embedded_engine"),
        SearchError::Bulk { .. } | SearchError::InvalidParameter(_) => {
            (400, "illegal_argument_exception")
        }
        _ => (500, "exception"),
    };
    error(status, kind, e.to_string())
}

/// A parameter's text.
fn param<'a>(params: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    params.get(key).and_then(Value::as_str)
}

/// The index names of an `index` parameter (a name, a comma list, or a list).
fn index_names(params: &Map<String, Value>) -> Vec<String> {
    match params.get("index") {
        Some(Value::String(s)) => s.split(',').map(|n| n.trim().to_owned()).collect(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// Parameters an API takes that change nothing here (one node, one shard, no caches).
const NO_EFFECT: &[&str] = &[
    "refresh",
    "wait_for_active_shards",
    "timeout",
    "master_timeout",
    "cluster_manager_timeout",
    "request_cache",
    "preference",
    // One shard: routing picks nothing (a `_routing` field is not kept).
    "routing",
    "search_type",
    "batched_reduce_size",
    "pre_filter_shard_size",
    "ccs_minimize_roundtrips",
    "max_concurrent_shard_requests",
    "max_concurrent_searches",
    "wait_for_status",
    "wait_for_no_relocating_shards",
    "wait_for_no_initializing_shards",
    "wait_for_nodes",
    "level",
    "include_type_name",
    "error_trace",
];

/// The first parameter of `params` that is neither in `known` nor without effect.
fn unknown_param(params: &Map<String, Value>, known: &[&str]) -> Option<String> {
    params
        .keys()
        .find(|k| !known.contains(&k.as_str()) && !NO_EFFECT.contains(&k.as_str()))
        .cloned()
}

/// Calls `api`; its response cut to the parts a `filter_path` parameter names, as OpenSearch's
/// REST layer cuts every response.
pub async fn call(
    backend: &dyn SearchBackend,
    api: &str,
    params: &Map<String, Value>,
    body: Option<&Value>,
) -> Outcome {
    let Some(spec) = params.get("filter_path") else {
        return call_unfiltered(backend, api, params, body).await;
    };
    let filter = match FilterPath::parse(spec, SearchLimits::default().max_filter_paths) {
        Ok(f) => f,
        Err(e) => return from_search_error(&e),
    };
    let mut rest = params.clone();
    rest.remove("filter_path");
    match call_unfiltered(backend, api, &rest, body).await {
        Outcome::Ok(v) => Outcome::Ok(filter.apply(&v)),
        other => other,
    }
}

/// Calls `api`.
async fn call_unfiltered(
    backend: &dyn SearchBackend,
    api: &str,
    params: &Map<String, Value>,
    body: Option<&Value>,
) -> Outcome {
    let known: &[&str] = match api {
        "indices.create" => &["index"],
        "indices.put_mapping" => &["index"],
        "indices.delete" | "indices.refresh" | "indices.get_mapping" | "indices.exists" => &[
            "index",
            "ignore_unavailable",
            "allow_no_indices",
            "expand_wildcards",
        ],
        "index" => &[
            "index",
            "id",
            "op_type",
            "version",
            "version_type",
            "if_seq_no",
            "if_primary_term",
        ],
        "bulk" => &["index"],
        "indices.put_alias" | "indices.delete_alias" => &["index", "name"],
        "indices.get_alias" | "indices.exists_alias" => &["index", "name"],
        "search" => &[
            "index",
            "rest_total_hits_as_int",
            "size",
            "from",
            "sort",
            "track_total_hits",
            "_source",
            "_source_includes",
            "_source_excludes",
            "docvalue_fields",
            "stored_fields",
            "typed_keys",
            "q",
            "df",
            "default_operator",
            "lenient",
            "analyze_wildcard",
        ],
        "count" => &[
            "index",
            "q",
            "df",
            "default_operator",
            "lenient",
            "analyze_wildcard",
        ],
        "msearch" => &["index", "rest_total_hits_as_int", "typed_keys"],
        "cluster.health" => &["index"],
        other => return Outcome::NotApplicable(format!("the runner does not implement {other}")),
    };
    if let Some(p) = unknown_param(params, known) {
        return error(
            400,
            "illegal_argument_exception",
            format!("{api}: parameter [{p}] is not supported"),
        );
    }
    // `search_type` changes nothing on one shard, but only OpenSearch's two are taken.
    if let Some(kind) = params.get("search_type").map(crate::assert::text)
        && !matches!(kind.as_str(), "query_then_fetch" | "dfs_query_then_fetch")
    {
        return error(
            400,
            "illegal_argument_exception",
            format!("Unsupported search type [{kind}]"),
        );
    }
    let names = index_names(params);
    // A body written as text is sent as it is: JSON, or for `msearch` lines of JSON.
    let body = match body {
        Some(Value::String(text)) if api == "msearch" => Some(Value::Array(
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| serde_json::from_str(l).unwrap_or_else(|_| Value::String(l.to_owned())))
                .collect(),
        )),
        Some(Value::String(text)) if api != "bulk" => match serde_json::from_str::<Value>(text) {
            Ok(v) => Some(v),
            Err(e) => {
                return error(
                    400,
                    "parsing_exception",
                    format!("the body is not JSON: {e}"),
                );
            }
        },
        other => other.cloned(),
    };
    let body = body.as_ref();
    match api {
        "indices.create" => create_index(backend, &names, body).await,
        "indices.delete" => {
            for name in &names {
                if let Err(e) = backend.delete_index(name).await {
                    return from_search_error(&e);
                }
            }
            Outcome::Ok(json!({"acknowledged": true}))
        }
        "indices.refresh" => {
            Outcome::Ok(json!({"_shards": {"total": 1, "successful": 1, "failed": 0}}))
        }
        "indices.exists" => {
            let existing: Vec<String> = match backend.list_indices().await {
                Ok(list) => list.into_iter().map(|i| i.name).collect(),
                Err(e) => return from_search_error(&e),
            };
            Outcome::Ok(Value::Bool(
                !names.is_empty() && names.iter().all(|n| existing.contains(n)),
            ))
        }
        "indices.get_mapping" => {
            let ignore = params
                .get("ignore_unavailable")
                .is_some_and(|v| crate::assert::text(v) == "true");
            let names = match resolve(backend, &names, ignore).await {
                Ok(n)
                    if n.is_empty()
                        && params
                            .get("allow_no_indices")
                            .is_some_and(|v| crate::assert::text(v) == "false") =>
                {
                    return error(404, "index_not_found_exception", "no such index");
                }
                Ok(n) => n,
                Err(o) => return o,
            };
            let mut out = Map::new();
            for name in &names {
                match backend.get_mapping(name).await {
                    Ok(m) => {
                        out.insert(name.clone(), json!({"mappings": m}));
                    }
                    Err(e) => return from_search_error(&e),
                }
            }
            Outcome::Ok(Value::Object(out))
        }
        "indices.put_mapping" => {
            let names = match resolve(backend, &names, false).await {
                Ok(n) => n,
                Err(o) => return o,
            };
            let update = body.cloned().unwrap_or_else(|| json!({}));
            for name in &names {
                if let Err(e) = backend.put_mapping(name, &update).await {
                    return from_search_error(&e);
                }
            }
            Outcome::Ok(json!({"acknowledged": true}))
        }
        "indices.put_alias" => {
            let Some(alias) = param(params, "name") else {
                return error(400, "illegal_argument_exception", "put_alias needs a name");
            };
            let options = body.cloned().unwrap_or(Value::Null);
            match backend.put_alias(&target(&names), alias, &options).await {
                Ok(()) => Outcome::Ok(json!({"acknowledged": true})),
                Err(e) => from_search_error(&e),
            }
        }
        "indices.delete_alias" => {
            let Some(alias) = param(params, "name") else {
                return error(
                    400,
                    "illegal_argument_exception",
                    "delete_alias needs a name",
                );
            };
            match backend.delete_alias(&target(&names), alias).await {
                Ok(()) => Outcome::Ok(json!({"acknowledged": true})),
                Err(e) => from_search_error(&e),
            }
        }
        "indices.get_alias" | "indices.exists_alias" => {
            let mut found = match backend.get_aliases(&target(&names)).await {
                Ok(v) => v,
                Err(e) => return from_search_error(&e),
            };
            // Only the aliases asked for, and only the indices that have one of them.
            if let Some(wanted) = param(params, "name") {
                let wanted: Vec<&str> = wanted.split(',').map(str::trim).collect();
                let keep = |alias: &str| {
                    wanted
                        .iter()
                        .any(|w| *w == "_all" || toolplan_search::backend::glob(w, alias))
                };
                if let Some(indices) = found.as_object_mut() {
                    for entry in indices.values_mut() {
                        if let Some(Value::Object(aliases)) = entry.get_mut("aliases") {
                            aliases.retain(|a, _| keep(a));
                        }
                    }
                    indices.retain(|_, entry| {
                        entry["aliases"].as_object().is_some_and(|a| !a.is_empty())
                    });
                }
            }
            let none = found.as_object().is_none_or(Map::is_empty);
            if api == "indices.exists_alias" {
                Outcome::Ok(Value::Bool(!none))
            } else if none && param(params, "name").is_some() {
                error(404, "aliases_not_found_exception", "alias missing")
            } else {
                Outcome::Ok(found)
            }
        }
        "cluster.health" => Outcome::Ok(json!({"status": "green", "timed_out": false})),
        "index" => index_document(backend, params, body).await,
        "bulk" => bulk(backend, names.first().map(String::as_str), body).await,
        "search" => search(backend, &names, params, body).await,
        "count" => {
            let query = body.and_then(|b| b.get("query")).cloned();
            let mut request = json!({"size": 0, "track_total_hits": true});
            if let Some(q) = query {
                request["query"] = q;
            }
            apply_q(&mut request, params);
            match backend.search(&target(&names), &request).await {
                Ok(r) => Outcome::Ok(json!({"count": r["hits"]["total"]["value"].clone(),
                                            "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0}})),
                Err(e) => from_search_error(&e),
            }
        }
        "msearch" => msearch(backend, &names, params, body).await,
        _ => Outcome::NotApplicable(format!("the runner does not implement {api}")),
    }
}

/// The indices the names of a request stand for (each a name, a pattern or `_all`; none is every
/// index); with `ignore_unavailable`, a missing name is left out instead of failing.
async fn resolve(
    backend: &dyn SearchBackend,
    names: &[String],
    ignore_unavailable: bool,
) -> Result<Vec<String>, Outcome> {
    let mut out: Vec<String> = Vec::new();
    let all = ["_all".to_owned()];
    for name in if names.is_empty() { &all[..] } else { names } {
        match backend.resolve_indices(name).await {
            Ok(found) => out.extend(found),
            Err(SearchError::NoSuchIndex(_)) if ignore_unavailable => {}
            Err(e) => return Err(from_search_error(&e)),
        }
    }
    out.dedup();
    Ok(out)
}

/// The `q=` parameter and the ones that go with it (`df`, `default_operator`, `lenient`,
/// `analyze_wildcard`): the request's query becomes their `query_string`.
fn apply_q(request: &mut Value, params: &Map<String, Value>) {
    let Some(q) = params.get("q").map(crate::assert::text) else {
        return;
    };
    let df = params.get("df").map(crate::assert::text);
    resolve_q(request, &q, df.as_deref());
    for (param, option) in [
        ("default_operator", "default_operator"),
        ("lenient", "lenient"),
        ("analyze_wildcard", "analyze_wildcard"),
    ] {
        if let Some(v) = params.get(param) {
            let text = crate::assert::text(v);
            let v = match text.as_str() {
                "true" | "false" => Value::Bool(text == "true"),
                _ => Value::String(text),
            };
            request["query"]["query_string"][option] = v;
        }
    }
}

/// The index expression a request names (`a`, `a,b`, `logs-*`): the backend resolves it; none is
/// every index.
fn target(names: &[String]) -> String {
    if names.is_empty() {
        "_all".to_owned()
    } else {
        names.join(",")
    }
}

async fn create_index(
    backend: &dyn SearchBackend,
    names: &[String],
    body: Option<&Value>,
) -> Outcome {
    let [name] = names else {
        return error(
            400,
            "illegal_argument_exception",
            "indices.create names one index",
        );
    };
    let body = body.cloned().unwrap_or_else(|| json!({}));
    let aliases = body.get("aliases").cloned();
    let mut mapping = body.get("mappings").cloned().unwrap_or_else(|| json!({}));
    if let Value::Object(m) = &mut mapping {
        m.entry("properties").or_insert_with(|| json!({}));
    }
    let mut request = json!({ "mappings": mapping });
    if let Some(settings) = body.get("settings") {
        request["settings"] = settings.clone();
    }
    let created = backend.create_index(name, &request).await;
    // The index's aliases, as the create-index API takes them.
    if created.is_ok()
        && let Some(Value::Object(aliases)) = &aliases
    {
        for (alias, options) in aliases {
            if let Err(e) = backend.put_alias(name, alias, options).await {
                let _ = backend.delete_index(name).await;
                return from_search_error(&e);
            }
        }
    }
    match created {
        Ok(()) => {
            Outcome::Ok(json!({"acknowledged": true, "shards_acknowledged": true, "index": name}))
        }
        Err(e) => from_search_error(&e),
    }
}

async fn index_document(
    backend: &dyn SearchBackend,
    params: &Map<String, Value>,
    body: Option<&Value>,
) -> Outcome {
    let Some(index) = param(params, "index") else {
        return error(400, "illegal_argument_exception", "index needs an index");
    };
    let Some(doc) = body else {
        return error(400, "illegal_argument_exception", "index needs a body");
    };
    let id = params.get("id").map(crate::assert::text);
    let op = if param(params, "op_type") == Some("create") {
        "create"
    } else {
        "index"
    };
    let mut action = json!({op: {"_index": index}});
    if let Some(id) = &id {
        action[op]["_id"] = Value::String(id.clone());
    }
    for key in ["version", "version_type", "if_seq_no", "if_primary_term"] {
        if let Some(v) = params.get(key) {
            action[op][key] = v.clone();
        }
    }
    let ndjson = format!("{action}\n{doc}\n");
    if let Err(o) = create_if_missing(backend, index).await {
        return o;
    }
    match backend.bulk(Some(index), &ndjson).await {
        Ok(summary) => match (summary.items.first(), summary.errors.first()) {
            (Some(item), _) => Outcome::Ok(json!({
                "_index": index, "_id": item.id, "_version": item.version, "result": item.result.as_str(),
                "_shards": {"total": 1, "successful": 1, "failed": 0},
                "_seq_no": item.seq_no, "_primary_term": 1})),
            (None, Some(e)) if e.contains("version conflict") => {
                error(409, "version_conflict_engine_exception", e.clone())
            }
            (None, _) => error(400, "mapper_parsing_exception", summary.errors.join("; ")),
        },
        Err(e) => from_search_error(&e),
    }
}

/// Creates `index` with an empty mapping when it does not exist, as OpenSearch does on a first
/// write.
async fn create_if_missing(backend: &dyn SearchBackend, index: &str) -> Result<(), Outcome> {
    match backend.get_mapping(index).await {
        Ok(_) => Ok(()),
        Err(SearchError::NoSuchIndex(_)) => backend
            .create_index(index, &json!({"mappings": {"properties": {}}}))
            .await
            .map_err(|e| from_search_error(&e)),
        Err(e) => Err(from_search_error(&e)),
    }
}

async fn bulk(backend: &dyn SearchBackend, index: Option<&str>, body: Option<&Value>) -> Outcome {
    let ndjson = match body {
        Some(Value::String(s)) => {
            let mut s = s.clone();
            if !s.ends_with('\n') {
                s.push('\n');
            }
            s
        }
        Some(Value::Array(lines)) => lines
            .iter()
            .map(|l| match l {
                Value::String(s) => format!("{s}\n"),
                other => format!("{other}\n"),
            })
            .collect(),
        _ => return error(400, "illegal_argument_exception", "bulk needs a body"),
    };
    // Every index the actions name is created first when missing.
    let mut targets: Vec<String> = index.map(str::to_owned).into_iter().collect();
    for line in ndjson.lines() {
        if let Ok(Value::Object(action)) = serde_json::from_str::<Value>(line)
            && let Some((_, meta)) = action.iter().next()
            && let Some(name) = meta.get("_index").and_then(Value::as_str)
            && !targets.iter().any(|t| t == name)
        {
            targets.push(name.to_owned());
        }
    }
    for target in &targets {
        if let Err(o) = create_if_missing(backend, target).await {
            return o;
        }
    }
    match backend.bulk(index, &ndjson).await {
        Ok(summary) => {
            Outcome::Ok(json!({"took": 0, "errors": !summary.errors.is_empty(), "items": []}))
        }
        Err(e) => from_search_error(&e),
    }
}

async fn search(
    backend: &dyn SearchBackend,
    names: &[String],
    params: &Map<String, Value>,
    body: Option<&Value>,
) -> Outcome {
    let name = target(names);
    let mut request = match body {
        Some(Value::Object(b)) => b.clone(),
        None | Some(Value::Null) => Map::new(),
        Some(other) => {
            return error(
                400,
                "parsing_exception",
                format!("a search body is an object, not {other}"),
            );
        }
    };
    for key in ["size", "from", "track_total_hits"] {
        if let Some(v) = params.get(key) {
            let v = match v {
                Value::String(s) => s.parse::<i64>().map(Value::from).unwrap_or_else(|_| {
                    if s == "true" || s == "false" {
                        Value::Bool(s == "true")
                    } else {
                        v.clone()
                    }
                }),
                other => other.clone(),
            };
            request.insert(key.into(), v);
        }
    }
    let mut with_q = Value::Object(request);
    apply_q(&mut with_q, params);
    let Value::Object(mut request) = with_q else {
        return error(400, "parsing_exception", "a search body is an object");
    };
    if let Some(sort) = params.get("sort") {
        let specs: Vec<Value> = crate::assert::text(sort)
            .split(',')
            .map(|s| match s.split_once(':') {
                Some((f, o)) => json!({f: o}),
                None => json!(s),
            })
            .collect();
        request.insert("sort".into(), Value::Array(specs));
    }
    if let Some(source) = params.get("_source") {
        request.insert("_source".into(), source.clone());
    }
    // URL parameters that name fields: a list, or names separated by commas.
    for key in ["docvalue_fields", "stored_fields"] {
        if let Some(v) = params.get(key) {
            let names: Vec<Value> = match v {
                Value::Array(list) => list.clone(),
                other => crate::assert::text(other)
                    .split(',')
                    .map(|n| Value::String(n.trim().to_owned()))
                    .collect(),
            };
            request.insert(key.into(), Value::Array(names));
        }
    }
    let includes = params.get("_source_includes").map(crate::assert::text);
    let excludes = params.get("_source_excludes").map(crate::assert::text);
    if includes.is_some() || excludes.is_some() {
        let list = |s: Option<String>| -> Value {
            Value::Array(
                s.unwrap_or_default()
                    .split(',')
                    .filter(|x| !x.is_empty())
                    .map(|x| json!(x))
                    .collect(),
            )
        };
        request.insert(
            "_source".into(),
            json!({"includes": list(includes), "excludes": list(excludes)}),
        );
    }
    if let Some(refusal) = inexact_count_as_int(params, &request) {
        return refusal;
    }
    let typed = params
        .get("typed_keys")
        .is_some_and(|v| crate::assert::text(v) == "true");
    let request = Value::Object(request);
    match backend.search(&name, &request).await {
        Ok(mut r) => {
            if typed {
                // The fields' kinds decide the names (`sterms` or `lterms`).
                let mut mappings = Vec::new();
                for index in backend.resolve_indices(&name).await.unwrap_or_default() {
                    if let Ok(m) = backend.get_mapping(&index).await
                        && let Ok(m) = toolplan_search::Mapping::parse(&m)
                    {
                        mappings.push(m);
                    }
                }
                toolplan_search::typed_keys::apply(
                    &request,
                    &mut r,
                    &toolplan_search::typed_keys::kinds_of(&mappings),
                );
            }
            if params
                .get("rest_total_hits_as_int")
                .is_some_and(|v| crate::assert::text(v) == "true")
            {
                totals_as_numbers(&mut r);
            }
            Outcome::Ok(r)
        }
        Err(e) => from_search_error(&e),
    }
}

/// OpenSearch's REST layer: with `rest_total_hits_as_int`, a count bounded by a number in
/// `track_total_hits` is refused (the number alone could not say it is a bound).
fn inexact_count_as_int(
    params: &Map<String, Value>,
    request: &Map<String, Value>,
) -> Option<Outcome> {
    let as_int = params
        .get("rest_total_hits_as_int")
        .is_some_and(|v| crate::assert::text(v) == "true");
    let n = request.get("track_total_hits").and_then(Value::as_i64)?;
    (as_int && n >= 0 && n != i64::from(i32::MAX)).then(|| {
        error(
            400,
            "illegal_argument_exception",
            format!("[rest_total_hits_as_int] cannot be used if the tracking of total hits is not accurate, got {n}"),
        )
    })
}

/// `rest_total_hits_as_int`: every `hits.total` of the response (the search's, its hits' inner
/// hits', its `top_hits` aggregations') written as the number alone.
fn totals_as_numbers(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if let Some(Value::Object(hits)) = map.get_mut("hits")
                && let Some(value) = hits.get("total").and_then(|t| t.get("value")).cloned()
            {
                hits.insert("total".into(), value);
            }
            for (key, child) in map.iter_mut() {
                if key != "_source" {
                    totals_as_numbers(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(totals_as_numbers),
        _ => {}
    }
}

/// The header keys of an `msearch` line the runner takes: the index, and those that change nothing
/// on a single shard.
const MSEARCH_HEADER_KEYS: &[&str] = &["index", "routing", "preference", "request_cache"];

async fn msearch(
    backend: &dyn SearchBackend,
    names: &[String],
    params: &Map<String, Value>,
    body: Option<&Value>,
) -> Outcome {
    let Some(Value::Array(lines)) = body else {
        return error(
            400,
            "illegal_argument_exception",
            "msearch needs a body of header and body lines",
        );
    };
    // Each search is read before any runs: one the REST layer refuses fails them all. A header
    // key the runner does not act on (`ignore_unavailable`, `expand_wildcards` …) is refused, not
    // dropped: it would change which indices answer.
    for header in lines.iter().step_by(2) {
        if let Some(key) = header.as_object().and_then(|h| {
            h.keys()
                .find(|k| !MSEARCH_HEADER_KEYS.contains(&k.as_str()))
        }) {
            return error(
                400,
                "illegal_argument_exception",
                format!("msearch: key [{key}] is not supported in the metadata section"),
            );
        }
    }
    for request in lines.iter().skip(1).step_by(2) {
        if let Some(refusal) = request
            .as_object()
            .and_then(|r| inexact_count_as_int(params, r))
        {
            return refusal;
        }
    }
    let mut responses = Vec::new();
    for pair in lines.chunks(2) {
        let [header, request] = pair else {
            return error(
                400,
                "illegal_argument_exception",
                "msearch lines come in pairs",
            );
        };
        let mut p = params.clone();
        if let Some(index) = header.get("index") {
            p.insert("index".into(), index.clone());
        } else if !names.is_empty() {
            p.insert("index".into(), Value::from(names.join(",")));
        }
        let idx = index_names(&p);
        responses.push(
            match Box::pin(search(backend, &idx, &p, Some(request))).await {
                Outcome::Ok(mut r) => {
                    r["status"] = json!(200);
                    r
                }
                Outcome::Err { body, .. } => body,
                Outcome::NotApplicable(why) => return Outcome::NotApplicable(why),
            },
        );
    }
    Outcome::Ok(json!({"took": 0, "responses": responses}))
}
