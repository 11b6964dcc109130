//! Stopping a search in progress: a shared [`Stop`] that the async side raises (the body's `timeout`,
//! the time budget, the caller dropping the search) and a query wrapper, [`Bounded`], whose scorers
//! end their document stream once it is raised. Collectors then finish with what they have: a partial
//! answer for a body `timeout`, an error for the others. The flag is read between matching documents
//! of queries whose documents are costly to match (phrases); queries whose documents are cheap keep
//! tantivy's own loops (block-WAND, buffered unions) and read it between segments and while pruning.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use tantivy::query::{EnableScoring, Explanation, Query, Scorer, Weight};
use tantivy::{DocId, DocSet, Score, SegmentReader, TERMINATED};

/// Why a search stops; later reasons take over from earlier ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Reason {
    /// Running.
    Running = 0,
    /// The body's `timeout` passed: answer with what was found.
    TimedOut = 1,
    /// The backend's time budget passed: fail.
    OverBudget = 2,
    /// The caller went away: fail.
    Cancelled = 3,
}

/// Whether, and why, a search must stop.
#[derive(Debug, Default)]
pub struct Stop(AtomicU8);

impl Stop {
    /// Asks the search to stop for `why` (a stronger reason than the current one wins).
    pub fn raise(&self, why: Reason) {
        self.0.fetch_max(why as u8, Ordering::Relaxed);
    }

    /// The current reason.
    pub fn reason(&self) -> Reason {
        match self.0.load(Ordering::Relaxed) {
            0 => Reason::Running,
            1 => Reason::TimedOut,
            2 => Reason::OverBudget,
            _ => Reason::Cancelled,
        }
    }

    fn stopped(&self) -> bool {
        self.0.load(Ordering::Relaxed) != 0
    }
}

/// Raises [`Reason::Cancelled`] when dropped: held by the search's future, so dropping the future
/// stops the blocking work.
pub struct StopOnDrop(pub Arc<Stop>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.raise(Reason::Cancelled);
    }
}

/// A query whose documents stop coming once [`Stop`] is raised.
#[derive(Debug)]
pub struct Bounded {
    inner: Box<dyn Query>,
    stop: Arc<Stop>,
    /// Whether every document is cheap to match (no phrase): then the inner query's own loops run,
    /// which cannot be left inside a segment (at most a segment's scan at full speed).
    cheap: bool,
}

impl Bounded {
    /// `inner`, stopped by `stop`.
    pub fn new(inner: Box<dyn Query>, stop: Arc<Stop>, cheap: bool) -> Self {
        Self { inner, stop, cheap }
    }
}

impl Clone for Bounded {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.box_clone(),
            stop: Arc::clone(&self.stop),
            cheap: self.cheap,
        }
    }
}

impl Query for Bounded {
    fn weight(&self, enable_scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        Ok(Box::new(BoundedWeight {
            inner: self.inner.weight(enable_scoring)?,
            stop: Arc::clone(&self.stop),
            cheap: self.cheap,
        }))
    }
}

struct BoundedWeight {
    inner: Box<dyn Weight>,
    stop: Arc<Stop>,
    cheap: bool,
}

impl Weight for BoundedWeight {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        Ok(Box::new(BoundedScorer {
            inner: self.inner.scorer(reader, boost)?,
            stop: Arc::clone(&self.stop),
            done: false,
        }))
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        self.inner.explain(reader, doc)
    }

    fn count(&self, reader: &SegmentReader) -> tantivy::Result<u32> {
        if self.cheap {
            if self.stop.stopped() {
                return Ok(0);
            }
            return self.inner.count(reader);
        }
        let mut scorer = self.scorer(reader, 1.0)?;
        Ok(match reader.alive_bitset() {
            Some(alive) => scorer.count(alive),
            None => scorer.count_including_deleted(),
        })
    }

    fn for_each(
        &self,
        reader: &SegmentReader,
        callback: &mut dyn FnMut(DocId, Score),
    ) -> tantivy::Result<()> {
        if self.cheap {
            if self.stop.stopped() {
                return Ok(());
            }
            return self.inner.for_each(reader, callback);
        }
        let mut scorer = self.scorer(reader, 1.0)?;
        let mut doc = scorer.doc();
        while doc != TERMINATED {
            callback(doc, scorer.score());
            doc = scorer.advance();
        }
        Ok(())
    }

    fn for_each_no_score(
        &self,
        reader: &SegmentReader,
        callback: &mut dyn FnMut(&[DocId]),
    ) -> tantivy::Result<()> {
        if self.cheap {
            if self.stop.stopped() {
                return Ok(());
            }
            return self.inner.for_each_no_score(reader, callback);
        }
        let mut scorer = self.scorer(reader, 1.0)?;
        let mut block = Vec::with_capacity(64);
        let mut doc = scorer.doc();
        while doc != TERMINATED {
            block.push(doc);
            if block.len() == block.capacity() {
                callback(&block);
                block.clear();
            }
            doc = scorer.advance();
        }
        if !block.is_empty() {
            callback(&block);
        }
        Ok(())
    }

    fn for_each_pruning(
        &self,
        threshold: Score,
        reader: &SegmentReader,
        callback: &mut dyn FnMut(DocId, Score) -> Score,
    ) -> tantivy::Result<()> {
        if self.cheap {
            // Once stopped, no score can pass the threshold, so the pruning skips the rest.
            let stop = &self.stop;
            return self
                .inner
                .for_each_pruning(threshold, reader, &mut |doc, score| {
                    if stop.stopped() {
                        Score::INFINITY
                    } else {
                        callback(doc, score)
                    }
                });
        }
        let mut scorer = self.scorer(reader, 1.0)?;
        let mut threshold = threshold;
        let mut doc = scorer.doc();
        while doc != TERMINATED {
            let score = scorer.score();
            if score > threshold {
                threshold = callback(doc, score);
            }
            doc = scorer.advance();
        }
        Ok(())
    }
}

struct BoundedScorer {
    inner: Box<dyn Scorer>,
    stop: Arc<Stop>,
    done: bool,
}

impl BoundedScorer {
    fn end(&mut self) -> DocId {
        self.done = true;
        TERMINATED
    }
}

impl DocSet for BoundedScorer {
    fn advance(&mut self) -> DocId {
        if self.done || self.stop.stopped() {
            return self.end();
        }
        self.inner.advance()
    }

    fn seek(&mut self, target: DocId) -> DocId {
        if self.done || self.stop.stopped() {
            return self.end();
        }
        self.inner.seek(target)
    }

    fn doc(&self) -> DocId {
        if self.done {
            TERMINATED
        } else {
            self.inner.doc()
        }
    }

    fn size_hint(&self) -> u32 {
        self.inner.size_hint()
    }
}

impl Scorer for BoundedScorer {
    fn score(&mut self) -> Score {
        self.inner.score()
    }
}
