//! A first plan checked against its question before it runs (numbers the question gives that no
//! step uses, tools its own thought names that no step calls, options it names that no step sets,
//! steps it does not ask for) and a plan that failed through its own references: each goes back
//! once, and the reply must call a tool. Results named without their `$ref:` marker get it. What
//! the question leaves no doubt about is fixed in place: an option it names set, a step that is
//! another's twin but for an option it contradicts dropped.

use std::sync::Arc;

use serde_json::{Value, json};
use toolplan_agent::scripted::ScriptedModel;
use toolplan_agent::{Agent, Planning};
use toolplan_demo as demo;
use toolplan_llm::{Message, ReplyStart, ToolChoice};
use toolplan_planner::FIX_PLAN_HINT;

use crate::support::tool_messages;

fn planning_agent(model: Arc<ScriptedModel>, repairs: usize) -> Agent {
    Agent::builder("test")
        .model(model)
        .tools(demo::tools())
        .planning(Planning::Only)
        .repairs(repairs)
        .max_turns(6)
        .build()
        .unwrap()
}

fn choices(model: &ScriptedModel) -> Vec<ToolChoice> {
    model
        .requests()
        .iter()
        .map(|r| r.tool_choice.clone())
        .collect()
}

/// The start given to each reply: the arguments of its calls and where it was left open.
fn starts(model: &ScriptedModel) -> Vec<Option<(Vec<Value>, Option<String>)>> {
    model
        .requests()
        .iter()
        .map(|r| {
            r.reply_start.as_ref().map(|s: &ReplyStart| {
                (
                    s.calls.iter().map(|c| c.arguments.clone()).collect(),
                    s.open_in.clone(),
                )
            })
        })
        .collect()
}

fn weather(id: &str, city: &str) -> Value {
    json!({"id": id, "tool": "get_weather", "arguments": {"location": city}})
}

/// A first plan `short` sent back by a check and `whole` written in its place, then `answer`:
/// checks that one repair made the difference, the reply that completed the plan had to call a
/// tool and started with `short`, open for more steps. Returns the tool results the model read.
async fn sent_back_then_completed(
    question: &str,
    short: Value,
    whole: Value,
    answer: &str,
) -> Vec<Message> {
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", short.clone())]),
        ScriptedModel::calls(&[("execute_tool_plan", whole)]),
        ScriptedModel::answer(answer),
    ]));
    let out = planning_agent(Arc::clone(&model), 1)
        .interact(question)
        .await
        .unwrap();
    assert_eq!(out.answer, answer);
    assert_eq!((out.record.repairs, out.record.repaired), (1, 1));
    assert_eq!(out.record.plans, 1);
    assert_eq!(
        choices(&model),
        [ToolChoice::Auto, ToolChoice::Required, ToolChoice::Auto]
    );
    assert_eq!(
        starts(&model),
        [None, Some((vec![short], Some("steps".to_owned()))), None]
    );
    tool_messages(&out.messages).into_iter().cloned().collect()
}

const QUESTION: &str = "Add the temperatures of London and Paris, then multiply the sum by 2.";

#[tokio::test]
async fn a_plan_that_leaves_out_a_number_of_the_question_goes_back_once() {
    let short = json!({"steps": [weather("l", "London"), weather("p", "Paris"),
        {"id": "s", "tool": "calculator", "arguments": {"expression": "$ref:l.temp + $ref:p.temp"}}]});
    let whole = json!({"steps": [weather("l", "London"), weather("p", "Paris"),
        {"id": "s", "tool": "calculator", "arguments": {"expression": "($ref:l.temp + $ref:p.temp) * 2"}}]});
    let results = sent_back_then_completed(QUESTION, short, whole, "54").await;
    // The first plan did not run: the model read what it left out.
    assert!(results[0].is_error);
    assert!(
        results[0]
            .content
            .starts_with("Error: the plan was not run. The question gives 2, but no step uses it"),
        "{}",
        results[0].content
    );
    assert!(
        results[1].content.contains("- s: 54"),
        "{}",
        results[1].content
    );
}

/// What each request holds the plan's steps to, as `held` reads it of the plan tool's
/// `StepReferences` (nothing for a request without them).
fn holds<T: Default>(
    model: &ScriptedModel,
    held: impl Fn(&toolplan_llm::StepReferences) -> T,
) -> Vec<T> {
    model
        .requests()
        .iter()
        .map(|r| {
            r.tools
                .iter()
                .find(|t| t.name == "execute_tool_plan")
                .and_then(|t| t.step_references.as_ref())
                .map(&held)
                .unwrap_or_default()
        })
        .collect()
}

/// The numbers each request holds the plan's steps to (`StepReferences::required_numbers`).
fn required_numbers(model: &ScriptedModel) -> Vec<Vec<Vec<String>>> {
    holds(model, |s| s.required_numbers.clone())
}

#[tokio::test]
async fn the_first_plan_is_held_to_the_question_s_numbers_while_it_is_written() {
    let plan = json!({"steps": [weather("l", "London"), weather("p", "Paris"),
        {"id": "s", "tool": "calculator", "arguments": {"expression": "($ref:l.temp + $ref:p.temp) * 2"}}]});
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", plan.clone())]),
        ScriptedModel::answer("54"),
    ]));
    let question = "Add the temperatures of London and Paris, multiply the sum by 2, and take 5%.";
    planning_agent(Arc::clone(&model), 1)
        .interact(question)
        .await
        .unwrap();
    // The first request only: a percentage also counts as a fraction.
    let two = vec!["2".to_owned()];
    let five = vec!["5".to_owned(), "0.05".to_owned()];
    assert_eq!(required_numbers(&model), [vec![two, five], vec![]]);
    // Without repairs, the checks are off, and so is this.
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", plan)]),
        ScriptedModel::answer("54"),
    ]));
    planning_agent(Arc::clone(&model), 0)
        .interact(question)
        .await
        .unwrap();
    assert!(required_numbers(&model).iter().all(Vec::is_empty));
}

#[tokio::test]
async fn the_first_plan_is_held_to_the_options_a_question_chooses_between() {
    let plan = json!({"steps": [weather("b", "Berlin"), weather("l", "London")]});
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", plan)]),
        ScriptedModel::answer("Berlin"),
    ]));
    planning_agent(Arc::clone(&model), 1)
        .interact("Which city is colder right now, Berlin or London? Answer with the city name.")
        .await
        .unwrap();
    let words = holds(&model, |s| s.required_words.clone());
    // The first request only.
    assert_eq!(
        words,
        [vec!["Berlin".to_owned(), "London".to_owned()], vec![]]
    );
}

#[tokio::test]
async fn a_question_naming_thousands_of_options_holds_the_plan_to_a_few() {
    let many = (0..5_000)
        .map(|i| format!("City{i}"))
        .collect::<Vec<_>>()
        .join(" or ");
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[(
            "execute_tool_plan",
            json!({"steps": [weather("a", "City0")]}),
        )]),
        ScriptedModel::answer("City0"),
    ]));
    planning_agent(Arc::clone(&model), 1)
        .interact(&format!("Which is warmest, {many}?"))
        .await
        .unwrap();
    let words = holds(&model, |s| s.required_words.clone());
    assert_eq!(words[0].len(), 16);
    assert_eq!(words[0][..2], ["City0", "City1"]);
}

#[tokio::test]
async fn a_plan_that_stops_before_its_own_thought_goes_back_open_for_more_steps() {
    let question = "How many degrees warmer is Cairo than Oslo?";
    let short = json!({
        "thought": "get_weather gives both temperatures, calculator subtracts them.",
        "steps": [weather("c", "Cairo"), weather("o", "Oslo")]
    });
    let whole = json!({
        "thought": "get_weather gives both temperatures, calculator subtracts them.",
        "steps": [weather("c", "Cairo"), weather("o", "Oslo"),
            {"id": "d", "tool": "calculator", "arguments": {"expression": "$ref:c.temp - $ref:o.temp"}}]
    });
    let results = sent_back_then_completed(question, short, whole, "28 degrees").await;
    assert!(
        results[0].content.starts_with(
            "Error: the plan was not run. Its thought names calculator, but no step calls it"
        ),
        "{}",
        results[0].content
    );
    assert!(
        results[1].content.contains("- d: 28"),
        "{}",
        results[1].content
    );
    // A thought whose tools the steps all call passes.
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[(
            "execute_tool_plan",
            json!({"thought": "get_weather for Cairo.", "steps": [weather("c", "Cairo")]}),
        )]),
        ScriptedModel::answer("35"),
    ]));
    let out = planning_agent(Arc::clone(&model), 1)
        .interact("What is the temperature in Cairo?")
        .await
        .unwrap();
    assert_eq!((out.record.llm_calls, out.record.repairs), (2, 0));
}

#[tokio::test]
async fn a_plan_sent_back_unchanged_runs_and_no_repairs_means_no_check() {
    let short = json!({"steps": [weather("l", "London"), weather("p", "Paris"),
        {"id": "s", "tool": "calculator", "arguments": {"expression": "$ref:l.temp + $ref:p.temp"}}]});
    // Sent back, the model keeps its plan: it runs (the check is made once).
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", short.clone())]),
        ScriptedModel::calls(&[("execute_tool_plan", short.clone())]),
        ScriptedModel::answer("27"),
    ]));
    let out = planning_agent(Arc::clone(&model), 1)
        .interact(QUESTION)
        .await
        .unwrap();
    assert_eq!(out.record.llm_calls, 3);
    assert_eq!(out.record.plans, 1);
    // Without repairs, the first plan runs as written.
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", short)]),
        ScriptedModel::answer("27"),
    ]));
    let out = planning_agent(Arc::clone(&model), 0)
        .interact(QUESTION)
        .await
        .unwrap();
    assert_eq!((out.record.llm_calls, out.record.repairs), (2, 0));
    assert!(tool_messages(&out.messages)[0].content.contains("- s: 27"));
}

#[tokio::test]
async fn a_step_the_question_does_not_ask_for_goes_back_and_the_plan_is_written_anew() {
    // The question is about London's weather; the directory lookup is a step nobody asked for.
    let extra = json!({"steps": [weather("l", "London"),
        {"id": "a", "tool": "get_user", "arguments": {"name": "Alice"}}]});
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", extra)]),
        ScriptedModel::calls(&[(
            "execute_tool_plan",
            json!({"steps": [weather("l", "London")]}),
        )]),
        ScriptedModel::answer("Cloudy, 14 °C."),
    ]));
    let out = planning_agent(Arc::clone(&model), 1)
        .interact("What is the weather in London?")
        .await
        .unwrap();
    let results = tool_messages(&out.messages);
    assert!(results[0].is_error);
    assert!(
        results[0].content.starts_with(
            "Error: the plan was not run. Step a (get_user) calls a tool that the question does \
             not ask about."
        ),
        "{}",
        results[0].content
    );
    // Only the corrected plan ran, with its one step.
    assert_eq!((out.record.plans, out.record.plan_steps), (1, 1));
    assert_eq!(out.record.unasked_steps, 1);
    assert_eq!((out.record.repairs, out.record.repaired), (1, 1));
    // The corrected plan is written anew, not continued from the first.
    assert_eq!(starts(&model), [None, None, None]);
    assert_eq!(
        choices(&model),
        [ToolChoice::Auto, ToolChoice::Required, ToolChoice::Auto]
    );

    // A lookup whose result another step reads is asked for: the plan runs as written.
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[(
            "execute_tool_plan",
            json!({"steps": [{"id": "a", "tool": "get_user", "arguments": {"name": "Alice"}},
                {"id": "w", "tool": "get_weather", "arguments": {"location": "$ref:a.city"}}]}),
        )]),
        ScriptedModel::answer("Sunny."),
    ]));
    let out = planning_agent(Arc::clone(&model), 1)
        .interact("What is the weather in London for Alice?")
        .await
        .unwrap();
    assert_eq!((out.record.repairs, out.record.unasked_steps), (0, 0));
    assert_eq!(out.record.plan_steps, 2);
}

#[tokio::test]
async fn a_result_named_without_its_marker_is_inserted() {
    let bare = json!({"steps": [weather("w", "Paris"), weather("b", "Berlin"),
        {"id": "c", "tool": "calculator", "arguments": {"expression": "(w.temp + b.temp) / 2"}}]});
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", bare)]),
        ScriptedModel::answer("12.5"),
    ]));
    let out = planning_agent(Arc::clone(&model), 1)
        .interact("Average temperature of Paris and Berlin?")
        .await
        .unwrap();
    // One plan, run with the references marked; the conversation holds the marked plan.
    assert_eq!((out.record.llm_calls, out.record.repairs), (2, 0));
    let result = &tool_messages(&out.messages)[0].content;
    assert!(result.contains("- c: 12.5"), "{result}");
    let plan = &out
        .messages
        .iter()
        .find_map(|m| m.tool_calls.first())
        .unwrap()
        .arguments;
    assert_eq!(
        plan["steps"][2]["arguments"]["expression"],
        "($ref:w.temp + $ref:b.temp) / 2"
    );
}

/// User records as `echo` returns them.
const CAROL: &str = r#"{"name": "Carol", "city": "Paris"}"#;
const HEIDI: &str = r#"{"name": "Heidi", "city": "New York"}"#;

#[tokio::test]
async fn a_plan_that_names_fields_its_tools_do_not_return_goes_back_before_it_runs() {
    let wrong = json!({"steps": [
        {"id": "o", "tool": "get_user", "arguments": {"name": "Carol"}},
        {"id": "c", "tool": "calculator", "arguments": {"expression": "$ref:o.temperature + 1"}}]});
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", wrong)]),
        ScriptedModel::answer("I need the weather too."),
    ]));
    let out = planning_agent(Arc::clone(&model), 1)
        .interact("Carol's temperature plus one?")
        .await
        .unwrap();
    let results = tool_messages(&out.messages);
    assert!(
        results[0].content.contains(
            "$ref:o.temperature names no field of what step 'o' returns: get_user's result has name, city, team"
        ),
        "{}",
        results[0].content
    );
    // Nothing ran, and the next reply had to be a corrected plan.
    assert!(
        results[0]
            .content
            .starts_with("Error: the plan was not run.")
    );
    assert_eq!(choices(&model), [ToolChoice::Auto, ToolChoice::Required]);
}

#[tokio::test]
async fn a_plan_that_failed_through_its_references_must_be_corrected() {
    // The lookups of the weather were left out: the users have no temperature. (The users come
    // from `echo`, which declares no output schema: with `get_user`'s, the plan would not run.)
    let wrong = json!({"steps": [
        {"id": "o", "tool": "echo", "arguments": {"text": CAROL}},
        {"id": "h", "tool": "echo", "arguments": {"text": HEIDI}},
        {"id": "c", "tool": "calculator", "arguments": {"expression": "$ref:o.temperature + $ref:h.temperature"}}]});
    let fixed = json!({"steps": [
        {"id": "o", "tool": "echo", "arguments": {"text": CAROL}},
        {"id": "h", "tool": "echo", "arguments": {"text": HEIDI}},
        {"id": "a", "tool": "get_weather", "arguments": {"location": "$ref:o.city"}},
        {"id": "b", "tool": "get_weather", "arguments": {"location": "$ref:h.city"}},
        {"id": "c", "tool": "calculator", "arguments": {"expression": "$ref:a.temp + $ref:b.temp"}}]});
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", wrong.clone())]),
        ScriptedModel::calls(&[("execute_tool_plan", fixed)]),
        ScriptedModel::answer("36"),
    ]));
    let out = planning_agent(Arc::clone(&model), 1)
        .interact("Sum of the temperatures where Carol and Heidi live?")
        .await
        .unwrap();
    let results = tool_messages(&out.messages);
    assert!(
        results[0].content.ends_with(FIX_PLAN_HINT),
        "{}",
        results[0].content
    );
    assert!(
        results[1].content.contains("- c: 36"),
        "{}",
        results[1].content
    );
    assert_eq!(
        choices(&model),
        [ToolChoice::Auto, ToolChoice::Required, ToolChoice::Auto]
    );
    assert_eq!(out.record.repairs, 1);
    // The correction starts with the steps that succeeded, open for more.
    let kept = json!({"steps": [
        {"id": "o", "tool": "echo", "arguments": {"text": CAROL}},
        {"id": "h", "tool": "echo", "arguments": {"text": HEIDI}}]});
    assert_eq!(
        starts(&model),
        [None, Some((vec![kept], Some("steps".to_owned()))), None]
    );

    // A step that fails on its own (the tool's error) is not the plan's fault: the model decides.
    let failing = json!({"steps": [{"id": "f", "tool": "fail", "arguments": {"message": "down"}}]});
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", failing)]),
        ScriptedModel::answer("Try it. It failed."),
    ]));
    let out = planning_agent(Arc::clone(&model), 1)
        .interact("Try it.")
        .await
        .unwrap();
    // The question written out again in front of the answer is not part of it.
    assert_eq!(out.answer, "It failed.");
    assert_eq!(starts(&model), [None, None]);
    assert!(
        !tool_messages(&out.messages)[0]
            .content
            .contains(FIX_PLAN_HINT)
    );
    assert_eq!(choices(&model), [ToolChoice::Auto, ToolChoice::Auto]);
    assert_eq!(out.record.repairs, 0);
}

#[tokio::test]
async fn direct_calls_are_checked_where_the_planner_is_offered_and_only_there() {
    let one = || ScriptedModel::calls(&[("calculator", json!({"expression": "2 + 3"}))]);
    let both = ScriptedModel::calls(&[
        ("calculator", json!({"expression": "2 + 3"})),
        ("calculator", json!({"expression": "4 * 5"})),
    ]);
    let question = "What are 2 + 3 and 4 * 5?";
    let model = Arc::new(ScriptedModel::new([
        one(),
        both,
        ScriptedModel::answer("5 and 20"),
    ]));
    let out = crate::support::agent(Arc::clone(&model), true)
        .interact(question)
        .await
        .unwrap();
    let results = tool_messages(&out.messages);
    assert!(
        results[0].content.starts_with(
            "Error: the calls were not run. The question gives 4 and 5, but no call uses them"
        ),
        "{}",
        results[0].content
    );
    assert_eq!(
        (results[1].content.as_str(), results[2].content.as_str()),
        ("5", "20")
    );
    assert_eq!(
        choices(&model),
        [ToolChoice::Auto, ToolChoice::Required, ToolChoice::Auto]
    );
    // The completing reply starts with the call made, open for one more.
    assert_eq!(
        starts(&model),
        [
            None,
            Some((vec![json!({"expression": "2 + 3"})], None)),
            None
        ]
    );
    // Without planning, the model's calls are its own: they run.
    let model = Arc::new(ScriptedModel::new([one(), ScriptedModel::answer("5")]));
    let out = crate::support::agent(Arc::clone(&model), false)
        .interact(question)
        .await
        .unwrap();
    assert_eq!(tool_messages(&out.messages)[0].content, "5");
    assert_eq!(out.record.repairs, 0);
}

/// A tool that returns the rate it was given.
fn interest_tool() -> Arc<dyn toolplan_core::Tool> {
    Arc::new(toolplan_core::FnTool::new(
        "interest",
        "Yearly interest on an amount.",
        json!({"type": "object", "properties": {
            "amount": {"type": "number"},
            "rate": {"type": "number", "description": "The yearly interest rate."}},
            "required": ["amount", "rate"]}),
        |arguments: Value, _| async move { Ok(arguments["rate"].clone()) },
    ))
}

#[tokio::test]
async fn a_percentage_given_as_a_whole_number_to_a_rate_is_a_fraction_where_planning_is_on() {
    let question = "What is the interest on 1000 at 5%?";
    let plan = json!({"steps": [
        {"id": "i", "tool": "interest", "arguments": {"amount": 1000, "rate": 5}}]});
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", plan)]),
        ScriptedModel::answer("50"),
    ]));
    let agent = Agent::builder("test")
        .model(Arc::clone(&model) as Arc<_>)
        .tools([interest_tool()])
        .planning(Planning::Only)
        .build()
        .unwrap();
    let out = agent.interact(question).await.unwrap();
    let result = &tool_messages(&out.messages)[0].content;
    assert!(result.contains("- i: 0.05"), "{result}");
    // Direct calls beside the planner too; without planning the call runs as the model wrote it.
    for (planning, rate) in [(Planning::Offered, "0.05"), (Planning::Off, "5")] {
        let model = Arc::new(ScriptedModel::new([
            ScriptedModel::calls(&[("interest", json!({"amount": 1000, "rate": 5}))]),
            ScriptedModel::answer("50"),
        ]));
        let agent = Agent::builder("test")
            .model(Arc::clone(&model) as Arc<_>)
            .tools([interest_tool()])
            .planning(planning)
            .build()
            .unwrap();
        let out = agent.interact(question).await.unwrap();
        assert_eq!(tool_messages(&out.messages)[0].content, rate);
    }
}

/// An air conditioner whose settings sit in a `body` object, and that returns what it was set to.
fn air_conditioner() -> Arc<dyn toolplan_core::Tool> {
    Arc::new(toolplan_core::FnTool::new(
        "set_air_conditioner",
        "Sets the air conditioner.",
        json!({"type": "object", "properties": {"body": {"type": "object", "properties": {
            "mode": {"type": "string", "enum": ["COOL", "AIR_DRY"], "default": "COOL"},
            "windStrength": {"type": "string", "enum": ["LOW", "HIGH", "MID"]},
            "temperature": {"type": "integer"}}}},
            "required": ["body"]}),
        |arguments: Value, _| async move { Ok(arguments["body"].clone()) },
    ))
}

fn air_conditioner_agent(model: &Arc<ScriptedModel>, planning: Planning) -> Agent {
    Agent::builder("test")
        .model(Arc::clone(model) as Arc<_>)
        .tools([air_conditioner()])
        .planning(planning)
        .build()
        .unwrap()
}

#[tokio::test]
async fn an_option_the_question_names_that_one_step_leaves_out_is_set() {
    let question = "Set cool mode with a temperature of 24 and high wind strength.";
    let short = json!({"steps": [{"id": "ac", "tool": "set_air_conditioner",
        "arguments": {"body": {"mode": "COOL", "temperature": 24}}}]});
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", short)]),
        ScriptedModel::answer("Set."),
    ]));
    let out = air_conditioner_agent(&model, Planning::Only)
        .interact(question)
        .await
        .unwrap();
    let result = &tool_messages(&out.messages)[0].content;
    assert!(result.contains("\"windStrength\":\"HIGH\""), "{result}");
    assert_eq!((out.record.filled_options, out.record.repairs), (1, 0));

    // A direct call beside the planner too; without planning it runs as the model wrote it.
    for (planning, filled) in [(Planning::Offered, 1), (Planning::Off, 0)] {
        let model = Arc::new(ScriptedModel::new([
            ScriptedModel::calls(&[(
                "set_air_conditioner",
                json!({"body": {"mode": "COOL", "temperature": 24}}),
            )]),
            ScriptedModel::answer("Set."),
        ]));
        let out = air_conditioner_agent(&model, planning)
            .interact(question)
            .await
            .unwrap();
        let result = &tool_messages(&out.messages)[0].content;
        assert_eq!(result.contains("HIGH"), filled == 1, "{result}");
        assert_eq!((out.record.filled_options, out.record.repairs), (filled, 0));
    }
}

#[tokio::test]
async fn an_option_that_could_go_to_either_of_two_steps_goes_back_to_be_written_anew() {
    let question = "Set the bedroom unit and the office unit to cool mode, the office one with high wind strength.";
    let plan = |office: Value| {
        json!({"steps": [
            {"id": "bedroom", "tool": "set_air_conditioner", "arguments": {"body": {"mode": "COOL"}}},
            {"id": "office", "tool": "set_air_conditioner", "arguments": {"body": office}}]})
    };
    let short = plan(json!({"mode": "COOL"}));
    let whole = plan(json!({"mode": "COOL", "windStrength": "HIGH"}));
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", short)]),
        ScriptedModel::calls(&[("execute_tool_plan", whole)]),
        ScriptedModel::answer("Set."),
    ]));
    let out = air_conditioner_agent(&model, Planning::Only)
        .interact(question)
        .await
        .unwrap();
    let results = tool_messages(&out.messages);
    assert_eq!(
        results[0].content,
        "Error: the plan was not run. The question asks for HIGH, but no step sets it: the plan \
         leaves out part of the question. Send the whole plan again, with \"windStrength\" \
         (inside \"body\") set to \"HIGH\" in the steps the question asks it for, of bedroom and \
         office (set_air_conditioner). Call execute_tool_plan again."
    );
    assert!(
        results[1].content.contains("HIGH"),
        "{}",
        results[1].content
    );
    assert_eq!(out.record.filled_options, 0);
    assert_eq!((out.record.repairs, out.record.repaired), (1, 1));
    // The reply is written anew (it must change a step), and must call a tool.
    assert_eq!(starts(&model), [None, None, None]);
    assert_eq!(
        choices(&model),
        [ToolChoice::Auto, ToolChoice::Required, ToolChoice::Auto]
    );

    // Direct calls beside the planner are told as calls.
    let call = json!({"body": {"mode": "COOL"}});
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[
            ("set_air_conditioner", call.clone()),
            ("set_air_conditioner", call),
        ]),
        ScriptedModel::answer("Set."),
    ]));
    let out = air_conditioner_agent(&model, Planning::Offered)
        .interact(question)
        .await
        .unwrap();
    let first = &tool_messages(&out.messages)[0].content;
    assert!(
        first.starts_with("Error: the calls were not run. The question asks for HIGH"),
        "{first}"
    );
}

#[tokio::test]
async fn a_plan_that_makes_up_a_date_the_question_never_gives_goes_back_to_be_written_anew() {
    let question = "What is the weather in Paris?";
    let short = json!({"steps": [weather("w", "Paris"),
        {"id": "e", "tool": "echo", "arguments": {"text": "trip on 2023-04-23"}}]});
    let whole = json!({"steps": [weather("w", "Paris")]});
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", short)]),
        ScriptedModel::calls(&[("execute_tool_plan", whole)]),
        ScriptedModel::answer("Cloudy."),
    ]));
    let out = planning_agent(Arc::clone(&model), 1)
        .interact(question)
        .await
        .unwrap();
    let results = tool_messages(&out.messages);
    assert!(
        results[0].content.starts_with(
            "Error: the plan was not run. The question gives no date, but step e (echo) sets \
             \"text\" to \"trip on 2023-04-23\""
        ),
        "{}",
        results[0].content
    );
    assert_eq!((out.record.repairs, out.record.repaired), (1, 1));
    assert_eq!(starts(&model), [None, None, None]);
    // A question that names the date passes.
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[(
            "execute_tool_plan",
            json!({"steps": [{"id": "e", "tool": "echo", "arguments": {"text": "2023-04-23"}}]}),
        )]),
        ScriptedModel::answer("Done."),
    ]));
    let out = planning_agent(Arc::clone(&model), 1)
        .interact("Echo the date of April 23, 2023.")
        .await
        .unwrap();
    assert_eq!(out.record.repairs, 0);
}

#[tokio::test]
async fn a_step_that_comes_back_with_its_made_up_date_is_dropped_when_it_stands_alone() {
    let question = "What is the weather in Paris?";
    let plan = json!({"steps": [weather("w", "Paris"),
        {"id": "e", "tool": "echo", "arguments": {"text": "trip on 2023-04-23"}}]});
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", plan.clone())]),
        ScriptedModel::calls(&[("execute_tool_plan", plan.clone())]),
        ScriptedModel::answer("Cloudy."),
    ]));
    let out = planning_agent(Arc::clone(&model), 1)
        .interact(question)
        .await
        .unwrap();
    assert_eq!((out.record.repairs, out.record.dropped_steps), (1, 1));
    let ran = &tool_messages(&out.messages)[1].content;
    assert!(ran.contains("- w:") && !ran.contains("- e:"), "{ran}");
    // A dry run shows the plan as it would run.
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", plan.clone())]),
        ScriptedModel::calls(&[("execute_tool_plan", plan)]),
    ]));
    let proposal = planning_agent(Arc::clone(&model), 1)
        .propose(question, &Default::default())
        .await
        .unwrap();
    assert_eq!(proposal.record.dropped_steps, 1);
    let steps = proposal.calls[0].arguments["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1);
}

fn weather_with_units() -> Arc<dyn toolplan_core::Tool> {
    Arc::new(toolplan_core::FnTool::new(
        "get_current_weather",
        "The current weather in a city.",
        json!({"type": "object", "properties": {
            "location": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["location"]}),
        |arguments: Value, _| async move { Ok(json!({"in": arguments["unit"], "temperature": 3})) },
    ))
}

/// The tool results the model read after `plan` ran for `question`, and the steps dropped.
async fn weather_plan_run(question: &str, plan: Value) -> (String, usize) {
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", plan)]),
        ScriptedModel::answer("3 degrees."),
    ]));
    let out = Agent::builder("test")
        .model(model)
        .tools([weather_with_units()])
        .planning(Planning::Only)
        .build()
        .unwrap()
        .interact(question)
        .await
        .unwrap();
    assert_eq!(out.record.repairs, 0);
    let result = tool_messages(&out.messages)[0].content.clone();
    (result, out.record.dropped_steps)
}

#[tokio::test]
async fn a_step_that_is_another_but_for_a_unit_the_question_does_not_ask_is_dropped() {
    let step = |id: &str, unit: &str| {
        json!({"id": id, "tool": "get_current_weather",
               "arguments": {"location": "New York, NY", "unit": unit}})
    };
    let plan = json!({"steps": [step("c", "celsius"), step("f", "fahrenheit")],
                      "output_steps": ["c", "f"]});
    let question = "What is the weather in New York? Give the temperature in Celsius.";
    let (result, dropped) = weather_plan_run(question, plan.clone()).await;
    assert!(result.contains("celsius"), "{result}");
    assert!(!result.contains("fahrenheit"), "{result}");
    assert_eq!(dropped, 1);

    // Both units asked: both steps run.
    let question = "The weather in New York, in celsius and in fahrenheit?";
    let (result, dropped) = weather_plan_run(question, plan).await;
    assert!(
        result.contains("fahrenheit") && result.contains("celsius"),
        "{result}"
    );
    assert_eq!(dropped, 0);
}

#[tokio::test]
async fn a_step_repeated_with_a_value_the_question_does_not_give_is_dropped() {
    let step = |id: &str, arguments: Value| json!({"id": id, "tool": "get_current_weather", "arguments": arguments});
    let plan = json!({"steps": [
        step("w", json!({"location": "Oslo"})),
        step("again", json!({"location": "Oslo", "unit": "fahrenheit"}))]});
    let (result, dropped) = weather_plan_run("What is the weather in Oslo?", plan.clone()).await;
    assert!(!result.contains("fahrenheit"), "{result}");
    assert_eq!(dropped, 1);

    // The question gives the addition: both run.
    let (result, dropped) = weather_plan_run("The weather in Oslo, and in fahrenheit?", plan).await;
    assert!(result.contains("fahrenheit"), "{result}");
    assert_eq!(dropped, 0);
}
