//! `pi --list-models [SEARCH]`: the model catalogue as pi will use it — the shipped catalogue
//! (upstream pi's model list, with prices) plus `~/.pi/agent/models.json` and `--models-file` —
//! one row per model: provider, id, context window, maximum output, thinking, images, the price
//! per million tokens of each bucket, and whether pi can run it here.

use std::process::ExitCode;

use pi_agent::model::{ModelInfo, Registry};

use super::args::AgentArgs;
use super::config::Config;
use super::{CliError, output, setup};

/// Prints the models whose `provider id` matches every word of `search` (each word's letters in
/// order, any case: upstream's fuzzy filter), sorted by provider then id. Exit 0; no match is
/// said on stdout as upstream does.
pub fn run(search: &str, args: &AgentArgs, cfg: &Config) -> Result<ExitCode, CliError> {
    let registry = setup::registry(args, cfg)?;
    let mut models: Vec<&ModelInfo> =
        registry.models().iter().filter(|m| matches(search, &format!("{} {}", m.provider, m.id))).collect();
    if models.is_empty() {
        output::line(format_args!("No models matching \"{}\"", search.trim()));
        return Ok(ExitCode::SUCCESS);
    }
    models.sort_by(|a, b| (&a.provider, &a.id).cmp(&(&b.provider, &b.id)));
    let header = [
        "provider",
        "model",
        "context",
        "max-out",
        "thinking",
        "images",
        "input",
        "output",
        "cache-read",
        "cache-write",
        "status",
    ];
    let mut rows = vec![header.map(str::to_owned).to_vec()];
    rows.extend(models.iter().map(|m| row(m, &registry)));
    output::table(&rows, 2);
    let stamp = &registry.stamp;
    output::line(format_args!(
        "\n{} models. Prices in USD per million tokens, from {} ({}); `n/a`: no price known, usage is billed as unknown.",
        models.len(),
        stamp.source,
        stamp.date
    ));
    Ok(ExitCode::SUCCESS)
}

/// One model's cells.
fn row(m: &ModelInfo, registry: &Registry) -> Vec<String> {
    let yes = |b: bool| if b { "yes" } else { "no" }.to_owned();
    let price = |read: fn(&pi_agent::model::Pricing) -> f64| m.cost.as_ref().map_or("n/a".into(), |p| dollars(read(p)));
    vec![
        m.provider.clone(),
        m.id.clone(),
        tokens(m.context_window),
        tokens(m.max_tokens),
        yes(m.reasoning),
        yes(m.input.iter().any(|kind| kind == "image")),
        price(|p| p.input),
        price(|p| p.output),
        price(|p| p.cache_read),
        price(|p| p.cache_write),
        status(m, registry),
    ]
}

/// `ready`, `needs VAR` (its provider's key is not set), `unavailable (login)` for a provider
/// reached through a subscription login, or `unavailable (API)` for a model on an API pi has no
/// client for.
pub(crate) fn status(m: &ModelInfo, registry: &Registry) -> String {
    if m.needs_login() {
        return "unavailable (login)".into();
    }
    if !m.runnable() {
        return format!("unavailable ({})", m.api.as_str());
    }
    // Bedrock signs with AWS credentials (variables, the profile file) rather than one key.
    // Looked up once per process (it may read the credentials file), not once per model.
    static AWS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if m.api == pi_agent::model::Api::BedrockConverseStream
        && m.auth.is_none()
        && !*AWS.get_or_init(|| pi_agent::provider::AwsAuth::from_environment().is_some())
    {
        return "needs AWS credentials".into();
    }
    match registry.api_key_var(&m.provider) {
        Some(var) if m.auth.is_none() && std::env::var(var).map_or(true, |v| v.trim().is_empty()) => {
            format!("needs {var}")
        }
        _ => "ready".into(),
    }
}

/// `$3`, `$0.075`, `$0.45` (the catalogue's `0.44999999999999996`): at most six decimals.
fn dollars(price: f64) -> String {
    let fixed = format!("{price:.6}");
    format!("${}", fixed.trim_end_matches('0').trim_end_matches('.'))
}

/// `200K`, `1M`, `1.5M`, `8192` → `8.2K` (upstream's `formatTokenCount`).
fn tokens(count: u64) -> String {
    let scaled = |n: f64, unit: &str| {
        if n.fract() == 0.0 { format!("{n}{unit}") } else { format!("{n:.1}{unit}") }
    };
    match count {
        1_000_000.. => scaled(count as f64 / 1_000_000.0, "M"),
        1_000.. => scaled(count as f64 / 1_000.0, "K"),
        _ => count.to_string(),
    }
}

/// True when every word of `search` is a subsequence of `text` (ASCII case ignored).
pub(crate) fn matches(search: &str, text: &str) -> bool {
    let text = text.to_lowercase();
    search.split_whitespace().all(|word| {
        let mut rest = text.chars();
        word.to_lowercase().chars().all(|wanted| rest.any(|c| c == wanted))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_counts_read_as_upstream_writes_them() {
        assert_eq!(
            [tokens(200_000), tokens(1_000_000), tokens(1_048_576), tokens(8192), tokens(512)],
            ["200K", "1M", "1.0M", "8.2K", "512"]
        );
    }

    #[test]
    fn prices_show_at_most_six_decimals() {
        assert_eq!(
            [dollars(3.0), dollars(0.075), dollars(0.44999999999999996), dollars(0.0)],
            ["$3", "$0.075", "$0.45", "$0"]
        );
    }

    #[test]
    fn search_words_match_in_order_anywhere() {
        assert!(matches("", "openai gpt-5"));
        assert!(matches("son 4.5", "anthropic claude-sonnet-4.5"));
        assert!(matches("ANTH sonnet", "anthropic claude-sonnet-4-5"));
        assert!(!matches("gemini", "anthropic claude-sonnet-4-5"));
    }
}
