//! The description of `execute_tool_plan`: how plans are written, then the tools a plan can call, in
//! one of the forms of [`ToolListing`]; where the tools chain ([`tools_chain`]), a worked example of
//! a chain.

use serde_json::Value;

use crate::signature::{documented_signature, tool_signature};

/// How the description of `execute_tool_plan` lists the tools a plan can call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolListing {
    /// The plan format, then `- name: description` per tool (no list when there are no tools).
    #[default]
    Descriptions,
    /// The plan format, the worked example of a chain where the tools chain (as [`Signatures`](Self::Signatures)),
    /// then each tool's name, JSON Schema of its arguments (and of its result, when it declares one)
    /// and description: for callers that offer only the planner (the model learns the arguments
    /// from here).
    Schemas,
    /// The plan format in few words, a worked example of a chain (only where some tool declares
    /// the fields of its result and there is another tool; elsewhere small models copy its steps into
    /// plans that need none), then each tool as a one-line
    /// signature (`name(arg: type): what it does`, see [`tool_signature`]): the shortest description
    /// that still tells a model every tool's arguments, for callers that offer only the planner.
    /// The plan schema is then shown without its explanations (the description has them), and the
    /// typed schema is the one to constrain decoding with.
    Signatures,
    /// As [`Signatures`](Self::Signatures), and under each signature one line per argument with
    /// what its schema says beyond the type: description, format, bounds, default (see
    /// [`documented_signature`](crate::documented_signature)). Everything the tools' schemas tell
    /// a model, in about half their tokens.
    Documented,
    /// The plan format alone: for callers that offer the tools to the model separately anyway (an
    /// agent), so the model reads each tool once and the prompt is shorter.
    Omitted,
    /// The plan format in few words and the worked example of [`Signatures`](Self::Signatures),
    /// without a list: for callers that offer only the planner and show the model the tools in the
    /// provider's own tool format, not callable (an agent's plan-only mode with
    /// `ToolDefinition::listed_only` tools).
    Native,
}

/// How plans are written, in full.
const PLAN_FORMAT: &str = "\
Run several tool calls as one plan instead of one call per turn. Each step is {id, tool, arguments}. \
A step uses an earlier step's result by putting \"$ref:<step_id>\" as an argument value (the whole \
result, keeping its JSON type) or \"$ref:<step_id>.<field>\" (a field; nested fields and array \
indexes with more dots, e.g. \"$ref:s1.items.0.name\"; a missing field gives null); \"$ref:\" inside \
longer text inserts the value as text. Steps that do not depend on each other run in parallel. \
List in output_steps only the steps whose results you need (all are returned if omitted). If a step \
fails, the steps that depend on it are skipped and every failure is reported; the others still run. \
A plan cannot call execute_tool_plan.";

/// How plans are written, in few words, for descriptions that list the tools as signatures (small
/// models, short prompts).
const COMPACT_PLAN_FORMAT: &str = "\
Runs tool calls as one plan. steps: [{id, tool, arguments}]. An argument value \"$ref:ID\" is the \
result of step ID, \"$ref:ID.field\" one field of it; inside longer text it is inserted as text. \
Steps run in parallel unless one refers to another. output_steps: the ids whose results you need. \
A failed step skips the steps that depend on it.";

/// What the answer example says of the `answer` field after the plan.
const ANSWER_FIELD_USE: &str = " answer is the reply to the user with $ref: where each result \
goes: you do not know the results yet, so never write a value yourself. It is null when the reply \
needs a judgement on the results (yes or no, which one is larger): you then reply when they come \
back.";

/// The sentence of [`ANSWER_FIELD_USE`] about judgements, which [`judgement_description`] replaces.
const JUDGEMENT_NULL: &str = "It is null when the reply \
needs a judgement on the results (yes or no, which one is larger): you then reply when they come \
back.";

/// What a question that asks for a judgement on the results reads of the `answer` field instead of
/// [`JUDGEMENT_NULL`]: a choice.
const JUDGEMENT_CHOICE: &str = "This question asks for a judgement on the results, so answer is a \
choice: {\"if\": a condition on the results, e.g. \"$ref:a.temp > $ref:b.temp\" or \
\"$ref:w.condition == 'snow'\" (== != < > <= >=, and, or, not), \"then\": the reply when it holds, \
\"else\": the reply when it does not}. The condition compares the results itself: plan only the \
lookups it reads.";

/// The form of the reply a question that asks for a judgement on the results wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judgement {
    /// Yes or no ("Is it raining where Bob lives?").
    YesNo,
    /// One of the options the question names ("Which city is colder, Berlin or London?").
    Between,
}

/// The planner's description as a question that asks for a judgement on the results reads it: the
/// `answer` field is a choice ([`choice_answer_schema`](crate::choice_answer_schema)) instead of
/// null. Where the description has the worked example of a chain with its answer
/// ([`answer_example`]), the example becomes a plan for a judgement of that form: the same lookups,
/// no step that compares (the condition does), and a choice as the answer. Elsewhere only the
/// sentence on judgements changes. Other questions read the description as it is, so that their
/// plans do not change. `None` when the description does not explain the field.
pub fn judgement_description(description: &str, judgement: Judgement) -> Option<String> {
    let example = answer_example();
    if description.contains(&example) {
        return Some(description.replace(&example, &judgement_example(judgement)));
    }
    description
        .contains(JUDGEMENT_NULL)
        .then(|| description.replace(JUDGEMENT_NULL, JUDGEMENT_CHOICE))
}

/// A tool as the description lists it.
pub(crate) struct ListedTool<'t> {
    /// Its name.
    pub(crate) name: &'t str,
    /// What it does.
    pub(crate) description: &'t str,
    /// The JSON Schema of its arguments.
    pub(crate) schema: &'t Value,
    /// The JSON Schema of its output, when it declares one.
    pub(crate) output: Option<&'t Value>,
}

/// The description of `execute_tool_plan` listing `tools` as `listing` says; with the answer example
/// instead of the default one when plans have an `answer` field.
pub(crate) fn describe(
    listing: ToolListing,
    answer_field: bool,
    tools: &[ListedTool<'_>],
) -> String {
    let format = match listing {
        ToolListing::Signatures | ToolListing::Documented | ToolListing::Native => {
            COMPACT_PLAN_FORMAT
        }
        _ => PLAN_FORMAT,
    };
    let example = match listing {
        ToolListing::Descriptions | ToolListing::Omitted => String::new(),
        _ if !tools_chain(tools) && answer_field => format!("\n{}", ANSWER_FIELD_USE.trim_start()),
        _ if !tools_chain(tools) => String::new(),
        _ if answer_field => answer_example(),
        _ => worked_example(None, r#""output_steps": ["e"]"#),
    };
    let mut text = format!("{format}{example}");
    let heading = match listing {
        ToolListing::Descriptions if tools.is_empty() => return text,
        ToolListing::Descriptions | ToolListing::Signatures | ToolListing::Documented => {
            "\nTools a plan can call:"
        }
        ToolListing::Schemas => {
            "\nTools a plan can call (name, JSON Schema of its arguments, -> that of its result when \
             known, what it does):"
        }
        ToolListing::Omitted | ToolListing::Native => return text,
    };
    text.push_str(heading);
    for tool in tools {
        text.push_str("\n- ");
        text.push_str(&match listing {
            ToolListing::Schemas => match tool.output {
                Some(output) => format!(
                    "{} {} -> {}: {}",
                    tool.name, tool.schema, output, tool.description
                ),
                None => format!("{} {}: {}", tool.name, tool.schema, tool.description),
            },
            ToolListing::Signatures => {
                tool_signature(tool.name, tool.description, tool.schema, tool.output)
            }
            ToolListing::Documented => {
                documented_signature(tool.name, tool.description, tool.schema, tool.output)
            }
            _ => format!("{}: {}", tool.name, tool.description),
        });
    }
    text
}

/// Whether a plan over `tools` can chain knowingly: some tool declares the fields of its result
/// (an output schema, at the top or of the objects of a top-level list) and there is another tool
/// to pass them to. The worked example of a chain ([`worked_example`]), which references results'
/// fields, is shown only then: it teaches small models to chain lookups (the agent bench's chains),
/// and where no result's fields are known they copy its steps into plans that need none (BFCL's
/// multiple category with the local model: 8/16 with it, 14/16 without).
pub(crate) fn tools_chain(tools: &[ListedTool<'_>]) -> bool {
    tools.len() > 1
        && tools
            .iter()
            .any(|t| t.output.is_some_and(|o| !output_fields(o).is_empty()))
}

/// The field names of an output schema: its properties, or those of its items when it is a list.
fn output_fields(schema: &Value) -> Vec<&str> {
    let mut fields: Vec<&str> = property_names(schema).collect();
    if let Some(items) = schema.get("items") {
        fields.extend(property_names(items));
    }
    fields
}

/// The names of a schema's `properties`.
fn property_names(schema: &Value) -> impl Iterator<Item = &str> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|p| p.keys().map(String::as_str))
}

/// A worked example of a chain, for descriptions meant for small models (they copy the shape of its
/// plan closely): how much more the product of order A7 costs than that of order B2, through
/// `get_order` for each order, `get_product` for each result, and `calculator`. Two entities, each
/// looked up in two steps, then combined: with the one-order example before it, the 1.5B model
/// planned chains over two or three people short (agent bench, bench/README.md). `thought_end` goes at the end of the plan's thought, after the lookups it lists;
/// `ending` is the plan's last field as JSON text (the default example's is `"output_steps": ["e"]`).
pub(crate) fn worked_example(thought_end: Option<&str>, ending: &str) -> String {
    let thought_end = thought_end.map(|t| format!(", {t}")).unwrap_or_default();
    example_plan(
        "how much more the product of order A7 costs than the product of order B2",
        &format!("calculator subtracts the prices{thought_end}"),
        ", {\"id\": \"e\", \"tool\": \"calculator\", \"arguments\": {\"expression\": \"$ref:p1.price - $ref:p2.price\"}}",
        ending,
    )
}

/// The worked example's plan, for `question`: the lookups of both orders' products, then
/// `more_steps` (JSON text, each step after a comma), with `thought_end` at the end of the thought
/// and `ending` as the plan's last field.
fn example_plan(question: &str, thought_end: &str, more_steps: &str, ending: &str) -> String {
    format!(
        "\nExample, for {question}: \
         {{\"thought\": \"get_order gives the sku of orders A7 and B2, get_product gives the price of \
         each sku, {thought_end}.\", \"steps\": [{{\"id\": \"o1\", \
         \"tool\": \"get_order\", \"arguments\": {{\"order_id\": \"A7\"}}}}, {{\"id\": \"o2\", \
         \"tool\": \"get_order\", \"arguments\": {{\"order_id\": \"B2\"}}}}, {{\"id\": \"p1\", \
         \"tool\": \"get_product\", \"arguments\": {{\"sku\": \"$ref:o1.sku\"}}}}, {{\"id\": \"p2\", \
         \"tool\": \"get_product\", \"arguments\": {{\"sku\": \"$ref:o2.sku\"}}}}{more_steps}], \
         {ending}}}. A field can only be referenced from a step whose tool returns it: plan a step for \
         every lookup the answer needs."
    )
}

/// The worked example for a question that asks for a judgement of the form `judgement`: the lookups
/// of the chain example, no step that compares them, and a choice whose condition compares the
/// prices, then what the choice is. The 1.5B model, shown the chain example with its calculator
/// step and the choice only described, planned a `compare_data` step and wrote a condition on its
/// flags (`$ref:c.same`), which says nothing of which is colder or whether both are sunny.
fn judgement_example(judgement: Judgement) -> String {
    let (question, then, otherwise) = match judgement {
        Judgement::YesNo => (
            "whether the product of order A7 costs more than the product of order B2",
            "Yes, it costs more.",
            "No, it does not cost more.",
        ),
        Judgement::Between => ("which order's product costs more, A7 or B2", "A7", "B2"),
    };
    let mut example = example_plan(
        question,
        "the answer compares the prices",
        "",
        &format!(
            "\"answer\": {{\"if\": \"$ref:p1.price > $ref:p2.price\", \"then\": \"{then}\", \"else\": \
             \"{otherwise}\"}}"
        ),
    );
    example.push(' ');
    example.push_str(JUDGEMENT_CHOICE);
    example
}

/// The answer of the worked example when plans may end with their answer ([`answer_example`]).
pub const EXAMPLE_ANSWER: &str =
    "The product of order A7 costs $ref:e more than the product of order B2.";

/// The worked example of the compact description when plans may end with their answer: the chain of
/// the default example, then the answer written with the result inserted, and what the field is for.
pub fn answer_example() -> String {
    let mut example = worked_example(
        Some("the answer puts it into words"),
        &format!(r#""answer": "{EXAMPLE_ANSWER}""#),
    );
    example.push_str(ANSWER_FIELD_USE);
    example
}

/// Words in a row of [`EXAMPLE_ANSWER`] that make an answer a copy of it.
const COPIED_WORDS: usize = 4;

/// Whether `answer` copies the worked example's answer ([`EXAMPLE_ANSWER`]): it has two runs of
/// four of its words in a row (references left out, case ignored) that `question` does not. Small
/// models copy the example's sentence when they have no answer to write ("The product of order A7
/// costs $ref:r", asked whether it rains); such an answer is not the reply to the question.
pub fn copies_example_answer(answer: &str, question: &str) -> bool {
    let example = words(EXAMPLE_ANSWER);
    let answer = words(answer).join(" ");
    let question = words(question).join(" ");
    let copied = example
        .windows(COPIED_WORDS)
        .filter(|run| {
            let run = run.join(" ");
            contains_words(&answer, &run) && !contains_words(&question, &run)
        })
        .count();
    copied >= 2
}

/// The words of `text`, lowercase, without `$ref:` references and punctuation.
fn words(text: &str) -> Vec<String> {
    text.split_whitespace()
        .filter(|w| !w.starts_with("$ref:"))
        .map(|w| {
            w.chars()
                .filter(|c| c.is_alphanumeric())
                .flat_map(char::to_lowercase)
                .collect::<String>()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// Whether the words `text` hold the words `run` in a row.
fn contains_words(text: &str, run: &str) -> bool {
    format!(" {text} ").contains(&format!(" {run} "))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::copies_example_answer as copies;
    use super::{
        JUDGEMENT_CHOICE, JUDGEMENT_NULL, Judgement, ListedTool, ToolListing, answer_example,
        describe, judgement_description, tools_chain,
    };

    fn tool<'t>(name: &'t str, schema: &'t Value, output: Option<&'t Value>) -> ListedTool<'t> {
        ListedTool {
            name,
            description: "does things",
            schema,
            output,
        }
    }

    #[test]
    fn tools_chain_when_a_result_has_declared_fields_and_another_tool_can_take_them() {
        let city = json!({"type": "object", "properties": {"location": {"type": "string"}}});
        let name = json!({"type": "object", "properties": {"name": {"type": "string"}}});
        let user = json!({"type": "object", "properties": {"city": {}, "team": {}}});
        let users = json!({"type": "array", "items": user.clone()});
        let opaque = json!({"type": "object"});
        let chained = [
            tool("get_user", &name, Some(&user)),
            tool("get_weather", &city, None),
        ];
        assert!(tools_chain(&chained));
        // The same through a list of users.
        assert!(tools_chain(&[
            tool("find_users", &name, Some(&users)),
            tool("get_weather", &city, None),
        ]));
        // No output declared, or one without fields, or no other tool: no chain.
        assert!(!tools_chain(&[
            tool("get_user", &name, None),
            tool("get_weather", &city, None),
        ]));
        assert!(!tools_chain(&[
            tool("get_user", &name, Some(&opaque)),
            tool("get_weather", &city, None),
        ]));
        assert!(!tools_chain(&[tool("get_user", &name, Some(&user))]));
        // The example is in the description exactly when the tools chain; the answer field is
        // explained either way.
        let unchained = [
            tool("get_user", &name, None),
            tool("get_weather", &city, None),
        ];
        for listing in [
            ToolListing::Documented,
            ToolListing::Schemas,
            ToolListing::Native,
        ] {
            assert!(describe(listing, false, &chained).contains("Example, for"));
            assert!(!describe(listing, false, &unchained).contains("Example, for"));
            assert!(describe(listing, true, &unchained).contains("answer is the reply"));
            assert!(describe(listing, true, &chained).contains("answer is the reply"));
        }
    }

    #[test]
    fn a_judgement_reads_the_choice_where_others_read_null() {
        let schema = json!({"type": "object", "properties": {"x": {"type": "string"}}});
        let output = json!({"type": "object", "properties": {"y": {"type": "string"}}});
        let chained = [tool("a", &schema, Some(&output)), tool("b", &schema, None)];
        let single = [tool("a", &schema, None)];
        // Without the worked example, only the sentence on judgements changes.
        let text = describe(ToolListing::Documented, true, &single);
        assert!(text.contains(JUDGEMENT_NULL), "{text}");
        for judgement in [Judgement::YesNo, Judgement::Between] {
            let judged = judgement_description(&text, judgement).unwrap();
            assert!(!judged.contains(JUDGEMENT_NULL));
            assert!(
                judged.contains("so answer is a choice: {\"if\""),
                "{judged}"
            );
            assert_eq!(
                judged.replace(JUDGEMENT_CHOICE, ""),
                text.replace(JUDGEMENT_NULL, "")
            );
        }
        // With it, the example becomes a judgement of the question's form: the same lookups, no
        // calculator, a choice as the answer.
        let text = describe(ToolListing::Documented, true, &chained);
        assert!(text.contains(&answer_example()), "{text}");
        let yes_no = judgement_description(&text, Judgement::YesNo).unwrap();
        let between = judgement_description(&text, Judgement::Between).unwrap();
        for (judged, then) in [
            (&yes_no, "\"then\": \"Yes, "),
            (&between, "\"then\": \"A7\""),
        ] {
            assert!(!judged.contains(JUDGEMENT_NULL), "{judged}");
            assert!(judged.contains(JUDGEMENT_CHOICE), "{judged}");
            assert!(!judged.contains("calculator subtracts"), "{judged}");
            assert!(
                judged.contains("\"if\": \"$ref:p1.price > $ref:p2.price\""),
                "{judged}"
            );
            assert!(judged.contains(then), "{judged}");
            assert!(
                judged.contains("\"sku\": \"$ref:o2.sku\"}}], \"answer\": {"),
                "{judged}"
            );
            // The tools are listed as before.
            let tools = text.find("\nTools a plan can call:").unwrap();
            assert!(judged.ends_with(&text[tools..]), "{judged}");
        }
        // A description without the answer field has nothing to change.
        let text = describe(ToolListing::Documented, false, &chained);
        assert_eq!(judgement_description(&text, Judgement::YesNo), None);
    }

    #[test]
    fn copies_of_the_example_answer() {
        let question = "Is it raining where Bob lives? Answer yes or no.";
        assert!(copies(
            "The product of order A7 costs $ref:r the user>",
            question
        ));
        assert!(copies("the PRODUCT of order a7, costs", question));
        assert!(!copies("It is $ref:w.condition where Bob lives.", question));
        // Words the question has are the user's, not the example's.
        assert!(!copies(
            "The product of order A7 costs $ref:p.price.",
            "How much does the product of order A7 cost?"
        ));
    }
}
