//! Token usage and its estimated cost, and their lenient wire forms (upstream's older files
//! leave buckets and totals out).

use serde::{Deserialize, Serialize};

/// Cost in USD per token bucket (an estimate from the model registry's prices). Read leniently
/// as upstream's older files write it: a missing bucket is 0, a missing `total` their sum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "CostWire")]
pub struct Cost {
    /// Fresh input tokens.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Cache-read tokens.
    pub cache_read: f64,
    /// Cache-write tokens.
    pub cache_write: f64,
    /// Sum of the buckets.
    pub total: f64,
    /// No price was known for (some of) the tokens: the amounts leave them out and are not the
    /// cost. Written as `"unknown": true` only then (readers that do not know it see zeros).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unknown: bool,
}

/// Cost as written in a file: every field optional (also built field by field by the report's
/// usage reader, `session::scan::usage`).
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CostWire {
    #[serde(default)]
    pub(crate) input: f64,
    #[serde(default)]
    pub(crate) output: f64,
    #[serde(default)]
    pub(crate) cache_read: f64,
    #[serde(default)]
    pub(crate) cache_write: f64,
    #[serde(default)]
    pub(crate) total: Option<f64>,
    #[serde(default)]
    pub(crate) unknown: bool,
}

impl From<CostWire> for Cost {
    fn from(w: CostWire) -> Self {
        let total = w.total.unwrap_or(w.input + w.output + w.cache_read + w.cache_write);
        let (input, output, cache_read, cache_write, unknown) =
            (w.input, w.output, w.cache_read, w.cache_write, w.unknown);
        Cost { input, output, cache_read, cache_write, total, unknown }
    }
}

/// Token usage in four exclusive buckets, their total, and the estimated cost. Read leniently as
/// upstream's older files write it (no `totalTokens`: the sum of the buckets; a missing bucket
/// or cost is 0); a value of the wrong type is still an error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "UsageWire")]
pub struct Usage {
    /// Fresh (uncached) input tokens.
    pub input: u64,
    /// Output tokens (including reasoning).
    pub output: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read: u64,
    /// Input tokens written to the prompt cache.
    pub cache_write: u64,
    /// `input + output + cache_read + cache_write`.
    pub total_tokens: u64,
    /// Estimated cost.
    pub cost: Cost,
}

/// Usage as written in a file: every field optional (also built field by field by the report's
/// usage reader, `session::scan::usage`).
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct UsageWire {
    #[serde(default)]
    pub(crate) input: u64,
    #[serde(default)]
    pub(crate) output: u64,
    #[serde(default)]
    pub(crate) cache_read: u64,
    #[serde(default)]
    pub(crate) cache_write: u64,
    #[serde(default)]
    pub(crate) total_tokens: Option<u64>,
    #[serde(default)]
    pub(crate) cost: Option<Cost>,
}

impl From<UsageWire> for Usage {
    fn from(w: UsageWire) -> Self {
        let sum = w.input.saturating_add(w.output).saturating_add(w.cache_read).saturating_add(w.cache_write);
        Usage {
            input: w.input,
            output: w.output,
            cache_read: w.cache_read,
            cache_write: w.cache_write,
            total_tokens: w.total_tokens.unwrap_or(sum),
            cost: w.cost.unwrap_or_default(),
        }
    }
}

impl Usage {
    /// Usage with these buckets and the total filled in (cost zero until priced).
    pub fn tokens(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Self {
        Usage {
            input,
            output,
            cache_read,
            cache_write,
            total_tokens: input + output + cache_read + cache_write,
            cost: Cost::default(),
        }
    }

    /// Adds another usage (tokens and costs).
    pub fn add(&mut self, other: &Usage) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.total_tokens += other.total_tokens;
        self.cost.input += other.cost.input;
        self.cost.output += other.cost.output;
        self.cost.cache_read += other.cost.cache_read;
        self.cost.cache_write += other.cost.cache_write;
        self.cost.total += other.cost.total;
        self.cost.unknown |= other.cost.unknown;
    }
}
