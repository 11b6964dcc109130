//! Makespan: sleeping plans finish in their critical path (exactly, on the paused clock; close to it, in real time).

use super::*;

// ---------------------------------------------------------------------------------------------------
// Makespan
// ---------------------------------------------------------------------------------------------------

/// The longest chain of sleeps, computed from the DAG alone (steps depend only on earlier ones).
pub(super) fn longest_chain_ms(dag: &Dag) -> u64 {
    let mut finish = vec![0u64; dag.steps.len()];
    for (i, s) in dag.steps.iter().enumerate() {
        let start = s.dep_set().iter().map(|&d| finish[d]).max().unwrap_or(0);
        finish[i] = start + s.ms;
    }
    finish.into_iter().max().unwrap_or(0)
}

pub(super) fn ms_by_id(dag: &Dag) -> HashMap<String, u64> {
    (0..dag.steps.len())
        .map(|i| (id_of(i), dag.steps[i].ms))
        .collect()
}

pub(super) const TOLERANCE: Duration = Duration::from_millis(2);

proptest! {
    #![proptest_config(cases(128))]

    /// With unlimited concurrency, a dependency-driven run takes the critical path (virtual time); a
    /// wave-barrier run takes the sum of each wave's longest step, which is never less.
    #[test]
    fn makespan_is_the_critical_path(dag in dag(60, 0.0, 1..51, false)) {
        let ms = ms_by_id(&dag);
        let cost = |s: &toolplan_core::Step| ms[&s.id];

        let rt = paused_runtime();
        let (plan, run, _) = run_dag(&dag, &rt, &config(usize::MAX, Schedule::Dependency));
        prop_assert!(run.all_ok());
        let critical = plan.critical_path(cost);
        prop_assert_eq!(critical, longest_chain_ms(&dag), "Plan::critical_path");
        let critical = Duration::from_millis(critical);
        prop_assert!(
            run.elapsed >= critical && run.elapsed <= critical + TOLERANCE,
            "dependency makespan {:?}, critical path {:?}", run.elapsed, critical
        );

        let rt = paused_runtime();
        let (plan_w, run_w, _) = run_dag(&dag, &rt, &config(usize::MAX, Schedule::WaveBarrier));
        prop_assert!(run_w.all_ok());
        prop_assert!(
            run_w.elapsed >= run.elapsed,
            "wave-barrier makespan {:?} < dependency makespan {:?}", run_w.elapsed, run.elapsed
        );
        let by_waves: u64 = plan_w
            .waves()
            .iter()
            .map(|w| w.iter().map(|&i| cost(&plan_w.steps()[i])).max().unwrap_or(0))
            .sum();
        let by_waves = Duration::from_millis(by_waves);
        prop_assert!(
            run_w.elapsed >= by_waves && run_w.elapsed <= by_waves + TOLERANCE,
            "wave-barrier makespan {:?}, sum of wave maxima {:?}", run_w.elapsed, by_waves
        );
    }
}

/// Real time, a few random DAGs of 10–50 ms sleeps: the makespan stays within 1.5× the critical path.
#[test]
pub(super) fn makespan_real_time_close_to_critical_path() {
    let mut rng = StdRng::seed_from_u64(0x7001_91a4);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    for round in 0..5 {
        let n = rng.random_range(5..=30);
        let steps: Vec<StepSpec> = (0..n)
            .map(|i| StepSpec {
                deps: if i == 0 {
                    Vec::new()
                } else {
                    (0..rng.random_range(0..4))
                        .map(|_| (rng.random_range(0..i), Edge::Whole))
                        .collect()
                },
                fail: false,
                ms: rng.random_range(10..=50),
                args_as_string: false,
                second_tool: false,
                text_output: false,
            })
            .collect();
        let dag = Dag {
            steps,
            order: (0..n).collect(),
            outputs: Vec::new(),
        };
        let (plan, run, _) = run_dag(&dag, &rt, &config(usize::MAX, Schedule::Dependency));
        assert!(run.all_ok(), "round {round}: {}", run.summary());
        let ms = ms_by_id(&dag);
        let critical = Duration::from_millis(plan.critical_path(|s| ms[&s.id]));
        let ratio = run.elapsed.as_secs_f64() / critical.as_secs_f64();
        assert!(
            run.elapsed >= critical && ratio <= 1.5,
            "round {round}: makespan {:?}, critical path {critical:?}, ratio {ratio:.2}",
            run.elapsed
        );
    }
}
