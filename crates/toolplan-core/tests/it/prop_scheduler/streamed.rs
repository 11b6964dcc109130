//! Streamed plans: the same random plans, their text cut into random chunks that arrive one by one,
//! give the report of the plan read whole, apart from timings.

use futures::StreamExt;

use super::*;

/// `text` with the step named in each "Skipped because dependency 'x' failed" left out: of two
/// failed dependencies, the one named is the one that failed first, which is a matter of timing.
fn any_dependency(text: &str) -> String {
    const SKIPPED: &str = "Skipped because dependency '";
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(SKIPPED) {
        out.push_str(&rest[..at + SKIPPED.len()]);
        rest = &rest[at + SKIPPED.len()..];
        if let Some(end) = rest.find('\'') {
            out.push('*');
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    out
}

/// What a report says apart from timings: each step's status, error and output, and the outcome.
fn untimed(run: &PlanRun) -> Value {
    json!({
        "steps": run.steps.iter().map(|s| json!({
            "id": s.id, "tool": s.tool, "status": format!("{:?}", s.status),
            "error": s.error.as_deref().map(any_dependency),
            "output": s.output, "unresolved": s.unresolved_reference, "wave": s.wave,
        })).collect::<Vec<_>>(),
        "outputs": run.outputs,
        "explicit": run.explicit_outputs,
        "waves": run.waves,
        "outcome": format!("{:?}", run.outcome),
        "summary": any_dependency(&run.summary()),
    })
}

/// `text` cut at `cuts` (byte offsets, taken in order, those inside a character skipped), each
/// chunk arriving 1 ms after the one before.
fn chunks(text: &str, cuts: &[usize]) -> Vec<String> {
    let mut out = Vec::new();
    let mut from = 0;
    let mut cuts = cuts.to_vec();
    cuts.sort_unstable();
    for cut in cuts.into_iter().chain([text.len()]) {
        let cut = cut.min(text.len());
        if cut <= from || !text.is_char_boundary(cut) {
            continue;
        }
        out.push(text[from..cut].to_owned());
        from = cut;
    }
    out
}

proptest! {
    #![proptest_config(cases(160))]

    /// Random DAGs (steps listed in any order, so references may name steps written later), random
    /// failures, limits and schedules, `rec` read-only or not, the text cut anywhere: the streamed
    /// run's report is the whole plan's, apart from timings.
    #[test]
    fn streamed_plans_report_what_whole_plans_report(
        dag in dag(30, 0.15, 0..5, true),
        limit in 1usize..=8,
        wave in prop::bool::weighted(0.2),
        read_only in prop::bool::weighted(0.7),
        pretty: bool,
        cuts in prop::collection::vec(0usize..4000, 0..60),
    ) {
        let schedule = if wave { Schedule::WaveBarrier } else { Schedule::Dependency };
        let cfg = config(limit, schedule);
        let plan = plan_json(&dag);
        let text = if pretty {
            serde_json::to_string_pretty(&plan).unwrap()
        } else {
            plan.to_string()
        };
        let rt = paused_runtime();

        let log = Arc::new(Mutex::new(Log::default()));
        let engine = engine_of(&log, cfg.clone(), read_only);
        let compiled = engine.compile(&text).unwrap();
        let whole = rt.block_on(engine.run(&compiled, RunControl::default()));

        let log = Arc::new(Mutex::new(Log::default()));
        let engine = engine_of(&log, cfg, read_only);
        let text_stream = futures::stream::iter(chunks(&text, &cuts)).then(|c| async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            c
        });
        let streamed = rt
            .block_on(engine.run_streamed(text_stream, RunControl::default()))
            .unwrap();
        prop_assert_eq!(untimed(&streamed), untimed(&whole));
        prop_assert!(streamed.steps.iter().all(|s| s.written.is_some()));
        prop_assert!(whole.steps.iter().all(|s| s.written.is_none()));
        // A step starts no earlier than its text was complete.
        for s in &streamed.steps {
            if let (Some(started), Some(written)) = (s.started, s.written) {
                prop_assert!(started >= written, "{} started before it was written", s.id);
            }
        }
    }
}
