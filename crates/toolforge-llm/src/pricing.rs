//! Prices per model, in US dollars per million tokens, and the cost of a [`Usage`].
//!
//! Defaults are the providers' published list prices (November 2026) for the models toolforge
//! documents; `prices` in the `toolforge` object of `mcp.servers.json` overrides or adds
//! entries. A model with no entry is priced like the most expensive default, so an unknown
//! model can never make the cost ceiling too generous.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::Usage;

/// One model's prices, USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    pub cache_write: f64,
    pub cache_read: f64,
}

impl Price {
    /// `usage` × prices, in USD.
    #[must_use]
    pub fn cost(&self, usage: &Usage) -> f64 {
        (usage.input_tokens as f64 * self.input
            + usage.output_tokens as f64 * self.output
            + usage.cache_creation_input_tokens as f64 * self.cache_write
            + usage.cache_read_input_tokens as f64 * self.cache_read)
            / 1_000_000.0
    }

    /// The most an input token can cost (uncached or written to the cache).
    #[must_use]
    pub fn worst_input(&self) -> f64 {
        self.input.max(self.cache_write).max(self.cache_read)
    }
}

/// The price table.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceTable {
    prices: BTreeMap<String, Price>,
}

const fn p(input: f64, output: f64, cache_write: f64, cache_read: f64) -> Price {
    Price {
        input,
        output,
        cache_write,
        cache_read,
    }
}

/// The built-in prices. `mock` is priced like `claude-sonnet-4-6` so offline runs show the
/// figures (and hit the ceiling) a real run would.
pub const DEFAULT_PRICES: &[(&str, Price)] = &[
    ("claude-opus-4-7", p(5.0, 25.0, 6.25, 0.50)),
    ("claude-opus-4-5", p(5.0, 25.0, 6.25, 0.50)),
    ("claude-sonnet-4-6", p(3.0, 15.0, 3.75, 0.30)),
    ("claude-sonnet-4-5", p(3.0, 15.0, 3.75, 0.30)),
    ("claude-haiku-4-5", p(1.0, 5.0, 1.25, 0.10)),
    ("claude-3-5-haiku-latest", p(0.80, 4.0, 1.0, 0.08)),
    ("gpt-4o", p(2.50, 10.0, 2.50, 1.25)),
    ("gpt-4o-mini", p(0.15, 0.60, 0.15, 0.075)),
    ("gpt-4.1", p(2.0, 8.0, 2.0, 0.50)),
    ("gpt-4.1-mini", p(0.40, 1.60, 0.40, 0.10)),
    ("mock", p(3.0, 15.0, 3.75, 0.30)),
];

impl Default for PriceTable {
    fn default() -> Self {
        Self {
            prices: DEFAULT_PRICES
                .iter()
                .map(|(m, p)| ((*m).to_owned(), *p))
                .collect(),
        }
    }
}

impl PriceTable {
    /// Adds or replaces entries.
    #[must_use]
    pub fn with_overrides(mut self, overrides: impl IntoIterator<Item = (String, Price)>) -> Self {
        self.prices.extend(overrides);
        self
    }

    /// The model's price: an exact entry, else the entry whose name prefixes the model id
    /// (`claude-sonnet-4-6-20261001` → `claude-sonnet-4-6`), else the most expensive entry.
    #[must_use]
    pub fn price(&self, model: &str) -> (Price, bool) {
        if let Some(p) = self.prices.get(model) {
            return (*p, true);
        }
        if let Some((_, p)) = self
            .prices
            .iter()
            .filter(|(k, _)| model.starts_with(k.as_str()))
            .max_by_key(|(k, _)| k.len())
        {
            return (*p, true);
        }
        (self.most_expensive(), false)
    }

    fn most_expensive(&self) -> Price {
        self.prices
            .values()
            .copied()
            .fold(p(0.0, 0.0, 0.0, 0.0), |a, b| {
                p(
                    a.input.max(b.input),
                    a.output.max(b.output),
                    a.cache_write.max(b.cache_write),
                    a.cache_read.max(b.cache_read),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_is_usage_times_prices() {
        let (price, known) = PriceTable::default().price("claude-sonnet-4-6");
        assert!(known);
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 1_000_000,
            cache_creation_input_tokens: 1_000_000,
            cache_read_input_tokens: 1_000_000,
        };
        assert!((price.cost(&usage) - (3.0 + 15.0 + 3.75 + 0.30)).abs() < 1e-9);
    }

    #[test]
    fn dated_ids_use_their_family_and_unknown_models_the_dearest_price() {
        let table = PriceTable::default();
        assert_eq!(
            table.price("claude-haiku-4-5-20251001").0,
            table.price("claude-haiku-4-5").0
        );
        let (unknown, known) = table.price("llama3.1:8b");
        assert!(!known);
        assert_eq!(unknown.output, 25.0);
        let cheap = table.with_overrides([("llama3.1:8b".to_owned(), p(0.0, 0.0, 0.0, 0.0))]);
        assert_eq!(cheap.price("llama3.1:8b"), (p(0.0, 0.0, 0.0, 0.0), true));
    }
}
