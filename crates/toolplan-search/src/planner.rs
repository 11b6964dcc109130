//! Query-DSL planning: a question in natural language → an OpenSearch request body, by a model that
//! sees the index mapping, a sample document and the current time (OpenSearch's QueryPlanningTool),
//! made dependable: the first *valid* JSON object of the reply is taken (stray braces and code
//! fences are skipped), it is checked against the mapping and the backend (unknown fields, `term` on
//! analysed text, clauses the backend cannot run, non-integer `size` / `k`), problems go back to the
//! model for a bounded number of repairs, and only then does the fallback query stand in — with the
//! reason recorded.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{SecondsFormat, Utc};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolplan_llm::{ChatModel, ChatRequest, Message};

use crate::backend::SearchBackend;
use crate::check;
use crate::error::SearchError;
use crate::mapping::Mapping;
use crate::prompts::{DEFAULT_EXAMPLES, DEFAULT_SYSTEM_PROMPT, DEFAULT_USER_PROMPT, substitute};

/// The query used when no valid DSL comes back: OpenSearch's default.
pub fn default_fallback() -> Value {
    json!({"size": 10, "query": {"match_all": {}}})
}

/// Sample-document fields are cut to this many characters.
pub const SAMPLE_FIELD_CHARS: usize = 250;

/// One model reply and what was found in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    /// The reply text.
    pub reply: String,
    /// The JSON object taken from it, if any.
    pub dsl: Option<Value>,
    /// What is wrong with it (empty when it was accepted).
    pub problems: Vec<String>,
}

/// The outcome of planning.
#[derive(Debug, Clone, PartialEq)]
pub struct DslPlan {
    /// The request body to run.
    pub dsl: Value,
    /// Every model reply, in order.
    pub attempts: Vec<Attempt>,
    /// Why the fallback query was used, if it was.
    pub fallback: Option<String>,
    /// Model calls made.
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
    system_prompt: String,
    user_prompt: String,
    parameters: HashMap<String, String>,
    fallback: Value,
    max_repairs: usize,
}

impl DslPlanner {
    /// A planner with the default prompts, one repair and OpenSearch's fallback query.
    pub fn new(model: Arc<dyn ChatModel>, backend: Arc<dyn SearchBackend>) -> Self {
        let mut parameters = HashMap::new();
        parameters.insert("examples".to_owned(), DEFAULT_EXAMPLES.to_owned());
        Self {
            model,
            backend,
            system_prompt: DEFAULT_SYSTEM_PROMPT.to_owned(),
            user_prompt: DEFAULT_USER_PROMPT.to_owned(),
            parameters,
            fallback: default_fallback(),
            max_repairs: 1,
        }
    }

    /// Replaces the system prompt (`${parameters.NAME}` placeholders are filled).
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = prompt.into();
        self
    }

    /// Replaces the user prompt (`${parameters.NAME}` placeholders are filled).
    pub fn with_user_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.user_prompt = prompt.into();
        self
    }

    /// Sets a parameter the prompts can name (registration-time parameters; a question's own
    /// parameters override them).
    pub fn with_parameter(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.parameters.insert(name.into(), value.into());
        self
    }

    /// The query used when no valid DSL comes back.
    pub fn with_fallback_query(mut self, query: Value) -> Self {
        self.fallback = query;
        self
    }

    /// How many times problems go back to the model before the fallback is used (default 1).
    pub fn with_max_repairs(mut self, n: usize) -> Self {
        self.max_repairs = n;
        self
    }

    /// Plans the DSL for `question` on `index`. `query_fields` and `embedding_model_id` are passed
    /// to the prompt when given; `extra` are execution-time parameters.
    pub async fn plan(
        &self,
        question: &str,
        index: &str,
        query_fields: &[String],
        extra: &HashMap<String, String>,
        cancel: &CancellationToken,
    ) -> Result<DslPlan, SearchError> {
        let mapping_json = self.backend.get_mapping(index).await?;
        let mapping = Mapping::parse(&mapping_json)?;
        let sample = self.backend.sample_document(index).await?;
        let mut p = self.parameters.clone();
        p.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        p.insert("question".into(), question.to_owned());
        p.insert("index_name".into(), index.to_owned());
        p.insert("index_mapping".into(), mapping_json.to_string());
        p.insert("sample_document".into(), sample_text(sample.as_ref()));
        p.insert(
            "current_time".into(),
            Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true),
        );
        if !query_fields.is_empty() {
            p.insert(
                "query_fields".into(),
                serde_json::to_string(query_fields).unwrap_or_default(),
            );
        }
        let mut messages = vec![
            Message::system(substitute(&self.system_prompt, &p)),
            Message::user(substitute(&self.user_prompt, &p)),
        ];
        let mut plan = DslPlan {
            dsl: Value::Null,
            attempts: Vec::new(),
            fallback: None,
            llm_calls: 0,
            input_tokens: 0,
            output_tokens: 0,
        };
        let embedded = self.backend.kind() == "embedded";
        for round in 0..=self.max_repairs {
            let request = ChatRequest {
                messages: messages.clone(),
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
            let reply = response.message.content.clone();
            let dsl = extract_json_object(&reply).map(normalize_integers);
            let problems = match &dsl {
                None => vec!["the reply holds no JSON object".to_owned()],
                Some(d) => problems(&mapping, d, embedded),
            };
            plan.attempts.push(Attempt {
                reply: reply.clone(),
                dsl: dsl.clone(),
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
        plan.dsl = self.fallback.clone();
        Ok(plan)
    }
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
