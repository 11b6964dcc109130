//! Reading a model reply: the text the response filter selects, the first JSON object in it,
//! `size` / `from` / `k` written as whole floats made integers, everything wrong with the body, and
//! the repair prompt that sends the problems back to the model.

use serde_json::{Value, json};
use serde_json_path::JsonPath;
use toolplan_llm::ChatResponse;

use crate::check;
use crate::mapping::Mapping;
use crate::params::apply_response_filter;

/// The reply text of a response, and the text the response filter selects from the raw response
/// (the reply text itself when there is no filter; `None` when the filter matches nothing).
pub(super) fn reply_text(
    response: &ChatResponse,
    filter: Option<&JsonPath>,
) -> (String, Option<String>) {
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

/// The message that sends a reply's problems back to the model.
pub(super) fn repair_prompt(problems: &[String]) -> String {
    let mut s = String::from("That query cannot be used:\n");
    for p in problems {
        s.push_str("- ");
        s.push_str(p);
        s.push('\n');
    }
    s.push_str("Return the corrected query: a single JSON object, nothing else.\nOutput:");
    s
}

/// The message that sends what the run of a valid query showed back to the model.
pub(super) fn observation_prompt(observations: &[String]) -> String {
    let mut s = String::from("That query ran on the index, and:\n");
    for o in observations {
        s.push_str("- ");
        s.push_str(o);
        s.push('\n');
    }
    s.push_str(
        "Return the query that answers the question: a single JSON object, nothing else.\nOutput:",
    );
    s
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
}
