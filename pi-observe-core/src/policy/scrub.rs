//! The built-in secret scrubber.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, OnceLock};

use regex::Regex;
use regex_automata::util::syntax;
use regex_automata::{Input, MatchKind, PatternSet, meta};

/// What replaces a scrubbed secret.
pub const REDACTED: &str = "[REDACTED]";

/// One scrubbing rule: a pattern and its replacement (`$1`-style group references allowed).
#[derive(Debug, Clone)]
struct Rule {
    name: Cow<'static, str>,
    pattern: Cow<'static, str>,
    /// The pattern compiled on its own, the first time the set finds the rule in a text: most
    /// texts hold no secret, and compiling every rule up front cost each run more than the set
    /// that finds them (7 of 10 ms).
    regex: OnceLock<Option<Regex>>,
    replacement: Cow<'static, str>,
}

impl Rule {
    /// `text` with every match of this rule replaced (borrowed when none); all of it withheld
    /// should the rule fail to compile (it cannot: the set holding it compiled).
    fn replace_all<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.regex.get_or_init(|| Regex::new(&self.pattern).ok()) {
            Some(regex) => regex.replace_all(text, self.replacement.as_ref()),
            None => Cow::Owned(REDACTED.to_owned()),
        }
    }
}

/// Finds known credential formats in text and replaces them with [`REDACTED`].
///
/// Built-in rules: OpenAI/Anthropic keys (`sk-…`, `sk-ant-…`), Stripe (`sk_live_…`,
/// `rk_live_…`), AWS access key ids (`AKIA…`, `ASIA…`), GitHub (`ghp_…`, `gho_…`,
/// `github_pat_…`), GitLab (`glpat-…`), Slack (`xox…`), Google API keys (`AIza…`), npm
/// (`npm_…`), Hugging Face (`hf_…`), JWTs, `Bearer …` and `Basic …` authorization, PEM
/// private-key blocks, credentials in URLs (`https://user:pass@host`), and `NAME=value` /
/// `"name": "value"` pairs whose name ends in a secret word (`password`, `secret`, `token`,
/// `api_key`, `access_key`, `AccountKey`, … — so `DB_PASSWORD=`, `GITHUB_TOKEN=`,
/// `aws_secret_access_key =` too). Token formats are found at the start of a line, after any
/// non-word character and after a JSON escape (`\n`, `\t`, `\r`), so captured provider payloads
/// are covered. Extend with [`Scrubber::with_rule`] / [`Scrubber::with_pattern`]; added rules
/// never replace the built-in ones.
#[derive(Debug, Clone)]
pub struct Scrubber {
    rules: Arc<Vec<Rule>>,
    /// All the rules as one set, which finds the rules a text matches. The built-in rules' set
    /// is compiled the first time it is needed (a few milliseconds: see [`Scrubber::compile`]);
    /// one with added rules, as it is built (to report a set too large).
    set: Arc<OnceLock<Option<RuleSet>>>,
}

/// The rules as one multi-pattern regex; short texts are searched with one cache every thread
/// shares.
///
/// The set's lazy DFA builds its states as texts need them, in its cache; most of a check's
/// cost is building them (the set is large: ~30 rules with counted repetitions). `regex`'s own
/// `RegexSet` keeps a cache per thread that uses it, so each of the agent's threads paid for the
/// same states again (and ~0.1 ms, and ~40 fresh pages, to make its cache). Short texts — the
/// ids and names pi checks, up to [`SHORT_TEXT`] bytes — take turns with one cache: a search of
/// one takes microseconds, so waiting for it costs less than a cache of one's own. Longer texts
/// (captured content, which can take milliseconds) use the regex's own caches, so an id check
/// never waits behind one.
struct RuleSet {
    regex: meta::Regex,
    cache: Mutex<meta::Cache>,
}

impl RuleSet {
    /// The set of `patterns`, built as `regex`'s `RegexSet` builds one (the same limits).
    fn new<'p>(patterns: impl IntoIterator<Item = &'p str>) -> Result<RuleSet, Box<meta::BuildError>> {
        let patterns: Vec<&str> = patterns.into_iter().collect();
        let config = meta::Config::new()
            .match_kind(MatchKind::All)
            .utf8_empty(true)
            .which_captures(regex_automata::nfa::thompson::WhichCaptures::None)
            .nfa_size_limit(Some(10 * (1 << 20)))
            .hybrid_cache_capacity(2 * (1 << 20));
        let regex =
            meta::Builder::new().configure(config).syntax(syntax::Config::new().utf8(true)).build_many(&patterns)?;
        let cache = Mutex::new(regex.create_cache());
        Ok(RuleSet { regex, cache })
    }

    fn len(&self) -> usize {
        self.regex.pattern_len()
    }

    /// `search` with the shared cache when `text` is short, else with one of the regex's own.
    fn with_cache<R>(&self, text: &str, search: impl FnOnce(&meta::Regex, Option<&mut meta::Cache>) -> R) -> R {
        if text.len() > SHORT_TEXT {
            return search(&self.regex, None);
        }
        // Poisoned only by a panic inside a search: the cache is still a valid cache.
        let mut cache = self.cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        search(&self.regex, Some(&mut cache))
    }

    fn is_match(&self, text: &str) -> bool {
        let input = Input::new(text).earliest(true);
        self.with_cache(text, |regex, cache| match cache {
            Some(cache) => regex.is_match_with(cache, &input),
            None => regex.is_match(input.clone()),
        })
    }

    /// The indices of the rules that match somewhere in `text`, ascending.
    fn matches(&self, text: &str) -> PatternSet {
        let input = Input::new(text);
        let mut found = PatternSet::new(self.regex.pattern_len());
        self.with_cache(text, |regex, cache| match cache {
            Some(cache) => regex.which_overlapping_matches_with(cache, &input, &mut found),
            None => regex.which_overlapping_matches(&input, &mut found),
        });
        found
    }
}

/// Texts up to this many bytes are searched with [`RuleSet`]'s shared cache: every identifier
/// (at most 128 characters) and name pi checks.
const SHORT_TEXT: usize = 256;

impl std::fmt::Debug for RuleSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuleSet").field("patterns", &self.len()).finish_non_exhaustive()
    }
}

/// Why a scrubber could not be built. A scrubber is never built with fewer rules than asked for:
/// callers treat this as a start-up error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScrubError {
    /// The pattern is not a valid regular expression.
    Invalid {
        /// The pattern.
        pattern: String,
        /// The parser's complaint, on one line.
        reason: String,
    },
    /// The pattern can match the empty string (`""`, `^`, `a*`), which would scrub nothing useful
    /// and everything in between.
    MatchesEmpty {
        /// The pattern.
        pattern: String,
    },
    /// The rules together exceed the regex size limit.
    TooLarge {
        /// The added (non-built-in) patterns.
        patterns: Vec<String>,
    },
}

impl std::fmt::Display for ScrubError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScrubError::Invalid { pattern, reason } => {
                write!(f, "pattern \"{pattern}\" is not a valid regex: {reason}")
            }
            ScrubError::MatchesEmpty { pattern } => write!(f, "pattern \"{pattern}\" matches the empty string"),
            ScrubError::TooLarge { patterns } => {
                let quoted: Vec<String> = patterns.iter().map(|p| format!("\"{p}\"")).collect();
                write!(f, "patterns {} together make the scrubber too large; simplify them", quoted.join(", "))
            }
        }
    }
}

impl std::error::Error for ScrubError {}

/// What may stand before a token so that it counts as a token's start: the start of the text,
/// any character but a letter or digit, or a JSON escape such as `\n` (whose `n` would defeat
/// `\b`). Kept in the replacement through `${pre}`.
macro_rules! token {
    ($body:literal) => {
        concat!(r"(?P<pre>^|[^A-Za-z0-9]|\\[nrt])", $body)
    };
}

const BUILTIN: &[(&str, &str, &str)] = &[
    (
        "private_key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
        "[REDACTED]",
    ),
    ("provider_key", token!(r"sk-[A-Za-z0-9_\-]{16,}"), "${pre}[REDACTED]"),
    ("stripe_key", token!(r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"), "${pre}[REDACTED]"),
    ("aws_access_key_id", token!(r"(?:AKIA|ASIA)[0-9A-Z]{16}\b"), "${pre}[REDACTED]"),
    ("github_token", token!(r"(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), "${pre}[REDACTED]"),
    ("gitlab_token", token!(r"gl(?:pat|ptt|dt|rt)-[A-Za-z0-9_\-]{20,}"), "${pre}[REDACTED]"),
    ("slack_token", token!(r"xox[abposr]-[A-Za-z0-9\-]{10,}"), "${pre}[REDACTED]"),
    ("google_api_key", token!(r"AIza[0-9A-Za-z_\-]{35}"), "${pre}[REDACTED]"),
    ("npm_token", token!(r"npm_[A-Za-z0-9]{36,}"), "${pre}[REDACTED]"),
    ("huggingface_token", token!(r"hf_[A-Za-z0-9]{30,}"), "${pre}[REDACTED]"),
    ("jwt", token!(r"eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}"), "${pre}[REDACTED]"),
    ("bearer", token!(r"(?i:(?P<scheme>bearer))\s+[A-Za-z0-9._~+/=\-]{8,}"), "${pre}${scheme} [REDACTED]"),
    (
        "basic_auth",
        r#"(?i)(?P<head>authorization(?:\\?")?\s*[:=]\s*(?:\\?")?basic)\s+[A-Za-z0-9+/]{4,}={0,2}"#,
        "${head} [REDACTED]",
    ),
    // The password runs to the last `@` before the host, so `p@ss` is not cut at its own `@`.
    ("url_credentials", r"\b([a-zA-Z][a-zA-Z0-9+.\-]*://)[^\s/:@]+:[^\s/]*@", "${1}[REDACTED]@"),
    ("gcp_oauth_token", token!(r"ya29\.[0-9A-Za-z_\-]{20,}"), "${pre}[REDACTED]"),
    (
        "slack_webhook",
        r"(?P<head>https://hooks\.slack\.com/)(?:services|workflows|triggers)/[A-Za-z0-9/_\-]+",
        "${head}[REDACTED]",
    ),
    (
        "discord_webhook",
        r"(?P<head>https://(?:[a-z]+\.)?discord(?:app)?\.com/api/webhooks/)[0-9]+/[A-Za-z0-9_\-]+",
        "${head}[REDACTED]",
    ),
    ("azure_sas_signature", r"(?i)(?P<head>(?:^|[?&;\s])sig=)[A-Za-z0-9%+/=_\-]{8,}", "${head}[REDACTED]"),
    (
        "mysql_password_flag",
        r#"(?P<head>(?:\b|\\[nrt])(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlsh|mariadb|mariadb-dump)\b[^\n|;&]*?\s-p)(?:[^\s'"\\]|\\[^nrt"\\])+"#,
        "${head}[REDACTED]",
    ),
    (
        "docker_login_password",
        r#"(?P<head>(?:\b|\\[nrt])(?:docker|podman|nerdctl)\s+login\b[^\n|;&]*?\s(?:-p|--password)(?:\s+|=))(?:[^\s'"\\]|\\[^nrt"\\])+"#,
        "${head}[REDACTED]",
    ),
    (
        "curl_user_password",
        r#"(?P<head>(?:\b|\\[nrt])curl\b[^\n|;&]*?\s(?:-u|--user)(?:\s+|=)['"]?[^\s:'"]+:)(?:[^\s'"\\]|\\[^nrt"\\])+"#,
        "${head}[REDACTED]",
    ),
    (
        "netrc_password",
        r#"(?im)(?P<head>(?:(?:\b|\\[nrt])(?:machine|default)\b[^\n]*?\bpassword|(?:^|\\[nrt])[ \t]*password)[ \t]+)(?:[^\s\\]|\\[^nrt"\\])+"#,
        "${head}[REDACTED]",
    ),
    ("twilio_key", token!(r"(?:SK|AC)[0-9a-fA-F]{32}\b"), "${pre}[REDACTED]"),
    ("sendgrid_key", token!(r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"), "${pre}[REDACTED]"),
    ("mailgun_key", token!(r"(?:key-[0-9a-zA-Z]{32}|[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8})\b"), "${pre}[REDACTED]"),
    (
        "discord_bot_token",
        token!(r"[MNO][A-Za-z0-9]{23,27}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40}"),
        "${pre}[REDACTED]",
    ),
    ("databricks_token", token!(r"dapi[0-9a-f]{32}(?:-[0-9]+)?\b"), "${pre}[REDACTED]"),
    ("vault_token", token!(r"hv[sbr]\.[A-Za-z0-9_\-]{20,}"), "${pre}[REDACTED]"),
    (
        // Datadog API/app keys and Twilio auth tokens are bare hex: found by the word near them.
        "datadog_key",
        r"(?i)(?P<head>(?:\b|\\[nrt])(?:datadog|dd|twilio)\b[^\n]{0,40}?)\b[0-9a-f]{32}(?:[0-9a-f]{8})?\b",
        "${head}[REDACTED]",
    ),
    ("age_secret_key", token!(r"AGE-SECRET-KEY-1[0-9A-Z]{58}"), "${pre}[REDACTED]"),
    (
        "pgp_private_key",
        r"-----BEGIN PGP PRIVATE KEY BLOCK-----[\s\S]*?(?:-----END PGP PRIVATE KEY BLOCK-----|\z)",
        "[REDACTED]",
    ),
    (
        "key_value",
        // Any name ending in a secret word (`DB_PASSWORD`, `GITHUB_TOKEN`, `AccountKey`), then
        // `=` or `:` (quoted JSON keys too), then the value up to a delimiter — a JSON escape
        // (`\n`, `\"`) ends it too, so the next escaped line is scrubbed on its own.
        concat!(
            r#"(?i)(?P<head>[A-Za-z0-9_\-]*(?:"#,
            r"password|passwd|pwd|secret|token|api[_\-]?key|app[_\-]?key|application[_\-]?key|access[_\-]?key|private[_\-]?key|account[_\-]?key|secret[_\-]?key|client[_\-]?secret|credentials?",
            r#")(?:\\?")?\s*[=:]\s*(?:\\?")?)(?:[^\s"'&,;}\\]|\\[^nrt"])+"#
        ),
        "${head}[REDACTED]",
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
                    .map(|(name, pattern, replacement)| Rule {
                        name: Cow::Borrowed(*name),
                        pattern: Cow::Borrowed(*pattern),
                        regex: OnceLock::new(),
                        replacement: Cow::Borrowed(*replacement),
                    })
                    .collect::<Vec<_>>();
                Scrubber { rules: Arc::new(rules), set: Arc::new(OnceLock::new()) }
            })
            .clone()
    }
}

impl Scrubber {
    /// The built-in rules plus one more. `replacement` may use `$1`-style group references.
    /// Fails, naming the pattern, when it is invalid, can match the empty string, or makes the
    /// whole rule set too large.
    pub fn with_rule(
        &self,
        name: impl Into<Cow<'static, str>>,
        pattern: &str,
        replacement: impl Into<Cow<'static, str>>,
    ) -> Result<Scrubber, ScrubError> {
        let invalid = |e: &dyn std::fmt::Display| ScrubError::Invalid {
            pattern: pattern.to_owned(),
            reason: e.to_string().lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or("").to_owned(),
        };
        let hir = regex_syntax::parse(pattern).map_err(|e| invalid(&e))?;
        if hir.properties().minimum_len().is_none_or(|len| len == 0) {
            return Err(ScrubError::MatchesEmpty { pattern: pattern.to_owned() });
        }
        let regex = Regex::new(pattern).map_err(|e| invalid(&e))?;
        let mut rules = Vec::clone(&self.rules);
        rules.push(Rule {
            name: name.into(),
            pattern: Cow::Owned(pattern.to_owned()),
            regex: OnceLock::from(Some(regex)),
            replacement: replacement.into(),
        });
        let set = RuleSet::new(rules.iter().map(|r| r.pattern.as_ref())).map_err(|_| ScrubError::TooLarge {
            patterns: rules.iter().skip(BUILTIN.len()).map(|r| r.pattern.to_string()).collect(),
        })?;
        Ok(Scrubber { rules: Arc::new(rules), set: Arc::new(OnceLock::from(Some(set))) })
    }

    /// Adds a pattern whose every match becomes [`REDACTED`] (the CLI's `--redact REGEX`).
    pub fn with_pattern(&self, pattern: &str) -> Result<Scrubber, ScrubError> {
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

    /// Compiles the rule set now, if it is not yet: it takes a few milliseconds, otherwise
    /// spent by the first [`Scrubber::scrub`]. For a thread that warms the scrubber while the
    /// rest of a start-up goes on (clones share the compiled set; a caller that needs it
    /// meanwhile waits for this compile instead of starting another). Then it checks a few
    /// identifiers shaped like the ones pi checks most (tool call ids, model ids), so that the
    /// states of the set's lazy DFA they need are built here, in the cache every thread shares,
    /// rather than by the agent's first checks.
    pub fn compile(&self) {
        const SHAPES: [&str; 5] = [
            "call_Ab12Cd34Ef56Gh78Ij90KlMn",
            "toolu_01A09q90qw90lq917835lq9",
            "faux_call_12_0",
            "gpt-4o-mini-2024-07-18",
            "models/gemini-2.5-flash:stream@v1+x",
        ];
        if let Some(set) = self.set() {
            for shape in SHAPES {
                set.is_match(shape);
            }
        }
    }

    /// The rule set; `None` (nothing found) only if the built-in rules did not compile, which
    /// the tests rule out for every build.
    fn set(&self) -> Option<&RuleSet> {
        // Only the built-in rules' set is compiled here (an extended scrubber's was compiled as
        // it was built); those patterns are constants, each compiled by the tests.
        self.set.get_or_init(|| RuleSet::new(self.rules.iter().map(|r| r.pattern.as_ref())).ok()).as_ref()
    }

    /// `text` with every match of every rule replaced; borrowed when nothing matched.
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Some(set) = self.set().filter(|set| set.is_match(text)) else {
            return Cow::Borrowed(text);
        };
        let matched = set.matches(text);
        if matched.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut out = Cow::Borrowed(text);
        for index in matched.iter() {
            let rule = &self.rules[index.as_usize()];
            if let Cow::Owned(replaced) = rule.replace_all(&out) {
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
    fn the_builtin_set_compiles_once_for_every_clone_and_an_extended_one_as_built() {
        let builtin = Scrubber::default();
        let clone = builtin.clone();
        builtin.compile();
        assert!(clone.set.get().is_some(), "a clone shares the compiled set");
        assert!(Arc::ptr_eq(&Scrubber::default().set, &builtin.set), "every default shares it too");
        let extended = builtin.with_pattern("internal-[0-9]{6}").unwrap();
        assert!(extended.set.get().is_some(), "checked (and compiled) as it was built");
        assert_eq!(extended.scrub("id internal-123456"), "id [REDACTED]");
    }

    #[test]
    fn builtin_rules_all_compile() {
        assert_eq!(Scrubber::default().rule_names().count(), BUILTIN.len());
        for (name, pattern, _) in BUILTIN {
            assert!(Regex::new(pattern).is_ok(), "{name}");
        }
        assert_eq!(Scrubber::default().set().map(RuleSet::len), Some(BUILTIN.len()));
    }

    #[test]
    fn threads_sharing_the_set_find_the_same_secrets_as_one_thread() {
        // Four threads at once, taking turns with the shared search cache for the short texts
        // and using caches of their own for the long ones: every verdict must be the one a lone
        // thread gets.
        let filler = "lorem ipsum ".repeat(30);
        let texts: Vec<String> = (0..80)
            .map(|i| match i % 5 {
                0 => format!("call_{i:04}_abcXYZ"),
                1 => format!("ghp_{i:02}abcdefghijklmnopqrstuvwxyz0123"),
                2 => format!("model-{i}.v2"),
                3 => format!("export API_TOKEN=t{i}zzzz"),
                _ => format!("{filler} sk-{i:02}abcdefghijklmnopqrstuvwx {filler}"),
            })
            .collect();
        assert!(texts.iter().any(|t| t.len() > SHORT_TEXT) && texts.iter().any(|t| t.len() <= SHORT_TEXT));
        let alone: Vec<String> = texts.iter().map(|t| scrub(t)).collect();
        assert!(alone.iter().filter(|t| t.contains(REDACTED)).count() == 48, "{alone:?}");
        // A failed assertion on any thread fails the scope, and the test.
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..20 {
                        assert_eq!(texts.iter().map(|t| scrub(t)).collect::<Vec<_>>(), alone);
                    }
                });
            }
        });
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
        for text in [
            "fix the bug in main.rs",
            "let token_count = 3;",
            "sk-short",
            "https://example.com/a",
            "the password is wrong, try again",
            "mysql -p shop",
            "docker login registry.example.com",
            "curl -u alice https://api.example.com",
            "dd if=/dev/zero of=disk.img bs=1M count=16",
            "a sig of approval",
        ] {
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
