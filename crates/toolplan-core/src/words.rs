//! Names in free text: where a name (a tool's, say) stands in a model's text as a word of its own.
//! The planner's check of a plan's thought against its steps and the local sampler's hold on the
//! same thing read names the same way through [`word_at`].

/// Where `word` first stands in `text` as a word of its own, if it does: not inside a longer name
/// (letters, digits, `_`, `-`, or a `.` between name characters), so `get_user` stands in
/// "get_user gives" and "then get_user." but not in "get_users" or "x.get_user". An empty `word`
/// stands nowhere.
pub fn word_at(text: &str, word: &str) -> Option<usize> {
    if word.is_empty() {
        return None;
    }
    let is_name = |c: char| c.is_alphanumeric() || c == '_' || c == '.' || c == '-';
    let mut from = 0;
    while let Some(found) = text.get(from..)?.find(word) {
        let at = from + found;
        let end = at + word.len();
        let before = text[..at].chars().next_back();
        // A sentence's full stop or a hyphen after the name still ends it.
        let after = text[end..].chars().next();
        let after_ok = match after {
            None => true,
            Some('.' | '-') => text[end + 1..].chars().next().is_none_or(|c| !is_name(c)),
            Some(c) => !is_name(c),
        };
        if before.is_none_or(|c| !is_name(c)) && after_ok {
            return Some(at);
        }
        from = end;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_names_are_found() {
        assert_eq!(word_at("get_user gives", "get_user"), Some(0));
        assert_eq!(word_at("then get_user.", "get_user"), Some(5));
        assert_eq!(word_at("(calc)", "calc"), Some(1));
        assert_eq!(word_at("get_users, then get_user", "get_user"), Some(16));
        for (text, word) in [
            ("get_users", "get_user"),
            ("my_get_user", "get_user"),
            ("x.get_user", "get_user"),
            ("get_user.city", "get_user"),
            ("calc", ""),
            ("ca", "calc"),
            ("", "calc"),
        ] {
            assert_eq!(word_at(text, word), None, "{text:?} {word:?}");
        }
    }
}
