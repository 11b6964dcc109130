//! Where an HTTP provider's settings come from: the environment, the base URL a caller gives, and
//! secrets that `Debug` output must not show.

/// The value of an environment variable, when it is set and not blank.
pub(crate) fn env_var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// A setting a caller gave, trimmed; a blank one counts as not given.
pub(crate) fn given(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

/// The base URL to use: the one the caller gave, else the one in the environment variable `env`,
/// else `default` (the provider's official endpoint).
pub(crate) fn base_url(given_url: Option<String>, env: &str, default: &str) -> String {
    given(given_url)
        .or_else(|| env_var(env))
        .unwrap_or_else(|| default.to_owned())
}

/// How a secret shows in `Debug` output: `<redacted>` when there is one.
pub(crate) fn redacted(secret: &Option<String>) -> Option<&'static str> {
    secret.as_ref().map(|_| "<redacted>")
}
