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

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, PoisonError};

use serde_json::{Map, Value};
use tantivy::schema::IndexRecordOption;
use tantivy::{DocSet, TERMINATED, Term};

use super::schema::{DocMeta, IndexSchema};
use super::{INDEX_DIR, Inner, OpenIndex, State, tv};
use crate::backend::{BulkItem, BulkResult, BulkSummary};
use crate::bulk::{self, BulkOp, Versioning};
use crate::error::SearchError;
use crate::mapping::{Extender, Mapping};

/// One index a bulk load writes to.
struct Target {
    name: String,
    index: Arc<OpenIndex>,
    mapping: Extender,
    /// What this load did to each id it wrote: the document's version and sequence number, or
    /// `None` once deleted (the index's reader sees none of it until the load commits).
    written: HashMap<String, Option<DocMeta>>,
    /// The documents the index held when this load began writing (taken at the first lookup,
    /// after any rebuild).
    committed: Option<tantivy::Searcher>,
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
        let mut summary = BulkSummary {
            items: Vec::with_capacity(actions.len()),
            ..BulkSummary::default()
        };
        let mut targets: Vec<Target> = Vec::new();
        let mut by_name: HashMap<String, usize> = HashMap::new();
        // The index each name an action gives is written to.
        let mut written_to: HashMap<String, String> = HashMap::new();
        // Each action's target, or `None` when it already failed.
        let mut plan: Vec<Option<usize>> = Vec::with_capacity(actions.len());
        for action in &actions {
            let fail = |summary: &mut BulkSummary, e: &dyn std::fmt::Display| {
                summary.errors.push(format!("line {}: {e}", action.line));
                None
            };
            let Some(named) = action.index.as_deref().or(default) else {
                plan.push(fail(&mut summary, &"no _index, and no index was named"));
                continue;
            };
            // Writes through an alias go to its write index (looked up once per name).
            let name = match written_to.get(named) {
                Some(name) => name,
                None => match self.write_target(named) {
                    Ok(name) => written_to.entry(named.to_owned()).or_insert(name),
                    Err(e) => {
                        plan.push(fail(&mut summary, &e));
                        continue;
                    }
                },
            };
            let name = name.as_str();
            let t = match by_name.get(name) {
                Some(&t) => t,
                None => match self.get_or_create(name) {
                    Ok(index) => {
                        targets.push(Target {
                            name: name.to_owned(),
                            mapping: Extender::new(&index.schema.mapping, self.limits.mapping()),
                            index,
                            written: HashMap::new(),
                            committed: None,
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
            let line = action.line;
            // A generated id is new: nothing to look up.
            let (id, current) = match action.id {
                Some(id) => {
                    let current = target.current(&id)?;
                    (id, current)
                }
                None => (self.generate_id(), None),
            };
            let version = match check_version(&id, action.versioning, current, &action.op) {
                Ok(v) => v,
                Err(conflict) => {
                    summary.errors.push(format!("line {line}: {conflict}"));
                    continue;
                }
            };
            let id_term = Term::from_field_text(target.index.schema.id, &id);
            let meta = DocMeta {
                version,
                seq_no: target.index.take_seq_no(),
            };
            let (kept, result) = match action.op {
                BulkOp::Delete => {
                    target.index.write(|w| {
                        w.delete_term(id_term);
                        Ok(())
                    })?;
                    summary.deleted += 1;
                    let result = if current.is_some() {
                        BulkResult::Deleted
                    } else {
                        BulkResult::NotFound
                    };
                    (None, result)
                }
                BulkOp::Index(doc) | BulkOp::Create(doc) => {
                    match target.index.schema.document(&id, &doc, meta) {
                        Ok(d) => {
                            target.index.write(|w| {
                                w.delete_term(id_term);
                                w.add_document(d).map(drop).map_err(tv)
                            })?;
                            summary.indexed += 1;
                            let result = if current.is_some() {
                                BulkResult::Updated
                            } else {
                                BulkResult::Created
                            };
                            (Some(meta), result)
                        }
                        Err(e) => {
                            summary.errors.push(format!("line {line}: {e}"));
                            continue;
                        }
                    }
                }
            };
            target.written.insert(id.clone(), kept);
            summary.items.push(BulkItem {
                id,
                result,
                version: meta.version,
                seq_no: meta.seq_no,
            });
            touched[t] = true;
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
        mapping.check_normalizers(&index.settings.normalizers())?;
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
                next_seq_no: std::sync::atomic::AtomicU64::new(
                    index.next_seq_no.load(std::sync::atomic::Ordering::Relaxed),
                ),
                settings: index.settings.clone(),
            };
            self.open
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(name.to_owned(), Arc::new(same));
            return Ok(());
        }
        self.remap(name, &index, mapping).map(drop)
    }

    /// The index `name`, created with an empty mapping when it does not exist. The caller holds
    /// the write lock.
    fn get_or_create(&self, name: &str) -> Result<Arc<OpenIndex>, SearchError> {
        match self.get(name) {
            Err(SearchError::NoSuchIndex(_)) => {
                let held = self.lock_alias_file()?;
                match self.create_under(name, &Value::Object(Map::new()), &held) {
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
        let new = Arc::new(Self::rebuild(&self.index_dir(name), old, mapping)?);
        self.open
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_owned(), Arc::clone(&new));
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
    /// The version and sequence number of the document `id`, as this load left it or else as the
    /// index holds it; `None` when there is none.
    fn current(&mut self, id: &str) -> Result<Option<DocMeta>, SearchError> {
        if let Some(written) = self.written.get(id) {
            return Ok(*written);
        }
        let schema = &self.index.schema;
        let searcher = self
            .committed
            .get_or_insert_with(|| self.index.reader.searcher());
        if searcher.num_docs() == 0 {
            return Ok(None);
        }
        let term = Term::from_field_text(schema.id, id);
        for segment in searcher.segment_readers() {
            let postings = segment
                .inverted_index(schema.id)
                .map_err(tv)?
                .read_postings(&term, IndexRecordOption::Basic)
                .map_err(|e| SearchError::Index(e.to_string()))?;
            let Some(mut postings) = postings else {
                continue;
            };
            let mut doc = postings.doc();
            while doc != TERMINATED {
                if !segment.is_deleted(doc) {
                    // A document of an index made before versions were kept has none: version 1.
                    let meta = IndexSchema::meta_at(segment, doc).map_err(tv)?;
                    return Ok(Some(meta.unwrap_or(DocMeta {
                        version: 1,
                        seq_no: 0,
                    })));
                }
                doc = postings.advance();
            }
        }
        Ok(None)
    }
}

/// The version a write gives its document, or why it conflicts with the one stored (in
/// OpenSearch's words).
fn check_version(
    id: &str,
    versioning: Versioning,
    current: Option<DocMeta>,
    op: &BulkOp,
) -> Result<u64, String> {
    if let (BulkOp::Create(_), Some(c)) = (op, current) {
        return Err(format!(
            "[{id}]: version conflict, document already exists (current version [{}])",
            c.version
        ));
    }
    let next = current.map_or(1, |c| c.version.saturating_add(1));
    match versioning {
        Versioning::Internal => Ok(next),
        Versioning::External(v) => match current {
            Some(c) if c.version >= v => Err(format!(
                "[{id}]: version conflict, current version [{}] is higher or equal to the one provided [{v}]",
                c.version
            )),
            _ => Ok(v),
        },
        Versioning::ExternalGte(v) => match current {
            Some(c) if c.version > v => Err(format!(
                "[{id}]: version conflict, current version [{}] is higher than the one provided [{v}]",
                c.version
            )),
            _ => Ok(v),
        },
        Versioning::IfSeqNo {
            seq_no,
            primary_term,
        } => match current {
            None => Err(format!(
                "[{id}]: version conflict, required seqNo [{seq_no}], primary term [{primary_term}]. but no document was found"
            )),
            // One primary, never replaced: its term is 1.
            Some(c) if c.seq_no != seq_no || primary_term != 1 => Err(format!(
                "[{id}]: version conflict, required seqNo [{seq_no}], primary term [{primary_term}]. current document has seqNo [{}] and primary term [1]",
                c.seq_no
            )),
            Some(_) => Ok(next),
        },
    }
}

/// Removes the tantivy directories of generations other than `current`.
pub(super) fn remove_other_generations(dir: &Path, current: &str) {
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
