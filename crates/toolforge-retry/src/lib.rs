//! The one retry policy of toolforge, shared by MCP tool calls (`toolforge-mcp`) and the model
//! providers (`toolforge-llm`).
//!
//! The rule: 3 attempts at most, full-jitter backoff from 500 ms doubling, every wait inside
//! the call's deadline. Transient failures (network, 5xx, timeout) are retried only when a
//! repeat cannot do harm: the request provably never left ([`Failure::NotSent`]), or the call
//! is idempotent. 4xx answers and validation or protocol errors are terminal; 429 and 408 are
//! retried only when the server said `Retry-After`, that wait fits the deadline, and the call
//! is idempotent.
//!
//! Everything here is a pure decision: the caller passes the clock's reading and a random
//! source, performs the wait and the next attempt itself. No async, no I/O.

use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, Instant};

/// How a call is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included; 0 counts as 1.
    pub max_attempts: u32,
    /// The backoff's cap before the second attempt; it doubles before each later one.
    pub base: Duration,
}

impl Default for RetryPolicy {
    /// 3 attempts, 500 ms base.
    fn default() -> Self {
        Self {
            max_attempts: 3,
            base: Duration::from_millis(500),
        }
    }
}

/// What an attempt ended with, when it did not succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The request provably never left: the connection was refused, or the server was
    /// restarting before the send. Retrying cannot execute anything twice.
    NotSent,
    /// The connection failed after the request may have reached the server.
    Network,
    /// No answer within the attempt's time.
    Timeout,
    /// The server answered with this HTTP status (and `Retry-After`, when it sent one).
    Status {
        status: u16,
        retry_after: Option<Duration>,
    },
    /// A validation, protocol or application error: sending it again gives the same answer.
    Rejected,
}

impl Failure {
    /// Network failures, timeouts and 5xx: worth another attempt when a repeat does no harm.
    #[must_use]
    pub fn is_transient(self) -> bool {
        match self {
            Self::NotSent | Self::Network | Self::Timeout => true,
            Self::Status { status, .. } => (500..=599).contains(&status),
            Self::Rejected => false,
        }
    }
}

/// The call being decided on.
#[derive(Debug, Clone, Copy)]
pub struct Attempted {
    /// Attempts made so far (1 after the first).
    pub attempts: u32,
    /// Sending the call twice has no further effect (a read-only or idempotent tool, a model
    /// completion, or a call the operator marked retryable).
    pub idempotent: bool,
    /// The clock's reading now.
    pub now: Instant,
    /// When the whole call, every attempt and wait included, must be over.
    pub deadline: Instant,
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Wait this long, then make the next attempt.
    Retry { after: Duration },
    /// Return the failure to the caller, for this reason.
    GiveUp(GiveUp),
}

/// Why a failure is not retried (for error messages and traces).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveUp {
    /// A 4xx answer or a validation, protocol or application error.
    Terminal,
    /// The request may have reached the server and the call is not idempotent: sending it again
    /// could execute it twice.
    MayHaveExecuted,
    /// 429 or 408 without a `Retry-After` to honour.
    NoRetryAfter,
    /// 429 or 408 whose `Retry-After` ends past the deadline.
    RetryAfterPastDeadline,
    /// Every attempt was used.
    AttemptsExhausted { attempts: u32 },
    /// The backoff would end past the deadline.
    DeadlineReached,
}

impl fmt::Display for GiveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Terminal => f.write_str("the error is not transient"),
            Self::MayHaveExecuted => f.write_str(
                "the request may have reached the server and the call is not marked idempotent, \
                 so sending it again could run it twice",
            ),
            Self::NoRetryAfter => {
                f.write_str("the server asked to slow down without a Retry-After")
            }
            Self::RetryAfterPastDeadline => {
                f.write_str("the server's Retry-After ends past the call's deadline")
            }
            Self::AttemptsExhausted { attempts } => write!(f, "all {attempts} attempts were used"),
            Self::DeadlineReached => {
                f.write_str("the call's deadline leaves no time for another attempt")
            }
        }
    }
}

/// A source of random numbers for the jitter (injected so tests are exact).
pub trait Jitter {
    /// A number in `0..=bound`.
    fn up_to(&mut self, bound: u64) -> u64;
}

/// Random numbers from the standard library's randomly keyed hasher: no dependency, good
/// enough to spread retries.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemJitter;

impl Jitter for SystemJitter {
    fn up_to(&mut self, bound: u64) -> u64 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(bound);
        match bound.checked_add(1) {
            Some(n) => h.finish() % n,
            None => h.finish(),
        }
    }
}

impl RetryPolicy {
    /// The policy with another base (tests use a short one).
    #[must_use]
    pub fn with_base(mut self, base: Duration) -> Self {
        self.base = base;
        self
    }

    /// The backoff's cap after `attempts` attempts: `base`, then doubling.
    #[must_use]
    pub fn backoff_cap(&self, attempts: u32) -> Duration {
        let doublings = attempts.saturating_sub(1).min(20);
        self.base.saturating_mul(1 << doublings)
    }

    /// Decides what follows a failed attempt.
    #[must_use]
    pub fn decide(&self, failure: Failure, call: Attempted, jitter: &mut dyn Jitter) -> Decision {
        let give_up = Decision::GiveUp;
        let left = call.deadline.saturating_duration_since(call.now);
        let after = match failure {
            Failure::Rejected => return give_up(GiveUp::Terminal),
            Failure::Status {
                status: 408 | 429,
                retry_after,
            } => {
                if !call.idempotent {
                    return give_up(GiveUp::MayHaveExecuted);
                }
                match retry_after {
                    None => return give_up(GiveUp::NoRetryAfter),
                    Some(wait) if wait >= left => return give_up(GiveUp::RetryAfterPastDeadline),
                    Some(wait) => wait,
                }
            }
            f if !f.is_transient() => return give_up(GiveUp::Terminal),
            f if f != Failure::NotSent && !call.idempotent => {
                return give_up(GiveUp::MayHaveExecuted);
            }
            _ => {
                let cap = self.backoff_cap(call.attempts);
                let cap_ms = u64::try_from(cap.as_millis()).unwrap_or(u64::MAX);
                Duration::from_millis(jitter.up_to(cap_ms))
            }
        };
        let max = self.max_attempts.max(1);
        if call.attempts >= max {
            return give_up(GiveUp::AttemptsExhausted {
                attempts: call.attempts,
            });
        }
        if after >= left {
            return give_up(GiveUp::DeadlineReached);
        }
        Decision::Retry { after }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Always the largest wait allowed (the backoff's cap).
    struct Max;
    impl Jitter for Max {
        fn up_to(&mut self, bound: u64) -> u64 {
            bound
        }
    }

    /// Replays fixed fractions (per mille) of the cap, recording the bounds asked for.
    struct Fixed {
        per_mille: u64,
        asked: Vec<u64>,
    }
    impl Jitter for Fixed {
        fn up_to(&mut self, bound: u64) -> u64 {
            self.asked.push(bound);
            bound * self.per_mille / 1000
        }
    }

    fn call(attempts: u32, idempotent: bool, left: Duration) -> Attempted {
        let now = Instant::now();
        Attempted {
            attempts,
            idempotent,
            now,
            deadline: now + left,
        }
    }

    const MINUTE: Duration = Duration::from_secs(60);

    fn status(status: u16, retry_after: Option<Duration>) -> Failure {
        Failure::Status {
            status,
            retry_after,
        }
    }

    #[test]
    fn defaults_are_three_attempts_from_500_ms_doubling() {
        let p = RetryPolicy::default();
        assert_eq!(p.max_attempts, 3);
        let caps: Vec<u128> = (1..=4).map(|a| p.backoff_cap(a).as_millis()).collect();
        assert_eq!(caps, [500, 1000, 2000, 4000]);
        assert!(p.backoff_cap(u32::MAX) >= p.backoff_cap(21), "no overflow");
    }

    #[test]
    fn full_jitter_draws_between_zero_and_the_cap() {
        let p = RetryPolicy::default();
        let mut half = Fixed {
            per_mille: 500,
            asked: Vec::new(),
        };
        let waits: Vec<Decision> = (1..=2)
            .map(|a| p.decide(Failure::Network, call(a, true, MINUTE), &mut half))
            .collect();
        assert_eq!(half.asked, [500, 1000]);
        assert_eq!(
            waits,
            [
                Decision::Retry {
                    after: Duration::from_millis(250)
                },
                Decision::Retry {
                    after: Duration::from_millis(500)
                }
            ]
        );
        let mut zero = Fixed {
            per_mille: 0,
            asked: Vec::new(),
        };
        assert_eq!(
            p.decide(Failure::Timeout, call(1, true, MINUTE), &mut zero),
            Decision::Retry {
                after: Duration::ZERO
            }
        );
        // The system source stays within the bound.
        for bound in [0, 1, 7, 500] {
            assert!(SystemJitter.up_to(bound) <= bound);
        }
    }

    #[test]
    fn the_third_failure_is_the_last() {
        let p = RetryPolicy::default();
        assert!(matches!(
            p.decide(Failure::NotSent, call(2, false, MINUTE), &mut Max),
            Decision::Retry { .. }
        ));
        assert_eq!(
            p.decide(Failure::NotSent, call(3, false, MINUTE), &mut Max),
            Decision::GiveUp(GiveUp::AttemptsExhausted { attempts: 3 })
        );
        let one = RetryPolicy {
            max_attempts: 0,
            ..p
        };
        assert_eq!(
            one.decide(Failure::NotSent, call(1, true, MINUTE), &mut Max),
            Decision::GiveUp(GiveUp::AttemptsExhausted { attempts: 1 })
        );
    }

    #[test]
    fn what_may_have_executed_is_retried_only_when_idempotent() {
        let p = RetryPolicy::default();
        // (failure, retried when not idempotent, retried when idempotent)
        let table = [
            (Failure::NotSent, true, true),
            (Failure::Network, false, true),
            (Failure::Timeout, false, true),
            (status(500, None), false, true),
            (status(503, Some(Duration::from_secs(1))), false, true),
            (status(529, None), false, true),
            (status(400, None), false, false),
            (status(401, None), false, false),
            (status(404, None), false, false),
            (status(409, None), false, false),
            (Failure::Rejected, false, false),
        ];
        for (failure, plain, idempotent) in table {
            for (flag, want) in [(false, plain), (true, idempotent)] {
                let got = p.decide(failure, call(1, flag, MINUTE), &mut Max);
                assert_eq!(
                    matches!(got, Decision::Retry { .. }),
                    want,
                    "{failure:?}, idempotent {flag}: {got:?}"
                );
            }
        }
        assert_eq!(
            p.decide(Failure::Network, call(1, false, MINUTE), &mut Max),
            Decision::GiveUp(GiveUp::MayHaveExecuted)
        );
        assert_eq!(
            p.decide(status(400, None), call(1, true, MINUTE), &mut Max),
            Decision::GiveUp(GiveUp::Terminal)
        );
    }

    #[test]
    fn throttling_waits_for_retry_after_when_it_fits() {
        let p = RetryPolicy::default();
        let secs = Duration::from_secs;
        for code in [429, 408] {
            assert_eq!(
                p.decide(
                    status(code, Some(secs(2))),
                    call(1, true, secs(10)),
                    &mut Max
                ),
                Decision::Retry { after: secs(2) },
                "{code}"
            );
            assert_eq!(
                p.decide(
                    status(code, Some(secs(20))),
                    call(1, true, secs(10)),
                    &mut Max
                ),
                Decision::GiveUp(GiveUp::RetryAfterPastDeadline),
                "{code}"
            );
            assert_eq!(
                p.decide(status(code, None), call(1, true, secs(10)), &mut Max),
                Decision::GiveUp(GiveUp::NoRetryAfter),
                "{code}"
            );
            assert_eq!(
                p.decide(
                    status(code, Some(secs(1))),
                    call(1, false, secs(10)),
                    &mut Max
                ),
                Decision::GiveUp(GiveUp::MayHaveExecuted),
                "{code}"
            );
        }
    }

    #[test]
    fn every_wait_ends_before_the_deadline() {
        let p = RetryPolicy::default();
        // The largest first wait is 500 ms: it fits 501 ms, not 500 ms.
        assert_eq!(
            p.decide(
                Failure::NotSent,
                call(1, false, Duration::from_millis(501)),
                &mut Max
            ),
            Decision::Retry {
                after: Duration::from_millis(500)
            }
        );
        assert_eq!(
            p.decide(
                Failure::NotSent,
                call(1, false, Duration::from_millis(500)),
                &mut Max
            ),
            Decision::GiveUp(GiveUp::DeadlineReached)
        );
        // A deadline already past.
        let mut late = call(1, true, Duration::ZERO);
        late.now += Duration::from_secs(1);
        assert_eq!(
            p.decide(Failure::Network, late, &mut Max),
            Decision::GiveUp(GiveUp::DeadlineReached)
        );
    }

    #[test]
    fn reasons_read_as_sentences() {
        let text = GiveUp::MayHaveExecuted.to_string();
        assert!(text.contains("may have reached the server"), "{text}");
        assert_eq!(
            GiveUp::AttemptsExhausted { attempts: 3 }.to_string(),
            "all 3 attempts were used"
        );
    }
}
