//! The cost guard (DESIGN §4): bounds the worst case of every model call before it is made,
//! sizes `max_tokens` to what the remaining budget can pay, and halts when it cannot pay a useful
//! minimum.
//!
//! The worst case of a call is its input bound ([`toolforge_llm::InputBound`]: the provider's
//! count plus a margin, or every input byte a token plus a documented overhead) with every token
//! at the dearest input price (uncached, cache write or cache read), plus `max_tokens` of output
//! at the output price. A call is made only when that worst case fits what is left, so:
//!
//! **spent ≤ ceiling** after every call whose bill stays within its input bound and its
//! `max_tokens`, which a provider never exceeds for output and, for input, holds by construction
//! of the byte bound. A bill past its bound (a provider's count that was off, or a provider that
//! bills more than the bytes it was sent) is logged, and from then on every bound is the largest
//! figure seen: the byte bound scaled by the worst ratio of a bill to its bound in this run, or
//! the provider's count when that is larger. A provider that bills 20,000 tokens for 2,000 bytes
//! once is assumed to do it again.

use toolforge_llm::{BoundSource, InputBound, Price, Usage};

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
    min_output: u32,
    trust_counts: bool,
    /// The worst ratio of billed input to its bound seen in this run (1 until a bill passes its
    /// bound); later bounds are scaled by it.
    inflation: f64,
}

impl CostGuard {
    #[must_use]
    pub fn new(ceiling_usd: f64, price: Price) -> Self {
        Self {
            ceiling: if ceiling_usd.is_finite() {
                ceiling_usd.max(0.0)
            } else {
                0.0
            },
            spent: 0.0,
            price,
            min_output: MIN_USEFUL_OUTPUT_TOKENS,
            trust_counts: true,
            inflation: 1.0,
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

    /// Whether counted bounds may still be used (false once a bill exceeded one).
    #[must_use]
    pub fn trusts_counts(&self) -> bool {
        self.trust_counts
    }

    /// Whether a bill has passed its bound in this run: every later bound is then scaled
    /// ([`CostGuard::scaled`]) and taken with the provider's count when it is larger.
    #[must_use]
    pub fn billed_past_a_bound(&self) -> bool {
        self.inflation > 1.0
    }

    /// `bound` scaled by the worst ratio of a bill to its bound seen so far (unchanged until a
    /// bill passes its bound).
    #[must_use]
    pub fn scaled(&self, bound: InputBound) -> InputBound {
        if !self.billed_past_a_bound() {
            return bound;
        }
        let tokens = (bound.tokens as f64 * self.inflation).ceil();
        InputBound {
            tokens: if tokens >= u64::MAX as f64 {
                u64::MAX
            } else {
                tokens as u64
            },
            source: bound.source,
        }
    }

    /// The most `input_tokens` of input can cost.
    fn input_worst_case(&self, input_tokens: u64) -> f64 {
        input_tokens as f64 * self.price.worst_input() / 1e6
    }

    /// The most a call with `input_tokens` of input and `max_tokens` of output can cost.
    #[must_use]
    pub fn worst_case(&self, input_tokens: u64, max_tokens: u32) -> f64 {
        self.input_worst_case(input_tokens) + f64::from(max_tokens) * self.price.output / 1e6
    }

    /// How many output tokens the next call may have, given the bound on its input: the most
    /// whose worst case still fits under the ceiling, at most `wanted_max_tokens`.
    #[must_use]
    pub fn allow(&self, input_bound: u64, wanted_max_tokens: u32) -> Allowance {
        let left = self.ceiling - self.spent - self.input_worst_case(input_bound);
        if left.is_nan() || left <= 0.0 {
            return Allowance::Halt;
        }
        let mut max_tokens = if self.price.output > 0.0 {
            let t = (left * 1e6 / self.price.output).floor();
            if t >= f64::from(wanted_max_tokens) {
                wanted_max_tokens
            } else {
                t as u32
            }
        } else {
            wanted_max_tokens
        };
        // Float rounding must never let the worst case pass what is left (a token or two).
        for _ in 0..8 {
            if max_tokens == 0
                || self.spent + self.worst_case(input_bound, max_tokens) <= self.ceiling
            {
                break;
            }
            max_tokens -= 1;
        }
        if self.spent + self.worst_case(input_bound, max_tokens) > self.ceiling {
            return Allowance::Halt;
        }
        if max_tokens < self.min_output.min(wanted_max_tokens).max(1) {
            return Allowance::Halt;
        }
        Allowance::Call { max_tokens }
    }

    /// Records a response's billed usage; returns its cost.
    pub fn record(&mut self, bound: InputBound, usage: &Usage) -> f64 {
        let cost = self.price.cost(usage);
        self.spent += cost;
        let billed = usage.total_input();
        if billed > bound.tokens {
            tracing::error!(
                billed,
                bound = bound.tokens,
                "the provider billed more input tokens than its bound; later calls are bounded by the largest figure seen"
            );
            if bound.source == BoundSource::Counted {
                self.trust_counts = false;
            }
            let ratio = billed as f64 / bound.tokens.max(1) as f64;
            if ratio.is_finite() {
                self.inflation = self.inflation.max(ratio);
            } else {
                self.inflation = f64::MAX;
            }
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

    fn bytes(tokens: u64) -> InputBound {
        InputBound {
            tokens,
            source: BoundSource::Bytes,
        }
    }

    #[test]
    fn clamps_then_halts() {
        let mut g = CostGuard::new(0.01, SONNET);
        // 1000 input tokens at 3.75/MTok = 0.00375; 0.00625 left pays 416 output tokens.
        assert_eq!(g.allow(1000, 4096), Allowance::Call { max_tokens: 416 });
        assert_eq!(g.allow(1000, 100), Allowance::Call { max_tokens: 100 });
        g.record(
            bytes(1000),
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
    fn an_allowed_call_billed_to_its_bounds_stays_under_the_ceiling() {
        for ceiling in [0.0001, 0.0123, 0.02, 0.1, 1.0] {
            for input in [0u64, 1, 999, 4173, 50_000] {
                let g = CostGuard::new(ceiling, SONNET);
                if let Allowance::Call { max_tokens } = g.allow(input, u32::MAX) {
                    assert!(
                        g.worst_case(input, max_tokens) <= ceiling,
                        "{ceiling} {input}"
                    );
                    let mut g = g.clone();
                    g.record(
                        bytes(input),
                        &Usage {
                            cache_creation_input_tokens: input,
                            output_tokens: u64::from(max_tokens),
                            ..Usage::default()
                        },
                    );
                    assert!(g.spent() <= ceiling, "{} > {ceiling}", g.spent());
                }
            }
        }
    }

    #[test]
    fn a_bill_past_a_counted_bound_stops_trusting_counts() {
        let mut g = CostGuard::new(1.0, SONNET);
        let usage = Usage {
            input_tokens: 200,
            ..Usage::default()
        };
        g.record(bytes(100), &usage);
        assert!(g.trusts_counts(), "a byte bound says nothing about counts");
        g.record(
            InputBound {
                tokens: 100,
                source: BoundSource::Counted,
            },
            &usage,
        );
        assert!(!g.trusts_counts());
    }

    /// The regression: after a bill past a byte bound, later calls were sized from the byte
    /// bound again, so a provider billing ten times the bytes was let through call after call.
    #[test]
    fn after_a_bill_past_its_bound_later_bounds_are_scaled_by_it() {
        let mut g = CostGuard::new(0.10, SONNET);
        assert_eq!(g.scaled(bytes(2_000)).tokens, 2_000);
        assert!(!g.billed_past_a_bound());
        g.record(
            bytes(2_000),
            &Usage {
                input_tokens: 20_000,
                output_tokens: 100,
                ..Usage::default()
            },
        );
        assert!(g.billed_past_a_bound());
        // The next request is a little larger: its bound scales by the 10x seen.
        let next = g.scaled(bytes(2_100));
        assert_eq!(next.tokens, 21_000);
        // $0.0615 spent; 21,000 tokens at $3.75 per million is $0.079: no call fits.
        assert_eq!(g.allow(next.tokens, 4096), Allowance::Halt);
        // A smaller bill later does not lower the scale.
        g.record(
            bytes(100),
            &Usage {
                input_tokens: 10,
                ..Usage::default()
            },
        );
        assert_eq!(g.scaled(bytes(100)).tokens, 1_000);
    }
}
