//! Fuzzy term matching as Lucene's `FuzzyQuery` does it: the terms within `distance` edits of a
//! term (a transposition one edit or two) that share its first `prefix_length` characters, at
//! most `max_expansions` of them over the index — the most alike (`1 - edits / the shorter
//! length`), then the first in term order, as Lucene's top-terms rewrite keeps them; all of them
//! with a constant-score rewrite —, each scored as a `term` query weighted by its likeness
//! (document frequencies are each term's own, not blended as Lucene blends them). `match`, `match_bool_prefix`, `multi_match` and `fuzzy` use it.

use std::collections::BinaryHeap;
use std::fmt;
use std::sync::OnceLock;

use levenshtein_automata::{DFA, Distance, LevenshteinAutomatonBuilder, SINK_STATE};
use tantivy::postings::TermInfo;
use tantivy::query::{
    BitSetDocSet, BooleanQuery, BoostQuery, ConstScorer, EnableScoring, Explanation, Occur, Query,
    Scorer, TermQuery, Weight,
};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{BitSet, DocId, DocSet, Score, SegmentReader, TantivyError, Term};
use tantivy_fst::Automaton;

/// OpenSearch's default `max_expansions` of fuzzy matching.
pub(crate) const DEFAULT_MAX_EXPANSIONS: usize = 50;

/// How a term is matched fuzzily.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Fuzziness {
    /// Edits allowed (0 to 2).
    pub(crate) distance: u8,
    /// Whether swapping two neighbouring characters is one edit.
    pub(crate) transpositions: bool,
    /// Leading characters that must be the same.
    pub(crate) prefix_length: usize,
    /// Most terms matched in one index segment.
    pub(crate) max_expansions: usize,
}

/// The documents holding a term near `term` in `field`.
#[derive(Clone)]
pub(crate) struct FuzzyQuery {
    field: Field,
    term: String,
    fuzziness: Fuzziness,
}

impl FuzzyQuery {
    /// Terms of `field` near `term` as `fuzziness` says.
    pub(crate) fn new(field: Field, term: &str, fuzziness: Fuzziness) -> FuzzyQuery {
        FuzzyQuery {
            field,
            term: term.to_owned(),
            fuzziness,
        }
    }
}

impl fmt::Debug for FuzzyQuery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Fuzzy({:?}, {:?}, {:?})",
            self.field, self.term, self.fuzziness
        )
    }
}

impl Query for FuzzyQuery {
    fn weight(&self, scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        let automaton = Prefixed::new(&self.term, &self.fuzziness);
        let max = self.fuzziness.max_expansions;
        let Some(searcher) = scoring.searcher() else {
            // No index to expand over: each segment's own terms, scored alike.
            return Ok(Box::new(FuzzyWeight {
                field: self.field,
                automaton,
                max_expansions: max,
            }));
        };
        // The closest terms of each segment, then of them all.
        let mut found: Vec<(u8, Vec<u8>)> = Vec::new();
        for reader in searcher.segment_readers() {
            // Every term of the segment: they are ranked over the index below.
            let weight = FuzzyWeight {
                field: self.field,
                automaton: Prefixed::new(&self.term, &self.fuzziness),
                max_expansions: usize::MAX,
            };
            found.extend(
                weight
                    .closest(reader)?
                    .into_iter()
                    .map(|(d, key, _)| (d, key)),
            );
        }
        // Ranked as Lucene's top-terms rewrite ranks them: the most alike (1 - edits / the
        // shorter length), then the first in term order; a term found in two segments once.
        let length = self.term.chars().count();
        let likeness = |distance: u8, key: &[u8]| {
            let shorter = length
                .min(String::from_utf8_lossy(key).chars().count())
                .max(1);
            1.0 - f32::from(distance) / shorter as f32
        };
        found.sort_by(|a, b| a.1.cmp(&b.1));
        found.dedup_by(|a, b| a.1 == b.1);
        found.sort_by(|a, b| {
            likeness(b.0, &b.1)
                .total_cmp(&likeness(a.0, &a.1))
                .then_with(|| a.1.cmp(&b.1))
        });
        found.truncate(max);
        let clauses: Vec<(Occur, Box<dyn Query>)> = found
            .into_iter()
            .map(|(distance, key)| {
                let likeness = likeness(distance, &key);
                let text = String::from_utf8_lossy(&key).into_owned();
                let term = TermQuery::new(
                    Term::from_field_text(self.field, &text),
                    IndexRecordOption::WithFreqs,
                );
                let clause: Box<dyn Query> =
                    Box::new(BoostQuery::new(Box::new(term), likeness.max(0.0)));
                (Occur::Should, clause)
            })
            .collect();
        BooleanQuery::new(clauses).weight(scoring)
    }
}

/// The terms near a term, as an automaton over a term dictionary: the first `prefix_length`
/// characters exactly, then the rest within the Levenshtein automaton's distance.
pub(crate) struct Prefixed {
    prefix: Vec<u8>,
    dfa: DFA,
}

/// The Levenshtein automaton builder of a distance (0 to 2) and transposition rule, made once:
/// making one takes milliseconds at distance 2.
fn builder(distance: u8, transpositions: bool) -> &'static LevenshteinAutomatonBuilder {
    static BUILDERS: [[OnceLock<LevenshteinAutomatonBuilder>; 2]; 3] =
        [const { [const { OnceLock::new() }; 2] }; 3];
    let d = distance.min(2);
    BUILDERS[usize::from(d)][usize::from(transpositions)]
        .get_or_init(|| LevenshteinAutomatonBuilder::new(d, transpositions))
}

/// Where [`Prefixed`] is: inside the prefix, in the automaton, or out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Prefix(usize),
    Edits(u32),
    Out,
}

impl Prefixed {
    /// The automaton of the terms near `term` as `fuzziness` says (its `max_expansions` aside).
    pub(crate) fn new(term: &str, fuzziness: &Fuzziness) -> Prefixed {
        let split = term
            .char_indices()
            .nth(fuzziness.prefix_length)
            .map_or(term.len(), |(at, _)| at);
        let (prefix, rest) = term.split_at(split);
        Prefixed {
            prefix: prefix.as_bytes().to_vec(),
            dfa: builder(fuzziness.distance, fuzziness.transpositions).build_dfa(rest),
        }
    }

    /// The edits between `term` and the query's term, when within the distance.
    fn distance(&self, term: &[u8]) -> Option<u8> {
        let rest = term.strip_prefix(self.prefix.as_slice())?;
        match self.dfa.eval(rest) {
            Distance::Exact(d) => Some(d),
            Distance::AtLeast(_) => None,
        }
    }
}

impl Automaton for Prefixed {
    type State = State;

    fn start(&self) -> State {
        if self.prefix.is_empty() {
            State::Edits(self.dfa.initial_state())
        } else {
            State::Prefix(0)
        }
    }

    fn is_match(&self, state: &State) -> bool {
        match state {
            State::Edits(s) => matches!(self.dfa.distance(*s), Distance::Exact(_)),
            _ => false,
        }
    }

    fn can_match(&self, state: &State) -> bool {
        match state {
            State::Edits(s) => *s != SINK_STATE,
            State::Prefix(_) => true,
            State::Out => false,
        }
    }

    fn accept(&self, state: &State, byte: u8) -> State {
        match *state {
            State::Prefix(i) if self.prefix.get(i) == Some(&byte) => {
                if i + 1 == self.prefix.len() {
                    State::Edits(self.dfa.initial_state())
                } else {
                    State::Prefix(i + 1)
                }
            }
            State::Edits(s) => State::Edits(self.dfa.transition(s, byte)),
            _ => State::Out,
        }
    }
}

struct FuzzyWeight {
    field: Field,
    automaton: Prefixed,
    max_expansions: usize,
}

impl FuzzyWeight {
    /// The terms matched in a segment: the closest `max_expansions`, then the first in order.
    fn terms(&self, reader: &SegmentReader) -> tantivy::Result<Vec<TermInfo>> {
        Ok(self
            .closest(reader)?
            .into_iter()
            .map(|(_, _, info)| info)
            .collect())
    }

    /// The closest `max_expansions` terms of a segment, with their edits.
    fn closest(&self, reader: &SegmentReader) -> tantivy::Result<Vec<(u8, Vec<u8>, TermInfo)>> {
        let index = reader.inverted_index(self.field)?;
        let dict = index.terms();
        let mut stream = dict.search(&self.automaton).into_stream()?;
        // The worst kept on top, to be dropped when a better one comes.
        let mut kept: BinaryHeap<(u8, Vec<u8>, Ordinal)> = BinaryHeap::new();
        while let Some((key, info)) = stream.next() {
            let Some(distance) = self.automaton.distance(key) else {
                continue;
            };
            kept.push((distance, key.to_vec(), Ordinal(info.clone())));
            if kept.len() > self.max_expansions {
                kept.pop();
            }
        }
        Ok(kept
            .into_iter()
            .map(|(distance, key, info)| (distance, key, info.0))
            .collect())
    }
}

/// A term's postings address, ordered by nothing (the term and its distance order the heap).
struct Ordinal(TermInfo);

impl PartialEq for Ordinal {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for Ordinal {}
impl PartialOrd for Ordinal {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ordinal {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

impl Weight for FuzzyWeight {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        let index = reader.inverted_index(self.field)?;
        let mut docs = BitSet::with_max_value(reader.max_doc());
        for info in self.terms(reader)? {
            let mut postings =
                index.read_block_postings_from_terminfo(&info, IndexRecordOption::Basic)?;
            loop {
                let block = postings.docs();
                if block.is_empty() {
                    break;
                }
                for &doc in block {
                    docs.insert(doc);
                }
                postings.advance();
            }
        }
        Ok(Box::new(ConstScorer::new(BitSetDocSet::from(docs), boost)))
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        let mut scorer = self.scorer(reader, 1.0)?;
        if scorer.seek(doc) == doc {
            Ok(Explanation::new("fuzzy", scorer.score()))
        } else {
            Err(TantivyError::InvalidArgument(format!(
                "document {doc} does not match"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn automaton(term: &str, distance: u8, prefix_length: usize) -> Prefixed {
        Prefixed::new(
            term,
            &Fuzziness {
                distance,
                transpositions: true,
                prefix_length,
                max_expansions: 50,
            },
        )
    }

    fn matches(a: &Prefixed, text: &str) -> bool {
        let mut state = a.start();
        for b in text.bytes() {
            state = a.accept(&state, b);
        }
        a.is_match(&state)
    }

    #[test]
    fn the_prefix_is_exact_and_the_rest_within_the_distance() {
        let a = automaton("xylophoen", 1, 1);
        assert!(matches(&a, "xylophone"));
        assert_eq!(a.distance(b"xylophone"), Some(1));
        assert!(!matches(&a, "zylophoen"));
        let b = automaton("dob", 1, 0);
        assert!(matches(&b, "dog") && matches(&b, "bob") && !matches(&b, "cat"));
        // A prefix as long as the term leaves nothing to edit.
        let c = automaton("dog", 1, 5);
        assert!(matches(&c, "dog") && !matches(&c, "dot"));
    }
}
