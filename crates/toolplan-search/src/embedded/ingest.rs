//! Writing documents: bulk loads, and the mapping growing with them.
//!
//! A bulk load first reads every document against its index's mapping ([`Extender`], OpenSearch's
//! dynamic mapping): an index the actions name that does not exist is created with an empty
//! mapping, as OpenSearch creates it on a first write, and a document the mapping refuses is a
//! failed action. When documents bring new fields, the index is rebuilt under the grown mapping
//! before anything is written: tantivy's schema is fixed when an index is made, so a new
//! generation of the index (`tantivy.<n>`) is made and every document is indexed into it again
//! from its `_source`, and `mapping.json` then names the new generation (one rename: a crash
//! leaves the old index or the new one). Loading into a new or empty index costs nothing more;
//! a field new to an index of N documents costs re-indexing the N, once per bulk load.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, PoisonError};

use serde_json::{Map, Value};
use tantivy::collector::Count;
use tantivy::query::TermQuery;
use tantivy::schema::{IndexRecordOption, Value as _};
use tantivy::{TantivyDocument, Term};

use super::{INDEX_DIR, Inner, OpenIndex, State, tv};
use crate::backend::BulkSummary;
use crate::bulk::{self, BulkOp};
use crate::error::SearchError;
use crate::mapping::{Extender, Mapping};

/// One index a bulk load writes to.
struct Target {
    name: String,
    index: Arc<OpenIndex>,
    mapping: Extender,
    /// Ids written by this load, which a `create` of the same id must not overwrite.
    written: HashSet<String>,
}

impl Inner {
    /// Applies a bulk body; actions without `_index` go to `default`.
    pub(super) fn bulk_blocking(
        &self,
        default: Option<&str>,
        ndjson: &str,
    ) -> Result<BulkSummary, SearchError> {
        let actions = bulk::parse(ndjson)?;
        let _one_writer = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
        let mut summary = BulkSummary::default();
        let mut targets: Vec<Target> = Vec::new();
        let mut by_name: HashMap<String, usize> = HashMap::new();
        // Each action's target, or `None` when it already failed.
        let mut plan: Vec<Option<usize>> = Vec::with_capacity(actions.len());
        for action in &actions {
            let fail = |summary: &mut BulkSummary, e: &dyn std::fmt::Display| {
                summary.errors.push(format!("line {}: {e}", action.line));
                None
            };
            let Some(name) = action.index.as_deref().or(default) else {
                plan.push(fail(&mut summary, &"no _index, and no index was named"));
                continue;
            };
            let t = match by_name.get(name) {
                Some(&t) => t,
                None => match self.get_or_create(name) {
                    Ok(index) => {
                        targets.push(Target {
                            name: name.to_owned(),
                            mapping: Extender::new(&index.schema.mapping, self.limits.mapping()),
                            index,
                            written: HashSet::new(),
                        });
                        by_name.insert(name.to_owned(), targets.len() - 1);
                        targets.len() - 1
                    }
                    Err(e) => {
                        plan.push(fail(&mut summary, &e));
                        continue;
                    }
                },
            };
            if let BulkOp::Index(doc) | BulkOp::Create(doc) = &action.op
                && let Err(e) = targets[t].mapping.add(doc)
            {
                plan.push(fail(&mut summary, &e));
                continue;
            }
            plan.push(Some(t));
        }
        for target in &mut targets {
            if target.mapping.changed() {
                let grown = std::mem::replace(
                    &mut target.mapping,
                    Extender::new(&target.index.schema.mapping, self.limits.mapping()),
                )
                .finish()?;
                self.check_size(&grown)?;
                target.index = self.remap(&target.name, &target.index, grown)?;
            }
        }
        let mut touched = vec![false; targets.len()];
        for (action, t) in actions.into_iter().zip(plan) {
            let Some(t) = t else { continue };
            let target = &mut targets[t];
            let id = action.id.clone().unwrap_or_else(|| self.generate_id());
            let id_term = Term::from_field_text(target.index.schema.id, &id);
            let doc = match action.op {
                BulkOp::Delete => {
                    target.index.write(|w| {
                        w.delete_term(id_term);
                        Ok(())
                    })?;
                    target.written.remove(&id);
                    summary.deleted += 1;
                    touched[t] = true;
                    continue;
                }
                BulkOp::Create(doc) if target.has(&id)? => {
                    summary.errors.push(format!(
                        "line {}: [{id}]: version conflict, document already exists",
                        action.line
                    ));
                    drop(doc);
                    continue;
                }
                BulkOp::Index(doc) | BulkOp::Create(doc) => doc,
            };
            match target.index.schema.document(&id, &doc) {
                Ok(d) => {
                    target.index.write(|w| {
                        w.delete_term(id_term);
                        w.add_document(d).map(drop).map_err(tv)
                    })?;
                    target.written.insert(id);
                    summary.indexed += 1;
                    touched[t] = true;
                }
                Err(e) => summary.errors.push(format!("line {}: {e}", action.line)),
            }
        }
        for (target, touched) in targets.iter().zip(touched) {
            if touched {
                let ix = &target.index;
                ix.write(|writer| writer.commit().map(drop).map_err(tv))?;
                ix.reader.reload().map_err(tv)?;
            }
        }
        Ok(summary)
    }

    /// Merges `update` into the mapping of `name`, rebuilding the index when its fields change.
    pub(super) fn put_mapping_blocking(
        &self,
        name: &str,
        update: &Value,
    ) -> Result<(), SearchError> {
        let _one_writer = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
        let index = self.get(name)?;
        let mapping = index.schema.mapping.updated(update)?;
        if mapping == index.schema.mapping {
            return Ok(());
        }
        self.check_size(&mapping)?;
        if mapping.fields() == index.schema.mapping.fields() {
            // Root options and object settings only: the documents are indexed as they are.
            State::write(&self.index_dir(name), &mapping, index.generation)?;
            let same = OpenIndex {
                schema: super::IndexSchema::build(mapping),
                index: index.index.clone(),
                reader: index.reader.clone(),
                writer: std::sync::Mutex::new(
                    index
                        .writer
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .take(),
                ),
                generation: index.generation,
            };
            self.open
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(name.to_owned(), Arc::new(same));
            return Ok(());
        }
        self.remap(name, &index, mapping).map(drop)
    }

    /// The index `name`, created with an empty mapping when it does not exist.
    fn get_or_create(&self, name: &str) -> Result<Arc<OpenIndex>, SearchError> {
        match self.get(name) {
            Err(SearchError::NoSuchIndex(_)) => {
                match self.create_blocking(name, &Value::Object(Map::new())) {
                    Ok(()) | Err(SearchError::IndexExists(_)) => self.get(name),
                    Err(e) => Err(e),
                }
            }
            other => other,
        }
    }

    /// Rebuilds the index `name` under `mapping` in a new generation, every document indexed again
    /// from its `_source`, and makes it the index's current one.
    pub(super) fn remap(
        &self,
        name: &str,
        old: &Arc<OpenIndex>,
        mapping: Mapping,
    ) -> Result<Arc<OpenIndex>, SearchError> {
        let dir = self.index_dir(name);
        let generation = old.generation + 1;
        // Hold the old generation's write lock first: another process writing to it makes the
        // rebuild fail here, instead of losing that process's writes.
        old.write(|_| Ok(()))?;
        let new = Self::build(&dir, mapping, generation)?;
        let searcher = old.reader.searcher();
        if searcher.num_docs() > 0 {
            new.write(|writer| {
                for segment in searcher.segment_readers() {
                    let store = segment
                        .get_store_reader(16)
                        .map_err(|e| SearchError::Index(e.to_string()))?;
                    for doc_id in segment.doc_ids_alive() {
                        let doc: TantivyDocument = store.get(doc_id).map_err(tv)?;
                        let id = doc
                            .get_first(old.schema.id)
                            .and_then(|v| v.as_str())
                            .unwrap_or_default()
                            .to_owned();
                        let source: Map<String, Value> = doc
                            .get_first(old.schema.source)
                            .and_then(|v| v.as_bytes())
                            .and_then(|b| serde_json::from_slice(b).ok())
                            .unwrap_or_default();
                        writer
                            .add_document(new.schema.reindexed(&id, &source))
                            .map_err(tv)?;
                    }
                }
                writer.commit().map(drop).map_err(tv)
            })?;
            new.reader.reload().map_err(tv)?;
        }
        State::write(&dir, &new.schema.mapping, generation)?;
        let new = Arc::new(new);
        // The old writer lets go of its lock; searches still running on the old generation finish
        // on it (its files stay readable while open).
        drop(
            old.writer
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        self.open
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_owned(), Arc::clone(&new));
        remove_other_generations(&dir, &State::dir_of(generation));
        Ok(new)
    }

    /// A new document id: unique in this process, ordered by time.
    pub(super) fn generate_id(&self) -> String {
        let n = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let t = chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default();
        format!("{t:x}{n:04x}")
    }
}

impl Target {
    /// Whether a document with `id` is in the index or was written by this load.
    fn has(&self, id: &str) -> Result<bool, SearchError> {
        if self.written.contains(id) {
            return Ok(true);
        }
        let query = TermQuery::new(
            Term::from_field_text(self.index.schema.id, id),
            IndexRecordOption::Basic,
        );
        let found = self
            .index
            .reader
            .searcher()
            .search(&query, &Count)
            .map_err(tv)?;
        Ok(found > 0)
    }
}

/// Removes the tantivy directories of generations other than `current`.
fn remove_other_generations(dir: &Path, current: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let generation = name == INDEX_DIR
            || name
                .strip_prefix(INDEX_DIR)
                .and_then(|rest| rest.strip_prefix('.'))
                .is_some_and(|n| n.parse::<u64>().is_ok());
        if generation && name != current {
            // Best effort: a directory left behind is removed by the next rebuild.
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
