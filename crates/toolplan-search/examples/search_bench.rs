//! Embedded-backend benchmark: bulk-loads N generated documents (default 100,000: text, keyword,
//! numeric, date and boolean fields) into a fresh index, then runs term, match, range, bool and
//! terms-aggregation queries many times each and prints bulk throughput and query latency p50/p99,
//! then what the indexed data costs: the index's bytes on disk, and the process's resident memory
//! (Linux: `VmRSS` and its peak `VmHWM` from `/proc/self/status`) before the load, after it and after
//! the searches, beside the size of the documents' JSON.
//!
//! ```text
//! cargo run --release -p toolplan-search --example search_bench -- [--docs 100000] [--runs 200]
//! ```

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolplan_search::{EmbeddedBackend, SearchBackend};

const WORDS: &[&str] = &[
    "wireless",
    "headphones",
    "noise",
    "cancelling",
    "bluetooth",
    "speaker",
    "portable",
    "battery",
    "charger",
    "laptop",
    "stand",
    "ergonomic",
    "keyboard",
    "mouse",
    "monitor",
    "camera",
    "lens",
    "tripod",
    "microphone",
    "studio",
    "gaming",
    "chair",
    "desk",
    "lamp",
    "smart",
    "watch",
    "fitness",
    "tracker",
    "phone",
    "case",
    "cable",
    "adapter",
    "router",
    "mesh",
    "drive",
    "storage",
    "backup",
];
const CATEGORIES: &[&str] = &[
    "electronics",
    "audio",
    "computers",
    "photo",
    "furniture",
    "wearables",
    "network",
    "storage",
];

/// A small deterministic generator (xorshift), so every run indexes the same data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A `/proc/self/status` field in MiB (`VmRSS`, `VmHWM`), where there is one.
fn status_mib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Resident memory now and at its peak, as text.
fn memory() -> String {
    match (status_mib("VmRSS:"), status_mib("VmHWM:")) {
        (Some(rss), Some(peak)) => format!("{rss:.0} MiB resident (peak {peak:.0} MiB)"),
        _ => "unknown (no /proc/self/status)".into(),
    }
}

/// Bytes of the files under `dir`.
fn disk_bytes(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => disk_bytes(&e.path()),
            Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let docs = arg("--docs", 100_000);
    let runs = arg("--runs", 200).max(1);
    let at_start = memory();
    let dir = tempfile::tempdir()?;
    let backend = EmbeddedBackend::open(dir.path())?;
    backend
        .create_index(
            "products",
            &json!({"properties": {
                "title": {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}},
                "category": {"type": "keyword"},
                "price": {"type": "float"},
                "stock": {"type": "integer"},
                "created_at": {"type": "date"},
                "on_sale": {"type": "boolean"}
            }}),
        )
        .await?;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut body = String::with_capacity(docs * 200);
    for i in 0..docs {
        let title: Vec<&str> = (0..4).map(|_| WORDS[rng.below(WORDS.len())]).collect();
        let doc = json!({
            "title": title.join(" "),
            "category": CATEGORIES[rng.below(CATEGORIES.len())],
            "price": (rng.below(100_000) as f64) / 100.0,
            "stock": rng.below(500),
            "created_at": 1_700_000_000_000_i64 + (rng.below(365 * 24 * 3600) as i64) * 1000,
            "on_sale": rng.below(4) == 0
        });
        body.push_str(&format!(
            "{}\n{doc}\n",
            json!({"index": {"_id": i.to_string()}})
        ));
    }
    let source_bytes = body.len();
    let started = Instant::now();
    let summary = backend.bulk(Some("products"), &body).await?;
    let load = started.elapsed();
    drop(body);
    let after_load = memory();
    println!("# embedded backend: {docs} documents, {runs} runs per query, release build");
    println!(
        "bulk load: {} documents in {:.2} s = {:.0} documents/s ({} errors)",
        summary.indexed,
        load.as_secs_f64(),
        summary.indexed as f64 / load.as_secs_f64(),
        summary.errors.len()
    );
    let queries: Vec<(&str, Value)> = vec![
        (
            "term (keyword)",
            json!({"query": {"term": {"category": "audio"}}}),
        ),
        (
            "match (text, 2 words)",
            json!({"query": {"match": {"title": "wireless headphones"}}}),
        ),
        (
            "range (float)",
            json!({"query": {"range": {"price": {"gte": 100, "lt": 200}}}}),
        ),
        (
            "bool (match + 2 filters)",
            json!({"query": {"bool": {
            "must": [{"match": {"title": "portable speaker"}}],
            "filter": [{"term": {"on_sale": true}}, {"range": {"created_at": {"gte": "2024-01-01"}}}]}}}),
        ),
        (
            "terms agg + avg (size 0)",
            json!({"size": 0, "aggs": {"c": {"terms": {"field": "category"},
            "aggs": {"p": {"avg": {"field": "price"}}}}}}),
        ),
    ];
    println!();
    println!(
        "{:28} {:>8} {:>8} {:>10}",
        "query", "p50 ms", "p99 ms", "hits"
    );
    for (name, body) in &queries {
        // One warm-up run.
        let first = backend.search("products", body).await?;
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = Instant::now();
            backend.search("products", body).await?;
            times.push(t.elapsed());
        }
        times.sort();
        println!(
            "{:28} {:>8.2} {:>8.2} {:>10}",
            name,
            percentile(&times, 0.50),
            percentile(&times, 0.99),
            first["hits"]["total"]["value"]
        );
    }
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    println!();
    println!(
        "bulk body: {:.1} MiB; index on disk: {:.1} MiB",
        mib(source_bytes as u64),
        mib(disk_bytes(dir.path()))
    );
    println!("memory before the load: {at_start}");
    println!("memory after the load: {after_load}");
    println!("memory after the searches: {}", memory());
    Ok(())
}
