//! The fixed numbers of the analyses: rounding, thresholds, floors and the sentences each needs.

/// Decimals kept in every float of the returned JSON.
pub const DECIMALS: i32 = 3;
/// The seed's default spike threshold for `analyze_trajectory` and `compare_trajectories`.
pub const DEFAULT_ACCELERATION_THRESHOLD: f64 = 0.3;
/// Velocities below this count as restatements in `tautology_density`.
pub const TAUTOLOGY_EPSILON: f64 = 0.1;
/// Variants at least this far from the baseline are recommended.
pub const RECOMMENDATION_THRESHOLD: f64 = 0.1;
/// Floor of the radius that `circularity_score` is relative to.
pub const CIRCULARITY_MIN_RADIUS: f64 = 0.5;
/// Floor of the joint scale of the two acceleration series before DTW.
pub const DTW_MIN_SCALE: f64 = 0.1;
/// Sentences `compare_trajectories` needs per text (an acceleration needs three points).
pub const MIN_COMPARE_SENTENCES: usize = 3;
/// Sentences `analyze_trajectory` needs (a velocity needs two points).
pub const MIN_TRAJECTORY_SENTENCES: usize = 2;

/// Distances this close to 0 or 2 are float noise and snap to the bound.
pub(super) const SNAP: f64 = 1e-12;
/// Below this standard deviation a series counts as constant (no correlation).
pub(super) const CONSTANT_STD: f64 = 1e-6;
