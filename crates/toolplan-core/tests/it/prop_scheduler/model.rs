//! The model of what must happen (statuses, skips, limits, order) and the properties that check runs against it.

use super::*;

// ---------------------------------------------------------------------------------------------------
// The model and the checks
// ---------------------------------------------------------------------------------------------------

/// What must happen to each step, computed without the engine: a step is skipped when a dependency did
/// not succeed, else it fails when its tool fails.
pub(super) fn expected_statuses(dag: &Dag) -> Vec<StepStatus> {
    let mut status = Vec::with_capacity(dag.steps.len());
    for (i, s) in dag.steps.iter().enumerate() {
        let st = if s.deps.iter().any(|&(d, _)| status[d] != StepStatus::Ok) {
            StepStatus::Skipped
        } else if s.fail || fails_to_render(dag, i) {
            StepStatus::Failed
        } else {
            StepStatus::Ok
        };
        status.push(st);
    }
    status
}

/// Every step that transitively depends on one of `roots` (roots excluded unless reachable).
pub(super) fn transitive_dependents(dag: &Dag, roots: &[usize]) -> BTreeSet<usize> {
    let n = dag.steps.len();
    let mut dependents = vec![Vec::new(); n];
    for (i, s) in dag.steps.iter().enumerate() {
        for d in s.dep_set() {
            dependents[d].push(i);
        }
    }
    let mut seen = BTreeSet::new();
    let mut stack = roots.to_vec();
    while let Some(i) = stack.pop() {
        for &d in &dependents[i] {
            if seen.insert(d) {
                stack.push(d);
            }
        }
    }
    seen
}

pub(super) const SKIP_PREFIX: &str = "Skipped because dependency '";
pub(super) const SKIP_SUFFIX: &str = "' failed";

pub(super) fn check_run(
    dag: &Dag,
    plan: &Plan,
    run: &PlanRun,
    log: &Log,
    config: &RunConfig,
) -> Result<(), TestCaseError> {
    let (limit, schedule) = (config.concurrency, config.schedule);
    let n = dag.steps.len();
    prop_assert_eq!(plan.len(), n);
    prop_assert_eq!(run.steps.len(), n);
    prop_assert_eq!(run.outcome, RunOutcome::Completed);
    let pidx: Vec<usize> = (0..n).map(|i| plan.index_of(&id_of(i)).unwrap()).collect();

    // Statuses, against the model.
    let expected = expected_statuses(dag);
    for i in 0..n {
        let rec = &run.steps[pidx[i]];
        prop_assert_eq!(&rec.id, &id_of(i));
        prop_assert_eq!(rec.status, expected[i], "step {}: {:?}", rec.id, rec.error);
    }

    // Skipped = exactly the transitive dependents of the failed steps (computed here, and by the plan).
    let failed: Vec<usize> = (0..n)
        .filter(|&i| run.steps[pidx[i]].status == StepStatus::Failed)
        .collect();
    let skipped: BTreeSet<usize> = (0..n)
        .filter(|&i| run.steps[pidx[i]].status == StepStatus::Skipped)
        .collect();
    prop_assert_eq!(&skipped, &transitive_dependents(dag, &failed));
    let failed_p: Vec<usize> = failed.iter().map(|&i| pidx[i]).collect();
    let skipped_p: BTreeSet<usize> = skipped.iter().map(|&i| pidx[i]).collect();
    let by_plan: BTreeSet<usize> = plan.transitive_dependents(&failed_p).into_iter().collect();
    prop_assert_eq!(&skipped_p, &by_plan);

    // Positions of each step's start and end in the global event order.
    let mut starts: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut ends: HashMap<&str, Vec<usize>> = HashMap::new();
    for (pos, (ev, id)) in log.events.iter().enumerate() {
        match ev {
            Ev::Start => starts.entry(id.as_str()).or_default().push(pos),
            Ev::End => ends.entry(id.as_str()).or_default().push(pos),
        }
    }
    let start_of = |i: usize| {
        starts
            .get(id_of(i).as_str())
            .and_then(|v| v.first().copied())
    };
    let end_of = |i: usize| ends.get(id_of(i).as_str()).and_then(|v| v.first().copied());

    for (i, s) in dag.steps.iter().enumerate() {
        let id = id_of(i);
        let rec = &run.steps[pidx[i]];
        let n_starts = starts.get(id.as_str()).map_or(0, Vec::len);
        let n_ends = ends.get(id.as_str()).map_or(0, Vec::len);
        if rec.status == StepStatus::Skipped {
            // Skipped steps never run, and say which failed dependency they were skipped for.
            prop_assert_eq!(n_starts, 0, "skipped step {} ran", id);
            prop_assert!(rec.started.is_none());
            let err = rec.error.as_deref().unwrap_or("");
            prop_assert!(
                err.starts_with(SKIP_PREFIX) && err.ends_with(SKIP_SUFFIX),
                "step {}: unexpected skip message {:?}",
                id,
                err
            );
            let named = &err[SKIP_PREFIX.len()..err.len() - SKIP_SUFFIX.len()];
            prop_assert!(
                s.dep_set()
                    .iter()
                    .any(|&d| id_of(d) == named && expected[d] != StepStatus::Ok),
                "step {}: skip names {:?}, which is not a direct dependency that did not succeed",
                id,
                named
            );
        } else if fails_to_render(dag, i) {
            // Failed resolving a path into a text output: the tool was never called.
            prop_assert_eq!(rec.status, StepStatus::Failed);
            prop_assert_eq!(n_starts, 0, "step {} called its tool", id);
            let err = rec.error.as_deref().unwrap_or("");
            prop_assert!(
                err.contains("is text (") && err.contains("), not JSON"),
                "step {}: {}",
                id,
                err
            );
        } else {
            // Ran exactly once, after every dependency finished successfully.
            prop_assert_eq!(n_starts, 1, "step {} started {} times", id, n_starts);
            prop_assert_eq!(n_ends, 1, "step {} ended {} times", id, n_ends);
            prop_assert!(rec.started.is_some());
            let start = start_of(i).unwrap();
            for d in s.dep_set() {
                prop_assert_eq!(run.steps[pidx[d]].status, StepStatus::Ok);
                let end = end_of(d).unwrap();
                prop_assert!(
                    end < start,
                    "step {} started before its dependency {} ended",
                    id,
                    id_of(d)
                );
            }
            // References resolved to the dependencies' outputs.
            let (_, rendered) = arguments_of(dag, i);
            let got = &log.args[id.as_str()][0];
            prop_assert_eq!(got, &rendered, "arguments of step {}", id);
            if rec.status == StepStatus::Failed {
                let want = format!("{id} failed on purpose");
                prop_assert_eq!(rec.error.as_deref(), Some(want.as_str()));
            }
        }
    }

    // Outputs: the successful output steps (all steps when output_steps is omitted), and the
    // successful steps that a failed or skipped step read.
    let outputs: BTreeSet<usize> = if dag.outputs.is_empty() {
        (0..n).collect()
    } else {
        dag.outputs.iter().copied().collect()
    };
    let read_by_failure: BTreeSet<usize> = (0..n)
        .filter(|&j| expected[j] != StepStatus::Ok)
        .flat_map(|j| dag.steps[j].dep_set())
        .collect();
    for (i, &status) in expected.iter().enumerate() {
        let id = id_of(i);
        let kept = outputs.contains(&i) || read_by_failure.contains(&i);
        let want =
            (kept && status == StepStatus::Ok).then(|| output_of(&id, dag.steps[i].text_output));
        prop_assert_eq!(run.output(&id), want.as_ref(), "output of {}", id);
        let listed = run.failure_inputs().contains_key(&id);
        prop_assert_eq!(
            listed,
            want.is_some() && !outputs.contains(&i),
            "{} in failure_inputs",
            id
        );
    }

    // Wave barrier: a step of wave w starts after every step of the earlier waves that ran has ended.
    if schedule == Schedule::WaveBarrier {
        for i in 0..n {
            let Some(start) = start_of(i) else { continue };
            let wave = plan.steps()[pidx[i]].wave;
            for (j, &pj) in pidx.iter().enumerate() {
                if plan.steps()[pj].wave < wave
                    && let Some(end) = end_of(j)
                {
                    prop_assert!(
                        end < start,
                        "wave barrier: {} (wave {}) started before {} ended",
                        id_of(i),
                        wave,
                        id_of(j)
                    );
                }
            }
        }
    }

    prop_assert!(
        log.max_running <= limit,
        "{} calls ran at once, limit {}",
        log.max_running,
        limit
    );
    prop_assert_eq!(log.running, 0);
    for (tool, &max) in &log.tool_max {
        if let Some(&tool_limit) = config.tool_concurrency.get(*tool) {
            prop_assert!(
                max <= tool_limit,
                "{} calls of {} ran at once, limit {}",
                max,
                tool,
                tool_limit
            );
        }
    }
    Ok(())
}

pub(super) fn run_dag(
    dag: &Dag,
    rt: &tokio::runtime::Runtime,
    cfg: &RunConfig,
) -> (Plan, PlanRun, Log) {
    let log = Arc::new(Mutex::new(Log::default()));
    let engine = engine(&log, cfg.clone());
    let plan = engine
        .compile_value(plan_json(dag))
        .unwrap_or_else(|e| panic!("generated plan is valid: {e}"));
    let run = rt.block_on(engine.run(&plan, RunControl::default()));
    drop(engine);
    let log = std::mem::take(&mut *log.lock().unwrap());
    (plan, run, log)
}

proptest! {
    #![proptest_config(cases(192))]

    /// Random DAGs with random failures, limits 1..=8 and both schedules, on paused virtual time.
    #[test]
    fn random_dags_fail_forward_and_respect_limits(
        dag in dag(60, 0.15, 0..5, true),
        limit in 1usize..=8,
        wave in prop::bool::weighted(0.25),
        rec_limit in prop::option::weighted(0.3, 1usize..=3),
        rec2_limit in prop::option::weighted(0.3, 1usize..=3),
    ) {
        let schedule = if wave { Schedule::WaveBarrier } else { Schedule::Dependency };
        let mut cfg = config(limit, schedule);
        for (tool, tool_limit) in [("rec", rec_limit), ("rec2", rec2_limit)] {
            if let Some(l) = tool_limit {
                cfg.tool_concurrency.insert(tool.to_owned(), l);
            }
        }
        let rt = paused_runtime();
        let (plan, run, log) = run_dag(&dag, &rt, &cfg);
        check_run(&dag, &plan, &run, &log, &cfg)?;
    }

    /// The same with no effective limit.
    #[test]
    fn random_dags_unlimited(dag in dag(60, 0.1, 0..5, false)) {
        let rt = paused_runtime();
        let cfg = config(usize::MAX, Schedule::Dependency);
        let (plan, run, log) = run_dag(&dag, &rt, &cfg);
        check_run(&dag, &plan, &run, &log, &cfg)?;
    }
}

proptest! {
    #![proptest_config(cases(24))]

    /// The same invariants on a multi-threaded runtime in real time (tool calls really overlap).
    #[test]
    fn random_dags_multi_thread(
        dag in dag(40, 0.15, 0..2, true),
        limit in 1usize..=8,
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .unwrap();
        let cfg = config(limit, Schedule::Dependency);
        let (plan, run, log) = run_dag(&dag, &rt, &cfg);
        check_run(&dag, &plan, &run, &log, &cfg)?;
    }
}
