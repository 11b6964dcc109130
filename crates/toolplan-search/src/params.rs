//! The parameters of query-DSL planning, as OpenSearch's QueryPlanningTool takes them: given when
//! the tool is registered (the planner's own) and again when it runs (one question's), where the
//! execution-time value of a parameter wins. Every parameter is also a `${parameters.NAME}` value for
//! the prompts, so custom prompts can name their own.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use serde_json_path::JsonPath;

use crate::error::SearchError;

/// How the DSL is written (OpenSearch's `generation_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum GenerationType {
    /// From the model's own knowledge and the prompts (the default).
    #[default]
    #[serde(rename = "llmGenerated")]
    LlmGenerated,
    /// A first call picks one of the [`SearchTemplate`]s; its stored body guides the generation.
    #[serde(rename = "user_templates")]
    UserTemplates,
}

impl std::str::FromStr for GenerationType {
    type Err = SearchError;
    fn from_str(s: &str) -> Result<Self, SearchError> {
        match s {
            "llmGenerated" => Ok(GenerationType::LlmGenerated),
            "user_templates" => Ok(GenerationType::UserTemplates),
            other => Err(SearchError::InvalidParameter(format!(
                "generation_type must be llmGenerated or user_templates, not '{other}'"
            ))),
        }
    }
}

/// A stored search template the model may pick (its body is fetched from the backend by id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchTemplate {
    /// The stored script's id.
    pub template_id: String,
    /// What it is for: the only thing the model sees when it picks one.
    pub template_description: String,
}

/// Parameters of one planning call. `None` / empty means "not given here".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlanParameters {
    /// Replaces the default system prompt of the generation call.
    pub query_planner_system_prompt: Option<String>,
    /// Replaces the default user prompt of the generation call.
    pub query_planner_user_prompt: Option<String>,
    /// Replaces the system prompt of the template-selection call.
    pub template_selection_system_prompt: Option<String>,
    /// Replaces the user prompt of the template-selection call.
    pub template_selection_user_prompt: Option<String>,
    /// `llmGenerated` or `user_templates`.
    pub generation_type: Option<GenerationType>,
    /// The templates for `user_templates`.
    pub search_templates: Option<Vec<SearchTemplate>>,
    /// A JSONPath into the provider's raw response that selects the text (or object) holding the DSL
    /// (`$.choices[0].message.content`); without it, the model's reply text.
    pub response_filter: Option<String>,
    /// The query used when no valid DSL comes back.
    pub fallback_query: Option<Value>,
    /// Fields the query should prefer.
    pub query_fields: Option<Vec<String>>,
    /// The model id for neural queries (shown to the model).
    pub embedding_model_id: Option<String>,
    /// Every other parameter, for `${parameters.NAME}` in custom prompts.
    pub values: BTreeMap<String, String>,
}

/// Text of a parameter: strings as they are, other JSON as its text.
fn text(v: &Value) -> String {
    toolplan_core::value_as_text(v).into_owned()
}

/// A parameter that is JSON, given as JSON or as a string holding JSON (OpenSearch's parameters
/// are strings).
fn json_param(name: &str, v: &Value) -> Result<Value, SearchError> {
    match v {
        Value::String(s) => serde_json::from_str(s)
            .map_err(|e| SearchError::InvalidParameter(format!("{name} is not valid JSON: {e}"))),
        other => Ok(other.clone()),
    }
}

impl PlanParameters {
    /// Reads parameters from a JSON object (tool arguments, an agent's registration). `question` and
    /// `index_name` are not parameters and are skipped; unknown names become prompt values.
    pub fn from_json(obj: &Map<String, Value>) -> Result<Self, SearchError> {
        let mut p = PlanParameters::default();
        for (name, v) in obj {
            if v.is_null() {
                continue;
            }
            match name.as_str() {
                "question" | "index_name" => {}
                "query_planner_system_prompt" => p.query_planner_system_prompt = Some(text(v)),
                "query_planner_user_prompt" => p.query_planner_user_prompt = Some(text(v)),
                "template_selection_system_prompt" => {
                    p.template_selection_system_prompt = Some(text(v))
                }
                "template_selection_user_prompt" => {
                    p.template_selection_user_prompt = Some(text(v))
                }
                "generation_type" => p.generation_type = Some(text(v).parse()?),
                "search_templates" => {
                    let list = json_param(name, v)?;
                    p.search_templates = Some(serde_json::from_value(list).map_err(|e| {
                        SearchError::InvalidParameter(format!(
                            "search_templates must be a list of {{template_id, template_description}}: {e}"
                        ))
                    })?);
                }
                "response_filter" => p.response_filter = Some(text(v)),
                "fallback_query" => p.fallback_query = Some(json_param(name, v)?),
                "query_fields" => {
                    let list = match v {
                        Value::String(s) if !s.trim_start().starts_with('[') => Value::Array(
                            s.split(',')
                                .map(|f| Value::String(f.trim().to_owned()))
                                .filter(|f| f.as_str().is_some_and(|f| !f.is_empty()))
                                .collect(),
                        ),
                        other => json_param(name, other)?,
                    };
                    p.query_fields = Some(serde_json::from_value(list).map_err(|e| {
                        SearchError::InvalidParameter(format!(
                            "query_fields must be a list of field names: {e}"
                        ))
                    })?);
                }
                "embedding_model_id" => p.embedding_model_id = Some(text(v)),
                _ => {
                    p.values.insert(name.clone(), text(v));
                }
            }
        }
        p.check()?;
        Ok(p)
    }

    /// These parameters with `over`'s given ones in their place (execution over registration).
    pub fn merged(&self, over: &PlanParameters) -> PlanParameters {
        fn pick<T: Clone>(a: &Option<T>, b: &Option<T>) -> Option<T> {
            b.clone().or_else(|| a.clone())
        }
        let mut values = self.values.clone();
        values.extend(over.values.iter().map(|(k, v)| (k.clone(), v.clone())));
        PlanParameters {
            query_planner_system_prompt: pick(
                &self.query_planner_system_prompt,
                &over.query_planner_system_prompt,
            ),
            query_planner_user_prompt: pick(
                &self.query_planner_user_prompt,
                &over.query_planner_user_prompt,
            ),
            template_selection_system_prompt: pick(
                &self.template_selection_system_prompt,
                &over.template_selection_system_prompt,
            ),
            template_selection_user_prompt: pick(
                &self.template_selection_user_prompt,
                &over.template_selection_user_prompt,
            ),
            generation_type: pick(&self.generation_type, &over.generation_type),
            search_templates: pick(&self.search_templates, &over.search_templates),
            response_filter: pick(&self.response_filter, &over.response_filter),
            fallback_query: pick(&self.fallback_query, &over.fallback_query),
            query_fields: pick(&self.query_fields, &over.query_fields),
            embedding_model_id: pick(&self.embedding_model_id, &over.embedding_model_id),
            values,
        }
    }

    /// What can be checked without a model: templates are non-blank and unique, `user_templates` has
    /// some, the response filter is a JSONPath, the fallback query is an object.
    pub fn check(&self) -> Result<(), SearchError> {
        let bad = |m: String| Err(SearchError::InvalidParameter(m));
        if let Some(list) = &self.search_templates {
            let mut seen = std::collections::HashSet::new();
            for (i, t) in list.iter().enumerate() {
                if t.template_id.trim().is_empty() || t.template_description.trim().is_empty() {
                    return bad(format!(
                        "search_templates[{i}]: template_id and template_description must not be blank"
                    ));
                }
                if !seen.insert(t.template_id.as_str()) {
                    return bad(format!(
                        "search_templates[{i}]: template_id '{}' appears twice",
                        t.template_id
                    ));
                }
            }
        }
        if self.generation_type == Some(GenerationType::UserTemplates)
            && self.search_templates.as_ref().is_none_or(Vec::is_empty)
        {
            return bad("generation_type user_templates needs search_templates".into());
        }
        if let Some(f) = &self.response_filter {
            response_filter(f)?;
        }
        if let Some(q) = &self.fallback_query
            && !q.is_object()
        {
            return bad(format!("fallback_query must be a JSON object, not {q}"));
        }
        Ok(())
    }
}

/// Parses a response filter.
pub fn response_filter(path: &str) -> Result<JsonPath, SearchError> {
    JsonPath::parse(path).map_err(|e| {
        SearchError::InvalidParameter(format!("response_filter '{path}' is not a JSONPath: {e}"))
    })
}

/// The text a response filter selects in a raw provider response: the first match, as text if it
/// is a string, as JSON text otherwise. `None` when it matches nothing.
pub fn apply_response_filter(path: &JsonPath, raw: &Value) -> Option<String> {
    path.query(raw).first().map(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(v: Value) -> Result<PlanParameters, SearchError> {
        PlanParameters::from_json(v.as_object().expect("object"))
    }

    #[test]
    fn opensearch_style_string_parameters_are_read() {
        let p = params(json!({
            "question": "q", "index_name": "i",
            "generation_type": "user_templates",
            "search_templates": "[{\"template_id\": \"a\", \"template_description\": \"by species\"}]",
            "fallback_query": "{\"query\": {\"match_none\": {}}}",
            "query_fields": "title, summary",
            "response_filter": "$.choices[0].message.content",
            "custom": 3,
        }))
        .expect("parameters");
        assert_eq!(p.generation_type, Some(GenerationType::UserTemplates));
        assert_eq!(p.search_templates.as_ref().map(Vec::len), Some(1));
        assert_eq!(p.fallback_query, Some(json!({"query": {"match_none": {}}})));
        assert_eq!(
            p.query_fields,
            Some(vec!["title".to_owned(), "summary".to_owned()])
        );
        assert_eq!(p.values.get("custom").map(String::as_str), Some("3"));
        assert!(!p.values.contains_key("question"));
    }

    #[test]
    fn bad_parameters_are_named() {
        let err = |v: Value| params(v).expect_err("rejected").to_string();
        assert!(err(json!({"generation_type": "magic"})).contains("generation_type"));
        assert!(
            err(json!({"generation_type": "user_templates"})).contains("needs search_templates")
        );
        assert!(
            err(json!({"search_templates": [{"template_id": " ", "template_description": "d"}]}))
                .contains("search_templates[0]")
        );
        assert!(
            err(
                json!({"search_templates": [{"template_id": "a", "template_description": "d"},
                                             {"template_id": "a", "template_description": "e"}]})
            )
            .contains("twice")
        );
        assert!(err(json!({"response_filter": "choices[0"})).contains("not a JSONPath"));
        assert!(err(json!({"fallback_query": "[1]"})).contains("JSON object"));
        assert!(err(json!({"fallback_query": "{oops"})).contains("not valid JSON"));
    }

    #[test]
    fn execution_parameters_win() {
        let registered =
            params(json!({"response_filter": "$.a", "query_planner_user_prompt": "U", "x": "1"}))
                .expect("registration");
        let run = params(json!({"response_filter": "$.b", "y": "2"})).expect("execution");
        let m = registered.merged(&run);
        assert_eq!(m.response_filter.as_deref(), Some("$.b"));
        assert_eq!(m.query_planner_user_prompt.as_deref(), Some("U"));
        assert_eq!(m.values.len(), 2);
    }

    #[test]
    fn response_filters_select_text_or_json() {
        let raw = json!({"choices": [{"message": {"content": "{\"size\": 1}"}}],
                         "output": {"message": {"content": [{"text": "t"}, {"json": {"a": 1}}]}}});
        let f = |p: &str| apply_response_filter(&response_filter(p).expect("path"), &raw);
        assert_eq!(
            f("$.choices[0].message.content").as_deref(),
            Some("{\"size\": 1}")
        );
        assert_eq!(f("$.output.message.content[0].text").as_deref(), Some("t"));
        assert_eq!(
            f("$.output.message.content[1].json").as_deref(),
            Some("{\"a\":1}")
        );
        assert_eq!(f("$.nothing"), None);
    }
}
