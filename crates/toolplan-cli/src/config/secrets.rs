//! The secret check of `toolplan.toml`: secrets come from the environment, never from the file.
//! A value of a secret-like key (`api_key`, `Authorization`, `--token` in `args` …) must be
//! exactly an environment reference, possibly after a scheme (`${VAR}`, `Bearer ${VAR}`); values
//! in known key formats (`sk-…`, `ghp_…`, `AKIA…`, `xoxb-…`) and credentials in URLs
//! (`user:pass@`, `?api_key=`) are refused whatever their key. Also which URLs stay on this
//! machine, for headers that must not travel in clear text.

/// Words that make a key (or a command-line flag, or a URL query parameter) secret-like.
const SECRET_WORDS: [&str; 8] = [
    "key",
    "secret",
    "token",
    "password",
    "passwd",
    "credential",
    "auth",
    "cookie",
];

/// Flag endings that name where a secret is, not the secret (`--token-env VAR`, `--key-file F`).
const NOT_SECRET_SUFFIXES: [&str; 9] = [
    "file", "path", "dir", "env", "var", "type", "name", "id", "url",
];

/// Prefixes of well-known API key formats, with the fewest characters that follow them.
const KEY_PREFIXES: [(&str, usize); 14] = [
    ("sk-", 16),
    ("sk_live_", 10),
    ("sk_test_", 10),
    ("rk_live_", 10),
    ("ghp_", 20),
    ("gho_", 20),
    ("ghs_", 20),
    ("ghu_", 20),
    ("github_pat_", 20),
    ("glpat-", 16),
    ("xoxb-", 10),
    ("xoxp-", 10),
    ("hf_", 20),
    ("AIza", 30),
];

fn secret_like(name: &str) -> bool {
    let mut lower = name.to_ascii_lowercase();
    // Words that only contain a secret word.
    if !lower.contains("authoriz") {
        for benign in ["keyword", "keyboard", "author"] {
            lower = lower.replace(benign, "");
        }
    }
    SECRET_WORDS.iter().any(|w| lower.contains(w))
}

/// `${VAR}`, or a fixed scheme and `${VAR}` (`Bearer ${VAR}`, `Basic ${VAR}`, `Token ${VAR}`).
fn is_env_reference(value: &str) -> bool {
    let v = value.trim();
    let v = ["Bearer ", "Basic ", "Token "]
        .iter()
        .find_map(|p| {
            v.get(..p.len())
                .filter(|head| head.eq_ignore_ascii_case(p))
                .map(|_| v[p.len()..].trim_start())
        })
        .unwrap_or(v);
    let Some(name) = v.strip_prefix("${").and_then(|r| r.strip_suffix('}')) else {
        return false;
    };
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why a string value looks like a secret whatever its key, if it does.
fn secret_value(value: &str) -> Option<&'static str> {
    let trimmed = value.trim();
    let lower = trimmed.to_ascii_lowercase();
    for scheme in ["bearer ", "basic "] {
        let at = if lower.starts_with(scheme) {
            Some(0)
        } else {
            lower
                .find(&format!("authorization: {scheme}"))
                .map(|i| i + "authorization: ".len())
        };
        if let Some(at) = at
            && !is_env_reference(&trimmed[at..])
        {
            return Some("a literal credential after its scheme");
        }
    }
    let words = value.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'));
    for word in words {
        let known = KEY_PREFIXES
            .iter()
            .any(|(p, n)| word.strip_prefix(p).is_some_and(|rest| rest.len() >= *n));
        let aws = word.len() == 20
            && (word.starts_with("AKIA") || word.starts_with("ASIA"))
            && word
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
        if known || aws {
            return Some("the format of an API key");
        }
    }
    if value.contains("://")
        && let Ok(url) = url::Url::parse(trimmed)
    {
        if !url.username().is_empty() || url.password().is_some() {
            return Some("credentials in the URL");
        }
        if url
            .query_pairs()
            .any(|(k, v)| secret_like(&k) && !is_env_reference(&v))
        {
            return Some("a secret in the URL's query");
        }
    }
    None
}

fn scan_table(table: &toml::Table, prefix: &str, found: &mut Vec<(String, &'static str)>) {
    for (k, v) in table {
        scan(v, &format!("{prefix}{k}"), k, found);
    }
}

/// Secret-like values under `path` (whose last key is `key`).
fn scan(value: &toml::Value, path: &str, key: &str, found: &mut Vec<(String, &'static str)>) {
    match value {
        toml::Value::Table(t) => scan_table(t, &format!("{path}."), found),
        toml::Value::Array(items) if key == "args" => scan_args(items, path, found),
        toml::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                scan(item, &format!("{path}[{i}]"), key, found);
            }
        }
        toml::Value::String(s) => {
            if secret_like(key) && !is_env_reference(s) {
                found.push((path.to_owned(), "a literal value"));
            } else if key != "instructions"
                && let Some(why) = secret_value(s)
            {
                found.push((path.to_owned(), why));
            }
        }
        _ if secret_like(key) => found.push((path.to_owned(), "a literal value")),
        _ => {}
    }
}

/// A command's arguments: a secret-like flag followed by a literal (`--api-key sk-1`,
/// `--token=abc`), or a literal that is a secret by its form.
fn scan_args(items: &[toml::Value], path: &str, found: &mut Vec<(String, &'static str)>) {
    let text = |i: usize| items.get(i).and_then(toml::Value::as_str);
    for i in 0..items.len() {
        let item_path = format!("{path}[{i}]");
        let Some(arg) = text(i) else {
            if let Some(item) = items.get(i) {
                scan(item, &item_path, "args", found);
            }
            continue;
        };
        if let Some(flag) = arg.strip_prefix('-') {
            let (name, inline) = match flag.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (flag, None),
            };
            let name = name.trim_start_matches('-').to_ascii_lowercase();
            let secret_flag =
                secret_like(&name) && !NOT_SECRET_SUFFIXES.iter().any(|s| name.ends_with(s));
            if secret_flag {
                let value = match inline {
                    Some(v) => Some((item_path.clone(), v)),
                    None => text(i + 1)
                        .filter(|next| !next.starts_with('-'))
                        .map(|next| (format!("{path}[{}]", i + 1), next)),
                };
                if let Some((at, v)) = value
                    && !is_env_reference(v)
                {
                    found.push((at, "a literal value after a secret-like flag"));
                    continue;
                }
            }
        }
        if let Some(why) = secret_value(arg) {
            found.push((item_path, why));
        }
    }
}

/// The host of a plain-http URL to another machine (where headers would travel in clear text).
pub(super) fn clear_text_host(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    (parsed.scheme() == "http" && !is_loopback_url(url))
        .then(|| parsed.host_str().unwrap_or_default().to_owned())
}

/// Whether a URL's host is this machine (`localhost`, 127.0.0.0/8, ::1).
pub(super) fn is_loopback_url(url: &str) -> bool {
    match url::Url::parse(url)
        .ok()
        .and_then(|u| u.host().map(|h| h.to_owned()))
    {
        Some(url::Host::Domain(d)) => {
            let d = d.to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// The first secret-like value of a parsed file: its key path and why it looks secret.
pub(super) fn find(table: &toml::Table) -> Option<(String, &'static str)> {
    let mut found = Vec::new();
    scan_table(table, "", &mut found);
    found.into_iter().next()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn mcp_servers_take_secrets_from_the_environment_only() {
        let c = Config::parse(
            r#"
            [[mcp_servers]]
            name = "everything"
            command = "npx"
            args = ["-y", "@modelcontextprotocol/server-everything"]
            env = { API_KEY = "${API_KEY}" }

            [[mcp_servers]]
            name = "remote"
            url = "http://127.0.0.1:3001/mcp"
            headers = { Authorization = "Bearer ${REMOTE_TOKEN}" }
            timeout = "30s"
            "#,
        )
        .unwrap();
        assert_eq!(c.mcp_servers.len(), 2);
        assert_eq!(
            c.mcp_servers[0].args[1],
            "@modelcontextprotocol/server-everything"
        );
        assert_eq!(c.mcp_servers[1].timeout.as_deref(), Some("30s"));
        let err = Config::parse(
            "[[mcp_servers]]\nname = \"x\"\ncommand = \"y\"\nenv = { API_KEY = \"abc\" }\n",
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("'mcp_servers[0].env.API_KEY' looks like a secret"),
            "{err}"
        );
    }

    /// The error of parsing `text`, which must fail.
    fn refused(text: &str) -> String {
        match Config::parse(text) {
            Ok(c) => panic!("accepted {text}: {c:?}"),
            Err(e) => format!("{e:#}"),
        }
    }

    fn server(fields: &str) -> String {
        format!("[[mcp_servers]]\nname = \"s\"\n{fields}\n")
    }

    #[test]
    fn secrets_cannot_hide_in_values_args_or_urls() {
        let cases = [
            // A literal credential after its scheme, under a key that does not look secret.
            (
                r#"url = "https://h.example/mcp"
headers = { Authorization = "Bearer abc" }"#,
                "mcp_servers[0].headers.Authorization",
            ),
            (
                r#"url = "https://h.example/mcp"
headers = { X-Custom = "Bearer abc" }"#,
                "mcp_servers[0].headers.X-Custom",
            ),
            // An environment reference beside a literal.
            (
                r#"command = "x"
env = { API_KEY = "sk-123${X}" }"#,
                "mcp_servers[0].env.API_KEY",
            ),
            // Flags in args.
            (
                r#"command = "x"
args = ["--api-key", "sk-live-123"]"#,
                "mcp_servers[0].args[1]",
            ),
            (
                r#"command = "x"
args = ["serve", "--token=abc"]"#,
                "mcp_servers[0].args[1]",
            ),
            (
                r#"command = "x"
args = ["--password", "hunter2"]"#,
                "mcp_servers[0].args[1]",
            ),
            // Known key formats anywhere.
            (
                r#"command = "x"
args = ["ghp_0123456789abcdefghijABCDEFGHIJ"]"#,
                "mcp_servers[0].args[0]",
            ),
            (
                r#"command = "x"
env = { AWS = "AKIAIOSFODNN7EXAMPLE" }"#,
                "mcp_servers[0].env.AWS",
            ),
            (
                r#"command = "x"
env = { SLACK = "xoxb-1234567890-abc" }"#,
                "mcp_servers[0].env.SLACK",
            ),
            // URLs.
            (
                r#"url = "https://h.example/mcp?api_key=abc""#,
                "mcp_servers[0].url",
            ),
            (
                r#"url = "https://h.example/mcp?x=1&token=abc""#,
                "mcp_servers[0].url",
            ),
            (
                r#"url = "https://user:pw@h.example/mcp""#,
                "mcp_servers[0].url",
            ),
        ];
        for (fields, key) in cases {
            let err = refused(&server(fields));
            assert!(
                err.contains(&format!("'{key}' looks like a secret")),
                "{fields}: {err}"
            );
        }
        assert!(refused("base_url = \"https://u:p@h.example/v1\"").contains("'base_url'"));
    }

    #[test]
    fn environment_references_and_ordinary_values_pass() {
        let c = Config::parse(&server(
            r#"command = "x"
args = ["--api-key", "${API_KEY}", "--token-env", "TOKEN", "--key-file", "k.pem", "--verbose", "--auth=${AUTH}", "sk-learn"]
env = { API_KEY = "${API_KEY}", MODE = "fast" }"#,
        ));
        assert!(c.is_ok(), "{c:?}");
        let c = Config::parse(&server(
            r#"url = "https://h.example/mcp?keyword=rust&page=2&token=${T}"
headers = { Authorization = "Basic ${CREDS}", Accept = "application/json", X-Api-Key = "${K}" }"#,
        ));
        assert!(c.is_ok(), "{c:?}");
        assert!(Config::parse("instructions = \"Bearer of news: be brief.\"").is_ok());
        assert!(is_env_reference("Bearer ${TOKEN}"));
        assert!(!is_env_reference("Bearer ${TOKEN}x"));
        assert!(!is_env_reference("${TOKEN} ${OTHER}"));
        assert!(!is_env_reference("${1X}"));
    }

    #[test]
    fn headers_never_travel_in_clear_text_to_another_machine() {
        let err = refused(&server(
            r#"url = "http://example.com/mcp"
headers = { Authorization = "Bearer ${TOKEN}" }"#,
        ));
        assert!(
            err.contains("headers would be sent in clear text to example.com: use https, or a loopback address"),
            "{err}"
        );
        for url in [
            "https://example.com/mcp",
            "http://127.0.0.1:3001/mcp",
            "http://localhost:3001/mcp",
            "http://[::1]:3001/mcp",
        ] {
            let c = Config::parse(&server(&format!(
                "url = \"{url}\"\nheaders = {{ Authorization = \"Bearer ${{T}}\" }}"
            )));
            assert!(c.is_ok(), "{url}: {c:?}");
        }
        // Without headers there is nothing to leak.
        assert!(Config::parse(&server(r#"url = "http://example.com/mcp""#)).is_ok());
    }

    #[test]
    fn rejects_secrets_and_unknown_fields() {
        let err = Config::parse("api_key = \"sk-123\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("secrets come from the environment"), "{err}");
        let err = Config::parse("[limits]\naws_secret = \"x\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("limits.aws_secret"), "{err}");
        let err = format!("{:#}", Config::parse("modle = \"local\"").unwrap_err());
        assert!(err.contains("modle"), "{err}");
    }
}
