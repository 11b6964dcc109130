//! The embedded backend: one tantivy index per OpenSearch index, on disk under a data directory.
//!
//! Layout: `<data dir>/<index>/mapping.json` (the mapping, grown by the documents' new fields, and
//! the generation of the tantivy index that holds them) and `<data dir>/<index>/tantivy/` (generation
//! 0; `tantivy.<n>` after the mapping grew `n` times: see `ingest`). Each open index keeps a reader that is reloaded after every commit, so a search sees
//! every document loaded before it, and one writer (one thread, so document order is stable) that the
//! first write opens: reading never takes the index's write lock. One process writes to an index at
//! a time (tantivy's lock; a rebuild takes the old generation's lock first, so it fails rather
//! than lose another process's writes), and a process sees another's writes when it next opens
//! the index. Stored search templates are
//! `<data dir>/_scripts/<id>.json` (index names cannot start with `_`).
//! Blocking index work runs on tokio's blocking pool.
//!
//! A search is bounded by the backend's [`SearchLimits`]: the request is checked against them, and a
//! timer stops the search in progress at the body's `timeout` (answering with the hits found so far,
//! `timed_out: true`) or at the time budget (failing); dropping the search's future stops it too.
//! An index whose directory cannot be read is left out of the list (with the reason, in
//! [`SearchBackend::list_indices_checked`]) and fails only the requests that name it.
//!
//! The parts: this module keeps the open indices; `ingest` writes documents, growing the mapping
//! and rebuilding the index when they bring new fields; `schema` maps an OpenSearch
//! mapping and documents onto tantivy; `analysis` registers the analyzers and normalizers a mapping
//! can name on each index; `search` runs one request body on one index, `multi` on several; `query` translates its query
//! DSL (by family: full text, term level, compound); `aggs` runs its aggregations; `budget` stops a
//! search in progress.

mod aggs;
mod alias_table;
mod analysis;
mod budget;
mod collapse;
mod combine;
mod fetch;
mod ingest;
mod lookup;
mod multi;
mod query;
mod schema;
mod search;
mod sort;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use async_trait::async_trait;
use chrono::Utc;
use serde_json::Value;
use tantivy::collector::TopDocs;
use tantivy::query::AllQuery;
use tantivy::schema::Value as _;
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument};

pub use crate::limits::DEFAULT_MAX_RESULT_WINDOW as MAX_RESULT_WINDOW;
pub use query::UNSUPPORTED;
pub use schema::IndexSchema;

use self::budget::{Reason, Stop, StopOnDrop};
use crate::backend::{
    BulkSummary, IndexInfo, IndexListing, SearchBackend, UnreadableIndex, check_index_expression,
    check_index_name, check_script_id, is_multi_index, script_object,
};
use crate::error::SearchError;
use crate::limits::{SearchLimits, body_timeout};
use crate::mapping::Mapping;
use crate::settings::IndexSettings;

const MAPPING_FILE: &str = "mapping.json";
const INDEX_DIR: &str = "tantivy";
const WRITER_MEMORY: usize = 50_000_000;
const SCRIPTS_DIR: &str = "_scripts";

struct OpenIndex {
    schema: IndexSchema,
    index: Index,
    reader: IndexReader,
    /// Opened by the first write: searching never takes the index's write lock, so several
    /// processes (and several backends in one process) can read one index.
    writer: Mutex<Option<IndexWriter>>,
    /// Which tantivy directory holds it ([`State`]).
    generation: u64,
    /// The sequence number of the next write: one more than the highest stored, found again when
    /// the writer opens (another process may have written before this one took the lock).
    next_seq_no: AtomicU64,
    /// The index's settings (`settings.json`), which lower the search limits for it.
    settings: IndexSettings,
}

/// One more than the highest sequence number stored in the index (0 when it is empty, or made
/// before sequence numbers were kept).
fn next_seq_no(index: &Index, searcher: &tantivy::Searcher) -> Result<u64, SearchError> {
    let mut next = 0;
    if index.schema().get_field(schema::SEQ_NO).is_err() {
        return Ok(next);
    }
    for segment in searcher.segment_readers() {
        if let Some(column) = segment
            .fast_fields()
            .column_opt::<u64>(schema::SEQ_NO)
            .map_err(tv)?
            && segment.num_docs() > 0
        {
            next = next.max(column.max_value().saturating_add(1));
        }
    }
    Ok(next)
}

impl OpenIndex {
    /// Gives the index its settings, and registers the custom normalizers they define (before
    /// anything is written with them).
    fn set_settings(&mut self, settings: IndexSettings) {
        analysis::register_normalizers(&self.index, &settings.normalizers());
        self.settings = settings;
    }

    /// A sequence number for a write.
    fn take_seq_no(&self) -> u64 {
        self.next_seq_no.fetch_add(1, Ordering::Relaxed)
    }

    /// Runs `f` with the index's writer, opening it first if needed.
    fn write<R>(
        &self,
        f: impl FnOnce(&mut IndexWriter) -> Result<R, SearchError>,
    ) -> Result<R, SearchError> {
        let mut slot = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            let writer = self
                .index
                .writer_with_num_threads(1, WRITER_MEMORY)
                .map_err(tv)?;
            self.reader.reload().map_err(tv)?;
            let next = next_seq_no(&self.index, &self.reader.searcher())?;
            self.next_seq_no.fetch_max(next, Ordering::Relaxed);
            *slot = Some(writer);
        }
        match slot.as_mut() {
            Some(writer) => f(writer),
            None => Err(SearchError::Index("the index writer did not open".into())),
        }
    }
}

/// The embedded, on-disk search backend. Cheap to clone: clones share the open indices.
#[derive(Clone)]
pub struct EmbeddedBackend {
    inner: Arc<Inner>,
}

impl EmbeddedBackend {
    /// The body with its terms lookups replaced by the values they name ([`lookup`]); `None` when
    /// it has none.
    async fn resolve_lookups(&self, body: &Value) -> Result<Option<Value>, SearchError> {
        let lookups = lookup::find(body, &self.inner.limits)?;
        if lookups.is_empty() {
            return Ok(None);
        }
        let mut resolved = body.clone();
        for l in lookups {
            check_index_name(&l.index)?;
            let found = self
                .search_one(
                    &l.index,
                    &serde_json::json!({"size": 1, "query": {"ids": {"values": [l.id]}}}),
                )
                .await?;
            let terms = lookup::terms_of(&found["hits"]["hits"][0]["_source"], &l.path);
            if let Some(slot) = resolved.pointer_mut(&l.pointer) {
                *slot = Value::Array(terms);
            }
        }
        Ok(Some(resolved))
    }

    /// The readable indices' names, and the alias table.
    async fn indices_and_aliases(
        &self,
    ) -> Result<(Vec<String>, crate::aliases::Aliases), SearchError> {
        let existing = self
            .list_indices()
            .await?
            .into_iter()
            .map(|i| i.name)
            .collect();
        let me = Arc::clone(&self.inner);
        let aliases = blocking(move || me.aliases()).await?;
        Ok((existing, aliases))
    }

    /// Runs a search body on one index, on a blocking thread, bounded by the limits: the body's
    /// `timeout` makes it answer with what it found by then, the time budget makes it fail, and
    /// dropping the future stops it (each at the next matching document).
    async fn search_one(&self, name: &str, body: &Value) -> Result<Value, SearchError> {
        let partial_after = body_timeout(body.get("timeout"))?;
        let budget = self.inner.limits.timeout;
        let stop = Arc::new(Stop::default());
        let _stop_on_drop = StopOnDrop(Arc::clone(&stop));
        let (me, index, body, running) = (
            Arc::clone(&self.inner),
            name.to_owned(),
            body.clone(),
            Arc::clone(&stop),
        );
        let work = blocking(move || {
            let ix = me.get(&index)?;
            let searcher = ix.reader.searcher();
            let searches = std::cell::Cell::new(0);
            let env = search::Env {
                name: &index,
                index: &ix.index,
                schema: &ix.schema,
                searcher: &searcher,
                now: Utc::now(),
                limits: &ix.settings.limits(&me.limits),
                stop: &running,
                searches: &searches,
            };
            search::run(&env, &body)
        });
        let timer = async {
            if let Some(partial) = partial_after.filter(|t| *t < budget) {
                tokio::time::sleep(partial).await;
                stop.raise(Reason::TimedOut);
                tokio::time::sleep(budget.saturating_sub(partial)).await;
            } else {
                tokio::time::sleep(budget).await;
            }
            stop.raise(Reason::OverBudget);
        };
        tokio::select! {
            result = work => result,
            () = timer => Err(SearchError::TimedOut { index: name.to_owned(), budget }),
        }
    }

    /// A backend over the indices in `dir` (created when missing), with the default
    /// [`SearchLimits`].
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, SearchError> {
        Self::open_with_limits(dir, SearchLimits::default())
    }

    /// A backend over the indices in `dir` (created when missing) whose searches are bounded by
    /// `limits`.
    pub fn open_with_limits(
        dir: impl Into<PathBuf>,
        limits: SearchLimits,
    ) -> Result<Self, SearchError> {
        Ok(Self {
            inner: Arc::new(Inner::open(dir, limits)?),
        })
    }

    /// The limits on its searches.
    pub fn limits(&self) -> &SearchLimits {
        &self.inner.limits
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }
}

struct Inner {
    dir: PathBuf,
    limits: SearchLimits,
    open: RwLock<HashMap<String, Arc<OpenIndex>>>,
    next_id: std::sync::atomic::AtomicU64,
    /// Held by every write (bulk loads, mapping changes), so a mapping grows one write at a time.
    writes: Mutex<()>,
}

impl std::fmt::Debug for EmbeddedBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedBackend")
            .field("dir", &self.inner.dir)
            .finish()
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SearchError + '_ {
    move |source| SearchError::Io {
        path: path.to_owned(),
        source,
    }
}

fn tv(e: tantivy::TantivyError) -> SearchError {
    SearchError::Index(e.to_string())
}

impl Inner {
    fn open(dir: impl Into<PathBuf>, limits: SearchLimits) -> Result<Self, SearchError> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        Ok(Self {
            dir,
            limits,
            open: RwLock::new(HashMap::new()),
            next_id: std::sync::atomic::AtomicU64::new(0),
            writes: Mutex::new(()),
        })
    }

    fn index_dir(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn exists(&self, name: &str) -> bool {
        self.index_dir(name).join(MAPPING_FILE).is_file()
    }

    /// The open index `name`, opening it from disk the first time.
    fn get(&self, name: &str) -> Result<Arc<OpenIndex>, SearchError> {
        if let Some(ix) = self
            .open
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
        {
            return Ok(Arc::clone(ix));
        }
        check_index_name(name)?;
        if !self.exists(name) {
            return Err(SearchError::NoSuchIndex(name.to_owned()));
        }
        let mut open = self.open.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(ix) = open.get(name) {
            return Ok(Arc::clone(ix));
        }
        // A damaged directory fails this index only, naming it; tantivy may panic on bad files.
        let dir = self.index_dir(name);
        let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Self::read(&dir)))
            .unwrap_or_else(|panic| Err(SearchError::Index(panic_text(panic.as_ref()))));
        let ix = Arc::new(opened.map_err(|e| SearchError::Unreadable {
            name: name.to_owned(),
            reason: e.to_string(),
        })?);
        open.insert(name.to_owned(), Arc::clone(&ix));
        Ok(ix)
    }

    /// Opens the index in `dir` from its files.
    fn read(dir: &Path) -> Result<OpenIndex, SearchError> {
        let state = State::read(dir)?;
        let schema = IndexSchema::build(Mapping::parse_strict(&state.mappings)?);
        let index = Index::open_in_dir(dir.join(state.tantivy_dir())).map_err(tv)?;
        let analysed_differently = state.analysis < ANALYSIS_VERSION
            && schema.mapping.fields().iter().any(|f| {
                f.analyzer
                    .as_deref()
                    .is_some_and(|a| ANALYZERS_CHANGED.contains(&a))
            });
        let made_by_an_earlier_build = !schema.matches(&index.schema()) || analysed_differently;
        let mut ix = Self::wrap(schema, index, state.generation)?;
        ix.set_settings(read_settings(dir)?);
        if made_by_an_earlier_build {
            // Made with analyzers that have changed since, or before fields this build keeps for
            // every document (`_version`, `_seq_no`,
            // `_ignored`): rebuilt once; a document without a version gets version 1 (what it
            // would have answered), numbered in index order.
            return Self::rebuild(dir, &ix, ix.schema.mapping.clone());
        }
        Ok(ix)
    }

    /// A new generation of the index in `dir` under `mapping`, with every document of `old`
    /// indexed again from its `_source` (keeping its version and sequence number), made the
    /// index's current one on disk. The caller publishes it among the open indices.
    fn rebuild(dir: &Path, old: &OpenIndex, mapping: Mapping) -> Result<OpenIndex, SearchError> {
        let generation = old.generation + 1;
        // Hold the old generation's write lock first: another process writing to it makes the
        // rebuild fail here, instead of losing that process's writes.
        old.write(|_| Ok(()))?;
        let mut new = Self::build(dir, mapping, generation)?;
        new.set_settings(old.settings.clone());
        let searcher = old.reader.searcher();
        let mut next = old.next_seq_no.load(Ordering::Relaxed);
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
                        let source: serde_json::Map<String, Value> = doc
                            .get_first(old.schema.source)
                            .and_then(|v| v.as_bytes())
                            .and_then(|b| serde_json::from_slice(b).ok())
                            .unwrap_or_default();
                        let meta = IndexSchema::meta_at(segment, doc_id)
                            .map_err(tv)?
                            .unwrap_or_else(|| {
                                next += 1;
                                schema::DocMeta {
                                    version: 1,
                                    seq_no: next - 1,
                                }
                            });
                        writer
                            .add_document(new.schema.reindexed(&id, &source, meta))
                            .map_err(tv)?;
                    }
                }
                writer.commit().map(drop).map_err(tv)
            })?;
            new.reader.reload().map_err(tv)?;
        }
        new.next_seq_no.fetch_max(next, Ordering::Relaxed);
        State::write(dir, &new.schema.mapping, generation)?;
        // The old writer lets go of its lock; searches still running on the old generation finish
        // on it (its files stay readable while open).
        drop(
            old.writer
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        ingest::remove_other_generations(dir, &State::dir_of(generation));
        Ok(new)
    }

    fn wrap(schema: IndexSchema, index: Index, generation: u64) -> Result<OpenIndex, SearchError> {
        analysis::register(&index);
        let reader: IndexReader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(tv)?;
        let next = next_seq_no(&index, &reader.searcher())?;
        Ok(OpenIndex {
            schema,
            index,
            reader,
            writer: Mutex::new(None),
            generation,
            next_seq_no: AtomicU64::new(next),
            settings: IndexSettings::default(),
        })
    }

    /// A new, empty tantivy index for `mapping` in generation `generation` of the index directory
    /// `dir` (a directory left there by an interrupted rebuild is replaced).
    fn build(dir: &Path, mapping: Mapping, generation: u64) -> Result<OpenIndex, SearchError> {
        let tantivy_dir = dir.join(State::dir_of(generation));
        if tantivy_dir.exists() {
            std::fs::remove_dir_all(&tantivy_dir).map_err(io(&tantivy_dir))?;
        }
        std::fs::create_dir_all(&tantivy_dir).map_err(io(&tantivy_dir))?;
        let schema = IndexSchema::build(mapping);
        Index::create_in_dir(&tantivy_dir, schema.schema.clone())
            .map_err(tv)
            .and_then(|index| Self::wrap(schema, index, generation))
    }

    /// Refuses a mapping larger than the limits allow.
    fn check_size(&self, mapping: &Mapping) -> Result<(), SearchError> {
        let count = mapping.mapper_count();
        if count > self.limits.max_mapped_fields {
            return Err(SearchError::InvalidMapping(format!(
                "Limit of total fields [{}] has been exceeded: the mapping has {count} (search limit max_mapped_fields)",
                self.limits.max_mapped_fields
            )));
        }
        Ok(())
    }

    fn create_blocking(&self, name: &str, mapping: &Value) -> Result<(), SearchError> {
        let held = self.lock_aliases()?;
        self.create_under(name, mapping, &held)
    }

    /// Makes index `name` under `held` (no other process may put an alias of its name until it
    /// exists).
    fn create_under(
        &self,
        name: &str,
        mapping: &Value,
        _held: &alias_table::AliasLock<'_>,
    ) -> Result<(), SearchError> {
        check_index_name(name)?;
        // A body of settings alone has an empty mapping.
        let parsed = match (mapping.get("settings"), mapping.get("mappings")) {
            (Some(_), None) => Mapping::parse_strict(&serde_json::json!({}))?,
            _ => Mapping::parse_strict(mapping)?,
        };
        let settings = IndexSettings::parse(mapping.get("settings"))?;
        parsed.check_normalizers(&settings.normalizers())?;
        self.check_size(&parsed)?;
        if self.aliases()?.contains(name) {
            return Err(SearchError::InvalidIndexName {
                name: name.to_owned(),
                reason: "an alias of that name exists",
            });
        }
        let mut open = self.open.write().unwrap_or_else(PoisonError::into_inner);
        if self.exists(name) || open.contains_key(name) {
            return Err(SearchError::IndexExists(name.to_owned()));
        }
        let dir = self.index_dir(name);
        let made = Self::build(&dir, parsed, 0).and_then(|mut ix| {
            write_settings(&dir, &settings)?;
            ix.set_settings(settings);
            // The state file is written last: its presence is what makes the index exist.
            State::write(&dir, &ix.schema.mapping, 0)?;
            Ok(ix)
        });
        match made {
            Ok(ix) => {
                open.insert(name.to_owned(), Arc::new(ix));
                Ok(())
            }
            Err(e) => {
                // Nothing half-made is left behind.
                let _ = std::fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }
}

/// The file of an index's settings, beside `mapping.json`.
const SETTINGS_FILE: &str = "settings.json";

/// Writes an index's settings (when it has any).
fn write_settings(dir: &Path, settings: &IndexSettings) -> Result<(), SearchError> {
    if *settings == IndexSettings::default() {
        return Ok(());
    }
    let path = dir.join(SETTINGS_FILE);
    let text = serde_json::to_string_pretty(&settings.to_json()).unwrap_or_default();
    std::fs::write(&path, text).map_err(io(&path))
}

/// Reads an index's settings (none when the file is missing).
fn read_settings(dir: &Path) -> Result<IndexSettings, SearchError> {
    let path = dir.join(SETTINGS_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(IndexSettings::default()),
        Err(e) => return Err(io(&path)(e)),
    };
    let json: Value = serde_json::from_str(&text)
        .map_err(|e| SearchError::Index(format!("{}: {e}", path.display())))?;
    IndexSettings::parse(Some(&json))
}

/// What `mapping.json` records: the mapping, and which generation of the tantivy index holds the
/// documents (the index is rebuilt into a new generation when its mapping grows).
struct State {
    mappings: Value,
    generation: u64,
    /// The [`ANALYSIS_VERSION`] of the build that indexed the documents (1 when not written).
    analysis: u64,
}

/// The version of the analyzers' output: raised when an analyzer makes different tokens or
/// positions of the same text, so that an index made before is indexed again when opened. 2: the
/// `english` analyzer's possessive `'s` no longer leaves a position gap (2026-11-28).
const ANALYSIS_VERSION: u64 = 2;

/// The analyzers whose output changed at each [`ANALYSIS_VERSION`] after 1.
const ANALYZERS_CHANGED: &[&str] = &["english"];

impl State {
    /// The tantivy directory of a generation: `tantivy`, then `tantivy.1`, `tantivy.2` …
    fn dir_of(generation: u64) -> String {
        if generation == 0 {
            INDEX_DIR.to_owned()
        } else {
            format!("{INDEX_DIR}.{generation}")
        }
    }

    fn tantivy_dir(&self) -> String {
        Self::dir_of(self.generation)
    }

    /// Reads `dir/mapping.json`: `{"mappings": …, "generation": n}`, or a bare mapping (generation 0).
    fn read(dir: &Path) -> Result<State, SearchError> {
        let path = dir.join(MAPPING_FILE);
        let text = std::fs::read_to_string(&path).map_err(io(&path))?;
        let json: Value = serde_json::from_str(&text)
            .map_err(|e| SearchError::InvalidMapping(format!("{}: {e}", path.display())))?;
        let generation = json.get("generation").and_then(Value::as_u64).unwrap_or(0);
        let analysis = json.get("analysis").and_then(Value::as_u64).unwrap_or(1);
        let mappings = match json.get("mappings") {
            Some(m) => m.clone(),
            None => json,
        };
        Ok(State {
            mappings,
            generation,
            analysis,
        })
    }

    /// Writes `dir/mapping.json` whole or not at all (a new file renamed over the old one), so a
    /// crash leaves the old mapping and generation or the new ones.
    fn write(dir: &Path, mapping: &Mapping, generation: u64) -> Result<(), SearchError> {
        let path = dir.join(MAPPING_FILE);
        let staged = dir.join(format!("{MAPPING_FILE}.new"));
        let text = serde_json::to_string_pretty(
            // Every index this build writes the state of was made, or indexed again when opened,
            // by this build's analyzers.
            &serde_json::json!({"mappings": mapping.to_json(), "generation": generation,
                                "analysis": ANALYSIS_VERSION}),
        )
        .unwrap_or_default();
        std::fs::write(&staged, text).map_err(io(&staged))?;
        std::fs::rename(&staged, &path).map_err(io(&path))
    }
}

/// The message of a caught panic.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    format!("the index files are damaged ({text})")
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, SearchError> + Send + 'static,
) -> Result<T, SearchError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| SearchError::Index(format!("index task failed: {e}")))?
}

#[async_trait]
impl SearchBackend for EmbeddedBackend {
    fn kind(&self) -> &'static str {
        "embedded"
    }

    async fn list_indices(&self) -> Result<Vec<IndexInfo>, SearchError> {
        Ok(self.list_indices_checked().await?.indices)
    }

    async fn list_indices_checked(&self) -> Result<IndexListing, SearchError> {
        let me = Arc::clone(&self.inner);
        blocking(move || {
            let names = me.index_names()?;
            let mut listing = IndexListing::default();
            for name in names {
                match me.get(&name) {
                    Ok(ix) => {
                        let docs = ix.reader.searcher().num_docs();
                        listing.indices.push(IndexInfo { name, docs });
                    }
                    Err(e) => {
                        let reason = match e {
                            SearchError::Unreadable { reason, .. } => reason,
                            other => other.to_string(),
                        };
                        listing.unreadable.push(UnreadableIndex { name, reason });
                    }
                }
            }
            Ok(listing)
        })
        .await
    }

    async fn create_index(&self, name: &str, mapping: &Value) -> Result<(), SearchError> {
        let (me, name, mapping) = (Arc::clone(&self.inner), name.to_owned(), mapping.clone());
        blocking(move || me.create_blocking(&name, &mapping)).await
    }

    async fn delete_index(&self, name: &str) -> Result<(), SearchError> {
        let (me, name) = (Arc::clone(&self.inner), name.to_owned());
        blocking(move || {
            check_index_name(&name)?;
            if !me.exists(&name) {
                return Err(SearchError::NoSuchIndex(name));
            }
            let held = me.lock_aliases()?;
            me.forget_aliases_of(&name, &held)?;
            // Close it first: the writer holds a lock file inside the directory.
            me.open
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&name);
            let dir = me.index_dir(&name);
            std::fs::remove_dir_all(&dir).map_err(io(&dir))
        })
        .await
    }

    async fn bulk(&self, index: Option<&str>, ndjson: &str) -> Result<BulkSummary, SearchError> {
        let (me, index, body) = (
            Arc::clone(&self.inner),
            index.map(str::to_owned),
            ndjson.to_owned(),
        );
        blocking(move || me.bulk_blocking(index.as_deref(), &body)).await
    }

    async fn get_mapping(&self, name: &str) -> Result<Value, SearchError> {
        let (me, name) = (Arc::clone(&self.inner), name.to_owned());
        blocking(move || {
            if me.exists(&name) {
                return Ok(me.get(&name)?.schema.mapping.to_json());
            }
            // An alias of one index gives that index's mapping.
            let aliases = me.aliases()?;
            match aliases
                .indices_of(&name)
                .map(|of| of.keys().collect::<Vec<_>>())
            {
                Some(indices) if indices.len() == 1 => {
                    Ok(me.get(indices[0])?.schema.mapping.to_json())
                }
                Some(_) => Err(SearchError::InvalidParameter(format!(
                    "the alias '{name}' names several indices, each with its own mapping"
                ))),
                None => Err(SearchError::NoSuchIndex(name)),
            }
        })
        .await
    }

    /// Merges the update into the mapping ([`Mapping::updated`]) and, when that adds fields,
    /// rebuilds the index under it (documents already indexed get the new fields from their
    /// `_source`).
    async fn put_mapping(&self, name: &str, mapping: &Value) -> Result<(), SearchError> {
        let (me, name, update) = (Arc::clone(&self.inner), name.to_owned(), mapping.clone());
        blocking(move || me.put_mapping_blocking(&name, &update)).await
    }

    /// Checks the alias's filter against each index (a search of it), then records the alias
    /// in the data directory's alias table.
    async fn put_alias(
        &self,
        index: &str,
        alias: &str,
        options: &Value,
    ) -> Result<(), SearchError> {
        let options = crate::aliases::AliasOptions::parse(options)?;
        if let Some(filter) = &options.filter {
            for name in self.resolve_indices(index).await? {
                self.search_one(&name, &serde_json::json!({"size": 0, "query": filter}))
                    .await?;
            }
        }
        let (me, index, alias) = (Arc::clone(&self.inner), index.to_owned(), alias.to_owned());
        blocking(move || me.put_alias_blocking(&index, &alias, options)).await
    }

    async fn get_aliases(&self, index: &str) -> Result<Value, SearchError> {
        let (me, index) = (Arc::clone(&self.inner), index.to_owned());
        blocking(move || me.get_aliases_blocking(&index)).await
    }

    async fn delete_alias(&self, index: &str, alias: &str) -> Result<(), SearchError> {
        let (me, index, alias) = (Arc::clone(&self.inner), index.to_owned(), alias.to_owned());
        blocking(move || me.delete_alias_blocking(&index, &alias)).await
    }

    /// Resolves through the aliases too: an alias stands for its indices.
    async fn resolve_indices(&self, expr: &str) -> Result<Vec<String>, SearchError> {
        check_index_expression(expr)?;
        let (existing, aliases) = self.indices_and_aliases().await?;
        Ok(aliases
            .resolve(expr, &existing)?
            .into_iter()
            .map(|t| t.index)
            .collect())
    }

    async fn sample_document(&self, name: &str) -> Result<Option<Value>, SearchError> {
        let (me, index) = (Arc::clone(&self.inner), name.to_owned());
        let is_index = blocking(move || Ok(me.exists(&index))).await?;
        if !is_index {
            // An alias (or a list or pattern): a document it shows, its filter applied.
            let r = self.search(name, &serde_json::json!({"size": 1})).await?;
            return Ok(r.pointer("/hits/hits/0/_source").cloned());
        }
        let (me, name) = (Arc::clone(&self.inner), name.to_owned());
        blocking(move || {
            let ix = me.get(&name)?;
            let searcher = ix.reader.searcher();
            let top = searcher
                .search(&AllQuery, &TopDocs::with_limit(1).order_by_score())
                .map_err(tv)?;
            let Some((_, address)) = top.first() else {
                return Ok(None);
            };
            let doc: TantivyDocument = searcher.doc(*address).map_err(tv)?;
            Ok(doc
                .get_first(ix.schema.source)
                .and_then(|v| v.as_bytes())
                .and_then(|b| serde_json::from_slice(b).ok()))
        })
        .await
    }

    /// Runs the search on the index `name` names, or on each index a list or pattern names
    /// (`a,b`, `logs-*`, `_all`, `-old`), merged: totals added, hits ordered across them; each index bounded as a single search is.
    async fn search(&self, name: &str, body: &Value) -> Result<Value, SearchError> {
        let resolved = self.resolve_lookups(body).await?;
        let mut body = resolved.as_ref().unwrap_or(body);
        let boost_spec = body.get("indices_boost").cloned();
        let without_boost;
        if boost_spec.is_some() {
            let mut b = body.clone();
            if let Some(o) = b.as_object_mut() {
                o.remove("indices_boost");
            }
            without_boost = b;
            body = &without_boost;
        }
        if boost_spec.is_none() && !is_multi_index(name) && self.inner.exists(name) {
            return self.search_one(name, body).await;
        }
        check_index_expression(name)?;
        let (existing, aliases) = self.indices_and_aliases().await?;
        let targets = aliases.resolve(name, &existing)?;
        let boosts = match &boost_spec {
            Some(spec) => multi::IndicesBoost::parse(spec, &existing, &aliases)?,
            None => multi::IndicesBoost::default(),
        };
        // Each index's body: the request's, filtered by the aliases it was reached through.
        let body_of = |target: &crate::aliases::Target, body: &Value| match &target.filters {
            Some(filters) => crate::aliases::filtered_body(body, filters),
            None => body.clone(),
        };
        if let [one] = targets.as_slice() {
            let boosted = multi::IndicesBoost::boosted(body, boosts.of(&one.index));
            return self.search_one(&one.index, &body_of(one, &boosted)).await;
        }
        let (mut per_index, from, size) = multi::per_index_body(body);
        let collapse = match body.as_object() {
            Some(o) => collapse::CollapseRequest::of_body(o, &self.inner.limits)?,
            None => None,
        };
        if let (Some(_), Some(o)) = (&collapse, per_index.as_object_mut()) {
            collapse::CollapseRequest::without_inner_hits(o);
        }
        let mut responses = Vec::with_capacity(targets.len());
        for target in &targets {
            let boosted = multi::IndicesBoost::boosted(&per_index, boosts.of(&target.index));
            responses.push(
                self.search_one(&target.index, &body_of(target, &boosted))
                    .await?,
            );
        }
        let mut merged = multi::merge(body, responses, from, size)?;
        // Each group's inner hits, searched across the indices.
        if let Some(c) = collapse.filter(|c| !c.inner_hits.is_empty())
            && let Some(Value::Array(hits)) = merged["hits"].get_mut("hits")
        {
            for hit in hits.iter_mut() {
                let group = c.group_of(hit).clone();
                for (inner_name, inner) in c.inner_searches(body.get("query"), &group) {
                    let response = self.search(name, &inner).await?;
                    collapse::CollapseRequest::attach(hit, &inner_name, &response);
                }
            }
        }
        Ok(merged)
    }

    async fn put_script(&self, id: &str, script: &Value) -> Result<(), SearchError> {
        check_script_id(id)?;
        let script = script_object(script)?;
        let dir = self.inner.dir.join(SCRIPTS_DIR);
        let path = dir.join(format!("{id}.json"));
        blocking(move || {
            std::fs::create_dir_all(&dir).map_err(io(&dir))?;
            std::fs::write(&path, script.to_string()).map_err(io(&path))
        })
        .await
    }

    async fn get_script(&self, id: &str) -> Result<Option<Value>, SearchError> {
        check_script_id(id)?;
        let path = self.inner.dir.join(SCRIPTS_DIR).join(format!("{id}.json"));
        blocking(move || match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| SearchError::Index(format!("{}: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(&path)(e)),
        })
        .await
    }

    async fn delete_script(&self, id: &str) -> Result<(), SearchError> {
        check_script_id(id)?;
        let path = self.inner.dir.join(SCRIPTS_DIR).join(format!("{id}.json"));
        let id = id.to_owned();
        blocking(move || match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(
                SearchError::InvalidParameter(format!("no stored script '{id}'")),
            ),
            Err(e) => Err(io(&path)(e)),
        })
        .await
    }

    /// Runs the body with `size: 0` (embedded searches take milliseconds; the same code path as a
    /// search, so what validates runs).
    async fn validate(&self, name: &str, body: &Value) -> Result<(), SearchError> {
        let mut dry = body.clone();
        if let Value::Object(o) = &mut dry {
            o.insert("size".into(), Value::from(0));
        }
        self.search(name, &dry).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tantivy::schema::{STORED, STRING, Schema};

    use super::*;

    /// An index as a build before `_version`, `_seq_no` and `_ignored` wrote it: the fields up to
    /// the mapped ones, one document.
    fn old_index(dir: &Path) {
        let index_dir = dir.join("old");
        let tantivy_dir = index_dir.join(INDEX_DIR);
        std::fs::create_dir_all(&tantivy_dir).unwrap();
        let mut b = Schema::builder();
        let id = b.add_text_field(schema::ID, STRING | tantivy::schema::FAST | STORED);
        let source = b.add_bytes_field(schema::SOURCE, STORED);
        let names = b.add_text_field(schema::FIELD_NAMES, STRING);
        let tag = b.add_text_field("f0", STRING | tantivy::schema::FAST);
        let index = Index::create_in_dir(&tantivy_dir, b.build()).unwrap();
        let mut writer: IndexWriter = index.writer_with_num_threads(1, 15_000_000).unwrap();
        let mut doc = TantivyDocument::new();
        doc.add_text(id, "a");
        doc.add_bytes(source, br#"{"tag":"x"}"#.as_slice());
        doc.add_text(names, "tag");
        doc.add_text(tag, "x");
        writer.add_document(doc).unwrap();
        writer.commit().unwrap();
        let state =
            json!({"mappings": {"properties": {"tag": {"type": "keyword"}}}, "generation": 0});
        std::fs::write(index_dir.join(MAPPING_FILE), state.to_string()).unwrap();
    }

    #[tokio::test]
    async fn an_index_made_before_versions_is_rebuilt_when_opened() {
        let dir = tempfile::tempdir().unwrap();
        old_index(dir.path());
        let b = EmbeddedBackend::open(dir.path()).unwrap();
        let r = b
            .search(
                "old",
                &json!({"query": {"term": {"tag": "x"}}, "version": true, "seq_no_primary_term": true}),
            )
            .await
            .unwrap();
        let hit = &r["hits"]["hits"][0];
        assert_eq!(
            (hit["_id"].clone(), hit["_version"].clone()),
            (json!("a"), json!(1))
        );
        assert_eq!(hit["_seq_no"], 0);
        // The rebuilt generation is the index's own now; writes go on from there.
        let summary = b
            .bulk(
                Some("old"),
                "{\"index\":{\"_id\":\"a\"}}\n{\"tag\":\"y\"}\n",
            )
            .await
            .unwrap();
        assert_eq!((summary.items[0].version, summary.items[0].seq_no), (2, 1));
        assert!(!dir.path().join("old").join(INDEX_DIR).exists());
    }
}
