//! `user_templates` generation: the model is shown the ids and descriptions of the stored search
//! templates and names one; the stored body of that template (or the default template) is what the
//! generation prompt then shows.

use std::collections::HashMap;

use serde_json::Value;
use serde_json_path::JsonPath;
use tokio_util::sync::CancellationToken;
use toolplan_llm::Message;

use super::reply::reply_text;
use super::{DslPlan, DslPlanner, TemplateChoice, default_fallback};
use crate::error::SearchError;
use crate::params::{PlanParameters, SearchTemplate};
use crate::prompts::{
    TEMPLATE_SELECTION_SYSTEM_PROMPT, TEMPLATE_SELECTION_USER_PROMPT, substitute,
};

impl DslPlanner {
    /// `user_templates`: the model picks a template id from the ids and descriptions; the stored body
    /// of that template (or the default template) is what the generation prompt shows.
    pub(super) async fn choose_template(
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
}
