//! Span arithmetic: the spans of term positions combined in order or in any order, filtered by
//! their relations to other spans, kept minimal (no span containing another), as Lucene's
//! interval iterators compute them.
//!
//! Every list of spans here is sorted by start. The work per document grows with the number of
//! spans times the logarithm of it (and, in order, times the number of parts), never with its
//! square: each part is searched by start, with the span ending first from each start on kept
//! beside it ([`Part`]).

use super::{Mode, Relation};

/// A span of positions, the positions between its parts, and the width it counts as inside a
/// larger span (its own positions, or, for repeated intervals, theirs only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Span {
    pub(super) start: u32,
    pub(super) end: u32,
    pub(super) gaps: i64,
    width: i64,
}

impl Span {
    /// The span of one term position.
    pub(super) fn term(position: u32) -> Span {
        Span::new(position, position, 0)
    }

    fn new(start: u32, end: u32, gaps: i64) -> Span {
        Span {
            start,
            end,
            gaps,
            width: i64::from(end) - i64::from(start) + 1,
        }
    }

    /// The span from `start` to `end` over parts `widths` wide in all.
    fn over(start: u32, end: u32, widths: i64) -> Span {
        let span = Span::new(start, end, 0);
        Span {
            gaps: (span.width - widths).max(0),
            ..span
        }
    }
}

/// The rule with its terms replaced by indices into the segment's postings.
pub(super) enum Source {
    Leaf(usize),
    Combine {
        sources: Vec<Source>,
        mode: Mode,
        max_gaps: Option<i64>,
    },
    AnyOf(Vec<Source>),
    Extend {
        source: Box<Source>,
        before: u32,
    },
    Repeat {
        source: Box<Source>,
        count: usize,
    },
    Filter {
        source: Box<Source>,
        relation: Relation,
        negated: bool,
        filter: Box<Source>,
    },
}

/// The intervals of a source in one document, given each leaf's term positions (sorted), sorted
/// by start.
pub(super) fn evaluate(source: &Source, leaves: &[Vec<Span>]) -> Vec<Span> {
    match source {
        Source::Leaf(i) => leaves.get(*i).cloned().unwrap_or_default(),
        Source::AnyOf(sources) => {
            let mut all: Vec<Span> = sources.iter().flat_map(|s| evaluate(s, leaves)).collect();
            all.sort();
            all.dedup();
            all
        }
        Source::Extend { source, before } => {
            let mut spans: Vec<Span> = evaluate(source, leaves)
                .into_iter()
                .map(|s| Span::new(s.start.saturating_sub(*before), s.end, s.gaps))
                .collect();
            spans.sort();
            spans
        }
        Source::Repeat { source, count } => repeat(&evaluate(source, leaves), *count),
        Source::Combine {
            sources,
            mode,
            max_gaps,
        } => {
            let lists: Vec<Vec<Span>> = sources.iter().map(|s| evaluate(s, leaves)).collect();
            // No parts (a `match` of stopwords only) match nothing, as in Lucene.
            if lists.is_empty() || lists.iter().any(Vec::is_empty) {
                return Vec::new();
            }
            let spans = match mode {
                Mode::Ordered => ordered(&lists),
                Mode::Unordered => unordered(&lists),
                Mode::UnorderedNoOverlap => {
                    // Lucene's no-overlap combination of two, folded from the left.
                    let mut acc = lists[0].clone();
                    for next in &lists[1..] {
                        let mut both = ordered(&[acc.clone(), next.clone()]);
                        both.extend(ordered(&[next.clone(), acc]));
                        acc = minimal(both);
                    }
                    acc
                }
            };
            match max_gaps {
                Some(max) => spans.into_iter().filter(|s| s.gaps <= *max).collect(),
                None => spans,
            }
        }
        Source::Filter {
            source,
            relation,
            negated,
            filter,
        } => {
            let spans = evaluate(source, leaves);
            let filters = Filters::new(evaluate(filter, leaves));
            spans
                .into_iter()
                .filter(|x| filters.any_related(*relation, x) != *negated)
                .collect()
        }
    }
}

/// Windows of `count` successive spans, each as one span as wide as its spans together (Lucene's
/// repeating intervals, which are not made minimal).
fn repeat(spans: &[Span], count: usize) -> Vec<Span> {
    if count == 0 {
        return Vec::new();
    }
    spans
        .windows(count)
        .map(|w| {
            let (first, last) = (w[0], w[w.len() - 1]);
            let end = last.end.max(first.end);
            let width: i64 = w.iter().map(|s| s.width).sum();
            let whole = Span::new(first.start, end, 0);
            Span {
                gaps: (whole.width - width).max(0),
                width,
                ..whole
            }
        })
        .collect()
}

/// One part's spans sorted by start, with, for each index, the span ending first (then starting
/// first) among those from it on.
struct Part<'a> {
    spans: &'a [Span],
    best_from: Vec<usize>,
}

impl<'a> Part<'a> {
    fn new(spans: &'a [Span]) -> Part<'a> {
        let mut best_from = vec![0; spans.len()];
        let mut best: Option<usize> = None;
        for i in (0..spans.len()).rev() {
            let better = best
                .is_none_or(|b| (spans[i].end, spans[i].start) <= (spans[b].end, spans[b].start));
            if better {
                best = Some(i);
            }
            best_from[i] = best.unwrap_or(i);
        }
        Part { spans, best_from }
    }

    /// Of the spans starting at or after `from` (after, when `strictly`), the one that ends
    /// first.
    fn first_ending(&self, from: u32, strictly: bool) -> Option<Span> {
        let i = self.spans.partition_point(|s| {
            if strictly {
                s.start <= from
            } else {
                s.start < from
            }
        });
        self.best_from.get(i).map(|&b| self.spans[b])
    }
}

/// The parts in order, each starting after the one before ends: from each span of the first, the
/// earliest ends of the rest.
fn ordered(lists: &[Vec<Span>]) -> Vec<Span> {
    let parts: Vec<Part<'_>> = lists[1..].iter().map(|l| Part::new(l)).collect();
    let spans = lists[0].iter().filter_map(|first| {
        let mut end = first.end;
        let mut widths = first.width;
        for part in &parts {
            let next = part.first_ending(end, true)?;
            end = next.end;
            widths += next.width;
        }
        Some(Span::over(first.start, end, widths))
    });
    minimal(spans.collect())
}

/// The parts in any order, overlaps allowed: for each start a span of some part has, each part's
/// span ending first from there on. Each part's pick only moves later as the start does, so one
/// pass over the starts keeps the latest end and the parts' widths as it goes; a window whose
/// parts all start after its start is wider than the one at their first start, and
/// [`minimal`] drops it.
fn unordered(lists: &[Vec<Span>]) -> Vec<Span> {
    if lists.is_empty() || lists.iter().any(Vec::is_empty) {
        return Vec::new();
    }
    let parts: Vec<Part<'_>> = lists.iter().map(|l| Part::new(l)).collect();
    // Every span's start with its part, in order of start.
    let mut starts: Vec<(u32, usize)> = lists
        .iter()
        .enumerate()
        .flat_map(|(j, l)| l.iter().map(move |s| (s.start, j)))
        .collect();
    starts.sort_unstable();
    let mut next = vec![0usize; parts.len()];
    let mut picked: Vec<Span> = parts.iter().map(|p| p.spans[p.best_from[0]]).collect();
    let mut end = picked.iter().map(|s| s.end).max().unwrap_or(0);
    let mut widths: i64 = picked.iter().map(|s| s.width).sum();
    let mut out = Vec::new();
    let mut passed = 0;
    while passed < starts.len() {
        let start = starts[passed].0;
        // The spans starting before `start` are behind every part's pick now.
        out.push(Span::over(start, end, widths));
        while passed < starts.len() && starts[passed].0 == start {
            let j = starts[passed].1;
            next[j] += 1;
            passed += 1;
            let Some(&b) = parts[j].best_from.get(next[j]) else {
                return minimal(out);
            };
            let pick = parts[j].spans[b];
            widths += pick.width - picked[j].width;
            end = end.max(pick.end);
            picked[j] = pick;
        }
    }
    minimal(out)
}

/// The spans that contain no other span of the list, in order.
fn minimal(mut spans: Vec<Span>) -> Vec<Span> {
    spans.sort_by(|a, b| {
        a.end
            .cmp(&b.end)
            .then(b.start.cmp(&a.start))
            .then(a.gaps.cmp(&b.gaps))
    });
    let mut out: Vec<Span> = Vec::with_capacity(spans.len());
    for s in spans {
        if out.last().is_none_or(|last| s.start > last.start) {
            out.push(s);
        }
    }
    out
}

/// A filter's spans sorted by start, with the latest end up to each index and the earliest end
/// from each index on, so that each relation is one search.
struct Filters {
    spans: Vec<Span>,
    latest_end_to: Vec<u32>,
    earliest_end_from: Vec<u32>,
}

impl Filters {
    fn new(spans: Vec<Span>) -> Filters {
        let mut latest_end_to = Vec::with_capacity(spans.len());
        let mut latest = 0;
        for s in &spans {
            latest = latest.max(s.end);
            latest_end_to.push(latest);
        }
        let mut earliest_end_from = vec![u32::MAX; spans.len()];
        let mut earliest = u32::MAX;
        for (i, s) in spans.iter().enumerate().rev() {
            earliest = earliest.min(s.end);
            earliest_end_from[i] = earliest;
        }
        Filters {
            spans,
            latest_end_to,
            earliest_end_from,
        }
    }

    /// The latest end among the spans starting at or before `position`.
    fn latest_end_starting_by(&self, position: u32) -> Option<u32> {
        let n = self.spans.partition_point(|s| s.start <= position);
        n.checked_sub(1).map(|i| self.latest_end_to[i])
    }

    /// Whether span `x` stands in `relation` to some filter span.
    fn any_related(&self, relation: Relation, x: &Span) -> bool {
        match relation {
            Relation::Containing => {
                let i = self.spans.partition_point(|s| s.start < x.start);
                self.earliest_end_from.get(i).is_some_and(|&e| e <= x.end)
            }
            Relation::ContainedBy => self
                .latest_end_starting_by(x.start)
                .is_some_and(|e| e >= x.end),
            Relation::Overlapping => self
                .latest_end_starting_by(x.end)
                .is_some_and(|e| e >= x.start),
            Relation::Before => self.spans.last().is_some_and(|y| x.end < y.start),
            Relation::After => self.earliest_end_from.first().is_some_and(|&e| x.start > e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Term spans at positions.
    fn at(positions: &[u32]) -> Vec<Span> {
        positions.iter().map(|&p| Span::term(p)).collect()
    }

    fn bounds(spans: &[Span]) -> Vec<(u32, u32, i64)> {
        spans.iter().map(|s| (s.start, s.end, s.gaps)).collect()
    }

    fn span(start: u32, end: u32) -> Span {
        Span::new(start, end, 0)
    }

    #[test]
    fn ordered_and_unordered_spans_are_minimal_with_their_gaps() {
        // "cold rain makes it wet": cold 0, it 3, wet 4.
        let (cold, it, wet) = (at(&[0]), at(&[3]), at(&[4]));
        assert_eq!(bounds(&ordered(&[cold.clone(), wet.clone()])), [(0, 4, 3)]);
        assert!(ordered(&[wet.clone(), cold.clone()]).is_empty());
        assert_eq!(
            bounds(&unordered(&[wet.clone(), cold.clone(), it.clone()])),
            [(0, 4, 2)]
        );
        // "cold cold": two starts, the minimal spans only.
        assert_eq!(bounds(&ordered(&[at(&[4, 5]), at(&[4, 5])])), [(4, 5, 0)]);
        assert_eq!(
            bounds(&minimal(vec![span(0, 5), span(2, 5), span(2, 3)])),
            [(2, 3, 0)]
        );
    }

    #[test]
    fn unordered_windows_are_every_minimal_window() {
        // a at 0 and 6, b at 3 and 9, c at 4: [0,4], [3,6] and [4,9] (which contains no other).
        let spans = unordered(&[at(&[0, 6]), at(&[3, 9]), at(&[4])]);
        assert_eq!(bounds(&spans), [(0, 4, 2), (3, 6, 1), (4, 9, 3)]);
        // The slow way: every window from every start, the minimal ones.
        let lists = [at(&[1, 2, 7, 8]), at(&[2, 5]), at(&[0, 9])];
        let mut slow = Vec::new();
        for from in 0..10 {
            let picks: Option<Vec<Span>> = lists
                .iter()
                .map(|l| l.iter().copied().find(|s| s.start >= from))
                .collect();
            if let Some(picks) = picks {
                let start = picks.iter().map(|s| s.start).min().unwrap_or(0);
                let end = picks.iter().map(|s| s.end).max().unwrap_or(0);
                slow.push(Span::over(start, end, picks.len() as i64));
            }
        }
        assert_eq!(bounds(&unordered(&lists)), bounds(&minimal(slow)));
    }

    #[test]
    fn a_repeated_part_needs_as_many_intervals() {
        // One "cold" cannot stand for two.
        assert!(repeat(&at(&[3]), 2).is_empty());
        // "cold x cold": the two as one span, its gap the position between.
        assert_eq!(bounds(&repeat(&at(&[0, 2, 3]), 2)), [(0, 2, 1), (2, 3, 0)]);
        // As a part of an unordered rule it counts its own positions only.
        let rain = at(&[1]);
        assert_eq!(
            bounds(&unordered(&[repeat(&at(&[0, 2]), 2), rain])),
            [(0, 2, 0)]
        );
    }

    #[test]
    fn filters_compare_spans() {
        let x = span(2, 6);
        let y = span(3, 3);
        let filters = |list: &[Span]| Filters::new(list.to_vec());
        assert!(filters(&[y]).any_related(Relation::Containing, &x));
        assert!(filters(&[x]).any_related(Relation::ContainedBy, &y));
        assert!(filters(&[y]).any_related(Relation::Overlapping, &x));
        assert!(filters(&[span(4, 4)]).any_related(Relation::Before, &y));
        assert!(filters(&[span(0, 1)]).any_related(Relation::After, &x));
        assert!(!filters(&[y]).any_related(Relation::Before, &x));
        assert!(!filters(&[span(1, 3), span(5, 9)]).any_related(Relation::Containing, &x));
        assert!(!filters(&[span(0, 3), span(3, 5)]).any_related(Relation::ContainedBy, &x));
        assert!(!filters(&[span(0, 1), span(7, 8)]).any_related(Relation::Overlapping, &x));
    }

    /// The searches give what comparing with every filter span gives.
    #[test]
    fn filter_searches_agree_with_comparing_every_span() {
        let list: Vec<Span> = [(0, 2), (1, 7), (3, 3), (4, 9), (8, 8)]
            .iter()
            .map(|&(a, b)| span(a, b))
            .collect();
        let filters = Filters::new(list.clone());
        for start in 0..10 {
            for end in start..10 {
                let x = span(start, end);
                for relation in [
                    Relation::Containing,
                    Relation::ContainedBy,
                    Relation::Overlapping,
                    Relation::Before,
                    Relation::After,
                ] {
                    let slow = list.iter().any(|y| match relation {
                        Relation::Containing => x.start <= y.start && y.end <= x.end,
                        Relation::ContainedBy => y.start <= x.start && x.end <= y.end,
                        Relation::Overlapping => x.start <= y.end && y.start <= x.end,
                        Relation::Before => x.end < y.start,
                        Relation::After => x.start > y.end,
                    });
                    assert_eq!(
                        filters.any_related(relation, &x),
                        slow,
                        "{relation:?} {x:?}"
                    );
                }
            }
        }
    }
}
