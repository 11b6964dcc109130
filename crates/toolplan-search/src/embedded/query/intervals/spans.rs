//! Span arithmetic: the spans of term positions combined in order or in any order, filtered by
//! their relations to other spans, kept minimal (no span containing another), as Lucene's
//! interval iterators compute them.

use super::{Mode, Relation};

/// A span of positions, and the positions between its parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Span {
    pub(super) start: u32,
    pub(super) end: u32,
    pub(super) gaps: i64,
}

impl Span {
    fn width(&self) -> i64 {
        i64::from(self.end) - i64::from(self.start) + 1
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
    Filter {
        source: Box<Source>,
        relation: Relation,
        negated: bool,
        filter: Box<Source>,
    },
}

/// The intervals of a source in one document, given each leaf's term positions.
pub(super) fn evaluate(source: &Source, leaves: &[Vec<Span>]) -> Vec<Span> {
    match source {
        Source::Leaf(i) => leaves.get(*i).cloned().unwrap_or_default(),
        Source::AnyOf(sources) => {
            let mut all: Vec<Span> = sources.iter().flat_map(|s| evaluate(s, leaves)).collect();
            all.sort();
            all.dedup();
            all
        }
        Source::Combine {
            sources,
            mode,
            max_gaps,
        } => {
            let parts: Vec<Vec<Span>> = sources.iter().map(|s| evaluate(s, leaves)).collect();
            // No parts (a `match` of stopwords only) match nothing, as in Lucene.
            if parts.is_empty() || parts.iter().any(Vec::is_empty) {
                return Vec::new();
            }
            let spans = match mode {
                Mode::Ordered => ordered(&parts),
                Mode::Unordered => unordered(&parts),
                Mode::UnorderedNoOverlap => {
                    // Lucene's no-overlap combination of two, folded from the left.
                    let mut acc = parts[0].clone();
                    for next in &parts[1..] {
                        let pair = [acc.clone(), next.clone()];
                        let swapped = [next.clone(), acc];
                        let mut both = ordered(&pair);
                        both.extend(ordered(&swapped));
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
            let filters = evaluate(filter, leaves);
            spans
                .into_iter()
                .filter(|x| filters.iter().any(|y| related(*relation, x, y)) != *negated)
                .collect()
        }
    }
}

/// Whether span `x` stands in `relation` to span `y`.
fn related(relation: Relation, x: &Span, y: &Span) -> bool {
    match relation {
        Relation::Containing => x.start <= y.start && y.end <= x.end,
        Relation::ContainedBy => y.start <= x.start && x.end <= y.end,
        Relation::Overlapping => x.start <= y.end && y.start <= x.end,
        Relation::Before => x.end < y.start,
        Relation::After => x.start > y.end,
    }
}

/// Of the spans in `list` that start at or after `from` (or after, when `strictly`), the one that
/// ends first (the widest of those).
fn first_ending(list: &[Span], from: u32, strictly: bool) -> Option<Span> {
    list.iter()
        .filter(|s| {
            if strictly {
                s.start > from
            } else {
                s.start >= from
            }
        })
        .min_by_key(|s| (s.end, s.start))
        .copied()
}

/// The span from `first` over one span of each of `others`, each picked by `pick` from its part
/// and the span so far; its gaps the positions the parts leave between them. `None` when a part
/// has nothing to pick.
fn join<'a>(
    first: &Span,
    others: impl Iterator<Item = &'a Vec<Span>>,
    pick: impl Fn(&[Span], &Span) -> Option<Span>,
) -> Option<Span> {
    let mut joined = *first;
    let mut widths = first.width();
    for part in others {
        let next = pick(part, &joined)?;
        joined.end = joined.end.max(next.end);
        widths += next.width();
    }
    joined.gaps = (joined.width() - widths).max(0);
    Some(joined)
}

/// The parts in order, each starting after the one before ends: from each span of the first, the
/// earliest ends of the rest.
fn ordered(parts: &[Vec<Span>]) -> Vec<Span> {
    let spans = parts[0].iter().filter_map(|first| {
        join(first, parts[1..].iter(), |part, so_far| {
            first_ending(part, so_far.end, true)
        })
    });
    minimal(spans.collect())
}

/// The parts in any order, overlaps allowed: for each span of each part as the first, the
/// earliest-ending span of every other part that starts with it or after.
fn unordered(parts: &[Vec<Span>]) -> Vec<Span> {
    let mut out = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let others = || {
            parts
                .iter()
                .enumerate()
                .filter(move |(j, _)| *j != i)
                .map(|(_, p)| p)
        };
        out.extend(part.iter().filter_map(|anchor| {
            join(anchor, others(), |other, so_far| {
                first_ending(other, so_far.start, false)
            })
        }));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Term spans at positions.
    fn at(positions: &[u32]) -> Vec<Span> {
        positions
            .iter()
            .map(|&p| Span {
                start: p,
                end: p,
                gaps: 0,
            })
            .collect()
    }

    fn bounds(spans: &[Span]) -> Vec<(u32, u32, i64)> {
        spans.iter().map(|s| (s.start, s.end, s.gaps)).collect()
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
        // The same position may stand for two parts when unordered.
        assert_eq!(
            bounds(&unordered(&[cold.clone(), cold.clone()])),
            [(0, 0, 0)]
        );
        // "cold cold": two starts, the minimal spans only.
        assert_eq!(bounds(&ordered(&[at(&[4, 5]), at(&[4, 5])])), [(4, 5, 0)]);
        assert_eq!(
            bounds(&minimal(vec![
                Span {
                    start: 0,
                    end: 5,
                    gaps: 0
                },
                Span {
                    start: 2,
                    end: 5,
                    gaps: 0
                },
                Span {
                    start: 2,
                    end: 3,
                    gaps: 0
                },
            ])),
            [(2, 3, 0)]
        );
    }

    #[test]
    fn filters_compare_spans() {
        let x = Span {
            start: 2,
            end: 6,
            gaps: 0,
        };
        let y = Span {
            start: 3,
            end: 3,
            gaps: 0,
        };
        assert!(related(Relation::Containing, &x, &y));
        assert!(related(Relation::ContainedBy, &y, &x));
        assert!(related(Relation::Overlapping, &x, &y));
        assert!(related(
            Relation::Before,
            &y,
            &Span {
                start: 4,
                end: 4,
                gaps: 0
            }
        ));
        assert!(related(
            Relation::After,
            &x,
            &Span {
                start: 0,
                end: 1,
                gaps: 0
            }
        ));
        assert!(!related(Relation::Before, &x, &y));
    }
}
