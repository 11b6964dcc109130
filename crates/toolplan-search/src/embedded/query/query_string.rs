//! `query_string` (Lucene's classic query syntax) and `simple_query_string`, read into the query
//! DSL the rest of the translator runs.
//!
//! `query_string`: terms, `field:term`, `field:(a b)`, `"phrases"~slop`, `term~fuzziness`,
//! wildcards (`qu?ck*`; `field:*` is `exists`), `/regular expressions/`, ranges (`[1 TO 5]`,
//! `{a TO *]`, `>=5`), `_exists_:field`, boosts (`term^2`, `(group)^2`), `+` / `-` and
//! `AND` / `OR` / `NOT` / `&&` / `||` / `!` combined as Lucene's classic parser combines them, `\`
//! escapes. Options: `default_field` or `fields` (with `^boost` and `*` patterns; all fields by
//! default, then leniently), `default_operator`, `lenient`, `phrase_slop`, `fuzziness`,
//! `fuzzy_transpositions`, `allow_leading_wildcard`, `minimum_should_match`, `tie_breaker`,
//! `boost`. A term on several fields is their `dis_max`.
//!
//! `simple_query_string`: words, `"phrases"`, `+` (and), `|` (or), `-` (not), `( )`, `word*`
//! (prefix), `word~N`, `"phrase"~N`; whitespace is `default_operator`; it never fails on syntax.

use serde_json::{Map, Value, json};

use super::QueryTranslator;
use crate::backend::glob;
use crate::error::SearchError;
use crate::mapping::FieldKind;

/// How a clause takes part in its boolean query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Occur {
    Must,
    Should,
    MustNot,
}

/// A parsed query.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Bool(Vec<(Occur, Node)>),
    /// A clause on a field (`None`: the default fields), with a boost.
    Leaf {
        field: Option<String>,
        leaf: Leaf,
        boost: Option<f64>,
    },
    /// A parenthesized group, with its field and boost.
    Group {
        node: Box<Node>,
        boost: Option<f64>,
    },
    /// Simple query string's `-x`: every document but those of `x`.
    Not(Box<Node>),
}

#[derive(Debug, Clone, PartialEq)]
enum Leaf {
    Term(String),
    Phrase(String, Option<u64>),
    Fuzzy(String, Option<String>),
    Wildcard(String),
    Prefix(String),
    Regex(String),
    Range {
        lower: Option<String>,
        upper: Option<String>,
        include_lower: bool,
        include_upper: bool,
    },
}

/// Tokens of the classic syntax.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    Open,
    Close,
    Plus,
    Minus,
    Not,
    And,
    Or,
    /// `field:` (the field name, unescaped).
    Field(String),
    /// A word (unescaped text, whether it has unescaped wildcards), with `~x` and `^x` suffixes.
    Word {
        text: String,
        wild: bool,
        fuzzy: Option<Option<String>>,
        boost: Option<f64>,
    },
    Phrase {
        text: String,
        slop: Option<u64>,
        boost: Option<f64>,
    },
    Regex {
        text: String,
        boost: Option<f64>,
    },
    Range {
        lower: Option<String>,
        upper: Option<String>,
        include_lower: bool,
        include_upper: bool,
        boost: Option<f64>,
    },
    /// `)^2`: the boost of the group just closed.
    GroupBoost(f64),
}

const SPECIAL: &str = "+-&|!(){}[]^\"~*?:\\/ ";

fn lex(text: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    // `~n` and `^n` after a word, phrase or group.
    let suffix = |i: &mut usize, mark: char| -> Option<String> {
        if chars.get(*i) != Some(&mark) {
            return None;
        }
        *i += 1;
        let start = *i;
        while *i < chars.len() && (chars[*i].is_ascii_digit() || chars[*i] == '.') {
            *i += 1;
        }
        Some(chars[start..*i].iter().collect())
    };
    let boost_of = |text: Option<String>| -> Result<Option<f64>, String> {
        match text {
            None => Ok(None),
            Some(t) => t
                .parse::<f64>()
                .map(Some)
                .map_err(|_| format!("a boost must be a number, found '^{t}'")),
        }
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            c if c.is_whitespace() => i += 1,
            '(' => {
                tokens.push(Token::Open);
                i += 1;
            }
            ')' => {
                tokens.push(Token::Close);
                i += 1;
                if let Some(b) = boost_of(suffix(&mut i, '^'))? {
                    tokens.push(Token::GroupBoost(b));
                }
            }
            '+' => {
                tokens.push(Token::Plus);
                i += 1;
            }
            '-' => {
                tokens.push(Token::Minus);
                i += 1;
            }
            '!' => {
                tokens.push(Token::Not);
                i += 1;
            }
            '&' if chars.get(i + 1) == Some(&'&') => {
                tokens.push(Token::And);
                i += 2;
            }
            '|' if chars.get(i + 1) == Some(&'|') => {
                tokens.push(Token::Or);
                i += 2;
            }
            '"' => {
                let mut text = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err("an unterminated phrase (\")".into()),
                        Some('"') => break,
                        Some('\\') => {
                            if let Some(&n) = chars.get(i + 1) {
                                text.push(n);
                            }
                            i += 2;
                        }
                        Some(&x) => {
                            text.push(x);
                            i += 1;
                        }
                    }
                }
                i += 1;
                let slop = match suffix(&mut i, '~') {
                    Some(s) if s.is_empty() => None,
                    Some(s) => Some(s.parse::<u64>().map_err(|_| {
                        format!("a phrase slop must be a whole number, found '~{s}'")
                    })?),
                    None => None,
                };
                let boost = boost_of(suffix(&mut i, '^'))?;
                tokens.push(Token::Phrase { text, slop, boost });
            }
            '/' => {
                let mut text = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err("an unterminated regular expression (/)".into()),
                        Some('/') => break,
                        Some('\\') if chars.get(i + 1) == Some(&'/') => {
                            text.push('/');
                            i += 2;
                        }
                        Some(&x) => {
                            text.push(x);
                            i += 1;
                        }
                    }
                }
                i += 1;
                let boost = boost_of(suffix(&mut i, '^'))?;
                tokens.push(Token::Regex { text, boost });
            }
            '[' | '{' => {
                let close = chars[i..]
                    .iter()
                    .position(|&x| x == ']' || x == '}')
                    .ok_or("an unterminated range ([ or {)")?;
                let inner: String = chars[i + 1..i + close].iter().collect();
                let include_upper = chars[i + close] == ']';
                let include_lower = c == '[';
                let parts: Vec<&str> = inner.split_whitespace().collect();
                let [lo, to, hi] = parts.as_slice() else {
                    return Err(format!("a range is [lower TO upper], found {c}{inner}"));
                };
                if *to != "TO" {
                    return Err(format!("a range is [lower TO upper], found {c}{inner}"));
                }
                let bound = |b: &str| (b != "*").then(|| unquote(b));
                i += close + 1;
                let boost = boost_of(suffix(&mut i, '^'))?;
                tokens.push(Token::Range {
                    lower: bound(lo),
                    upper: bound(hi),
                    include_lower,
                    include_upper,
                    boost,
                });
            }
            _ => {
                // A word: up to whitespace or a special character not escaped.
                let mut text = String::new();
                let mut wild = false;
                while i < chars.len() {
                    let x = chars[i];
                    if x == '\\' {
                        if let Some(&n) = chars.get(i + 1) {
                            text.push(n);
                        }
                        i += 2;
                        continue;
                    }
                    if x == '*' || x == '?' {
                        wild = true;
                        text.push(x);
                        i += 1;
                        continue;
                    }
                    // `>=5` and `<5` start a word; `-` and `+` inside one are part of it.
                    if (x == '-' || x == '+') && !text.is_empty() {
                        text.push(x);
                        i += 1;
                        continue;
                    }
                    if SPECIAL.contains(x) || x.is_whitespace() {
                        break;
                    }
                    text.push(x);
                    i += 1;
                }
                if chars.get(i) == Some(&':') {
                    i += 1;
                    tokens.push(Token::Field(text));
                    continue;
                }
                if text.is_empty() {
                    return Err(format!("unexpected '{}'", chars[i]));
                }
                let fuzzy = suffix(&mut i, '~').map(|s| (!s.is_empty()).then_some(s));
                let boost = boost_of(suffix(&mut i, '^'))?;
                let word = match text.as_str() {
                    "AND" if fuzzy.is_none() && boost.is_none() => Token::And,
                    "OR" if fuzzy.is_none() && boost.is_none() => Token::Or,
                    "NOT" if fuzzy.is_none() && boost.is_none() => Token::Not,
                    _ => Token::Word {
                        text,
                        wild,
                        fuzzy,
                        boost,
                    },
                };
                tokens.push(word);
            }
        }
    }
    Ok(tokens)
}

fn unquote(s: &str) -> String {
    s.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(s)
        .to_owned()
}

/// The classic parser over tokens.
struct Classic {
    tokens: Vec<Token>,
    at: usize,
    and_default: bool,
    depth: usize,
    max_depth: usize,
}

#[derive(Clone, Copy, PartialEq)]
enum Conj {
    None,
    And,
    Or,
}

#[derive(Clone, Copy, PartialEq)]
enum Modifier {
    None,
    Required,
    Not,
}

impl Classic {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    /// A query: clauses until the end or a `)`, combined as Lucene's classic parser does.
    fn query(&mut self, field: Option<&str>) -> Result<Node, String> {
        self.depth += 1;
        if self.depth > self.max_depth {
            return Err(format!(
                "the query nests more than {} groups deep",
                self.max_depth
            ));
        }
        let mut clauses: Vec<(Occur, Node)> = Vec::new();
        loop {
            let conj = match self.peek() {
                Some(Token::And) => {
                    self.at += 1;
                    Conj::And
                }
                Some(Token::Or) => {
                    self.at += 1;
                    Conj::Or
                }
                _ => Conj::None,
            };
            let modifier = match self.peek() {
                Some(Token::Plus) => {
                    self.at += 1;
                    Modifier::Required
                }
                Some(Token::Minus | Token::Not) => {
                    self.at += 1;
                    Modifier::Not
                }
                _ => Modifier::None,
            };
            match self.peek() {
                None | Some(Token::Close) if conj == Conj::None && modifier == Modifier::None => {
                    break;
                }
                None | Some(Token::Close) => return Err("an operator with nothing after it".into()),
                _ => {}
            }
            let clause = self.clause(field)?;
            self.add(&mut clauses, conj, modifier, clause);
        }
        self.depth -= 1;
        Ok(match clauses.len() {
            1 if clauses[0].0 != Occur::MustNot => clauses.remove(0).1,
            _ => Node::Bool(clauses),
        })
    }

    /// Lucene's `addClause`: how a conjunction and a modifier set this clause's and the previous
    /// clause's occurrence.
    fn add(&self, clauses: &mut Vec<(Occur, Node)>, conj: Conj, modifier: Modifier, node: Node) {
        if let Some(last) = clauses.last_mut() {
            if conj == Conj::And && last.0 != Occur::MustNot {
                last.0 = Occur::Must;
            }
            if self.and_default && conj == Conj::Or && last.0 != Occur::MustNot {
                last.0 = Occur::Should;
            }
        }
        let prohibited = modifier == Modifier::Not;
        let required = if self.and_default {
            !prohibited && conj != Conj::Or
        } else {
            modifier == Modifier::Required || (conj == Conj::And && !prohibited)
        };
        let occur = match (required, prohibited) {
            (_, true) => Occur::MustNot,
            (true, false) => Occur::Must,
            (false, false) => Occur::Should,
        };
        clauses.push((occur, node));
    }

    fn clause(&mut self, field: Option<&str>) -> Result<Node, String> {
        let mut field = field.map(str::to_owned);
        if let Some(Token::Field(f)) = self.peek() {
            field = Some(f.clone());
            self.at += 1;
        }
        match self.next() {
            Some(Token::Open) => {
                let inner = self.query(field.as_deref())?;
                if self.next() != Some(Token::Close) {
                    return Err("a ( without its )".into());
                }
                let boost = match self.peek() {
                    Some(Token::GroupBoost(b)) => {
                        let b = *b;
                        self.at += 1;
                        Some(b)
                    }
                    _ => None,
                };
                Ok(Node::Group {
                    node: Box::new(inner),
                    boost,
                })
            }
            Some(Token::Word {
                text,
                wild,
                fuzzy,
                boost,
            }) => {
                let leaf = if let Some(cmp) = ["<=", ">=", "<", ">"]
                    .iter()
                    .find(|op| text.starts_with(**op))
                {
                    let value = Some(text[cmp.len()..].to_owned());
                    match *cmp {
                        "<=" => range(None, value, true, true),
                        "<" => range(None, value, true, false),
                        ">=" => range(value, None, true, true),
                        _ => range(value, None, false, true),
                    }
                } else if let Some(f) = fuzzy {
                    Leaf::Fuzzy(text, f)
                } else if wild {
                    Leaf::Wildcard(text)
                } else {
                    Leaf::Term(text)
                };
                Ok(Node::Leaf { field, leaf, boost })
            }
            Some(Token::Phrase { text, slop, boost }) => Ok(Node::Leaf {
                field,
                leaf: Leaf::Phrase(text, slop),
                boost,
            }),
            Some(Token::Regex { text, boost }) => Ok(Node::Leaf {
                field,
                leaf: Leaf::Regex(text),
                boost,
            }),
            Some(Token::Range {
                lower,
                upper,
                include_lower,
                include_upper,
                boost,
            }) => Ok(Node::Leaf {
                field,
                leaf: range(lower, upper, include_lower, include_upper),
                boost,
            }),
            Some(other) => Err(format!("unexpected {other:?}")),
            None => Err("the query ends too early".into()),
        }
    }
}

fn range(
    lower: Option<String>,
    upper: Option<String>,
    include_lower: bool,
    include_upper: bool,
) -> Leaf {
    Leaf::Range {
        lower,
        upper,
        include_lower,
        include_upper,
    }
}

/// Parses the simple query string syntax; it does not fail: what it cannot read is text.
fn simple(text: &str, and_default: bool) -> Node {
    let chars: Vec<char> = text.chars().collect();
    let mut at = 0;
    let node = simple_or(&chars, &mut at, and_default, 0);
    node.unwrap_or(Node::Bool(Vec::new()))
}

fn simple_or(chars: &[char], at: &mut usize, and_default: bool, depth: usize) -> Option<Node> {
    // Clauses joined by `|` (should) and `+` (must); whitespace is the default operator.
    let mut groups: Vec<Vec<Node>> = vec![Vec::new()];
    // The operator written before the next clause, if any: `|` or `+`.
    let mut written: Option<char> = None;
    while *at < chars.len() {
        let c = chars[*at];
        match c {
            c if c.is_whitespace() => *at += 1,
            '|' | '+' => {
                written = Some(c);
                *at += 1;
            }
            ')' if depth > 0 => {
                *at += 1;
                break;
            }
            _ => {
                let node = simple_unary(chars, at, and_default, depth)?;
                let or = match written.take() {
                    Some('|') => true,
                    Some(_) => false,
                    None => !and_default,
                };
                if or && groups.last().is_some_and(|g| !g.is_empty()) {
                    groups.push(Vec::new());
                }
                if let Some(g) = groups.last_mut() {
                    g.push(node);
                }
            }
        }
    }
    let ors: Vec<(Occur, Node)> = groups
        .into_iter()
        .filter(|g| !g.is_empty())
        .map(|mut g| {
            let node = if g.len() == 1 {
                g.remove(0)
            } else {
                Node::Bool(g.into_iter().map(|n| (Occur::Must, n)).collect())
            };
            (Occur::Should, node)
        })
        .collect();
    match ors.len() {
        0 => None,
        1 => ors.into_iter().next().map(|(_, n)| n),
        _ => Some(Node::Bool(ors)),
    }
}

fn simple_unary(chars: &[char], at: &mut usize, and_default: bool, depth: usize) -> Option<Node> {
    match chars.get(*at)? {
        '-' => {
            *at += 1;
            let inner = simple_unary(chars, at, and_default, depth)?;
            Some(Node::Not(Box::new(inner)))
        }
        '(' => {
            *at += 1;
            // Past the nesting limit, the rest is read flat.
            let node = simple_or(chars, at, and_default, (depth + 1).min(64))?;
            Some(Node::Group {
                node: Box::new(node),
                boost: None,
            })
        }
        '"' => {
            *at += 1;
            let start = *at;
            while *at < chars.len() && chars[*at] != '"' {
                *at += 1;
            }
            let text: String = chars[start..*at].iter().collect();
            *at += 1;
            let slop = simple_suffix(chars, at).and_then(|s| s.parse().ok());
            Some(Node::Leaf {
                field: None,
                leaf: Leaf::Phrase(text, slop),
                boost: None,
            })
        }
        _ => {
            let start = *at;
            while *at < chars.len()
                && !"|+()\"~".contains(chars[*at])
                && !chars[*at].is_whitespace()
            {
                if chars[*at] == '\\' {
                    *at += 1;
                }
                *at += 1;
            }
            let raw: String = chars[start..(*at).min(chars.len())].iter().collect();
            let text = raw.replace('\\', "");
            let fuzzy = simple_suffix(chars, at);
            let leaf = match (text.strip_suffix('*'), fuzzy) {
                (_, Some(f)) => Leaf::Fuzzy(text.clone(), (!f.is_empty()).then_some(f)),
                (Some(prefix), None) if !prefix.is_empty() => Leaf::Prefix(prefix.to_owned()),
                _ => Leaf::Term(text),
            };
            Some(Node::Leaf {
                field: None,
                leaf,
                boost: None,
            })
        }
    }
}

fn simple_suffix(chars: &[char], at: &mut usize) -> Option<String> {
    if chars.get(*at) != Some(&'~') {
        return None;
    }
    *at += 1;
    let start = *at;
    while *at < chars.len() && chars[*at].is_ascii_digit() {
        *at += 1;
    }
    Some(chars[start..*at].iter().collect())
}

/// The options both queries read.
struct Settings {
    fields: Vec<(String, Option<f64>)>,
    lenient: bool,
    and_default: bool,
    phrase_slop: u64,
    fuzziness: Value,
    transpositions: bool,
    leading_wildcard: bool,
    tie_breaker: Option<f64>,
}

const QUERY_STRING_OPTIONS: &[&str] = &[
    "query",
    "default_field",
    "fields",
    "default_operator",
    "lenient",
    "phrase_slop",
    "fuzziness",
    "fuzzy_transpositions",
    "fuzzy_max_expansions",
    "allow_leading_wildcard",
    "analyze_wildcard",
    "minimum_should_match",
    "tie_breaker",
    "type",
    "boost",
    "auto_generate_synonyms_phrase_query",
    "enable_position_increments",
    "escape",
    "max_determinized_states",
    "rewrite",
    "_name",
];

const SIMPLE_OPTIONS: &[&str] = &[
    "query",
    "fields",
    "default_operator",
    "lenient",
    "analyze_wildcard",
    "minimum_should_match",
    "fuzzy_transpositions",
    "fuzzy_max_expansions",
    "flags",
    "boost",
    "auto_generate_synonyms_phrase_query",
    "_name",
];

impl QueryTranslator<'_> {
    /// `query_string`, as the DSL it stands for.
    pub(super) fn query_string_dsl(&self, body: &Value, path: &str) -> Result<Value, SearchError> {
        let options = options(body, path, "query_string", QUERY_STRING_OPTIONS)?;
        if let Some(t) = options.get("type").and_then(Value::as_str)
            && t != "best_fields"
        {
            return Err(SearchError::dsl(
                path,
                format!("[query_string] of type {t} is not supported by the embedded engine"),
            ));
        }
        let text = query_text(&options, path)?;
        let settings = self.settings(&options, path, true)?;
        let mut parser = Classic {
            tokens: lex(&text).map_err(|e| {
                SearchError::dsl(path, format!("Failed to parse query [{text}]: {e}"))
            })?,
            at: 0,
            and_default: settings.and_default,
            depth: 0,
            max_depth: self.limits.max_nested_depth,
        };
        let node = parser
            .query(None)
            .map_err(|e| SearchError::dsl(path, format!("Failed to parse query [{text}]: {e}")))?;
        if parser.at < parser.tokens.len() {
            return Err(SearchError::dsl(
                path,
                format!("Failed to parse query [{text}]: a ) without its ("),
            ));
        }
        self.finish(&node, &settings, &options, path)
    }

    /// `simple_query_string`, as the DSL it stands for.
    pub(super) fn simple_query_string_dsl(
        &self,
        body: &Value,
        path: &str,
    ) -> Result<Value, SearchError> {
        let options = options(body, path, "simple_query_string", SIMPLE_OPTIONS)?;
        if let Some(flags) = options.get("flags").and_then(Value::as_str)
            && !flags.eq_ignore_ascii_case("ALL")
        {
            return Err(SearchError::dsl(
                path,
                format!(
                    "[simple_query_string] flags {flags} are not supported by the embedded engine (ALL)"
                ),
            ));
        }
        let text = query_text(&options, path)?;
        let mut settings = self.settings(&options, path, false)?;
        // Simple query strings never fail on a value a field cannot hold.
        settings.lenient = true;
        let node = simple(&text, settings.and_default);
        self.finish(&node, &settings, &options, path)
    }

    fn finish(
        &self,
        node: &Node,
        settings: &Settings,
        options: &Map<String, Value>,
        path: &str,
    ) -> Result<Value, SearchError> {
        let mut dsl = self.node_dsl(node, None, settings, path)?;
        if let Some(m) = options.get("minimum_should_match")
            && let Some(b) = dsl.get_mut("bool").and_then(Value::as_object_mut)
            && b.contains_key("should")
        {
            b.insert("minimum_should_match".into(), m.clone());
        }
        if let Some(boost) = options.get("boost") {
            dsl = json!({"bool": {"must": [dsl], "boost": boost}});
        }
        Ok(dsl)
    }

    fn settings(
        &self,
        options: &Map<String, Value>,
        path: &str,
        classic: bool,
    ) -> Result<Settings, SearchError> {
        let mut names: Vec<String> = Vec::new();
        match (options.get("fields"), options.get("default_field")) {
            (Some(_), Some(_)) => {
                return Err(SearchError::dsl(
                    path,
                    "cannot use [fields] parameter in conjunction with [default_field]",
                ));
            }
            (Some(Value::Array(list)), _) => {
                names.extend(list.iter().filter_map(Value::as_str).map(str::to_owned));
            }
            (Some(other), _) => {
                return Err(SearchError::dsl(
                    path,
                    format!("fields must be a list, found {other}"),
                ));
            }
            (None, Some(Value::String(f))) if classic => names.push(f.clone()),
            _ => names.push("*".into()),
        }
        let mut fields = Vec::new();
        let mut patterns = false;
        for name in names {
            let (name, boost) = match name.split_once('^') {
                Some((n, b)) => (
                    n.to_owned(),
                    Some(b.parse::<f64>().map_err(|_| {
                        SearchError::dsl(path, format!("a field boost must be a number: {name}"))
                    })?),
                ),
                None => (name, None),
            };
            if name.contains('*') {
                patterns = true;
                for f in self.searchable_fields() {
                    if glob(&name, &f) {
                        fields.push((f, boost));
                    }
                }
            } else {
                fields.push((name, boost));
            }
        }
        let and_default = match options.get("default_operator").and_then(Value::as_str) {
            None => false,
            Some(op) if op.eq_ignore_ascii_case("or") => false,
            Some(op) if op.eq_ignore_ascii_case("and") => true,
            Some(op) => {
                return Err(SearchError::dsl(
                    path,
                    format!("default_operator must be AND or OR, found {op}"),
                ));
            }
        };
        let flag =
            |key: &str, default: bool| options.get(key).and_then(Value::as_bool).unwrap_or(default);
        Ok(Settings {
            fields,
            // Over field patterns (`*` by default), a value a field cannot hold is skipped.
            lenient: flag("lenient", patterns),
            and_default,
            phrase_slop: options
                .get("phrase_slop")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            fuzziness: options
                .get("fuzziness")
                .cloned()
                .unwrap_or_else(|| json!("AUTO")),
            transpositions: flag("fuzzy_transpositions", true),
            leading_wildcard: flag("allow_leading_wildcard", true),
            tie_breaker: options.get("tie_breaker").and_then(Value::as_f64),
        })
    }

    /// The mapped fields a `*` pattern can reach: searchable and of a type the engine indexes.
    fn searchable_fields(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .schema
            .fields
            .values()
            .filter(|f| f.spec.searchable)
            .map(|f| f.spec.path.clone())
            .collect();
        names.sort();
        names
    }

    fn node_dsl(
        &self,
        node: &Node,
        field: Option<&str>,
        settings: &Settings,
        path: &str,
    ) -> Result<Value, SearchError> {
        Ok(match node {
            Node::Bool(clauses) => {
                let mut must = Vec::new();
                let mut should = Vec::new();
                let mut must_not = Vec::new();
                for (occur, n) in clauses {
                    let q = self.node_dsl(n, field, settings, path)?;
                    match occur {
                        Occur::Must => must.push(q),
                        Occur::Should => should.push(q),
                        Occur::MustNot => must_not.push(q),
                    }
                }
                if must.is_empty() && should.is_empty() && must_not.is_empty() {
                    return Ok(json!({"match_none": {}}));
                }
                json!({"bool": {"must": must, "should": should, "must_not": must_not}})
            }
            Node::Group { node, boost } => {
                let inner = self.node_dsl(node, field, settings, path)?;
                match boost {
                    Some(b) => json!({"bool": {"must": [inner], "boost": b}}),
                    None => inner,
                }
            }
            Node::Not(inner) => {
                let inner = self.node_dsl(inner, field, settings, path)?;
                json!({"bool": {"must": [{"match_all": {}}], "must_not": [inner]}})
            }
            Node::Leaf {
                field: own,
                leaf,
                boost,
            } => {
                let field = own.as_deref().or(field);
                let targets: Vec<(String, Option<f64>)> = match field {
                    Some("_exists_") => {
                        let Leaf::Term(name) = leaf else {
                            return Err(SearchError::dsl(path, "_exists_ takes a field name"));
                        };
                        return Ok(json!({"exists": {"field": name}}));
                    }
                    Some(f) if f.contains('*') => self
                        .searchable_fields()
                        .into_iter()
                        .filter(|n| glob(f, n))
                        .map(|n| (n, None))
                        .collect(),
                    Some(f) => vec![(f.to_owned(), None)],
                    None => settings.fields.clone(),
                };
                let lenient = settings.lenient || field.is_some_and(|f| f.contains('*'));
                let mut per_field = Vec::new();
                for (name, field_boost) in &targets {
                    if let Some(q) = self.leaf_dsl(name, leaf, settings, lenient, path)? {
                        let b = field_boost.unwrap_or(1.0) * boost.unwrap_or(1.0);
                        per_field.push(if (b - 1.0).abs() > f64::EPSILON {
                            json!({"bool": {"must": [q], "boost": b}})
                        } else {
                            q
                        });
                    }
                }
                match per_field.len() {
                    0 => json!({"match_none": {}}),
                    1 => per_field.remove(0),
                    _ => {
                        let mut dm = json!({"dis_max": {"queries": per_field}});
                        if let Some(t) = settings.tie_breaker {
                            dm["dis_max"]["tie_breaker"] = json!(t);
                        }
                        dm
                    }
                }
            }
        })
    }

    /// The clause of one leaf on one field; `None` when the field cannot take it and the query is
    /// lenient.
    fn leaf_dsl(
        &self,
        name: &str,
        leaf: &Leaf,
        settings: &Settings,
        lenient: bool,
        path: &str,
    ) -> Result<Option<Value>, SearchError> {
        let Some(indexed) = self.schema.fields.get(name) else {
            // A field the mapping lacks matches nothing.
            return Ok(Some(json!({"match_none": {}})));
        };
        let kind = &indexed.spec.kind;
        let text_like = matches!(kind, FieldKind::Text | FieldKind::Keyword);
        let fits = |v: &str| match kind {
            FieldKind::Integer => crate::embedded::schema::integer(&json!(v)).is_some(),
            FieldKind::Float => crate::embedded::schema::float(&json!(v)).is_some(),
            FieldKind::Boolean => v == "true" || v == "false",
            FieldKind::Date => crate::datemath::parse_date(v).is_some(),
            FieldKind::Ip => {
                crate::embedded::schema::ip_address(v).is_some()
                    || crate::embedded::schema::ip_block(v).is_some()
            }
            _ => true,
        };
        let skip_or = |q: Value| -> Result<Option<Value>, SearchError> { Ok(Some(q)) };
        // What this field cannot take: left out of a lenient query, else an error.
        let cannot = |what: &str| -> Result<Option<Value>, SearchError> {
            if lenient {
                Ok(None)
            } else {
                Err(SearchError::dsl(
                    path,
                    format!(
                        "failed to create query: {what} on {} field '{name}'",
                        kind.name()
                    ),
                ))
            }
        };
        match leaf {
            Leaf::Term(t) => {
                if !fits(t) {
                    return cannot(&format!("[{t}], not a value"));
                }
                skip_or(match kind {
                    FieldKind::Text => json!({"match": {name: {"query": t,
                        "operator": if settings.and_default { "and" } else { "or" }}}}),
                    _ => json!({"term": {name: {"value": t}}}),
                })
            }
            Leaf::Phrase(t, slop) => {
                if *kind != FieldKind::Text {
                    return self.leaf_dsl(name, &Leaf::Term(t.clone()), settings, lenient, path);
                }
                skip_or(json!({"match_phrase": {name: {"query": t,
                    "slop": slop.unwrap_or(settings.phrase_slop)}}}))
            }
            Leaf::Fuzzy(t, distance) => {
                if !text_like {
                    return self.leaf_dsl(name, &Leaf::Term(t.clone()), settings, lenient, path);
                }
                let fuzziness = distance.as_ref().map_or_else(
                    || settings.fuzziness.clone(),
                    |d| json!(d.parse::<f64>().map_or(2, |f| f.round() as u64)),
                );
                skip_or(json!({"match": {name: {"query": t, "fuzziness": fuzziness,
                    "fuzzy_transpositions": settings.transpositions}}}))
            }
            Leaf::Wildcard(t) if t == "*" => skip_or(json!({"exists": {"field": name}})),
            Leaf::Wildcard(t) | Leaf::Prefix(t) | Leaf::Regex(t) => {
                let (clause, what) = match leaf {
                    Leaf::Wildcard(_) => ("wildcard", "a wildcard"),
                    Leaf::Prefix(_) => ("prefix", "a prefix"),
                    _ => ("regexp", "a regular expression"),
                };
                if clause == "wildcard"
                    && !settings.leading_wildcard
                    && (t.starts_with('*') || t.starts_with('?'))
                {
                    return Err(SearchError::dsl(
                        path,
                        format!("leading wildcard is not allowed: {t}"),
                    ));
                }
                if !text_like {
                    return cannot(what);
                }
                // On text, wildcard and prefix terms are lower-cased as the analyzer lower-cases
                // the text.
                let value = if *kind == FieldKind::Text && clause != "regexp" {
                    t.to_lowercase()
                } else {
                    t.clone()
                };
                Ok(Some(json!({ clause: {name: {"value": value}} })))
            }
            Leaf::Range {
                lower,
                upper,
                include_lower,
                include_upper,
            } => {
                if [lower, upper].into_iter().flatten().any(|v| !fits(v)) {
                    return cannot("a range bound that is not a value");
                }
                let mut r = Map::new();
                if let Some(l) = lower {
                    r.insert(if *include_lower { "gte" } else { "gt" }.into(), json!(l));
                }
                if let Some(u) = upper {
                    r.insert(if *include_upper { "lte" } else { "lt" }.into(), json!(u));
                }
                if r.is_empty() {
                    return skip_or(json!({"exists": {"field": name}}));
                }
                skip_or(json!({"range": {name: r}}))
            }
        }
    }
}

/// The options object of a query-string clause, its options checked.
fn options(
    body: &Value,
    path: &str,
    kind: &str,
    allowed: &[&str],
) -> Result<Map<String, Value>, SearchError> {
    let Value::Object(options) = body else {
        return Err(SearchError::dsl(
            path,
            format!("[{kind}] takes an object of options"),
        ));
    };
    super::check_options(kind, options, &[allowed], path)?;
    Ok(options.clone())
}

fn query_text(options: &Map<String, Value>, path: &str) -> Result<String, SearchError> {
    match options.get("query") {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Number(n)) => Ok(n.to_string()),
        Some(Value::Bool(b)) => Ok(b.to_string()),
        _ => Err(SearchError::dsl(path, "[query] must be text")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, and_default: bool) -> Node {
        let mut p = Classic {
            tokens: lex(text).unwrap(),
            at: 0,
            and_default,
            depth: 0,
            max_depth: 20,
        };
        p.query(None).unwrap()
    }

    fn term(t: &str) -> Node {
        Node::Leaf {
            field: None,
            leaf: Leaf::Term(t.into()),
            boost: None,
        }
    }

    #[test]
    fn classic_operators_combine_as_lucene_combines_them() {
        assert_eq!(
            parse("a AND b", false),
            Node::Bool(vec![(Occur::Must, term("a")), (Occur::Must, term("b"))])
        );
        assert_eq!(
            parse("a b -c +d", false),
            Node::Bool(vec![
                (Occur::Should, term("a")),
                (Occur::Should, term("b")),
                (Occur::MustNot, term("c")),
                (Occur::Must, term("d"))
            ])
        );
        assert_eq!(
            parse("a OR b", true),
            Node::Bool(vec![(Occur::Should, term("a")), (Occur::Should, term("b"))])
        );
        assert_eq!(
            parse("a b", true),
            Node::Bool(vec![(Occur::Must, term("a")), (Occur::Must, term("b"))])
        );
        assert_eq!(
            parse("NOT a", false),
            Node::Bool(vec![(Occur::MustNot, term("a"))])
        );
    }

    #[test]
    fn fields_phrases_ranges_and_suffixes() {
        let tokens =
            lex(r#"title:"big fish"~2^3 n:[1 TO *} age:>=30 x\:y quick~1 qu?ck* /jo.n/"#).unwrap();
        assert_eq!(tokens[0], Token::Field("title".into()));
        assert_eq!(
            tokens[1],
            Token::Phrase {
                text: "big fish".into(),
                slop: Some(2),
                boost: Some(3.0)
            }
        );
        assert_eq!(
            tokens[3],
            Token::Range {
                lower: Some("1".into()),
                upper: None,
                include_lower: true,
                include_upper: false,
                boost: None
            }
        );
        assert_eq!(
            tokens[5],
            Token::Word {
                text: ">=30".into(),
                wild: false,
                fuzzy: None,
                boost: None
            }
        );
        assert_eq!(
            tokens[6],
            Token::Word {
                text: "x:y".into(),
                wild: false,
                fuzzy: None,
                boost: None
            }
        );
        assert_eq!(
            tokens[7],
            Token::Word {
                text: "quick".into(),
                wild: false,
                fuzzy: Some(Some("1".into())),
                boost: None
            }
        );
        assert_eq!(
            tokens[8],
            Token::Word {
                text: "qu?ck*".into(),
                wild: true,
                fuzzy: None,
                boost: None
            }
        );
        assert_eq!(
            tokens[9],
            Token::Regex {
                text: "jo.n".into(),
                boost: None
            }
        );
        assert!(lex("\"open").is_err());
    }

    #[test]
    fn simple_syntax_never_fails() {
        assert_eq!(
            simple("a | b", false),
            Node::Bool(vec![(Occur::Should, term("a")), (Occur::Should, term("b"))])
        );
        assert_eq!(
            simple("a +b", false),
            Node::Bool(vec![(Occur::Must, term("a")), (Occur::Must, term("b"))])
        );
        assert!(matches!(simple("a -b", true), Node::Bool(ref c) if c.len() == 2));
        let _ = simple("((((\"unclosed ~ | + -", false);
    }
}
