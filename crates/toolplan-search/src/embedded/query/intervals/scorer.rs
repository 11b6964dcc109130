//! The intervals query in each index segment: the postings of the rule's terms, and the
//! documents whose rule has a span.

use std::fmt;

use tantivy::postings::{Postings, SegmentPostings};
use tantivy::query::{EmptyScorer, EnableScoring, Explanation, Query, Scorer, Weight};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocId, DocSet, Score, SegmentReader, TERMINATED, TantivyError, Term};

use super::spans::{Source, Span, evaluate};
use super::{Pattern, Rule};

/// The query: an interval rule on a text field.
#[derive(Debug, Clone)]
pub(crate) struct IntervalsQuery {
    field: Field,
    rule: Rule,
    max_expansions: usize,
}

impl IntervalsQuery {
    /// The rule on `field`, its patterns matching at most `max_expansions` terms a segment.
    pub(super) fn new(field: Field, rule: Rule, max_expansions: usize) -> IntervalsQuery {
        IntervalsQuery {
            field,
            rule,
            max_expansions,
        }
    }
}

impl Query for IntervalsQuery {
    fn weight(&self, _scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        Ok(Box::new(IntervalsWeight(self.clone())))
    }
}

struct IntervalsWeight(IntervalsQuery);

impl IntervalsWeight {
    /// The rule as a source over `leaves` (each leaf the postings of its terms in `reader`).
    fn source(
        &self,
        rule: &Rule,
        reader: &SegmentReader,
        leaves: &mut Vec<Vec<SegmentPostings>>,
    ) -> tantivy::Result<Source> {
        let field = self.0.field;
        Ok(match rule {
            Rule::Term(text) => {
                let index = reader.inverted_index(field)?;
                let term = Term::from_field_text(field, text);
                let postings =
                    index.read_postings(&term, IndexRecordOption::WithFreqsAndPositions)?;
                leaves.push(postings.into_iter().collect());
                Source::Leaf(leaves.len() - 1)
            }
            Rule::Pattern(pattern, shown) => {
                leaves.push(self.expand(pattern, shown, reader)?);
                Source::Leaf(leaves.len() - 1)
            }
            Rule::Combine {
                rules,
                mode,
                max_gaps,
            } => Source::Combine {
                sources: rules
                    .iter()
                    .map(|r| self.source(r, reader, leaves))
                    .collect::<tantivy::Result<_>>()?,
                mode: *mode,
                max_gaps: *max_gaps,
            },
            Rule::Extend { rule, before } => Source::Extend {
                source: Box::new(self.source(rule, reader, leaves)?),
                before: *before,
            },
            Rule::Repeat { rule, count } => Source::Repeat {
                source: Box::new(self.source(rule, reader, leaves)?),
                count: *count,
            },
            Rule::AnyOf(rules) => Source::AnyOf(
                rules
                    .iter()
                    .map(|r| self.source(r, reader, leaves))
                    .collect::<tantivy::Result<_>>()?,
            ),
            Rule::Filter {
                rule,
                relation,
                negated,
                filter,
            } => Source::Filter {
                source: Box::new(self.source(rule, reader, leaves)?),
                relation: *relation,
                negated: *negated,
                filter: Box::new(self.source(filter, reader, leaves)?),
            },
        })
    }

    /// The postings of the terms a pattern matches in the segment; more than `max_expansions`
    /// is an error, as in Lucene.
    fn expand(
        &self,
        pattern: &Pattern,
        shown: &str,
        reader: &SegmentReader,
    ) -> tantivy::Result<Vec<SegmentPostings>> {
        let index = reader.inverted_index(self.0.field)?;
        let dict = index.terms();
        let mut infos = Vec::new();
        let max = self.0.max_expansions;
        let too_many = || {
            TantivyError::InvalidArgument(format!(
                "Automaton [{shown}] expanded to too many terms (limit {max})"
            ))
        };
        macro_rules! collect {
            ($stream:expr) => {{
                let mut stream = $stream;
                while stream.advance() {
                    if infos.len() == max {
                        return Err(too_many());
                    }
                    infos.push(stream.value().clone());
                }
            }};
        }
        match pattern {
            Pattern::Prefix(prefix) => {
                let mut end = prefix.as_bytes().to_vec();
                // The first key after every key that starts with the prefix.
                while let Some(last) = end.pop() {
                    if last < u8::MAX {
                        end.push(last + 1);
                        break;
                    }
                }
                let builder = dict.range().ge(prefix.as_bytes());
                let builder = if end.is_empty() {
                    builder
                } else {
                    builder.lt(&end)
                };
                collect!(builder.into_stream()?)
            }
            Pattern::Regex(regex) => {
                let automaton = tantivy_fst::Regex::new(regex).map_err(|e| {
                    TantivyError::InvalidArgument(format!("invalid pattern [{shown}]: {e}"))
                })?;
                collect!(dict.search(automaton).into_stream()?)
            }
            Pattern::Fuzzy { term, fuzziness } => {
                let automaton = super::super::fuzzy::Prefixed::new(term, fuzziness);
                collect!(dict.search(automaton).into_stream()?)
            }
        }
        infos
            .iter()
            .map(|info| {
                index
                    .read_postings_from_terminfo(info, IndexRecordOption::WithFreqsAndPositions)
                    .map_err(TantivyError::from)
            })
            .collect()
    }
}

impl Weight for IntervalsWeight {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        let mut leaves = Vec::new();
        let source = self.source(&self.0.rule, reader, &mut leaves)?;
        if leaves.iter().all(Vec::is_empty) {
            return Ok(Box::new(EmptyScorer));
        }
        let mut scorer = IntervalsScorer {
            leaves,
            source,
            boost,
            doc: 0,
            score: 0.0,
            positions: Vec::new(),
        };
        scorer.doc = scorer.find(scorer.first_candidate());
        Ok(Box::new(scorer))
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        let mut scorer = self.scorer(reader, 1.0)?;
        if scorer.seek(doc) != doc {
            return Err(TantivyError::InvalidArgument(format!(
                "document {doc} does not match the intervals query"
            )));
        }
        Ok(Explanation::new("intervals", scorer.score()))
    }
}

/// The documents whose rule has intervals, in order.
struct IntervalsScorer {
    leaves: Vec<Vec<SegmentPostings>>,
    source: Source,
    boost: Score,
    doc: DocId,
    score: Score,
    positions: Vec<u32>,
}

impl IntervalsScorer {
    /// The smallest document any leaf is on.
    fn first_candidate(&self) -> DocId {
        self.leaves
            .iter()
            .flatten()
            .map(DocSet::doc)
            .min()
            .unwrap_or(TERMINATED)
    }

    /// The first document from `candidate` on whose rule has intervals.
    fn find(&mut self, mut candidate: DocId) -> DocId {
        while candidate != TERMINATED {
            let mut spans: Vec<Vec<Span>> = Vec::with_capacity(self.leaves.len());
            for leaf in &mut self.leaves {
                let mut found = Vec::new();
                for postings in leaf.iter_mut() {
                    if postings.doc() == candidate {
                        self.positions.clear();
                        postings.positions(&mut self.positions);
                        found.extend(self.positions.iter().map(|&p| Span::term(p)));
                    }
                }
                found.sort();
                found.dedup();
                spans.push(found);
            }
            let result = evaluate(&self.source, &spans);
            if !result.is_empty() {
                let freq: f32 = result
                    .iter()
                    .map(|s| 1.0 / (1.0 + (s.end - s.start) as f32))
                    .sum();
                self.score = self.boost * freq / (freq + 1.0);
                return candidate;
            }
            candidate = self.step_past(candidate);
        }
        TERMINATED
    }

    /// Moves every leaf past `doc`; the next candidate.
    fn step_past(&mut self, doc: DocId) -> DocId {
        for postings in self.leaves.iter_mut().flatten() {
            if postings.doc() == doc {
                postings.advance();
            }
        }
        self.first_candidate()
    }
}

impl DocSet for IntervalsScorer {
    fn advance(&mut self) -> DocId {
        if self.doc == TERMINATED {
            return TERMINATED;
        }
        let next = self.step_past(self.doc);
        self.doc = self.find(next);
        self.doc
    }

    fn seek(&mut self, target: DocId) -> DocId {
        if self.doc >= target {
            return self.doc;
        }
        for postings in self.leaves.iter_mut().flatten() {
            if postings.doc() < target {
                postings.seek(target);
            }
        }
        let next = self.first_candidate();
        self.doc = self.find(next);
        self.doc
    }

    fn doc(&self) -> DocId {
        self.doc
    }

    fn size_hint(&self) -> u32 {
        self.leaves
            .iter()
            .flatten()
            .map(|p| p.size_hint())
            .max()
            .unwrap_or(0)
    }
}

impl Scorer for IntervalsScorer {
    fn score(&mut self) -> Score {
        self.score
    }
}

impl fmt::Debug for IntervalsWeight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("IntervalsWeight").field(&self.0).finish()
    }
}
