//! The analyzers and normalizers a mapping can name ([`crate::mapping::ANALYZERS`],
//! [`crate::mapping::NORMALIZERS`]), as tantivy tokenizers registered on every index under
//! `tp_<name>`:
//!
//! * `standard` — words split at what is not a letter or digit, lowercased, longer than 255 bytes
//!   left out (OpenSearch's standard tokenizer splits on Unicode word boundaries: the same words for
//!   most text);
//! * `simple` — runs of letters, lowercased;
//! * `whitespace` — split at whitespace, case kept;
//! * `keyword` — the whole value as one token;
//! * `stop` — `simple`, without English stop words (Lucene's list, OpenSearch's `_english_`);
//! * `english` — `standard`, a trailing `'s` dropped, stop words removed, stemmed (Snowball's
//!   English stemmer; OpenSearch's is Porter's, which stems a few words differently);
//! * the `lowercase` normalizer — the whole value lowercased.

use tantivy::Index;
use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RawTokenizer, RegexTokenizer, RemoveLongFilter,
    SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer, Token, TokenStream, Tokenizer,
    TokenizerManager, WhitespaceTokenizer,
};

/// Lucene's English stop words (OpenSearch's `_english_`).
const ENGLISH_STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// The longest token the standard analyzer keeps, in bytes.
const MAX_TOKEN_BYTES: usize = 255;

/// The tantivy tokenizer name of an analyzer.
pub fn analyzer_tokenizer(name: &str) -> String {
    // `default` is the index's default analyzer, which is `standard` here.
    let name = if name == "default" { "standard" } else { name };
    format!("tp_{name}")
}

/// The tantivy tokenizer name of a normalizer.
pub fn normalizer_tokenizer(name: &str) -> String {
    format!("tp_norm_{name}")
}

/// Registers every analyzer and normalizer on `index`.
pub fn register(index: &Index) {
    // Analyzers and normalizers also shape the columns that aggregations and sorting read (of
    // keywords, and of text fields with field data), which tantivy writes with its own set of
    // tokenizers.
    for manager in [index.tokenizers(), index.fast_field_tokenizer()] {
        register_analyzers(manager);
        manager.register(
            &normalizer_tokenizer("lowercase"),
            normalizer(&["lowercase"]),
        );
    }
}

/// A normalizer: the whole value as one token, through `filters` in order (`lowercase`,
/// `asciifolding`; others were refused with the settings).
fn normalizer<S: AsRef<str>>(filters: &[S]) -> TextAnalyzer {
    let mut builder = TextAnalyzer::builder(RawTokenizer::default()).dynamic();
    for filter in filters {
        builder = match filter.as_ref() {
            "lowercase" => builder.filter_dynamic(LowerCaser),
            "asciifolding" => builder.filter_dynamic(AsciiFoldingFilter),
            _ => builder,
        };
    }
    builder.build()
}

/// Registers an index's custom normalizers (name → filters, from its settings) on `index`, beside
/// the built-in ones; filters other than `lowercase` and `asciifolding` were refused with the
/// settings.
pub fn register_normalizers(
    index: &Index,
    normalizers: &std::collections::BTreeMap<String, Vec<String>>,
) {
    for manager in [index.tokenizers(), index.fast_field_tokenizer()] {
        for (name, filters) in normalizers {
            manager.register(&normalizer_tokenizer(name), normalizer(filters));
        }
    }
}

/// Registers every analyzer on `manager`.
fn register_analyzers(manager: &TokenizerManager) {
    let stop = || StopWordFilter::remove(ENGLISH_STOP_WORDS.iter().map(|w| (*w).to_owned()));
    let letters = || RegexTokenizer::new(r"\p{L}+").ok();
    manager.register(
        &analyzer_tokenizer("standard"),
        TextAnalyzer::builder(SimpleTokenizer::default())
            .filter(RemoveLongFilter::limit(MAX_TOKEN_BYTES + 1))
            .filter(LowerCaser)
            .build(),
    );
    if let Some(letters) = letters() {
        manager.register(
            &analyzer_tokenizer("simple"),
            TextAnalyzer::builder(letters).filter(LowerCaser).build(),
        );
    }
    if let Some(letters) = letters() {
        manager.register(
            &analyzer_tokenizer("stop"),
            TextAnalyzer::builder(letters)
                .filter(LowerCaser)
                .filter(stop())
                .build(),
        );
    }
    manager.register(
        &analyzer_tokenizer("whitespace"),
        TextAnalyzer::builder(WhitespaceTokenizer::default()).build(),
    );
    manager.register(
        &analyzer_tokenizer("keyword"),
        TextAnalyzer::builder(RawTokenizer::default()).build(),
    );
    manager.register(
        &analyzer_tokenizer("english"),
        TextAnalyzer::builder(PossessiveTokenizer(SimpleTokenizer::default()))
            .filter(RemoveLongFilter::limit(MAX_TOKEN_BYTES + 1))
            .filter(LowerCaser)
            .filter(stop())
            .filter(Stemmer::new(Language::English))
            .build(),
    );
}

/// A tokenizer whose words lose a trailing `'s` (OpenSearch's English possessive filter): the
/// simple tokenizer splits "dog's" into "dog" and "s", so the lone "s" after an apostrophe is
/// dropped, and the words after it keep the positions they would have without it (as the word
/// "dog's" is one position in OpenSearch), so that phrases and interval gaps count words.
#[derive(Clone)]
struct PossessiveTokenizer(SimpleTokenizer);

impl Tokenizer for PossessiveTokenizer {
    type TokenStream<'a> = PossessiveStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> PossessiveStream<'a> {
        PossessiveStream {
            inner: self.0.token_stream(text),
            text,
            dropped: 0,
            token: Token::default(),
        }
    }
}

struct PossessiveStream<'a> {
    inner: <SimpleTokenizer as Tokenizer>::TokenStream<'a>,
    text: &'a str,
    /// The tokens dropped so far, taken off the later positions.
    dropped: usize,
    /// The current token, its position moved back over the dropped ones (a copy: the inner
    /// stream counts positions on from its own token).
    token: Token,
}

impl TokenStream for PossessiveStream<'_> {
    fn advance(&mut self) -> bool {
        while self.inner.advance() {
            let token = self.inner.token();
            let after_apostrophe = token.offset_from > 0
                && self.text[..token.offset_from].ends_with(['\'', '\u{2019}']);
            if !(after_apostrophe && token.text.eq_ignore_ascii_case("s")) {
                self.token.clone_from(token);
                self.token.position = token.position.saturating_sub(self.dropped);
                return true;
            }
            self.dropped += 1;
        }
        false
    }

    fn token(&self) -> &Token {
        &self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.token
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tantivy::schema::Schema;

    fn tokens(index: &Index, tokenizer: &str, text: &str) -> Vec<String> {
        let mut analyzer = index.tokenizers().get(tokenizer).expect("registered");
        let mut stream = analyzer.token_stream(text);
        let mut out = Vec::new();
        while let Some(t) = stream.next() {
            out.push(t.text.clone());
        }
        out
    }

    #[test]
    fn the_analyzers_make_the_tokens_opensearch_makes() {
        let index = Index::create_in_ram(Schema::builder().build());
        register(&index);
        let text = "The Dog's 2 Quick-Foxes ran";
        assert_eq!(
            tokens(&index, "tp_standard", text),
            ["the", "dog", "s", "2", "quick", "foxes", "ran"]
        );
        assert_eq!(
            tokens(&index, "tp_simple", text),
            ["the", "dog", "s", "quick", "foxes", "ran"]
        );
        assert_eq!(
            tokens(&index, "tp_whitespace", text),
            ["The", "Dog's", "2", "Quick-Foxes", "ran"]
        );
        assert_eq!(tokens(&index, "tp_keyword", text), [text]);
        assert_eq!(
            tokens(&index, "tp_stop", text),
            ["dog", "s", "quick", "foxes", "ran"]
        );
        assert_eq!(
            tokens(&index, "tp_english", text),
            ["dog", "2", "quick", "fox", "ran"]
        );
        assert_eq!(tokens(&index, "tp_norm_lowercase", "ÄBc D"), ["äbc d"]);
    }

    #[test]
    fn a_dropped_possessive_leaves_no_gap_in_positions() {
        let index = Index::create_in_ram(Schema::builder().build());
        register(&index);
        let mut analyzer = index.tokenizers().get("tp_english").expect("registered");
        let mut stream = analyzer.token_stream("dog's bone the end");
        let mut positions = Vec::new();
        while let Some(t) = stream.next() {
            positions.push((t.text.clone(), t.position));
        }
        // "the", a stop word, still holds its place.
        assert_eq!(
            positions,
            [
                ("dog".to_owned(), 0),
                ("bone".to_owned(), 1),
                ("end".to_owned(), 3)
            ]
        );
    }
}
