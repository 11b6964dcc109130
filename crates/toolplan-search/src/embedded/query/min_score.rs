//! `min_score`: the documents of a query whose score is at least a bound. Scores are computed
//! even where the caller asked for none (counting, aggregations), since they decide what matches.

use std::fmt;

use tantivy::query::{EnableScoring, Explanation, Query, Scorer, Weight};
use tantivy::{DocId, DocSet, Score, SegmentReader, TERMINATED, TantivyError};

/// A query's documents scoring at least `min`.
pub(crate) struct MinScore {
    inner: Box<dyn Query>,
    min: Score,
}

impl MinScore {
    /// The documents of `inner` scoring at least `min`.
    pub(crate) fn new(inner: Box<dyn Query>, min: Score) -> MinScore {
        MinScore { inner, min }
    }
}

impl fmt::Debug for MinScore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MinScore({:?}, {})", self.inner, self.min)
    }
}

impl Clone for MinScore {
    fn clone(&self) -> Self {
        MinScore {
            inner: self.inner.box_clone(),
            min: self.min,
        }
    }
}

impl Query for MinScore {
    fn weight(&self, scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        let scoring = match scoring {
            EnableScoring::Enabled { .. } => scoring,
            EnableScoring::Disabled {
                searcher_opt: Some(searcher),
                ..
            } => EnableScoring::enabled_from_searcher(searcher),
            EnableScoring::Disabled { .. } => {
                return Err(TantivyError::InvalidArgument(
                    "min_score needs the documents' scores".into(),
                ));
            }
        };
        Ok(Box::new(MinScoreWeight {
            inner: self.inner.weight(scoring)?,
            min: self.min,
        }))
    }

    fn query_terms<'a>(&'a self, visitor: &mut dyn FnMut(&'a tantivy::Term, bool)) {
        self.inner.query_terms(visitor);
    }
}

struct MinScoreWeight {
    inner: Box<dyn Weight>,
    min: Score,
}

impl Weight for MinScoreWeight {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        let mut scorer = MinScoreScorer {
            inner: self.inner.scorer(reader, boost)?,
            min: self.min,
        };
        if scorer.inner.doc() != TERMINATED && scorer.inner.score() < scorer.min {
            scorer.advance();
        }
        Ok(Box::new(scorer))
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        self.inner.explain(reader, doc)
    }
}

struct MinScoreScorer {
    inner: Box<dyn Scorer>,
    min: Score,
}

impl DocSet for MinScoreScorer {
    fn advance(&mut self) -> DocId {
        loop {
            let doc = self.inner.advance();
            if doc == TERMINATED || self.inner.score() >= self.min {
                return doc;
            }
        }
    }

    fn doc(&self) -> DocId {
        self.inner.doc()
    }

    fn size_hint(&self) -> u32 {
        self.inner.size_hint()
    }
}

impl Scorer for MinScoreScorer {
    fn score(&mut self) -> Score {
        self.inner.score()
    }
}
