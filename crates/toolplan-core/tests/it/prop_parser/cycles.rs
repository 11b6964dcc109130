//! Cycles and graph structure: every cycle found is real, every cyclic group is named, separate cycles are each named.

use super::*;

// ---------------------------------------------------------------------------------------------------
// Cycles and graph structure
// ---------------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
pub(super) struct Graph {
    /// `deps[i]`: the steps step `i` waits for, each with whether it is named by a `$ref` (else by
    /// `depends_on`). May include `i` itself and later steps.
    pub(super) deps: Vec<Vec<(usize, bool)>>,
}

impl Graph {
    pub(super) fn dep_set(&self, i: usize) -> BTreeSet<usize> {
        self.deps[i].iter().map(|&(d, _)| d).collect()
    }

    /// `reach[a][b]`: b is reachable from a along one or more dependency edges.
    fn reach(&self) -> Vec<Vec<bool>> {
        let n = self.deps.len();
        let mut reach = vec![vec![false; n]; n];
        for (a, row) in reach.iter_mut().enumerate() {
            let mut stack: Vec<usize> = self.dep_set(a).into_iter().collect();
            while let Some(x) = stack.pop() {
                if !row[x] {
                    row[x] = true;
                    stack.extend(self.dep_set(x));
                }
            }
        }
        reach
    }
}

pub(super) fn graph() -> impl Strategy<Value = Graph> {
    (1usize..=12)
        .prop_flat_map(|n| {
            (
                prop::collection::vec(
                    prop::collection::vec((any::<Index>(), any::<bool>()), 0..3),
                    n,
                ),
                prop::collection::vec((any::<Index>(), any::<Index>(), any::<bool>()), 0..3),
            )
        })
        .prop_map(|(earlier, extra)| {
            let n = earlier.len();
            let mut deps: Vec<Vec<(usize, bool)>> = earlier
                .into_iter()
                .enumerate()
                .map(|(i, picks)| {
                    if i == 0 {
                        Vec::new()
                    } else {
                        picks.into_iter().map(|(ix, r)| (ix.index(i), r)).collect()
                    }
                })
                .collect();
            for (from, to, r) in extra {
                deps[from.index(n)].push((to.index(n), r));
            }
            Graph { deps }
        })
}

pub(super) fn gid(i: usize) -> String {
    format!("v{i}")
}

pub(super) fn graph_plan(g: &Graph) -> Value {
    let steps: Vec<Value> = g
        .deps
        .iter()
        .enumerate()
        .map(|(i, deps)| {
            let refs: Vec<Value> = deps
                .iter()
                .filter(|(_, r)| *r)
                .map(|&(d, _)| json!(format!("$ref:{}", gid(d))))
                .collect();
            let after: Vec<String> = deps
                .iter()
                .filter(|(_, r)| !*r)
                .map(|&(d, _)| gid(d))
                .collect();
            json!({"id": gid(i), "tool": "echo", "arguments": {"text": refs}, "depends_on": after})
        })
        .collect();
    json!({"steps": steps})
}

/// The cycles a rejected plan names, each checked to be a real cycle of `g` (the first step repeated
/// at the end, each step depending on the next, no other repeats), as sets of steps.
pub(super) fn named_cycles(
    g: &Graph,
    result: &Result<Plan, InvalidPlan>,
) -> Result<Vec<BTreeSet<usize>>, TestCaseError> {
    let Err(e) = result else {
        return Err(TestCaseError::fail("a cyclic plan was accepted"));
    };
    let n = g.deps.len();
    let index: HashMap<String, usize> = (0..n).map(|i| (gid(i), i)).collect();
    let mut named = Vec::new();
    for p in &e.problems {
        let Problem::Cycle { cycle } = p else {
            return Err(TestCaseError::fail(format!("unexpected problem {p:?}")));
        };
        prop_assert!(cycle.len() >= 2, "{:?}", cycle);
        prop_assert_eq!(cycle.first(), cycle.last());
        let steps: Vec<usize> = cycle.iter().map(|id| index[id]).collect();
        let inner: HashSet<usize> = steps[..steps.len() - 1].iter().copied().collect();
        prop_assert_eq!(
            inner.len(),
            steps.len() - 1,
            "cycle repeats a step: {:?}",
            cycle
        );
        for w in steps.windows(2) {
            prop_assert!(
                g.dep_set(w[0]).contains(&w[1]),
                "{} does not depend on {} in {:?}",
                gid(w[0]),
                gid(w[1]),
                cycle
            );
        }
        named.push(inner.into_iter().collect());
    }
    prop_assert!(!named.is_empty());
    Ok(named)
}

proptest! {
    #![proptest_config(cases(256))]

    /// A plan is rejected exactly when its dependencies have a cycle, and every cycle it names is a
    /// real cycle. Acyclic plans get exactly the right edges and Kahn levels.
    #[test]
    fn cycles_are_found_and_real(g in graph()) {
        let n = g.deps.len();
        let reach = g.reach();
        let registry = toolplan_demo::registry();
        let result = tool_plan::compile_value(graph_plan(&g), &registry, &each_call_runs());
        if (0..n).any(|i| reach[i][i]) {
            named_cycles(&g, &result)?;
        } else {
            let plan = match &result {
                Ok(plan) => plan,
                Err(e) => return Err(TestCaseError::fail(format!("acyclic plan rejected: {e}"))),
            };
            // Kahn levels: the longest dependency chain below each step (edges may point forward, so
            // relax n times).
            let mut level = vec![0usize; n];
            for _ in 0..n {
                for i in 0..n {
                    for d in g.dep_set(i) {
                        level[i] = level[i].max(level[d] + 1);
                    }
                }
            }
            for (i, &want_wave) in level.iter().enumerate() {
                let p = plan.index_of(&gid(i)).unwrap();
                let step = &plan.steps()[p];
                let deps: BTreeSet<String> =
                    step.deps.iter().map(|&d| plan.steps()[d].id.clone()).collect();
                let want: BTreeSet<String> = g.dep_set(i).into_iter().map(gid).collect();
                prop_assert_eq!(&deps, &want, "deps of {}", gid(i));
                prop_assert!(step.deps.windows(2).all(|w| w[0] < w[1]), "deps ascending, no repeats");
                prop_assert_eq!(step.wave, want_wave, "wave of {}", gid(i));
                prop_assert!(plan.waves()[want_wave].contains(&p));
                for &d in &step.deps {
                    prop_assert!(plan.steps()[d].dependents.contains(&p));
                }
            }
        }
    }

    /// "Every problem named": each separate group of steps that wait for each other (a strongly
    /// connected component with a cycle, a self-reference included) has one of its cycles named, so
    /// that fixing the named cycles leaves no other cycle behind.
    #[test]
    fn every_cyclic_group_is_named(g in graph()) {
        let n = g.deps.len();
        let reach = g.reach();
        prop_assume!((0..n).any(|i| reach[i][i]));
        let registry = toolplan_demo::registry();
        let result = tool_plan::compile_value(graph_plan(&g), &registry, &each_call_runs());
        let named = named_cycles(&g, &result)?;
        let mut seen = vec![false; n];
        for i in 0..n {
            if !reach[i][i] || seen[i] {
                continue;
            }
            let group: BTreeSet<usize> =
                (0..n).filter(|&j| j == i || (reach[i][j] && reach[j][i])).collect();
            for &j in &group {
                seen[j] = true;
            }
            prop_assert!(
                named.iter().any(|c| c.is_subset(&group)),
                "no cycle named among {:?}; named: {:?}; problems: {}",
                group.iter().map(|&j| gid(j)).collect::<Vec<_>>(),
                named.iter().map(|c| c.iter().map(|&j| gid(j)).collect::<Vec<_>>()).collect::<Vec<_>>(),
                result.as_ref().err().map(ToString::to_string).unwrap_or_default()
            );
        }
    }
}

/// The smallest cases `every_cyclic_group_is_named` finds, fixed: two separate cycles where the second
/// also waits for a step of the first must both be named.
#[test]
pub(super) fn separate_cycles_are_each_named() {
    let registry = toolplan_demo::registry();
    // v0 -> v0, and v1 -> v1 where v1 also waits for v0.
    let self_loops = Graph {
        deps: vec![vec![(0, true)], vec![(0, false), (1, true)]],
    };
    // v0 <-> v1, and v2 <-> v3 where v2 also waits for v0.
    let two_pairs = Graph {
        deps: vec![
            vec![(1, true)],
            vec![(0, true)],
            vec![(0, true), (3, true)],
            vec![(2, true)],
        ],
    };
    for g in [self_loops, two_pairs] {
        let result = tool_plan::compile_value(graph_plan(&g), &registry, &each_call_runs());
        let text = result.as_ref().err().map(ToString::to_string).unwrap();
        let named = named_cycles(&g, &result).unwrap();
        let last = g.deps.len() - 1;
        assert!(
            named.iter().any(|c| c.contains(&last)),
            "the cycle through {} is not named: {text}",
            gid(last)
        );
    }
}

/// Limits under which every step runs, repeats too: these graphs are about the edges the plan
/// writes, and their steps may repeat each other's calls.
fn each_call_runs() -> Limits {
    Limits {
        repeated_calls: toolplan_core::RepeatedCalls::RunEach,
        ..Limits::default()
    }
}
