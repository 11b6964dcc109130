//! The plan IR every dialect compiles into, and the validation that turns a draft into a runnable plan.
//!
//! A dialect parser produces a [`DraftPlan`] (steps named by id, references still by id) together with
//! the problems it found; [`validate`] adds the problems that need the whole plan or the tool registry
//! (unknown tools and references, cycles, literal arguments that break a tool's schema) and, when there
//! are none, resolves ids to indexes and computes dependency edges and waves.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::error::{InvalidPlan, Problem};
use crate::limits::{RepeatedCalls, WRITTEN_ORDER_WORK, WrittenOrder};
use crate::output::{self, Lookup};
use crate::template::Template;
use crate::tool::{ToolRegistry, closest};

/// The name of the plan meta-tool; a plan may not call it (no recursive plans).
pub const EXECUTE_TOOL_PLAN: &str = "execute_tool_plan";

/// A step as a dialect parsed it, before validation.
#[derive(Debug, Clone, PartialEq)]
pub struct DraftStep {
    /// Position of the step in the source plan (for messages).
    pub position: usize,
    /// The step id.
    pub id: String,
    /// The tool to call; `None` when the parser already reported it missing or mistyped.
    pub tool: Option<String>,
    /// The arguments, with references found; `None` when the parser already reported them unusable.
    pub arguments: Option<Template>,
    /// Ids of steps this one must wait for besides those its references name.
    pub depends_on: Vec<String>,
}

/// A plan as a dialect parsed it, before validation.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DraftPlan {
    /// The steps with usable ids, in source order.
    pub steps: Vec<DraftStep>,
    /// The steps whose results are returned; empty means all.
    pub output_steps: Vec<String>,
}

/// One validated step of a plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The step id.
    pub id: String,
    /// The tool to call.
    pub tool: String,
    /// The arguments; every reference's `slot` is the index of the step it names.
    pub arguments: Template,
    /// Indexes of the steps this one waits for, ascending, without repeats.
    pub deps: Vec<usize>,
    /// Indexes of the steps that wait for this one, ascending.
    pub dependents: Vec<usize>,
    /// The Kahn level: 0 for steps without dependencies, else one more than the deepest dependency.
    pub wave: usize,
    /// The earlier step that makes the same call, when this step is a repeat that shares its result
    /// instead of running ([`RepeatedCalls`]); it is then also one of `deps`.
    pub same_call_as: Option<usize>,
}

/// A validated, acyclic plan, ready to run any number of times.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    steps: Vec<Step>,
    outputs: Vec<usize>,
    explicit_outputs: bool,
    waves: Vec<Vec<usize>>,
    index: HashMap<String, usize>,
}

impl Plan {
    /// The steps, in source order.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Indexes of the steps whose results are returned (all steps when `output_steps` was empty).
    pub fn outputs(&self) -> &[usize] {
        &self.outputs
    }

    /// Whether `output_steps` was given (and so only some results are returned).
    pub fn has_explicit_outputs(&self) -> bool {
        self.explicit_outputs
    }

    /// Steps grouped by Kahn level.
    pub fn waves(&self) -> &[Vec<usize>] {
        &self.waves
    }

    /// The index of the step with that id.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    /// Number of steps.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether the plan has no steps (never true for a validated plan).
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The length of the longest dependency chain when each step takes `cost(step)`: the least time any
    /// scheduler can take.
    pub fn critical_path<T>(&self, cost: impl Fn(&Step) -> T) -> T
    where
        T: Copy + PartialOrd + std::ops::Add<Output = T> + Default,
    {
        // Steps in wave order are in a topological order.
        let mut finish = vec![T::default(); self.steps.len()];
        let mut best = T::default();
        for &i in self.waves.iter().flatten() {
            let step = &self.steps[i];
            let mut start = T::default();
            for &d in &step.deps {
                if finish[d] > start {
                    start = finish[d];
                }
            }
            finish[i] = start + cost(step);
            if finish[i] > best {
                best = finish[i];
            }
        }
        best
    }

    /// Every step that transitively depends on one of `roots` (the roots themselves excluded unless
    /// reachable from another root), in ascending order.
    pub fn transitive_dependents(&self, roots: &[usize]) -> Vec<usize> {
        let mut seen = vec![false; self.steps.len()];
        let mut stack: Vec<usize> = roots.to_vec();
        while let Some(i) = stack.pop() {
            for &d in &self.steps[i].dependents {
                if !seen[d] {
                    seen[d] = true;
                    stack.push(d);
                }
            }
        }
        (0..self.steps.len()).filter(|&i| seen[i]).collect()
    }
}

/// Validates a draft against a tool registry. `problems` are those the dialect parser already found;
/// the result lists them first, then the ones found here.
pub fn validate(
    draft: DraftPlan,
    mut problems: Vec<Problem>,
    tools: &ToolRegistry,
    repeated_calls: RepeatedCalls,
    written_order: WrittenOrder,
) -> Result<Plan, InvalidPlan> {
    let mut index: HashMap<String, usize> = HashMap::with_capacity(draft.steps.len());
    for (i, s) in draft.steps.iter().enumerate() {
        index.entry(s.id.clone()).or_insert(i);
    }

    let mut steps = resolve_steps(draft.steps, &index, tools, &mut problems, None);
    check_outputs(&steps, tools, &mut problems);
    let repeats = if repeated_calls == RepeatedCalls::RunEach {
        Vec::new()
    } else {
        repeated_calls_of(&steps, tools, repeated_calls, &mut problems)
    };

    let mut outputs = Vec::with_capacity(draft.output_steps.len());
    for id in &draft.output_steps {
        match index.get(id) {
            Some(&i) => {
                if !outputs.contains(&i) {
                    outputs.push(i);
                }
            }
            None => problems.push(Problem::UnknownOutputStep { id: id.clone() }),
        }
    }

    for i in 0..steps.len() {
        for k in 0..steps[i].deps.len() {
            let d = steps[i].deps[k];
            steps[d].dependents.push(i);
        }
    }
    let mut waves = match levels(&mut steps) {
        Ok(waves) => waves,
        Err(cycles) => {
            problems.extend(cycles.into_iter().map(|cycle| Problem::Cycle { cycle }));
            Vec::new()
        }
    };

    if !problems.is_empty() {
        return Err(InvalidPlan { problems });
    }
    if written_order == WrittenOrder::Kept && keep_written_order(&mut steps, tools) {
        // The order edges follow one topological order of the plan: no cycle.
        for step in steps.iter_mut() {
            step.wave = 0;
        }
        waves = levels(&mut steps).unwrap_or_default();
    }
    if !repeats.is_empty() {
        waves = share_repeats(&mut steps, &repeats);
    }
    let explicit_outputs = !outputs.is_empty();
    if !explicit_outputs {
        outputs = (0..steps.len()).collect();
    }
    Ok(Plan {
        steps,
        outputs,
        explicit_outputs,
        waves,
        index,
    })
}

/// The first steps of a plan still being written, as far as they can be checked: what
/// [`validate_prefix`] returns.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Prefix {
    /// The steps, with the references and dependencies that name steps already written resolved.
    pub(crate) steps: Vec<Step>,
    /// Per step: whether it names a step not yet written (it waits for the rest of the plan).
    pub(crate) pending: Vec<bool>,
    /// Per step: whether it makes the same call (tool and arguments) as an earlier step (how
    /// repeats are run is decided on the whole plan).
    pub(crate) repeat: Vec<bool>,
}

/// Validates the steps written so far of a plan whose text is still arriving: the checks of
/// [`validate`] that the rest of the plan cannot undo (tools, literal arguments against schemas,
/// references into output schemas, ids, cycles among these steps). A name no step written so far
/// has is not a problem: the step is marked [`Prefix::pending`]. `output_steps` are not looked at.
pub(crate) fn validate_prefix(
    draft: DraftPlan,
    mut problems: Vec<Problem>,
    tools: &ToolRegistry,
) -> Result<Prefix, InvalidPlan> {
    let mut index: HashMap<String, usize> = HashMap::with_capacity(draft.steps.len());
    for (i, s) in draft.steps.iter().enumerate() {
        index.entry(s.id.clone()).or_insert(i);
    }
    let mut pending = Vec::with_capacity(draft.steps.len());
    let mut steps = resolve_steps(
        draft.steps,
        &index,
        tools,
        &mut problems,
        Some(&mut pending),
    );
    check_outputs(&steps, tools, &mut problems);
    for i in 0..steps.len() {
        for k in 0..steps[i].deps.len() {
            let d = steps[i].deps[k];
            steps[d].dependents.push(i);
        }
    }
    if let Err(cycles) = levels(&mut steps) {
        problems.extend(cycles.into_iter().map(|cycle| Problem::Cycle { cycle }));
    }
    if !problems.is_empty() {
        return Err(InvalidPlan { problems });
    }
    let repeat = steps
        .iter()
        .enumerate()
        .map(|(i, step)| {
            steps[..i]
                .iter()
                .any(|s| s.tool == step.tool && s.arguments == step.arguments)
        })
        .collect();
    Ok(Prefix {
        steps,
        pending,
        repeat,
    })
}

/// The steps of a draft with their tools checked and their references and `depends_on` resolved to
/// indexes through `index`. A name `index` lacks is a problem, unless `pending` is given (a plan still
/// being written, whose later steps may bring it): the step is then marked there and waits.
fn resolve_steps(
    draft_steps: Vec<DraftStep>,
    index: &HashMap<String, usize>,
    tools: &ToolRegistry,
    problems: &mut Vec<Problem>,
    mut pending: Option<&mut Vec<bool>>,
) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::with_capacity(draft_steps.len());
    for draft_step in draft_steps {
        let DraftStep {
            id,
            tool,
            arguments,
            depends_on,
            ..
        } = draft_step;
        if let Some(tool) = &tool {
            check_tool(&id, tool, arguments.as_ref(), tools, problems);
        }
        let tool = tool.unwrap_or_default();
        let mut arguments =
            arguments.unwrap_or(Template::Literal(Value::Object(Default::default())));

        let mut deps = Vec::new();
        let mut waits = false;
        let mut reported: HashSet<String> = HashSet::new();
        arguments.for_each_ref_mut(&mut |r| match index.get(&r.step) {
            Some(&slot) => {
                r.slot = slot;
                deps.push(slot);
            }
            None if pending.is_some() => waits = true,
            None => {
                if reported.insert(r.step.clone()) {
                    problems.push(Problem::UnknownReference {
                        step: id.clone(),
                        target: r.step.clone(),
                        reference: r.to_string(),
                    });
                }
            }
        });
        for target in depends_on {
            match index.get(&target) {
                Some(&slot) => deps.push(slot),
                None if pending.is_some() => waits = true,
                None => problems.push(Problem::UnknownDependency {
                    step: id.clone(),
                    target,
                }),
            }
        }
        deps.sort_unstable();
        deps.dedup();
        if let Some(pending) = pending.as_deref_mut() {
            pending.push(waits);
        }
        steps.push(Step {
            id,
            tool,
            arguments,
            deps,
            dependents: Vec::new(),
            wave: 0,
            same_call_as: None,
        });
    }
    steps
}

/// Makes each step on a tool that does not say it is read-only wait for the step on the same tool
/// written before it ([`WrittenOrder::Kept`]), unless the data flow puts it first; returns whether
/// it added any wait.
///
/// An order edge that the references reverse (the step written first reads the later one) is not
/// made. The rest are kept by Kahn's algorithm over the plan's own dependencies and these order edges,
/// taking ready steps in written order. When it is stuck, the steps left wait for each other in a
/// cycle, which (the plan's own dependencies having none) holds an order edge: the data flow puts
/// a step before the one written ahead of it, and that order edge is dropped
/// ([`order_edge_on_a_cycle`]). The edges kept follow the order found, so they make no cycle. Each
/// stuck moment walks the steps once: at most one walk per order edge. All of it is bounded by
/// [`WRITTEN_ORDER_WORK`] steps and references visited; a plan that needs more (built to be slow:
/// thousands of such steps, each reading a long history) keeps no order edge and runs by its
/// references alone.
fn keep_written_order(steps: &mut [Step], tools: &ToolRegistry) -> bool {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    let n = steps.len();
    // The step on the same tool written before each step, when that tool changes things.
    let mut before: Vec<Option<usize>> = vec![None; n];
    let mut last: HashMap<&str, usize> = HashMap::new();
    for (i, step) in steps.iter().enumerate() {
        let read_only = tools
            .get(&step.tool)
            .is_some_and(|t| t.tool().annotations().read_only == Some(true));
        if read_only {
            continue;
        }
        if let Some(p) = last.insert(step.tool.as_str(), i)
            && steps[i].deps.binary_search(&p).is_err()
        {
            before[i] = Some(p);
        }
    }
    // An order edge the references reverse (the earlier-written step reads, directly or not, the
    // later one) goes first.
    let mut seen = vec![usize::MAX; n];
    let mut work = 0usize;
    for (i, edge) in before.iter_mut().enumerate() {
        if let Some(p) = *edge
            && reads(steps, p, i, i, &mut seen, &mut work)
        {
            *edge = None;
        }
    }
    if before.iter().all(Option::is_none) {
        return false;
    }
    let mut after: Vec<Option<usize>> = vec![None; n];
    for (i, p) in before.iter().enumerate() {
        if let Some(p) = *p {
            after[p] = Some(i);
        }
    }
    let mut missing: Vec<usize> = steps.iter().map(|s| s.deps.len()).collect();
    let mut waiting: Vec<bool> = before.iter().map(Option::is_some).collect();
    let mut done = vec![false; n];
    let mut ready: BinaryHeap<Reverse<usize>> = (0..n)
        .filter(|&i| missing[i] == 0 && !waiting[i])
        .map(Reverse)
        .collect();
    let mut finished = 0;
    while finished < n {
        if work > WRITTEN_ORDER_WORK {
            // A plan built to make this slow runs by its references alone.
            return false;
        }
        let Some(Reverse(i)) = ready.pop() else {
            // Stuck: the steps left wait for each other in a cycle, which has an order edge (the
            // plan's own dependencies have none). Of the cycle's order edges, the one into the
            // last-written step goes (the data flow needs it earlier than written: `a` reads `c`,
            // so `c` runs before `b`).
            let Some(i) = order_edge_on_a_cycle(steps, &done, &waiting, &before, &mut work) else {
                // Cannot happen for a plan without cycles; keep no order edge then.
                before.iter_mut().for_each(|b| *b = None);
                break;
            };
            waiting[i] = false;
            before[i] = None;
            if missing[i] == 0 {
                ready.push(Reverse(i));
            }
            continue;
        };
        done[i] = true;
        finished += 1;
        for k in 0..steps[i].dependents.len() {
            let d = steps[i].dependents[k];
            missing[d] -= 1;
            if missing[d] == 0 && !waiting[d] {
                ready.push(Reverse(d));
            }
        }
        if let Some(d) = after[i]
            && before[d] == Some(i)
        {
            waiting[d] = false;
            if missing[d] == 0 {
                ready.push(Reverse(d));
            }
        }
    }
    let mut added = false;
    for (i, p) in before.into_iter().enumerate() {
        if let Some(p) = p {
            let at = steps[i].deps.binary_search(&p).unwrap_or_else(|at| at);
            steps[i].deps.insert(at, p);
            steps[p].dependents.push(i);
            added = true;
        }
    }
    added
}

/// Whether step `from` reads step `target`'s result, directly or through other steps' references
/// (its dependencies so far). `seen` marks the steps visited with `mark` (one mark per question, so
/// the array is allocated once).
fn reads(
    steps: &[Step],
    from: usize,
    target: usize,
    mark: usize,
    seen: &mut [usize],
    work: &mut usize,
) -> bool {
    let mut stack = vec![from];
    seen[from] = mark;
    while let Some(x) = stack.pop() {
        *work += steps[x].deps.len();
        if *work > WRITTEN_ORDER_WORK {
            return false;
        }
        for &d in &steps[x].deps {
            if d == target {
                return true;
            }
            if seen[d] != mark {
                seen[d] = mark;
                stack.push(d);
            }
        }
    }
    false
}

/// When [`keep_written_order`] is stuck: walks from the last-written step left along what each
/// step waits for (its order edge when it has one, else a dependency not yet done) until a step
/// comes again, and returns the last-written step of that cycle that waits by its order edge.
/// One walk: at most every step once.
fn order_edge_on_a_cycle(
    steps: &[Step],
    done: &[bool],
    waiting: &[bool],
    before: &[Option<usize>],
    work: &mut usize,
) -> Option<usize> {
    let n = steps.len();
    *work += n;
    let mut at = vec![usize::MAX; n];
    let mut path: Vec<usize> = Vec::new();
    let mut x = (0..n).rev().find(|&i| !done[i])?;
    while at[x] == usize::MAX {
        at[x] = path.len();
        path.push(x);
        x = if waiting[x] {
            before[x]?
        } else {
            *work += steps[x].deps.len();
            steps[x].deps.iter().copied().find(|&d| !done[d])?
        };
    }
    path[at[x]..].iter().copied().filter(|&i| waiting[i]).max()
}

/// The pairs (first, repeat) of steps that make the same call (same tool, same arguments) of a tool
/// whose repeats are harmless; a repeat of another tool is a problem with
/// [`RepeatedCalls::ShareOrReject`].
fn repeated_calls_of(
    steps: &[Step],
    tools: &ToolRegistry,
    repeated_calls: RepeatedCalls,
    problems: &mut Vec<Problem>,
) -> Vec<(usize, usize)> {
    let mut pairs = Vec::new();
    // Steps by a hash of their call; equal hashes are compared in full.
    let mut seen: HashMap<u64, Vec<usize>> = HashMap::with_capacity(steps.len());
    for (i, step) in steps.iter().enumerate() {
        let candidates = seen
            .entry(step.arguments.call_hash(&step.tool))
            .or_default();
        let first = candidates
            .iter()
            .copied()
            .find(|&j| steps[j].tool == step.tool && steps[j].arguments == step.arguments);
        let Some(first) = first else {
            candidates.push(i);
            continue;
        };
        let harmless = tools
            .get(&step.tool)
            .is_some_and(|t| t.tool().annotations().repeat_is_harmless());
        if harmless {
            pairs.push((first, i));
        } else if repeated_calls == RepeatedCalls::ShareOrReject {
            problems.push(Problem::RepeatedCall {
                step: step.id.clone(),
                first: steps[first].id.clone(),
                tool: step.tool.clone(),
            });
        }
    }
    pairs
}

/// Makes each repeat of a (valid, acyclic) plan wait for the copy of its call that runs and take
/// its result ([`Step::same_call_as`]), and returns the new waves. Of two copies, the one in the
/// earlier wave runs (the other cannot be among its dependencies), so no cycle is made.
fn share_repeats(steps: &mut [Step], repeats: &[(usize, usize)]) -> Vec<Vec<usize>> {
    for &(a, b) in repeats {
        // `a` may itself be a repeat of an earlier copy: follow to the one that runs.
        let mut runs = a;
        while let Some(earlier) = steps[runs].same_call_as {
            runs = earlier;
        }
        let (runs, shares) = if steps[runs].wave <= steps[b].wave {
            (runs, b)
        } else {
            (b, runs)
        };
        if runs == shares || steps[shares].same_call_as.is_some() {
            continue;
        }
        let step = &mut steps[shares];
        step.same_call_as = Some(runs);
        if let Err(at) = step.deps.binary_search(&runs) {
            step.deps.insert(at, runs);
            steps[runs].dependents.push(shares);
            steps[runs].dependents.sort_unstable();
        }
    }
    // The added dependencies go from an earlier wave to a later or equal one: acyclic still.
    levels(steps).unwrap_or_default()
}

/// Checks every reference into the result of a tool that declares an output schema
/// ([`crate::output`]): its path must name what the schema has, and a reference that is a whole
/// argument must have a type the argument's schema allows. References to unknown steps were
/// reported already.
fn check_outputs(steps: &[Step], tools: &ToolRegistry, problems: &mut Vec<Problem>) {
    for step in steps {
        let mut reported: HashSet<String> = HashSet::new();
        step.arguments.for_each_ref(&mut |r| {
            let Some((target, schema)) = output_schema_of(steps, tools, r.slot) else {
                return;
            };
            if let Lookup::Missing { at, fields } = output::lookup(schema, &r.path)
                && reported.insert(r.to_string())
            {
                let written = r.path.get(at).map(String::as_str).unwrap_or_default();
                let where_ = if at == 0 {
                    format!("{}'s result", target.tool)
                } else {
                    format!(
                        "'{}.{}' of {}",
                        target.id,
                        r.path[..at].join("."),
                        target.tool
                    )
                };
                let shown = if fields.is_empty() {
                    "no fields".to_owned()
                } else {
                    fields.join(", ")
                };
                problems.push(Problem::UnknownOutputField {
                    step: step.id.clone(),
                    reference: r.to_string(),
                    target: target.id.clone(),
                    has: format!("{where_} has {shown}"),
                    suggestion: likely_field(&fields, written),
                });
            }
        });
        // Whole-value references in the top-level arguments: their declared type against the
        // argument's.
        let (Template::Object(arguments), Some(registered)) =
            (&step.arguments, tools.get(&step.tool))
        else {
            continue;
        };
        for (argument, template) in arguments {
            let Template::Ref(r) = template else { continue };
            let Some((target, schema)) = output_schema_of(steps, tools, r.slot) else {
                continue;
            };
            let Lookup::Found(found) = output::lookup(schema, &r.path) else {
                continue;
            };
            let wanted = registered
                .schema()
                .get("properties")
                .and_then(|p| p.get(argument));
            let (Some(found), Some(wanted)) = (
                output::kinds(&found),
                wanted.and_then(|w| output::kinds(&[w])),
            ) else {
                continue;
            };
            if !output::kinds_meet(&found, &wanted) {
                problems.push(Problem::ReferenceTypeMismatch {
                    step: step.id.clone(),
                    argument: argument.clone(),
                    reference: r.to_string(),
                    found: format!(
                        "{} (the output schema of {})",
                        show_kinds(&found),
                        target.tool
                    ),
                    expected: show_kinds(&wanted),
                });
            }
        }
    }
}

/// The field of `fields` that `written` most likely meant: a close spelling (`cty` for `city`),
/// else one that begins the other (`temp` for `temperature`, `temperature` for `temp`).
fn likely_field(fields: &[String], written: &str) -> Option<String> {
    const MIN_SHARED: usize = 3;
    closest(fields.iter().map(String::as_str), written)
        .or_else(|| {
            fields.iter().map(String::as_str).find(|f| {
                let (short, long) = if f.len() < written.len() {
                    (*f, written)
                } else {
                    (written, *f)
                };
                short.len() >= MIN_SHARED && long.starts_with(short)
            })
        })
        .map(str::to_owned)
}

/// The step at `slot` and its tool's output schema, when the slot is a step of the plan and its
/// tool declares one.
fn output_schema_of<'p>(
    steps: &'p [Step],
    tools: &'p ToolRegistry,
    slot: usize,
) -> Option<(&'p Step, &'p Value)> {
    let target = steps.get(slot)?;
    let schema = tools.get(&target.tool)?.output_schema()?;
    Some((target, schema))
}

/// JSON types as a message names them: `a string`, `an integer or null`.
fn show_kinds(kinds: &[&str]) -> String {
    let named: Vec<String> = kinds
        .iter()
        .map(|k| match *k {
            "null" => "null".to_owned(),
            "integer" | "array" | "object" => format!("an {k}"),
            other => format!("a {other}"),
        })
        .collect();
    named.join(" or ")
}

fn check_tool(
    id: &str,
    tool: &str,
    arguments: Option<&Template>,
    tools: &ToolRegistry,
    problems: &mut Vec<Problem>,
) {
    if tool.trim().is_empty() {
        problems.push(Problem::BlankTool {
            step: id.to_owned(),
        });
        return;
    }
    if tool == EXECUTE_TOOL_PLAN {
        problems.push(Problem::RecursivePlan {
            step: id.to_owned(),
        });
        return;
    }
    let Some(registered) = tools.get(tool) else {
        problems.push(Problem::UnknownTool {
            step: id.to_owned(),
            tool: tool.to_owned(),
            suggestion: tools.closest_name(tool).map(str::to_owned),
        });
        return;
    };
    // Arguments without references can be checked now, before anything runs.
    if let Some(literal) = arguments.and_then(Template::as_literal)
        && let Err(detail) = registered.check_arguments(literal)
    {
        problems.push(Problem::SchemaViolation {
            step: id.to_owned(),
            tool: tool.to_owned(),
            detail,
        });
    }
}

/// Kahn's algorithm: sets each step's wave and returns the waves, or every cycle when there are any.
fn levels(steps: &mut [Step]) -> Result<Vec<Vec<usize>>, Vec<Vec<String>>> {
    let n = steps.len();
    let mut missing: Vec<usize> = steps.iter().map(|s| s.deps.len()).collect();
    let mut order: Vec<usize> = (0..n).filter(|&i| missing[i] == 0).collect();
    let mut head = 0;
    while head < order.len() {
        let i = order[head];
        head += 1;
        let wave = steps[i].wave;
        for k in 0..steps[i].dependents.len() {
            let d = steps[i].dependents[k];
            steps[d].wave = steps[d].wave.max(wave + 1);
            missing[d] -= 1;
            if missing[d] == 0 {
                order.push(d);
            }
        }
    }
    if order.len() < n {
        return Err(find_cycles(steps, &missing));
    }
    let depth = steps.iter().map(|s| s.wave + 1).max().unwrap_or(0);
    let mut waves = vec![Vec::new(); depth];
    for (i, s) in steps.iter().enumerate() {
        waves[s.wave].push(i);
    }
    Ok(waves)
}

/// Names one cycle in each group of steps that wait for each other (each strongly connected group of
/// the steps Kahn's algorithm could not order), so that every independent cycle is reported at once.
fn find_cycles(steps: &[Step], missing: &[usize]) -> Vec<Vec<String>> {
    use petgraph::graph::{DiGraph, NodeIndex};

    let stuck: Vec<usize> = (0..steps.len()).filter(|&i| missing[i] > 0).collect();
    let mut node_of: HashMap<usize, NodeIndex> = HashMap::with_capacity(stuck.len());
    let mut graph: DiGraph<usize, ()> = DiGraph::with_capacity(stuck.len(), stuck.len());
    for &i in &stuck {
        node_of.insert(i, graph.add_node(i));
    }
    for &i in &stuck {
        for d in &steps[i].deps {
            if let Some(&to) = node_of.get(d) {
                graph.add_edge(node_of[&i], to, ());
            }
        }
    }
    let mut groups: Vec<Vec<usize>> = petgraph::algo::tarjan_scc(&graph)
        .into_iter()
        .map(|group| {
            let mut steps: Vec<usize> = group.into_iter().map(|n| graph[n]).collect();
            steps.sort_unstable();
            steps
        })
        .filter(|group| group.len() > 1 || steps[group[0]].deps.contains(&group[0]))
        .collect();
    groups.sort_unstable();
    groups
        .into_iter()
        .filter_map(|group| shortest_cycle(steps, &group))
        .map(|cycle| cycle.into_iter().map(|i| steps[i].id.clone()).collect())
        .collect()
}

/// The shortest cycle through the first step of a strongly connected group, following dependencies
/// (`a -> b` means `a` waits for `b`), with the first step repeated at the end.
fn shortest_cycle(steps: &[Step], group: &[usize]) -> Option<Vec<usize>> {
    let start = *group.first()?;
    let in_group: HashSet<usize> = group.iter().copied().collect();
    let mut parent: HashMap<usize, usize> = HashMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(u) = queue.pop_front() {
        for &d in &steps[u].deps {
            if d == start {
                // Walk the parents back from `u` to `start`, then read the walk forwards.
                let mut cycle = vec![u];
                let mut cur = u;
                while cur != start {
                    cur = *parent.get(&cur)?;
                    cycle.push(cur);
                }
                cycle.reverse();
                cycle.push(start);
                return Some(cycle);
            }
            if in_group.contains(&d) && !parent.contains_key(&d) && d != start {
                parent.insert(d, u);
                queue.push_back(d);
            }
        }
    }
    None
}
