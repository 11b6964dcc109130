//! Document tools: one tool per text file, answering a question with the file's passages that match
//! it best. They are what query-plan leaves ask in the examples (one report per period, as in
//! LlamaIndex's per-filing query engines), and work for any folder of `.md` / `.txt` files.
//!
//! Passages are the file's blank-line-separated paragraphs. A passage scores by how many of the
//! question's words (three letters or more, common words left out) it contains, and by how often;
//! the best few are returned in document order. No model is involved: a synthesizer writes the
//! answer from what the leaves return.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use toolplan_core::{Tool, ToolAnnotations, ToolContext, ToolError, ToolResult};

/// Passages returned per question.
pub const DEFAULT_TOP_K: usize = 3;

/// Words too common to tell passages apart.
const STOPWORDS: &[&str] = &[
    "the", "and", "for", "what", "was", "were", "how", "did", "does", "with", "that", "this",
    "from", "are", "its", "which", "who", "when", "where", "why", "have", "has", "had", "about",
    "into", "than", "then", "there", "their", "they", "them", "our", "your", "can", "many", "much",
];

/// Why documents could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DocumentError {
    /// A file or folder could not be read.
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A folder held no `.md` or `.txt` file.
    #[error("{} holds no .md or .txt file", .0.display())]
    Empty(PathBuf),
}

/// A tool that answers questions about one document with its best-matching passages.
#[derive(Debug, Clone)]
pub struct DocumentTool {
    name: String,
    description: String,
    title: String,
    passages: Vec<String>,
    top_k: usize,
}

fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(str::to_lowercase)
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
}

impl DocumentTool {
    /// A tool named `name` over `text`; its title is the first non-empty line (without `#`).
    pub fn new(name: impl Into<String>, text: &str) -> Self {
        let title = text
            .lines()
            .map(|l| l.trim().trim_start_matches('#').trim())
            .find(|l| !l.is_empty())
            .unwrap_or("a document")
            .to_owned();
        let passages: Vec<String> = text
            .split("\n\n")
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect();
        let description = format!(
            "Answers questions about \"{title}\" with the passages of that document that match the question best."
        );
        Self {
            name: name.into(),
            description,
            title,
            passages,
            top_k: DEFAULT_TOP_K,
        }
    }

    /// A tool over a file, named after the file (`june_2022.md` → `june_2022`).
    pub fn from_file(path: &Path) -> Result<Self, DocumentError> {
        let text = std::fs::read_to_string(path).map_err(|source| DocumentError::Read {
            path: path.to_owned(),
            source,
        })?;
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(Self::new(tool_name(&stem), &text))
    }

    /// Passages returned per question (at least 1).
    pub fn with_top_k(mut self, k: usize) -> Self {
        self.top_k = k.max(1);
        self
    }

    /// The passages that answer `question` best, in document order.
    pub fn lookup(&self, question: &str) -> Vec<&str> {
        let terms: HashSet<String> = words(question).collect();
        let mut scored: Vec<(usize, usize, usize)> = self
            .passages
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let found: Vec<String> = words(p).filter(|w| terms.contains(w)).collect();
                let distinct: HashSet<&String> = found.iter().collect();
                (distinct.len(), found.len(), i)
            })
            .filter(|(distinct, ..)| *distinct > 0)
            .collect();
        scored.sort_by(|a, b| (b.0, b.1).cmp(&(a.0, a.1)).then(a.2.cmp(&b.2)));
        let mut best: Vec<usize> = scored.iter().take(self.top_k).map(|s| s.2).collect();
        best.sort_unstable();
        best.iter().map(|&i| self.passages[i].as_str()).collect()
    }
}

/// A tool name from a file name: lower case, anything but letters and digits as `_`.
pub fn tool_name(stem: &str) -> String {
    let name: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() {
        "document".into()
    } else {
        name
    }
}

/// One tool per `.md` / `.txt` file of a folder, in file-name order.
pub fn load_dir(dir: &Path) -> Result<Vec<Arc<dyn Tool>>, DocumentError> {
    let read_err = |source| DocumentError::Read {
        path: dir.to_owned(),
        source,
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(read_err)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.is_file()
                && p.extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("md") || e.eq_ignore_ascii_case("txt"))
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(DocumentError::Empty(dir.to_owned()));
    }
    files
        .iter()
        .map(|f| DocumentTool::from_file(f).map(|t| Arc::new(t) as Arc<dyn Tool>))
        .collect()
}

#[async_trait]
impl Tool for DocumentTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        json!({"type": "object",
               "properties": {"input": {"type": "string", "description": "The question."}},
               "required": ["input"], "additionalProperties": false})
    }

    /// A lookup in a document: changes nothing.
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::READ_ONLY
    }

    async fn call(&self, arguments: Value, _ctx: ToolContext) -> ToolResult {
        let question = arguments["input"]
            .as_str()
            .ok_or_else(|| ToolError::invalid("input must be text"))?;
        let found = self.lookup(question);
        if found.is_empty() {
            return Ok(json!(format!(
                "No passage of \"{}\" matches the question.",
                self.title
            )));
        }
        Ok(Value::String(found.join("\n\n")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = "# Lumen Rides, March 2022\n\nRevenue was $120 million, up 12% from February.\n\n\
        Riders: 2.1 million monthly active riders.\n\nThe weather was mild.";

    #[test]
    fn lookup_returns_matching_passages_in_document_order() {
        let tool = DocumentTool::new("march", REPORT).with_top_k(2);
        assert_eq!(tool.title, "Lumen Rides, March 2022");
        assert_eq!(
            tool.lookup("What was the revenue growth?"),
            ["Revenue was $120 million, up 12% from February."]
        );
        assert_eq!(
            tool.lookup("revenue and riders"),
            [
                "Revenue was $120 million, up 12% from February.",
                "Riders: 2.1 million monthly active riders."
            ]
        );
        assert!(tool.lookup("what?").is_empty());
    }

    #[test]
    fn names_come_from_file_names() {
        assert_eq!(tool_name("June 2022"), "june_2022");
        assert_eq!(tool_name(""), "document");
    }

    #[tokio::test]
    async fn folders_become_tools() {
        let dir = std::env::temp_dir().join(format!("toolplan-docs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("b_report.md"), REPORT).expect("write");
        std::fs::write(dir.join("a notes.txt"), "Notes\n\nNothing about money.").expect("write");
        std::fs::write(dir.join("skip.json"), "{}").expect("write");
        let tools = load_dir(&dir).expect("loads");
        let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
        assert_eq!(names, ["a_notes", "b_report"]);
        let out = tools[1]
            .call(json!({"input": "revenue?"}), ToolContext::detached())
            .await
            .expect("answers");
        assert_eq!(
            out,
            json!("Revenue was $120 million, up 12% from February.")
        );
        let out = tools[0]
            .call(json!({"input": "revenue?"}), ToolContext::detached())
            .await
            .expect("answers");
        assert_eq!(out, json!("No passage of \"Notes\" matches the question."));
        std::fs::remove_dir_all(&dir).ok();
        assert!(matches!(load_dir(&dir), Err(DocumentError::Read { .. })));
    }
}
