//! The embedding maths behind `calculate_drift`, `analyze_variants`, `analyze_trajectory` and
//! `compare_trajectories`: pure functions over texts and the embeddings the server computed for
//! them. This module never embeds, never does I/O and never panics on finite input; every number
//! it returns is finite and inside the range documented below.
//!
//! # Conventions
//!
//! - `d(x, y)` is the cosine distance `1 − (x·y) / (‖x‖ ‖y‖)`, in `[0, 2]`: 0 same direction, 1
//!   orthogonal, 2 opposite. It is computed in `f64`, and values within 1e-12 of 0 or 2 snap to
//!   the bound (float noise). A zero, empty or non-finite embedding is an error, never a NaN.
//! - Every float in the returned JSON is rounded half away from zero to [`DECIMALS`] (3)
//!   decimals, as in the seed's `analyze_variants` example (`0.084`). Scores are computed from
//!   unrounded values and rounded once, at the end; the interpretation texts and the variant
//!   recommendations are decided on the rounded values, so they always agree with the numbers
//!   shown next to them.
//! - Scores are clamped to their range before rounding.
//!
//! # `analyze_variants`
//!
//! - `from_baseline[v] = d(baseline, v)` for every variant except the baseline, in input order.
//! - `pairwise["(a, b)"] = d(a, b)` for every unordered pair, `a` before `b` in input order, the
//!   baseline included.
//! - `recommendations`: the variants most likely to shift behaviour, i.e. every non-baseline
//!   variant with a (rounded) distance ≥ [`RECOMMENDATION_THRESHOLD`] (0.1, the bottom of the
//!   seed's "similar meaning, different wording" band: below it a rewording is near-verbatim),
//!   plus the farthest variant(s) even when below that threshold, unless their distance is 0.
//!   Sorted by distance, largest first; ties keep input order. Each entry is
//!   `{variant, distance, text}`.
//!
//! # Trajectories
//!
//! A text of `n` sentences with embeddings `e₀ … eₙ₋₁` is a path. All indices are 0-based.
//!
//! - **velocity** `vᵢ = d(eᵢ, eᵢ₊₁)`, `i = 0 … n−2` (`n−1` values, each in `[0, 2]`):
//!   how far consecutive sentences move. `mean_velocity` is their mean.
//! - **acceleration** `aᵢ = |vᵢ₊₁ − vᵢ|`, `i = 0 … n−3` (`n−2` values, in `[0, 2]`): the magnitude
//!   of the change of pace. Unsigned, because a spike is a break in rhythm either way; the signed
//!   change is used only by the deceleration score. `mean_acceleration` and `max_acceleration`
//!   are 0 when `n = 2` (no acceleration exists).
//! - **spike**: an acceleration strictly above the threshold `θ` (default 0.3). Reported as
//!   - `magnitude = aᵢ`;
//!   - `isolation_score = clamp(1 − mean(neighbours) / aᵢ, 0, 1)`, the neighbours being
//!     `aᵢ₋₁` and `aᵢ₊₁` where they exist (1 when there is none): 1 for a spike between flat
//!     neighbours, 0 when a neighbour is at least as large;
//!   - `position_ratio = (i + 2) / (n − 1)`: the sentence whose arrival revealed the change of
//!     pace (`aᵢ` compares the velocity into sentence `i+1` with the velocity into sentence
//!     `i+2`), relative to the last sentence; 1.0 is a spike on the final sentence (a punchline).
//! - **deadpan_score** (Adams: isolated spikes on a stable, slow background) is 0 when there is
//!   no spike, otherwise `0.25·rarity + 0.35·isolation + 0.20·stability + 0.20·calm` with
//!   - `rarity = 1 − (k − 1) / m` for `k` spikes among `m = n − 2` accelerations (one spike → 1);
//!   - `isolation` = the mean `isolation_score` of the spikes;
//!   - `stability = clamp(1 − mean(B) / θ, 0, 1)` where `B` are the non-spike accelerations
//!     (0 when every acceleration is a spike; 1 when `θ = 0`, where `B` only holds zeros);
//!   - `calm = clamp(1 − median(v), 0, 1)`: a slow background (the median ignores the spike's
//!     own fast segments).
//! - **circularity_score** `= 1 − d(e₀, eₙ₋₁) / max(R, 0.5)` with `R = maxⱼ d(e₀, eⱼ)`: how close
//!   the end is to the start, relative to how far the text ever went from its start. The floor
//!   [`CIRCULARITY_MIN_RADIUS`] (0.5, the seed's "substantially different") keeps a text that
//!   never left a tight cluster from looking non-circular because of noise. Always in `[0, 1]`
//!   since `d(e₀, eₙ₋₁) ≤ R`.
//! - **tautology_density** = share of velocities `vᵢ < ε`, with [`TAUTOLOGY_EPSILON`] `ε = 0.1`:
//!   consecutive sentences that say nearly the same thing (restatements).
//! - **deceleration_score** `= clamp((F − L) / F, 0, 1)` where, with `h = ⌊(n − 1) / 2⌋`, `F` is
//!   the mean of the first `h` velocities and `L` the mean of the last `h`: how much slower the
//!   second half moves than the first, relative to the first. 0 when `h = 0` (a single
//!   velocity) or `F = 0`.
//! - **heller_score** (Heller: circular, decelerating, restating) `= 0.35·circularity +
//!   0.40·tautology + 0.25·deceleration`.
//! - `adams_interpretation`: `Strong` (deadpan ≥ 0.7), `Moderate` (≥ 0.4), `Weak` (> 0) or `No`
//!   deadpan structure (no spike). `heller_interpretation`: `High` (heller ≥ 0.5, the seed's LAS
//!   flag), `Moderate` (≥ 0.35) or `Low` circular reasoning.
//! - With `include_sentences`, `sentences` lists `{index, text, velocity, acceleration, spike}`
//!   per sentence: `velocity` is `vᵢ₋₁` (the distance from the previous sentence, null for the
//!   first), `acceleration` is `aᵢ₋₂` (null for the first two), `spike` whether that
//!   acceleration is a spike (so a spike's `position_ratio` is its sentence's `index / (n − 1)`).
//!
//! # `compare_trajectories`
//!
//! Both texts need at least 3 sentences (so that each has an acceleration series). With `x`
//! (golden) and `y` (synthetic) the two acceleration series:
//!
//! - **acceleration_dtw**: both series are divided by `S = max(max x, max y, 0.1)` (joint scaling
//!   keeps their relative size; the floor [`DTW_MIN_SCALE`] keeps two nearly flat profiles from
//!   being stretched into noise), then dynamic time warping with local cost `|x̂ᵢ − ŷⱼ|` finds
//!   the minimum-cost warping path. The score is that cost divided by `max(len x, len y)`, the
//!   length of the shortest warping path: a mean per-step difference, in `[0, 1]`. (Dividing
//!   by the chosen path's own length would let float noise pick a longer, equally cheap path
//!   and move the score.)
//! - **acceleration_correlation**: both series are resampled by linear interpolation to
//!   `L = max(len x, len y)` points at the same relative positions, then Pearson's `r` in
//!   `[−1, 1]`. When `L < 2` or either resampled series is constant (standard deviation below
//!   1e-6, float noise of `f32` embeddings) `r` is undefined and reported as 0.
//! - **spike_position_match**: 1 when neither text has a spike, 0 when only one has, otherwise
//!   `1 − (mean over golden spikes of the distance to the nearest synthetic spike position +
//!   the same from the synthetic side) / 2`, positions being `position_ratio`s.
//! - **spike_count_match** `= min(kₓ, k_y) / max(kₓ, k_y)` (1 when both are 0).
//! - **fitness_score** (lower = better) `= 0.30·dtw + 0.20·(1 − r)/2 + 0.15·(1 − position_match) +
//!   0.15·(1 − count_match) + 0.10·|deadpanₓ − deadpan_y| + 0.10·|hellerₓ − heller_y|`. When `r`
//!   is undefined its weight moves to the DTW term (`0.50·dtw`), so a flat text compared with
//!   itself still scores 0.
//! - `interpretation`: `Excellent` (fitness < 0.2), `Good … with some rhythm deviation` (< 0.4),
//!   `Partial` (< 0.6) or `Poor` structural match.
//!
//! # Sentence splitting
//!
//! [`split_sentences`] is the rule-based stand-in for spaCy's segmenter; see its docs.

mod distances;
mod error;
mod parameters;
mod sentences;
mod trajectories;
mod variants;

pub use distances::cosine_distance;
pub use error::AnalysisError;
pub use parameters::{
    CIRCULARITY_MIN_RADIUS, DECIMALS, DEFAULT_ACCELERATION_THRESHOLD, DTW_MIN_SCALE,
    MIN_COMPARE_SENTENCES, MIN_TRAJECTORY_SENTENCES, RECOMMENDATION_THRESHOLD, TAUTOLOGY_EPSILON,
};
pub use sentences::split_sentences;
pub use trajectories::{TrajectoryOptions, analyze_trajectory, compare_trajectories};
pub use variants::analyze_variants;

#[cfg(test)]
mod tests;
