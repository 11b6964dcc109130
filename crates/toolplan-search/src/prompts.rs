//! The default prompts of query-DSL planning (those of OpenSearch's QueryPlanningTool; the user
//! prompt with one line more, the frequent values of the keyword fields), and the
//! `${parameters.NAME}` / `${parameters.NAME:-default}` substitution that fills them.
//!
//! Values the planner fills: `question`, `index_name`, `index_mapping`, `sample_document`,
//! `current_time`, `query_fields`, `embedding_model_id`, `examples`, `template` and
//! `search_templates` (as OpenSearch), and two of its own: `keyword_values`
//! (`category: billing, login; status: open, closed`) and `index_fields` (`price (float), genre
//! (keyword), title (text, title.keyword)`, for custom prompts; the default prompts do not name it).

use std::collections::HashMap;

/// The default system prompt.
pub const DEFAULT_SYSTEM_PROMPT: &str = r#"==== PURPOSE ====
You are an OpenSearch DSL expert. Convert a natural-language question into a strict JSON OpenSearch query body.

==== RULES ====
Use only fields present in the provided mapping; never invent names.
Choose query types based on user intent and field types:
match: single-token full-text on analyzed text fields.
match_phrase: multi-token phrases on analyzed text fields (search string contains spaces, hyphens, commas, etc.).
multi_match: when multiple analyzed text fields are equally relevant.
term / terms: exact match on keyword, numeric, boolean.
range: numeric/date comparisons (gt, lt, gte, lte).
bool with must, should, must_not, filter: AND/OR/NOT logic.
wildcard / prefix on keyword: "starts with" / pattern matching.
exists: field presence/absence.
nested query / nested agg: ONLY if the mapping for that exact path (or a parent) has "type":"nested".
neural: semantic similarity on a 'semantic' or 'knn_vector' field (dense). Use "query_text" and "k"; include "model_id" unless bound in mapping.
neural (top-level): allowed when it's the only relevance clause needed; otherwise wrap in a bool when combining with filters/other queries.

Mechanics:
Put exact constraints (term, terms, range, exists, prefix, wildcard) in bool.filter (non-scoring). Put full-text relevance (match, match_phrase, multi_match) in bool.must.
Top N items/products/documents: return top hits (set "size": N as an integer) and sort by the relevant metric(s). Do not use aggregations for item lists.
Neural retrieval size: set "k" ≥ "size" (e.g. heuristic, k = max(size*5, 100) and k<=ef_search).
Spelling tolerance: match_phrase does NOT support fuzziness; use match or multi_match with "fuzziness": "AUTO" when tolerant matching is needed.
Text operators (OR vs AND): default to OR for natural-language queries; to tighten, use minimum_should_match (e.g., "75%"). Use AND only when every token is essential; if order/adjacency matters, use match_phrase.
Numeric note: use ONLY integers for size and k (not floats).

Aggregations (counts, averages, grouped summaries, distributions):
Use aggregations when the user asks for grouped summaries (e.g., counts by category, averages by brand, or top N categories/brands).
terms on field.keyword or numeric for grouping / top N groups (not items).
Metric aggs (avg, min, max, sum, stats, cardinality) on numeric fields.
date_histogram, histogram, range for distributions.
Always set "size": 0 when only aggregations are needed.
Use sub-aggregations + order for "top N groups by metric".
If grouping/filtering exactly on a text field, use its .keyword sub-field when present.

DATE RULES
Use range on date/date_nanos in bool.filter.
Emit ISO 8601 UTC ('Z') bounds; don't set time_zone for explicit UTC. (now is UTC)
Date math: now±N{y|M|w|d|h|m|s}.
Rounding: "/UNIT" floors to start (now/d, now/w, now/M, now/y).
End boundaries: prefer the next unit's start.
Formats: only add "format" when inputs aren't default; epoch_millis allowed.
Buckets: use date_histogram with calendar_interval or fixed_interval.

NEURAL / SEMANTIC SEARCH
When to use: conceptual/semantic intent, or when user asks for semantic/neural/vector/embedding search.
When not to use: purely structured/exact queries, or when no semantic/knn_vector field or model_id is available.
Use the "neural" clause against the chosen field. Required: "query_text" and "k".
For "semantic" fields, omit model_id unless overriding. For "knn_vector", include model_id unless default is bound.
If no model id, do not generate neural clause.

FIELD SELECTION & PROXYING
Goal: pick the smallest set of mapping fields that best capture the user's intent.
When provided, and present in the mapping, prioritize query_fields.
Proxy Rule: If at least one field is loosely related, proceed with the best proxy; do NOT fallback to match_all due to ambiguity.
Micro Self-Check: verify fields exist; if not, swap to proxies. Only if no relevant fields exist at all, fallback to match_all.

==== OUTPUT FORMAT ====
Return EXACTLY ONE JSON object (valid OpenSearch request body).
No escapes, no code fences, no quotes around the whole object.
If nothing relevant exists, return exactly:
{"size":10,"query":{"match_all":{}}}

==== EXAMPLES ====
${parameters.examples:-}
==== TEMPLATE USE ====
Use this search template provided by the user as reference to generate the query: ${parameters.template:-}
Note that this template might contain terms that are not relevant to the question at hand; in that case ignore the template."#;

/// The default user prompt: OpenSearch's ([`OPENSEARCH_USER_PROMPT`]) with one line more, the
/// frequent values of the keyword fields (`${parameters.keyword_values}`, see
/// [`crate::planner::values`]), so that the model spells values as they are stored.
pub const DEFAULT_USER_PROMPT: &str = r#"Question: ${parameters.question}
Mapping: ${parameters.index_mapping:-}
Query Fields: ${parameters.query_fields:-}
Sample Document from index: ${parameters.sample_document:-}
Values of keyword fields (most frequent first): ${parameters.keyword_values:-none}
In UTC: ${parameters.current_time:-} format: yyyy-MM-dd'T'HH:mm:ss'Z'
Embedding Model ID for Neural Search: ${parameters.embedding_model_id:- not provided}

==== OUTPUT ====
GIVE THE OUTPUT PART ONLY IN YOUR RESPONSE (a single JSON object)
Output:"#;

/// The line [`DEFAULT_USER_PROMPT`] adds to OpenSearch's user prompt (after the sample document).
pub const KEYWORD_VALUES_LINE: &str =
    "Values of keyword fields (most frequent first): ${parameters.keyword_values:-none}\n";

/// OpenSearch QueryPlanningTool's own user prompt, unchanged: the baseline (pass it as
/// `query_planner_user_prompt` to plan without the keyword values in the prompt).
pub const OPENSEARCH_USER_PROMPT: &str = r#"Question: ${parameters.question}
Mapping: ${parameters.index_mapping:-}
Query Fields: ${parameters.query_fields:-}
Sample Document from index: ${parameters.sample_document:-}
In UTC: ${parameters.current_time:-} format: yyyy-MM-dd'T'HH:mm:ss'Z'
Embedding Model ID for Neural Search: ${parameters.embedding_model_id:- not provided}

==== OUTPUT ====
GIVE THE OUTPUT PART ONLY IN YOUR RESPONSE (a single JSON object)
Output:"#;

/// The system prompt of the template-selection call (`user_templates`). Not OpenSearch's own: this
/// one asks for the id alone, which every model can follow.
pub const TEMPLATE_SELECTION_SYSTEM_PROMPT: &str = r#"You choose the search template that best fits a question about an OpenSearch index.
Each template has a template_id and a template_description saying what kind of query it holds.
Reply with the template_id of the one template that best fits the question, and nothing else.
If no template fits the question, reply with: none"#;

/// The user prompt of the template-selection call.
pub const TEMPLATE_SELECTION_USER_PROMPT: &str = r#"Question: ${parameters.question}
Search templates: ${parameters.search_templates}
Template id:"#;

/// Worked examples for the system prompt (question, mapping, DSL), in the style of OpenSearch's
/// QueryPlanningTool examples.
pub const DEFAULT_EXAMPLES: &str = r#"Example 1 — numeric range and date math
Question: Show all products that cost more than 50 dollars in the last 30 days.
Mapping: {"properties":{"price":{"type":"float"},"created_at":{"type":"date"},"color":{"type":"keyword"}}}
DSL: {"query":{"bool":{"filter":[{"range":{"price":{"gt":50}}},{"range":{"created_at":{"gte":"now-30d/d","lte":"now"}}}]}}}

Example 2 — fuzzy text with an exact filter
Question: Find active records in London, tolerate typos.
Mapping: {"properties":{"city":{"type":"text","fields":{"keyword":{"type":"keyword","ignore_above":256}}},"status":{"type":"keyword"}}}
DSL: {"query":{"bool":{"must":[{"match":{"city":{"query":"London","fuzziness":"AUTO"}}}],"filter":[{"term":{"status":"active"}}]}}}

Example 3 — counts by group
Question: How many orders are there per status?
Mapping: {"properties":{"status":{"type":"keyword"},"order_id":{"type":"keyword"}}}
DSL: {"size":0,"aggs":{"orders_by_status":{"terms":{"field":"status"}}}}

Example 4 — top N items sorted
Question: Top 5 electronics by rating, then by number of reviews.
Mapping: {"properties":{"category":{"type":"keyword"},"rating":{"type":"float"},"reviews_count":{"type":"integer"}}}
DSL: {"size":5,"query":{"bool":{"filter":[{"term":{"category":"electronics"}}]}},"sort":[{"rating":{"order":"desc"}},{"reviews_count":{"order":"desc"}}]}

Example 5 — top N groups by a metric
Question: Top 3 categories by total sales.
Mapping: {"properties":{"category":{"type":"text","fields":{"keyword":{"type":"keyword"}}},"sales":{"type":"float"}}}
DSL: {"size":0,"aggs":{"top_categories":{"terms":{"field":"category.keyword","size":3,"order":{"total_sales":"desc"}},"aggs":{"total_sales":{"sum":{"field":"sales"}}}}}}

Example 6 — counting matches
Question: How many iris flowers of type versicolor are there?
Mapping: {"properties":{"species":{"type":"text","fields":{"keyword":{"type":"keyword"}}},"petal_length_in_cm":{"type":"float"}}}
DSL: {"size":0,"query":{"term":{"species.keyword":"versicolor"}},"track_total_hits":true}
"#;

/// Fills `${parameters.NAME}` and `${parameters.NAME:-default}` placeholders. A placeholder without
/// a value and without a default is left as it is (as OpenSearch's substitution does).
pub fn substitute(template: &str, parameters: &HashMap<String, String>) -> String {
    const OPEN: &str = "${parameters.";
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find(OPEN) {
        out.push_str(&rest[..start]);
        let after = &rest[start + OPEN.len()..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        match (parameters.get(name), default) {
            (Some(v), _) => out.push_str(v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => out.push_str(&rest[start..start + OPEN.len() + end + 1]),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_defaults_and_unknowns() {
        let mut p = HashMap::new();
        p.insert("question".to_owned(), "How many?".to_owned());
        p.insert("empty".to_owned(), String::new());
        assert_eq!(
            substitute(
                "Q: ${parameters.question} M: ${parameters.model:- none} E:${parameters.empty:-x} U:${parameters.unknown}",
                &p
            ),
            "Q: How many? M:  none E: U:${parameters.unknown}"
        );
        assert_eq!(
            substitute("broken ${parameters.question", &p),
            "broken ${parameters.question"
        );
        let user = substitute(DEFAULT_USER_PROMPT, &p);
        assert!(user.starts_with("Question: How many?\nMapping: \n"));
        assert!(user.contains("Embedding Model ID for Neural Search:  not provided"));
        assert!(user.contains("\nValues of keyword fields (most frequent first): none\nIn UTC: "));
    }

    #[test]
    fn the_default_user_prompt_is_opensearchs_with_the_values_line() {
        let at = OPENSEARCH_USER_PROMPT
            .find("In UTC:")
            .expect("the time line");
        let rebuilt = format!(
            "{}{KEYWORD_VALUES_LINE}{}",
            &OPENSEARCH_USER_PROMPT[..at],
            &OPENSEARCH_USER_PROMPT[at..]
        );
        assert_eq!(rebuilt, DEFAULT_USER_PROMPT);
    }
}
