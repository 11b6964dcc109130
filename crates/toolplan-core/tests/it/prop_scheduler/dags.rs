//! Random DAGs: steps with references of every kind and `depends_on`, failures, sleeps, and the plan JSON they become.

use super::*;

// ---------------------------------------------------------------------------------------------------
// Random DAGs
// ---------------------------------------------------------------------------------------------------

/// How a step names one of its dependencies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Edge {
    /// `"$ref:dep"`: the whole output, typed.
    Whole,
    /// `"$ref:dep.nested.list.0"`: a field path through an object and an array.
    Field,
    /// `"… $ref:dep.id, …"`: interpolated into text.
    Text,
    /// `"depends_on": ["dep"]`: ordering only.
    DependsOn,
}

#[derive(Debug, Clone)]
pub(super) struct StepSpec {
    /// Dependencies (indexes of earlier steps) and how each is named; the same dependency may appear
    /// several times.
    pub(super) deps: Vec<(usize, Edge)>,
    /// Whether the tool call fails.
    pub(super) fail: bool,
    /// How long the tool call sleeps.
    pub(super) ms: u64,
    /// Whether `arguments` is written as a JSON string (agentle4j style) rather than an object.
    pub(super) args_as_string: bool,
    /// Whether the step calls the second recording tool (`rec2`) instead of `rec`.
    pub(super) second_tool: bool,
    /// Whether the tool returns text rather than an object: a field path into it (a `Field` or `Text`
    /// edge of a dependent) then fails the dependent before its tool is called.
    pub(super) text_output: bool,
}

impl StepSpec {
    pub(super) fn dep_set(&self) -> BTreeSet<usize> {
        self.deps.iter().map(|&(d, _)| d).collect()
    }
}

#[derive(Debug, Clone)]
pub(super) struct Dag {
    pub(super) steps: Vec<StepSpec>,
    /// The order the steps are listed in the plan (a permutation of `0..n`).
    pub(super) order: Vec<usize>,
    /// `output_steps` (empty: omitted).
    pub(super) outputs: Vec<usize>,
}

pub(super) fn edge() -> impl Strategy<Value = Edge> {
    prop_oneof![
        Just(Edge::Whole),
        Just(Edge::Field),
        Just(Edge::Text),
        Just(Edge::DependsOn),
    ]
}

/// DAGs of 1..=`max_n` steps; each step depends on a random subset of earlier steps. `fail_p` is the
/// chance that a step's tool fails (and, when not zero, some steps return text, so that dependents
/// following a path into it fail before their tool is called).
pub(super) fn dag(
    max_n: usize,
    fail_p: f64,
    ms: std::ops::Range<u64>,
    with_outputs: bool,
) -> impl Strategy<Value = Dag> {
    (1..=max_n)
        .prop_flat_map(move |n| {
            let step = (
                prop::collection::vec((any::<Index>(), edge()), 0..5),
                prop::bool::weighted(fail_p),
                ms.clone(),
                any::<bool>(),
                prop::bool::weighted(0.4),
                // Plans without failures have no text outputs either.
                prop::bool::weighted(if fail_p > 0.0 { 0.08 } else { 0.0 }),
            );
            let outputs = if with_outputs {
                prop::collection::vec(any::<Index>(), 0..4).boxed()
            } else {
                Just(Vec::new()).boxed()
            };
            (
                prop::collection::vec(step, n),
                Just((0..n).collect::<Vec<usize>>()).prop_shuffle(),
                outputs,
            )
        })
        .prop_map(|(raw, order, outputs)| {
            let n = raw.len();
            let steps = raw
                .into_iter()
                .enumerate()
                .map(
                    |(i, (picks, fail, ms, args_as_string, second_tool, text_output))| StepSpec {
                        deps: if i == 0 {
                            Vec::new()
                        } else {
                            picks.into_iter().map(|(ix, e)| (ix.index(i), e)).collect()
                        },
                        fail,
                        ms,
                        args_as_string,
                        second_tool,
                        text_output,
                    },
                )
                .collect();
            Dag {
                steps,
                order,
                outputs: outputs.into_iter().map(|ix| ix.index(n)).collect(),
            }
        })
}

/// Step ids of a few shapes, all matching `[A-Za-z0-9_-]+`.
pub(super) fn id_of(i: usize) -> String {
    match i % 3 {
        0 => format!("s{i}"),
        1 => format!("step-{i}"),
        _ => format!("n_{i}"),
    }
}

/// What the recording tool returns for step `id`.
pub(super) fn output_of(id: &str, text_output: bool) -> Value {
    if text_output {
        json!(format!("plain text from {id}"))
    } else {
        json!({"id": id, "nested": {"list": [id, 7]}})
    }
}

/// Whether step `i` must fail before its tool is called: it follows a field path into a dependency's
/// text output.
pub(super) fn fails_to_render(dag: &Dag, i: usize) -> bool {
    dag.steps[i]
        .deps
        .iter()
        .any(|&(d, e)| matches!(e, Edge::Field | Edge::Text) && dag.steps[d].text_output)
}

/// The arguments the recording tool must receive for step `i`, once references are resolved, and the
/// arguments as written in the plan.
pub(super) fn arguments_of(dag: &Dag, i: usize) -> (Value, Value) {
    let s = &dag.steps[i];
    let (mut whole, mut field) = (Vec::new(), Vec::new());
    let (mut whole_rendered, mut field_rendered) = (Vec::new(), Vec::new());
    let mut text = String::from("from");
    let mut text_rendered = String::from("from");
    for &(d, e) in &s.deps {
        let dep = id_of(d);
        match e {
            Edge::Whole => {
                whole.push(json!(format!("$ref:{dep}")));
                whole_rendered.push(output_of(&dep, dag.steps[d].text_output));
            }
            Edge::Field => {
                field.push(json!(format!("$ref:{dep}.nested.list.0")));
                field_rendered.push(json!(dep));
            }
            Edge::Text => {
                text.push_str(&format!(" $ref:{dep}.id,"));
                text_rendered.push_str(&format!(" {dep},"));
            }
            Edge::DependsOn => {}
        }
    }
    let common = json!({"me": id_of(i), "fail": s.fail, "ms": s.ms, "text_output": s.text_output});
    let mut written = common.clone();
    written["whole"] = json!(whole);
    written["field"] = json!(field);
    written["text"] = json!(text);
    let mut rendered = common;
    rendered["whole"] = json!(whole_rendered);
    rendered["field"] = json!(field_rendered);
    rendered["text"] = json!(text_rendered);
    (written, rendered)
}

pub(super) fn tool_of(s: &StepSpec) -> &'static str {
    if s.second_tool { "rec2" } else { "rec" }
}

pub(super) fn plan_json(dag: &Dag) -> Value {
    let steps: Vec<Value> = dag
        .order
        .iter()
        .map(|&i| {
            let s = &dag.steps[i];
            let (written, _) = arguments_of(dag, i);
            let arguments = if s.args_as_string {
                Value::String(written.to_string())
            } else {
                written
            };
            let tool = tool_of(s);
            let mut step = json!({"id": id_of(i), "tool": tool, "arguments": arguments});
            let depends_on: Vec<String> = s
                .deps
                .iter()
                .filter(|(_, e)| *e == Edge::DependsOn)
                .map(|&(d, _)| id_of(d))
                .collect();
            if !depends_on.is_empty() {
                step["depends_on"] = json!(depends_on);
            }
            step
        })
        .collect();
    let mut plan = json!({"steps": steps});
    if !dag.outputs.is_empty() {
        let ids: Vec<String> = dag.outputs.iter().map(|&i| id_of(i)).collect();
        plan["output_steps"] = json!(ids);
    }
    plan
}
