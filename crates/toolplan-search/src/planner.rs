//! Query-DSL planning: a question in natural language → an OpenSearch request body, by a model that
//! sees the index mapping, a sample document and the current time (OpenSearch's QueryPlanningTool),
//! made dependable: the first *valid* JSON object of the reply is taken (stray braces and code
//! fences are skipped), mistakes with one right correction are corrected on the spot
//! ([`crate::autofix`]), it is checked against the mapping and the backend (unknown fields, `term` on
//! analysed text, clauses the backend cannot run, non-integer `size` / `k`) and validated by the
//! backend itself (a dry run: what it cannot parse or run), problems go back to the
//! model for a bounded number of repairs, and only then does the fallback query stand in — with the
//! reason recorded.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{SecondsFormat, Utc};
use serde_json::{Value, json};
use serde_json_path::JsonPath;
use tokio_util::sync::CancellationToken;
use toolplan_llm::{ChatModel, ChatRequest, ChatResponse, Message};

use crate::backend::SearchBackend;
use crate::check;
use crate::error::SearchError;
use crate::mapping::Mapping;
use crate::params::{
    GenerationType, PlanParameters, SearchTemplate, apply_response_filter, response_filter,
};
use crate::prompts::{
    DEFAULT_EXAMPLES, DEFAULT_SYSTEM_PROMPT, DEFAULT_USER_PROMPT, TEMPLATE_SELECTION_SYSTEM_PROMPT,
    TEMPLATE_SELECTION_USER_PROMPT, substitute,
};

/// The query used when no valid DSL comes back: OpenSearch's default.
pub fn default_fallback() -> Value {
    json!({"size": 10, "query": {"match_all": {}}})
}

/// Sample-document fields are cut to this many characters.
pub const SAMPLE_FIELD_CHARS: usize = 250;

/// One model reply and what was found in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    /// The reply text (what the response filter selected, when there is one).
    pub reply: String,
    /// The JSON object taken from it, if any (after the deterministic corrections).
    pub dsl: Option<Value>,
    /// The corrections made to it without the model ([`crate::autofix`]).
    pub fixes: Vec<String>,
    /// What is wrong with it (empty when it was accepted).
    pub problems: Vec<String>,
}

/// The template-selection step of `user_templates` generation.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateChoice {
    /// The model's reply to the selection prompt.
    pub reply: String,
    /// The template id it named, if it named one of the offered ids.
    pub selected: Option<String>,
    /// The template body the generation prompt showed (the stored one, or the default).
    pub template: String,
    /// Why the default template stood in, if it did.
    pub note: Option<String>,
}

/// The outcome of planning.
#[derive(Debug, Clone, PartialEq)]
pub struct DslPlan {
    /// The request body to run.
    pub dsl: Value,
    /// Every generation reply, in order.
    pub attempts: Vec<Attempt>,
    /// The template selection, with `user_templates`.
    pub template: Option<TemplateChoice>,
    /// Why the fallback query was used, if it was.
    pub fallback: Option<String>,
    /// Model calls made (the selection call included).
    pub llm_calls: u64,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
}

/// Plans OpenSearch DSL for questions about the indices of a backend.
pub struct DslPlanner {
    model: Arc<dyn ChatModel>,
    backend: Arc<dyn SearchBackend>,
    params: PlanParameters,
    max_repairs: usize,
    autofix: bool,
}

impl DslPlanner {
    /// A planner with the default prompts, `llmGenerated`, one repair and OpenSearch's fallback
    /// query.
    pub fn new(model: Arc<dyn ChatModel>, backend: Arc<dyn SearchBackend>) -> Self {
        Self {
            model,
            backend,
            params: PlanParameters::default(),
            max_repairs: 1,
            autofix: true,
        }
    }

    /// Registration-time parameters (prompts, generation type and templates, response filter,
    /// fallback query, prompt values), given ones replacing earlier ones; checked here.
    pub fn with_parameters(mut self, params: &PlanParameters) -> Result<Self, SearchError> {
        let merged = self.params.merged(params);
        merged.check()?;
        self.params = merged;
        Ok(self)
    }

    /// The registration-time parameters.
    pub fn parameters(&self) -> &PlanParameters {
        &self.params
    }

    /// Replaces the system prompt (`${parameters.NAME}` placeholders are filled).
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.params.query_planner_system_prompt = Some(prompt.into());
        self
    }

    /// Replaces the user prompt (`${parameters.NAME}` placeholders are filled).
    pub fn with_user_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.params.query_planner_user_prompt = Some(prompt.into());
        self
    }

    /// Sets a value the prompts can name as `${parameters.NAME}`.
    pub fn with_parameter(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.params.values.insert(name.into(), value.into());
        self
    }

    /// The query used when no valid DSL comes back.
    pub fn with_fallback_query(mut self, query: Value) -> Self {
        self.params.fallback_query = Some(query);
        self
    }

    /// Whether mistakes with exactly one correction are corrected without the model (default on;
    /// see [`crate::autofix`]).
    pub fn with_autofix(mut self, on: bool) -> Self {
        self.autofix = on;
        self
    }

    /// How many times problems go back to the model before the fallback is used (default 1).
    pub fn with_max_repairs(mut self, n: usize) -> Self {
        self.max_repairs = n;
        self
    }

    /// Plans the DSL for `question` on `index`. `run` are execution-time parameters: each one given
    /// replaces the registration-time one.
    pub async fn plan(
        &self,
        question: &str,
        index: &str,
        run: &PlanParameters,
        cancel: &CancellationToken,
    ) -> Result<DslPlan, SearchError> {
        let p = self.params.merged(run);
        p.check()?;
        let filter = p
            .response_filter
            .as_deref()
            .map(response_filter)
            .transpose()?;
        let mapping_json = self.backend.get_mapping(index).await?;
        let mapping = Mapping::parse(&mapping_json)?;
        let sample = self.backend.sample_document(index).await?;
        let mut values: HashMap<String, String> = HashMap::new();
        values.insert("examples".into(), DEFAULT_EXAMPLES.to_owned());
        values.extend(p.values.iter().map(|(k, v)| (k.clone(), v.clone())));
        values.insert("question".into(), question.to_owned());
        values.insert("index_name".into(), index.to_owned());
        values.insert("index_mapping".into(), mapping_json.to_string());
        values.insert("sample_document".into(), sample_text(sample.as_ref()));
        values.insert(
            "current_time".into(),
            Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true),
        );
        if let Some(fields) = p.query_fields.as_ref().filter(|f| !f.is_empty()) {
            values.insert(
                "query_fields".into(),
                serde_json::to_string(fields).unwrap_or_default(),
            );
        }
        if let Some(id) = &p.embedding_model_id {
            values.insert("embedding_model_id".into(), id.clone());
        }
        let mut plan = DslPlan {
            dsl: Value::Null,
            attempts: Vec::new(),
            template: None,
            fallback: None,
            llm_calls: 0,
            input_tokens: 0,
            output_tokens: 0,
        };
        if p.generation_type == Some(GenerationType::UserTemplates) {
            let templates = p.search_templates.as_deref().unwrap_or_default();
            let choice = self
                .choose_template(
                    &p,
                    templates,
                    &mut values,
                    filter.as_ref(),
                    &mut plan,
                    cancel,
                )
                .await?;
            values.insert("template".into(), choice.template.clone());
            plan.template = Some(choice);
        }

        let system = p
            .query_planner_system_prompt
            .as_deref()
            .unwrap_or(DEFAULT_SYSTEM_PROMPT);
        let user = p
            .query_planner_user_prompt
            .as_deref()
            .unwrap_or(DEFAULT_USER_PROMPT);
        let mut messages = vec![
            Message::system(substitute(system, &values)),
            Message::user(substitute(user, &values)),
        ];
        let embedded = self.backend.kind() == "embedded";
        for round in 0..=self.max_repairs {
            let response = self.call(&messages, &mut plan, cancel).await?;
            let (reply, filtered) = reply_text(&response, filter.as_ref());
            let mut dsl = filtered
                .as_deref()
                .and_then(extract_json_object)
                .map(normalize_integers);
            let fixes = match (&mut dsl, self.autofix) {
                (Some(d), true) => crate::autofix::autofix(&mapping, d),
                _ => Vec::new(),
            };
            let mut problems = match (&filtered, &dsl) {
                (None, _) => vec![format!(
                    "the response_filter '{}' matches nothing in the provider's response",
                    p.response_filter.as_deref().unwrap_or_default()
                )],
                (Some(_), None) => vec!["the reply holds no JSON object".to_owned()],
                (Some(_), Some(d)) => problems(&mapping, d, embedded),
            };
            if problems.is_empty()
                && let Some(d) = &dsl
            {
                match self.backend.validate(index, d).await {
                    Ok(()) => {}
                    Err(e) if e.is_rejection() => {
                        problems.push(format!("the index rejects it: {e}"))
                    }
                    Err(e) => return Err(e),
                }
            }
            plan.attempts.push(Attempt {
                reply: filtered.clone().unwrap_or_else(|| reply.clone()),
                dsl: dsl.clone(),
                fixes,
                problems: problems.clone(),
            });
            if problems.is_empty()
                && let Some(d) = dsl
            {
                plan.dsl = d;
                return Ok(plan);
            }
            if round < self.max_repairs {
                messages.push(Message::assistant(reply, Vec::new()));
                messages.push(Message::user(repair_prompt(&problems)));
            }
        }
        let last = plan
            .attempts
            .last()
            .map(|a| a.problems.join("; "))
            .unwrap_or_default();
        plan.fallback = Some(format!(
            "no valid DSL after {} attempt{}: {last}",
            plan.attempts.len(),
            if plan.attempts.len() == 1 { "" } else { "s" }
        ));
        plan.dsl = p.fallback_query.clone().unwrap_or_else(default_fallback);
        Ok(plan)
    }

    /// One model call, counted in `plan`.
    async fn call(
        &self,
        messages: &[Message],
        plan: &mut DslPlan,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, SearchError> {
        let request = ChatRequest {
            messages: messages.to_vec(),
            temperature: Some(0.0),
            max_tokens: Some(1024),
            ..ChatRequest::default()
        };
        let response = self
            .model
            .chat(&request, cancel)
            .await
            .map_err(|e| SearchError::Transport(format!("the model call failed: {e}")))?;
        plan.llm_calls += 1;
        plan.input_tokens += response.usage.input_tokens;
        plan.output_tokens += response.usage.output_tokens;
        Ok(response)
    }

    /// `user_templates`: the model picks a template id from the ids and descriptions; the stored body
    /// of that template (or the default template) is what the generation prompt shows.
    async fn choose_template(
        &self,
        p: &PlanParameters,
        templates: &[SearchTemplate],
        values: &mut HashMap<String, String>,
        filter: Option<&JsonPath>,
        plan: &mut DslPlan,
        cancel: &CancellationToken,
    ) -> Result<TemplateChoice, SearchError> {
        values.insert(
            "search_templates".into(),
            serde_json::to_string(templates).unwrap_or_default(),
        );
        let system = p
            .template_selection_system_prompt
            .as_deref()
            .unwrap_or(TEMPLATE_SELECTION_SYSTEM_PROMPT);
        let user = p
            .template_selection_user_prompt
            .as_deref()
            .unwrap_or(TEMPLATE_SELECTION_USER_PROMPT);
        let messages = [
            Message::system(substitute(system, values)),
            Message::user(substitute(user, values)),
        ];
        let response = self.call(&messages, plan, cancel).await?;
        let (raw_reply, filtered) = reply_text(&response, filter);
        let reply = filtered.unwrap_or(raw_reply);
        let selected = pick_template(&reply, templates);
        let default_template = default_fallback().to_string();
        let (template, note) = match &selected {
            None => (
                default_template,
                Some("the model named none of the templates; the default template is used".into()),
            ),
            Some(id) => match self.backend.get_script(id).await? {
                Some(script) => (
                    script.get("source").map_or_else(
                        || script.to_string(),
                        |s| match s {
                            Value::String(t) => t.clone(),
                            other => other.to_string(),
                        },
                    ),
                    None,
                ),
                None => (
                    default_template,
                    Some(format!(
                        "template '{id}' is not stored in the {} backend; the default template is used",
                        self.backend.kind()
                    )),
                ),
            },
        };
        Ok(TemplateChoice {
            reply,
            selected,
            template,
            note,
        })
    }
}

/// The reply text of a response, and the text the response filter selects from the raw response
/// (the reply text itself when there is no filter; `None` when the filter matches nothing).
fn reply_text(response: &ChatResponse, filter: Option<&JsonPath>) -> (String, Option<String>) {
    let text = response.message.content.clone();
    match filter {
        None => (text.clone(), Some(text)),
        Some(f) => {
            let selected = response
                .raw
                .as_ref()
                .and_then(|raw| apply_response_filter(f, raw));
            (text, selected)
        }
    }
}

/// The template id a selection reply names: the whole reply (trimmed of quotes and fences) if it is
/// an id, else the id that appears first in it (longer ids first where one contains another).
pub fn pick_template(reply: &str, templates: &[SearchTemplate]) -> Option<String> {
    let trimmed = reply
        .trim()
        .trim_matches(|c: char| matches!(c, '`' | '"' | '\'' | '.'));
    if let Some(t) = templates.iter().find(|t| t.template_id == trimmed) {
        return Some(t.template_id.clone());
    }
    let mut best: Option<(usize, usize, &str)> = None;
    for t in templates {
        if let Some(pos) = reply.find(t.template_id.as_str()) {
            let key = (
                pos,
                usize::MAX - t.template_id.len(),
                t.template_id.as_str(),
            );
            if best.is_none_or(|b| (key.0, key.1) < (b.0, b.1)) {
                best = Some(key);
            }
        }
    }
    best.map(|(_, _, id)| id.to_owned())
}

fn repair_prompt(problems: &[String]) -> String {
    let mut s = String::from("That query cannot be used:\n");
    for p in problems {
        s.push_str("- ");
        s.push_str(p);
        s.push('\n');
    }
    s.push_str("Return the corrected query: a single JSON object, nothing else.\nOutput:");
    s
}

/// The sample document as the prompt shows it: each top-level field as text, cut to
/// [`SAMPLE_FIELD_CHARS`] characters (marked), `null` for an empty index.
pub fn sample_text(sample: Option<&Value>) -> String {
    let Some(Value::Object(doc)) = sample else {
        return "null".into();
    };
    let mut out = serde_json::Map::new();
    for (k, v) in doc {
        let text = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let cut: String = text.chars().take(SAMPLE_FIELD_CHARS).collect();
        let shown = if cut.len() < text.len() {
            format!("{cut}... [truncated]")
        } else {
            cut
        };
        out.insert(k.clone(), Value::String(shown));
    }
    Value::Object(out).to_string()
}

/// The first JSON object in `text` that parses: prose, code fences and stray braces before it are
/// skipped; anything after it is ignored.
pub fn extract_json_object(text: &str) -> Option<Value> {
    for (i, _) in text.char_indices().filter(|(_, c)| *c == '{') {
        let mut stream = serde_json::Deserializer::from_str(&text[i..]).into_iter::<Value>();
        if let Some(Ok(v @ Value::Object(_))) = stream.next() {
            return Some(v);
        }
    }
    None
}

/// `size`, `from` and `k` written as whole floats (`10.0`) become integers, as OpenSearch's tool does.
pub fn normalize_integers(mut v: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(o) => {
                for (k, child) in o.iter_mut() {
                    if matches!(k.as_str(), "size" | "from" | "k")
                        && let Some(f) = child.as_f64()
                        && child.is_f64()
                        && f.fract() == 0.0
                        && f >= 0.0
                    {
                        *child = json!(f as u64);
                    } else {
                        walk(child);
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut v);
    v
}

/// Everything wrong with a generated body: the mapping checks, clauses the embedded backend cannot
/// run, and `size` / `from` / `k` that are not whole numbers.
pub fn problems(mapping: &Mapping, dsl: &Value, embedded: bool) -> Vec<String> {
    let mut out: Vec<String> = check::check(mapping, dsl)
        .iter()
        .map(ToString::to_string)
        .collect();
    fn walk(v: &Value, path: &str, embedded: bool, out: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                for (k, child) in o {
                    let here = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    if embedded
                        && crate::embedded::UNSUPPORTED.contains(&k.as_str())
                        && path.contains("query")
                    {
                        out.push(format!("{here}: the {k} clause cannot run on this index; use the clauses its mapping supports"));
                        continue;
                    }
                    if matches!(k.as_str(), "size" | "from" | "k")
                        && child.is_number()
                        && child.as_u64().is_none()
                    {
                        out.push(format!("{here}: must be a whole number, found {child}"));
                    }
                    walk(child, &here, embedded, out);
                }
            }
            Value::Array(a) => {
                for (i, child) in a.iter().enumerate() {
                    walk(child, &format!("{path}[{i}]"), embedded, out);
                }
            }
            _ => {}
        }
    }
    walk(dsl, "", embedded, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_ids_are_picked_from_the_reply() {
        let t = |id: &str| SearchTemplate {
            template_id: id.into(),
            template_description: "d".into(),
        };
        let list = [t("species"), t("species_range"), t("petal")];
        assert_eq!(pick_template(" `petal`\n", &list).as_deref(), Some("petal"));
        assert_eq!(
            pick_template("The best is species_range.", &list).as_deref(),
            Some("species_range")
        );
        assert_eq!(
            pick_template("petal, or maybe species", &list).as_deref(),
            Some("petal")
        );
        assert_eq!(pick_template("none", &list), None);
    }

    #[test]
    fn the_first_valid_object_is_taken() {
        assert_eq!(extract_json_object("no json"), None);
        assert_eq!(extract_json_object(""), None);
        assert_eq!(extract_json_object("null"), None);
        assert_eq!(
            extract_json_object("{\"size\": 0}"),
            Some(json!({"size": 0}))
        );
        assert_eq!(
            extract_json_object(
                "Sure! {not json} here:\n```json\n{\"size\": 0}\n```\nDone {\"x\": 1}"
            ),
            Some(json!({"size": 0}))
        );
        assert_eq!(
            extract_json_object("[1, {\"a\": 2}]"),
            Some(json!({"a": 2}))
        );
        assert_eq!(
            extract_json_object("{\"a\": {\"b\": 1}} trailing"),
            Some(json!({"a": {"b": 1}}))
        );
    }

    #[test]
    fn whole_floats_become_integers() {
        assert_eq!(
            normalize_integers(
                json!({"size": 10.0, "query": {"neural": {"f": {"k": 100.0}}}, "x": 1.5})
            ),
            json!({"size": 10, "query": {"neural": {"f": {"k": 100}}}, "x": 1.5})
        );
    }

    #[test]
    fn problems_name_where() {
        let mapping = Mapping::parse(&json!({"properties": {"species": {"type": "text", "fields": {"keyword": {"type": "keyword"}}}}})).expect("mapping");
        let p = problems(
            &mapping,
            &json!({"size": 2.5, "query": {"bool": {"must": [{"neural": {"v": {}}}]}}}),
            true,
        );
        assert_eq!(
            p,
            [
                "size: must be a whole number, found 2.5",
                "query.bool.must[0].neural: the neural clause cannot run on this index; use the clauses its mapping supports",
            ]
        );
        assert!(problems(&mapping, &json!({"query": {"neural": {}}}), false).is_empty());
        assert!(
            problems(
                &mapping,
                &json!({"query": {"match": {"species": "setosa"}}}),
                true
            )
            .is_empty()
        );
    }

    #[test]
    fn sample_fields_are_cut() {
        let long = "x".repeat(300);
        let shown = sample_text(Some(&json!({"a": long, "b": 3})));
        let v: Value = serde_json::from_str(&shown).expect("json");
        assert_eq!(v["b"], "3");
        assert!(v["a"].as_str().expect("text").ends_with("... [truncated]"));
        assert_eq!(
            v["a"]
                .as_str()
                .expect("text")
                .chars()
                .filter(|c| *c == 'x')
                .count(),
            250
        );
        assert_eq!(sample_text(None), "null");
    }
}
