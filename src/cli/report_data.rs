//! What `pi report` adds up, shared by its text formats (`report.rs`) and its HTML page
//! (`report_html.rs`).

use std::collections::BTreeMap;

use pi_agent::message::Usage;

/// The usage and assistant turns of one group.
#[derive(Default)]
pub(super) struct Sums {
    pub(super) usage: Usage,
    pub(super) turns: u64,
}

/// Groups by their key (one value per dimension).
pub(super) type Groups = BTreeMap<Vec<String>, Sums>;

/// `provider/model` → tokens billed without a known price.
pub(super) type Unpriced = BTreeMap<String, u64>;

/// The footnote under a report with `n/a` costs: which models, how many tokens, how to fix it.
pub(super) fn unpriced_note(unpriced: &Unpriced) -> String {
    let models: Vec<String> = unpriced.iter().map(|(model, tokens)| format!("{model} ({tokens} tokens)")).collect();
    format!(
        "n/a: no price known for {}; their cost is unknown, not zero (add a \"cost\" for them in ~/.pi/agent/models.json)",
        models.join(", ")
    )
}
