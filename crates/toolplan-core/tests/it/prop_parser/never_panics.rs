//! The parser and validator never panic: any JSON, plan-shaped values, mostly valid plans (which also run) and any text; every rejection names a problem and the text and value entry points agree.

use super::*;

/// Runs a valid plan with the demo tools under a short deadline (virtual time) and checks the record.
pub(super) fn run_demo(plan: &Plan) -> Result<(), TestCaseError> {
    let engine = demo_engine();
    let rt = paused_runtime();
    let run = rt.block_on(engine.run(plan, RunControl::default()));
    prop_assert_eq!(run.steps.len(), plan.len());
    for s in &run.steps {
        match s.status {
            StepStatus::Ok => prop_assert!(s.error.is_none() && s.started.is_some()),
            StepStatus::Failed => {
                let err = s.error.as_deref().unwrap_or("");
                prop_assert!(!err.is_empty());
                prop_assert!(
                    !err.contains("the tool panicked"),
                    "demo tool panicked in step {}: {}",
                    s.id,
                    err
                );
            }
            StepStatus::Skipped => {
                let err = s.error.as_deref().unwrap_or("");
                prop_assert!(s.started.is_none());
                if run.outcome == RunOutcome::Completed {
                    prop_assert!(
                        err.starts_with("Skipped because dependency '"),
                        "step {}: {}",
                        s.id,
                        err
                    );
                }
            }
        }
    }
    match run.outcome {
        RunOutcome::Completed => prop_assert!(run.elapsed <= DEADLINE),
        RunOutcome::DeadlineExceeded => prop_assert!(
            run.elapsed >= DEADLINE && run.elapsed <= DEADLINE + Duration::from_millis(1),
            "stopped at {:?}",
            run.elapsed
        ),
        RunOutcome::Cancelled => prop_assert!(false, "nobody cancelled the run"),
        RunOutcome::Declined => prop_assert!(false, "no plan needs approval here"),
    }
    let report = run.to_json();
    prop_assert!(serde_json::to_string(&report).is_ok());
    prop_assert!(!run.summary().is_empty());
    Ok(())
}

/// Ok, or an error that names at least one problem (all of them printable). Valid plans also run.
pub(super) fn check_result(result: &Result<Plan, InvalidPlan>) -> Result<(), TestCaseError> {
    match result {
        Ok(plan) => {
            prop_assert!(!plan.is_empty());
            prop_assert!(plan.outputs().iter().all(|&i| i < plan.len()));
            prop_assert_eq!(plan.waves().iter().map(Vec::len).sum::<usize>(), plan.len());
            run_demo(plan)?;
        }
        Err(e) => {
            prop_assert!(!e.problems.is_empty(), "rejected without a problem");
            prop_assert!(!e.to_string().is_empty());
            for p in &e.problems {
                prop_assert!(!p.to_string().is_empty());
                let _ = p.step();
            }
        }
    }
    Ok(())
}

/// Whether the id is one the parser accepts under these limits.
pub(super) fn valid_id(id: &str, limits: &Limits) -> bool {
    !id.is_empty()
        && id.len() <= limits.max_id_len
        && id
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

/// Problems that must be among those reported, derived from the plan directly: duplicate ids, and for
/// each (first) step with a valid id and a string tool, blank, recursive or unknown tools.
pub(super) fn required_problems(value: &Value, limits: &Limits) -> Vec<Problem> {
    let mut out = Vec::new();
    let Some(steps) = value.get("steps").and_then(Value::as_array) else {
        return out;
    };
    if !value.is_object() || steps.is_empty() || steps.len() > limits.max_steps {
        return out;
    }
    let registry = toolplan_demo::registry();
    let mut first: HashMap<&str, usize> = HashMap::new();
    for (pos, step) in steps.iter().enumerate() {
        let Some(id) = step.get("id").and_then(Value::as_str) else {
            continue;
        };
        if !step.is_object() || !valid_id(id, limits) {
            continue;
        }
        if let Some(&f) = first.get(id) {
            out.push(Problem::DuplicateId {
                id: id.to_owned(),
                first: f,
                second: pos,
            });
            continue;
        }
        first.insert(id, pos);
        match step.get("tool").and_then(Value::as_str) {
            Some(t) if t.trim().is_empty() => out.push(Problem::BlankTool {
                step: id.to_owned(),
            }),
            Some("execute_tool_plan") => out.push(Problem::RecursivePlan {
                step: id.to_owned(),
            }),
            Some(t) if !registry.contains(t) => out.push(Problem::UnknownTool {
                step: id.to_owned(),
                tool: t.to_owned(),
                suggestion: registry.closest_name(t).map(str::to_owned),
            }),
            _ => {}
        }
    }
    out
}

/// Compiles a value both ways (value, and its text) and checks both results.
pub(super) fn check_value(value: &Value, limits: &Limits) -> Result<(), TestCaseError> {
    let registry = toolplan_demo::registry();
    let text = value.to_string();
    let by_value = tool_plan::compile_value(value.clone(), &registry, limits);
    check_result(&by_value)?;
    let by_text = tool_plan::compile(&text, &registry, limits);
    if text.len() <= limits.max_plan_bytes {
        // The two entry points agree (compared on the value the text parses back to, since float
        // parsing may differ from the original in the last bit).
        let reparsed: Value = serde_json::from_str(&text).unwrap();
        let by_reparsed = tool_plan::compile_value(reparsed, &registry, limits);
        prop_assert_eq!(&by_text, &by_reparsed);
        prop_assert_eq!(by_text.is_ok(), by_value.is_ok());
    } else {
        let Err(e) = &by_text else {
            return Err(TestCaseError::fail(
                "a plan over the size limit was accepted",
            ));
        };
        let too_large = matches!(e.problems[..], [Problem::PlanTooLarge { .. }]);
        prop_assert!(too_large, "{:?}", e.problems);
    }
    let required = required_problems(value, limits);
    if !required.is_empty() {
        let Err(e) = &by_value else {
            return Err(TestCaseError::fail(format!(
                "accepted a plan with problems {required:?}"
            )));
        };
        for p in &required {
            prop_assert!(
                e.problems.contains(p),
                "missing {:?} in {:?}",
                p,
                e.problems
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------
// Property 3: the parser and validator never panic
// ---------------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(cases(256))]

    /// Any JSON value at all.
    #[test]
    fn arbitrary_json_never_panics(value in arb_json(), limits in limits()) {
        check_value(&value, &limits)?;
    }

    /// Plan-shaped values: steps with random fields of random types, `$ref:` fragments, cycles,
    /// duplicate ids, bad tools, truncated argument strings.
    #[test]
    fn plan_shaped_values_never_panic(value in plan_shaped(), limits in limits()) {
        check_value(&value, &limits)?;
    }

    /// Plans that are often valid, so that the run half is exercised too.
    #[test]
    fn mostly_valid_plans_compile_and_run(value in mostly_valid_plan(), limits in limits()) {
        check_value(&value, &limits)?;
    }

    /// Text: truncated plans, and arbitrary or JSON-ish character soup.
    #[test]
    fn arbitrary_text_never_panics(
        value in prop_oneof![plan_shaped(), mostly_valid_plan()],
        cut in any::<Index>(),
        soup in prop_oneof![".{0,40}", "[\\[\\]{}\":,0-9a-z$. -]{0,60}"],
        limits in limits(),
    ) {
        let registry = toolplan_demo::registry();
        let text = serde_json::to_string_pretty(&value).unwrap();
        let truncated = truncate(&text, cut.index(text.len() + 1));
        for t in [truncated, soup.as_str()] {
            let result = tool_plan::compile(t, &registry, &limits);
            check_result(&result)?;
        }
    }
}
