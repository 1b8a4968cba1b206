//! The cost guard (DESIGN §4): projects the worst case before every model call, clamps
//! `max_tokens` to what the remaining budget can pay, and halts when it cannot pay a useful
//! minimum.
//!
//! The worst case of a call is its estimated input, every token at the dearest input price
//! (uncached or cache write), plus `max_tokens` of output. The input estimate
//! ([`toolforge_llm::estimate_input_tokens`]) over-counts on purpose and is calibrated: once a
//! response reports more input tokens than were estimated, later estimates are scaled by the
//! largest ratio seen. So actual spend stays ≤ the ceiling whenever a call's billed input is
//! within its (calibrated) estimate, and a provider never bills more output than `max_tokens`.

use toolforge_llm::{Price, Usage};

/// The default `COST_CEILING_USD`.
pub const DEFAULT_CEILING_USD: f64 = 0.10;

/// The smallest `max_tokens` worth a call: below it the run halts instead.
pub const MIN_USEFUL_OUTPUT_TOKENS: u32 = 64;

/// What the guard allows for the next call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Allowance {
    /// Call with this `max_tokens` (≤ the requested one).
    Call { max_tokens: u32 },
    /// The budget cannot pay a useful call.
    Halt,
}

/// Per-request spend tracking against a ceiling.
#[derive(Debug, Clone)]
pub struct CostGuard {
    ceiling: f64,
    spent: f64,
    price: Price,
    calibration: f64,
    min_output: u32,
}

impl CostGuard {
    #[must_use]
    pub fn new(ceiling_usd: f64, price: Price) -> Self {
        Self {
            ceiling: ceiling_usd.max(0.0),
            spent: 0.0,
            price,
            calibration: 1.0,
            min_output: MIN_USEFUL_OUTPUT_TOKENS,
        }
    }

    /// Changes the smallest useful `max_tokens`.
    #[must_use]
    pub fn with_min_output(mut self, tokens: u32) -> Self {
        self.min_output = tokens.max(1);
        self
    }

    /// Dollars spent so far.
    #[must_use]
    pub fn spent(&self) -> f64 {
        self.spent
    }

    #[must_use]
    pub fn ceiling(&self) -> f64 {
        self.ceiling
    }

    /// The worst-case cost of `input_tokens` of input (calibrated) and no output.
    fn input_worst_case(&self, estimated_input: u64) -> f64 {
        (estimated_input as f64 * self.calibration).ceil() * self.price.worst_input() / 1e6
    }

    /// How many output tokens the next call may have, given its estimated input.
    #[must_use]
    pub fn allow(&self, estimated_input: u64, wanted_max_tokens: u32) -> Allowance {
        let left = self.ceiling - self.spent - self.input_worst_case(estimated_input);
        if left <= 0.0 {
            return Allowance::Halt;
        }
        let affordable = if self.price.output > 0.0 {
            let t = (left * 1e6 / self.price.output).floor();
            if t >= f64::from(u32::MAX) {
                u32::MAX
            } else {
                t as u32
            }
        } else {
            u32::MAX
        };
        let max_tokens = wanted_max_tokens.min(affordable);
        if max_tokens < self.min_output.min(wanted_max_tokens).max(1) {
            return Allowance::Halt;
        }
        Allowance::Call { max_tokens }
    }

    /// Records a response's billed usage; returns its cost.
    pub fn record(&mut self, estimated_input: u64, usage: &Usage) -> f64 {
        let cost = self.price.cost(usage);
        self.spent += cost;
        if estimated_input > 0 {
            let ratio = usage.total_input() as f64 / estimated_input as f64;
            if ratio > self.calibration {
                tracing::warn!(
                    ratio,
                    "billed input exceeded the estimate; later estimates are scaled up"
                );
                self.calibration = ratio;
            }
        }
        if self.spent > self.ceiling {
            tracing::error!(
                spent = self.spent,
                ceiling = self.ceiling,
                "spend passed the ceiling: a provider billed more input than estimated"
            );
        }
        cost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SONNET: Price = Price {
        input: 3.0,
        output: 15.0,
        cache_write: 3.75,
        cache_read: 0.30,
    };

    #[test]
    fn clamps_then_halts() {
        let mut g = CostGuard::new(0.01, SONNET);
        // 1000 input tokens at 3.75/MTok = 0.00375; 0.00625 left pays 416 output tokens.
        assert_eq!(g.allow(1000, 4096), Allowance::Call { max_tokens: 416 });
        assert_eq!(g.allow(1000, 100), Allowance::Call { max_tokens: 100 });
        g.record(
            1000,
            &Usage {
                input_tokens: 1000,
                output_tokens: 400,
                ..Usage::default()
            },
        );
        assert!(g.spent() <= 0.01);
        assert_eq!(g.allow(1000, 4096), Allowance::Halt);
    }

    #[test]
    fn under_estimates_scale_later_projections() {
        let mut g = CostGuard::new(1.0, SONNET);
        g.record(
            100,
            &Usage {
                input_tokens: 200,
                ..Usage::default()
            },
        );
        let Allowance::Call { max_tokens } = g.allow(10_000, u32::MAX) else {
            panic!("should call")
        };
        let left = 1.0 - g.spent() - 20_000.0 * 3.75 / 1e6;
        assert_eq!(max_tokens, (left * 1e6 / 15.0).floor() as u32);
    }
}
