//! The built-in secret scrubber.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use regex::{Regex, RegexSet};

/// What replaces a scrubbed secret.
pub const REDACTED: &str = "[REDACTED]";

/// One scrubbing rule: a pattern and its replacement (`$1`-style group references allowed).
#[derive(Debug, Clone)]
struct Rule {
    name: Cow<'static, str>,
    regex: Regex,
    replacement: Cow<'static, str>,
}

/// Finds known credential formats in text and replaces them with [`REDACTED`].
///
/// Built-in rules: OpenAI/Anthropic keys (`sk-…`, `sk-ant-…`), AWS access key ids (`AKIA…`,
/// `ASIA…`), GitHub tokens (`ghp_…`, `gho_…`, `github_pat_…`), Slack tokens (`xox…`), JWTs,
/// `Bearer …`, PEM private-key blocks, credentials in URLs (`https://user:pass@host`) and
/// `password=`/`api_key=`/`token=`/`secret=` pairs (also as JSON keys). Extend with
/// [`Scrubber::with_rule`].
#[derive(Debug, Clone)]
pub struct Scrubber {
    rules: Arc<Vec<Rule>>,
    set: Arc<RegexSet>,
}

const BUILTIN: &[(&str, &str, &str)] = &[
    (
        "private_key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
        "[REDACTED]",
    ),
    ("provider_key", r"\bsk-[A-Za-z0-9_\-]{16,}", "[REDACTED]"),
    ("aws_access_key_id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", "[REDACTED]"),
    ("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})", "[REDACTED]"),
    ("slack_token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}", "[REDACTED]"),
    ("jwt", r"\beyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}", "[REDACTED]"),
    ("bearer", r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=\-]{8,}", "${1} [REDACTED]"),
    ("url_credentials", r"\b([a-zA-Z][a-zA-Z0-9+.\-]*://)[^\s/:@]+:[^\s/@]+@", "${1}[REDACTED]@"),
    (
        "key_value",
        r#"(?i)\b((?:password|passwd|pwd|secret|client_secret|api[_\-]?key|access[_\-]?token|auth[_\-]?token|refresh[_\-]?token|token)"?\s*[=:]\s*"?)[^\s"'&,;}]+"#,
        "${1}[REDACTED]",
    ),
];

impl Default for Scrubber {
    /// The built-in rules.
    fn default() -> Self {
        static BUILTIN_SCRUBBER: OnceLock<Scrubber> = OnceLock::new();
        BUILTIN_SCRUBBER
            .get_or_init(|| {
                let rules = BUILTIN
                    .iter()
                    .filter_map(|(name, pattern, replacement)| {
                        // The built-in patterns are constants covered by tests.
                        Regex::new(pattern).ok().map(|regex| Rule {
                            name: Cow::Borrowed(*name),
                            regex,
                            replacement: Cow::Borrowed(*replacement),
                        })
                    })
                    .collect();
                Scrubber::from_rules(rules)
            })
            .clone()
    }
}

impl Scrubber {
    fn from_rules(rules: Vec<Rule>) -> Scrubber {
        let set = RegexSet::new(rules.iter().map(|r| r.regex.as_str())).unwrap_or_else(|_| RegexSet::empty());
        Scrubber { rules: Arc::new(rules), set: Arc::new(set) }
    }

    /// The built-in rules plus one more. `replacement` may use `$1`-style group references.
    pub fn with_rule(
        &self,
        name: impl Into<Cow<'static, str>>,
        pattern: &str,
        replacement: impl Into<Cow<'static, str>>,
    ) -> Result<Scrubber, regex::Error> {
        let mut rules = Vec::clone(&self.rules);
        rules.push(Rule { name: name.into(), regex: Regex::new(pattern)?, replacement: replacement.into() });
        Ok(Scrubber::from_rules(rules))
    }

    /// Adds a pattern whose every match becomes [`REDACTED`] (the CLI's `--redact REGEX`).
    pub fn with_pattern(&self, pattern: &str) -> Result<Scrubber, regex::Error> {
        self.with_rule(format!("custom_{}", self.rules.len()), pattern, REDACTED)
    }

    /// Names of the built-in rules. Every one of them must be active in
    /// [`Scrubber::default`]; a build whose `regex` lacks a needed feature would silently lose
    /// rules, so each binary's tests compare the two.
    pub fn builtin_rule_names() -> impl Iterator<Item = &'static str> {
        BUILTIN.iter().map(|(name, _, _)| *name)
    }

    /// Names of the rules, in the order they are applied.
    pub fn rule_names(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().map(|r| r.name.as_ref())
    }

    /// `text` with every match of every rule replaced; borrowed when nothing matched.
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let matched = self.set.matches(text);
        if !matched.matched_any() {
            return Cow::Borrowed(text);
        }
        let mut out = Cow::Borrowed(text);
        for index in matched.iter() {
            let rule = &self.rules[index];
            if let Cow::Owned(replaced) = rule.regex.replace_all(&out, rule.replacement.as_ref()) {
                out = Cow::Owned(replaced);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrub(text: &str) -> String {
        Scrubber::default().scrub(text).into_owned()
    }

    #[test]
    fn builtin_rules_all_compile() {
        assert_eq!(Scrubber::default().rule_names().count(), BUILTIN.len());
    }

    #[test]
    fn known_secret_formats_are_replaced() {
        let cases = [
            "key sk-proj-abcdefghijklmnopqrstuvwx end",
            "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123",
            "aws AKIAIOSFODNN7EXAMPLE here",
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
            "xoxb-1234567890-abcdefghij",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "Authorization: Bearer abcdef0123456789",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
            "https://alice:hunter22@example.com/repo.git",
            "password=hunter22",
            r#"{"api_key": "zzzsecretzzz"}"#,
            "TOKEN: abc123456",
        ];
        let secrets = [
            "abcdefghijklmnopqrstuvwx",
            "api03",
            "AKIAIOSFODNN7EXAMPLE",
            "ghp_",
            "github_pat_",
            "xoxb-",
            "eyJhbGci",
            "abcdef0123456789",
            "MIIEowIBAAKCAQEA",
            "hunter22",
            "hunter22",
            "zzzsecretzzz",
            "abc123456",
        ];
        for (text, secret) in cases.iter().zip(secrets) {
            let out = scrub(text);
            assert!(!out.contains(secret), "{secret:?} survived in {out:?}");
            assert!(out.contains(REDACTED), "{out:?}");
        }
        assert_eq!(scrub("Authorization: Bearer abcdef0123456789"), "Authorization: Bearer [REDACTED]");
        assert_eq!(scrub("https://alice:pw@h/x"), "https://[REDACTED]@h/x");
    }

    #[test]
    fn ordinary_text_is_left_alone_and_borrowed() {
        for text in ["fix the bug in main.rs", "let token_count = 3;", "sk-short", "https://example.com/a"] {
            assert!(matches!(Scrubber::default().scrub(text), Cow::Borrowed(_)), "{text}");
        }
    }

    #[test]
    fn custom_patterns_extend_the_builtins() {
        let scrubber = Scrubber::default().with_pattern(r"ACME-\d{6}").unwrap();
        assert_eq!(
            scrubber.scrub("id ACME-123456 and sk-abcdefghijklmnopqrst").as_ref(),
            "id [REDACTED] and [REDACTED]"
        );
        assert!(Scrubber::default().with_pattern("(").is_err());
    }
}
