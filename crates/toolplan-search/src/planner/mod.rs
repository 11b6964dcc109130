//! Query-DSL planning: a question in natural language → an OpenSearch request body, by a model that
//! sees the index mapping, a sample document and the current time (OpenSearch's QueryPlanningTool),
//! made dependable: the first *valid* JSON object of the reply is taken (stray braces and code
//! fences are skipped), mistakes with one right correction are corrected on the spot
//! ([`crate::autofix`]), it is checked against the mapping and the backend (unknown fields, `term` on
//! analysed text, clauses the backend cannot run, non-integer `size` / `k`) and validated by the
//! backend itself (a dry run: what it cannot parse or run). A valid body is then run once and what
//! came back is compared with the question ([`observe`]: no hits, a value the question names but the
//! query ignores, a sample value copied, an aggregation missing …). What the planner can correct
//! from its observations it corrects itself ([`amend`]: the named value becomes a filter, the copied
//! value goes, the aggregation the question asks for is added), keeping the amended body when it
//! has fewer observations. Problems and observations left go back to the model for a bounded number of repairs (each observation once); only then does the fallback
//! query stand in — with the reason recorded. A repair that is worse than a valid body before it is
//! not taken: of the valid bodies, the one with the fewest observations wins (the first of equals).
//!
//! The prompt shows, besides the mapping and a sample document, the frequent values of the keyword
//! fields ([`values`]), so values are spelled as stored.
//!
//! [`DslPlanner`] runs the rounds (this module); the other parts:
//!
//! * [`values`] — the frequent values of the keyword fields, bounded, for the prompt and the checks.
//! * [`observe`] — the execution-guided checks and their word lists.
//! * [`amend`] — the corrections the planner makes from those observations.
//! * `templates` — `user_templates` generation: the model picks one of the stored search
//!   templates, whose body the generation prompt then shows.
//! * `reply` — reading a model reply: the text the response filter selects, the first JSON object
//!   in it, whole floats made integers, what is wrong with it, and the prompts that send problems and
//!   observations back.

pub mod amend;
#[cfg(test)]
mod fixtures;
pub mod observe;
mod reply;
mod templates;
pub mod values;

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{SecondsFormat, Utc};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolplan_llm::{ChatModel, ChatRequest, ChatResponse, Message};

pub use self::reply::{extract_json_object, normalize_integers, problems};
pub use self::templates::pick_template;

use self::observe::Context;
use self::reply::{observation_prompt, repair_prompt, reply_text};
use self::values::{KeywordValues, field_list, keyword_values};
use crate::backend::SearchBackend;
use crate::error::SearchError;
use crate::mapping::Mapping;
use crate::params::{GenerationType, PlanParameters, response_filter};
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
    /// The reply text (what the response filter selected, when there is one).
    pub reply: String,
    /// The JSON object taken from it, if any (after the deterministic corrections).
    pub dsl: Option<Value>,
    /// The corrections made to it without the model ([`crate::autofix`]).
    pub fixes: Vec<String>,
    /// What is wrong with it: problems (empty when it was accepted without remarks), or, when
    /// [`Self::observed`], the observations of its run.
    pub problems: Vec<String>,
    /// Whether the body passed the checks and the dry run, and `problems` are observations of its
    /// run ([`observe`]) rather than reasons it cannot be used.
    pub observed: bool,
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
    keyword_values: bool,
    observe: bool,
    amend: bool,
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
            keyword_values: true,
            observe: true,
            amend: true,
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

    /// Whether the prompt shows the frequent values of the keyword fields (default on; one search
    /// per question, see [`values`]). A `keyword_values` parameter given by the caller is shown
    /// instead, and no search is made.
    pub fn with_keyword_values(mut self, on: bool) -> Self {
        self.keyword_values = on;
        self
    }

    /// Whether a valid body is run and its observations go back to the model (default on; see
    /// [`observe`]).
    pub fn with_observations(mut self, on: bool) -> Self {
        self.observe = on;
        self
    }

    /// Whether the planner corrects a body from its observations itself before it asks the model
    /// (default on; see [`amend`]). Needs [`with_observations`](Self::with_observations).
    pub fn with_amendments(mut self, on: bool) -> Self {
        self.amend = on;
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
        let given_values = p.values.contains_key("keyword_values");
        let known = if self.keyword_values && !given_values {
            match keyword_values(self.backend.as_ref(), index, &mapping, cancel).await {
                Ok(v) => v,
                Err(e @ SearchError::Cancelled(_)) => return Err(e),
                // The values are an aid: a backend that cannot give them plans without them.
                Err(_) => KeywordValues::default(),
            }
        } else {
            KeywordValues::default()
        };
        let mut values: HashMap<String, String> = HashMap::new();
        values.insert("examples".into(), DEFAULT_EXAMPLES.to_owned());
        if self.keyword_values {
            values.insert("keyword_values".into(), known.prompt_text());
        }
        values.insert("index_fields".into(), field_list(&mapping, &mapping_json));
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
        let cx = Context {
            question,
            mapping: &mapping,
            values: &known,
            sample: sample.as_ref(),
        };
        // Observations already sent back (each goes back once), and the valid body with the fewest
        // observations so far (the first of equals).
        let mut sent: Vec<String> = Vec::new();
        let mut best: Option<(usize, Value)> = None;
        for round in 0..=self.max_repairs {
            let response = self.call(&messages, &mut plan, cancel).await?;
            let (reply, filtered) = reply_text(&response, filter.as_ref());
            let mut dsl = filtered
                .as_deref()
                .and_then(extract_json_object)
                .map(normalize_integers);
            let mut fixes = match (&mut dsl, self.autofix) {
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
            let mut observed = false;
            if self.observe
                && problems.is_empty()
                && let Some(d) = &dsl
            {
                let ran = match observe::run(self.backend.as_ref(), index, d, cancel).await {
                    Ok(r) => Some(r),
                    Err(e) if e.is_rejection() => {
                        problems.push(format!("the index rejects it: {e}"));
                        None
                    }
                    Err(e @ SearchError::Cancelled(_)) => return Err(e),
                    // A run that fails otherwise (time budget, transport) leaves the static checks.
                    Err(_) => None,
                };
                if problems.is_empty() {
                    problems = observe::observations(&cx, d, ran.as_ref());
                    observed = !problems.is_empty();
                }
                // What the planner can correct itself, it does: the amended body is checked and
                // run like any other, and kept when it has fewer observations.
                if observed
                    && self.amend
                    && let Some((amended, notes)) = amend::amend(&cx, d, ran.as_ref())
                    && let Some(left) = self
                        .observe_amended(index, &mapping, &cx, embedded, &amended, cancel)
                        .await?
                    && left.len() < problems.len()
                {
                    fixes.extend(notes);
                    problems = left;
                    observed = !problems.is_empty();
                    dsl = Some(amended);
                }
            }
            plan.attempts.push(Attempt {
                reply: filtered.clone().unwrap_or_else(|| reply.clone()),
                dsl: dsl.clone(),
                fixes,
                problems: problems.clone(),
                observed,
            });
            let Some(d) = dsl.filter(|_| problems.is_empty() || observed) else {
                if round < self.max_repairs {
                    messages.push(Message::assistant(reply, Vec::new()));
                    messages.push(Message::user(repair_prompt(&problems)));
                }
                continue;
            };
            if problems.is_empty() {
                plan.dsl = d;
                return Ok(plan);
            }
            if best.as_ref().is_none_or(|(n, _)| problems.len() < *n) {
                best = Some((problems.len(), d));
            }
            let new: Vec<String> = problems.into_iter().filter(|o| !sent.contains(o)).collect();
            if new.is_empty() || round == self.max_repairs {
                break;
            }
            messages.push(Message::assistant(reply, Vec::new()));
            messages.push(Message::user(observation_prompt(&new)));
            sent.extend(new);
        }
        if let Some((_, d)) = best {
            plan.dsl = d;
            return Ok(plan);
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

    /// The observations of an amended body ([`amend`]), or `None` when it does not pass the
    /// checks, the dry run or its run.
    async fn observe_amended(
        &self,
        index: &str,
        mapping: &Mapping,
        cx: &Context<'_>,
        embedded: bool,
        body: &Value,
        cancel: &CancellationToken,
    ) -> Result<Option<Vec<String>>, SearchError> {
        if !problems(mapping, body, embedded).is_empty() {
            return Ok(None);
        }
        let ran = match self.backend.validate(index, body).await {
            Ok(()) => observe::run(self.backend.as_ref(), index, body, cancel).await,
            Err(e) => Err(e),
        };
        match ran {
            Ok(r) => Ok(Some(observe::observations(cx, body, Some(&r)))),
            Err(e @ SearchError::Cancelled(_)) => Err(e),
            Err(_) => Ok(None),
        }
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
}

/// The sample document as the prompt shows it: each top-level field as text, cut to
/// [`SAMPLE_FIELD_CHARS`] characters (marked), `null` for an empty index.
pub fn sample_text(sample: Option<&Value>) -> String {
    let Some(Value::Object(doc)) = sample else {
        return "null".into();
    };
    let mut out = serde_json::Map::new();
    for (k, v) in doc {
        let text = toolplan_core::value_as_text(v);
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

#[cfg(test)]
mod tests {
    use super::*;

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
