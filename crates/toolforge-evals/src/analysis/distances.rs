//! Cosine distances between embeddings, and the small statistics (mean, median, rounding) the
//! analyses share.

use super::error::AnalysisError;
use super::parameters::*;

/// Cosine distance `1 − cos(a, b)`: 0 same direction, 1 orthogonal, 2 opposite (unrounded;
/// within 1e-12 of 0 or 2 it snaps to the bound, so identical vectors give exactly 0). Errors on different lengths, a zero or empty vector, or a
/// non-finite component.
pub fn cosine_distance(a: &[f32], b: &[f32]) -> Result<f64, AnalysisError> {
    let norm_a = embedding_norm(a, a.len(), || "a".to_string())?;
    let norm_b = embedding_norm(b, a.len(), || "b".to_string())?;
    Ok(distance(a, norm_a, b, norm_b))
}

/// Validates one embedding against the expected dimension and returns its Euclidean norm.
pub(super) fn embedding_norm(
    vector: &[f32],
    dimension: usize,
    which: impl Fn() -> String,
) -> Result<f64, AnalysisError> {
    if vector.len() != dimension {
        return Err(AnalysisError::DimensionMismatch {
            which: which(),
            expected: dimension,
            found: vector.len(),
        });
    }
    if vector.iter().any(|x| !x.is_finite()) {
        return Err(AnalysisError::NonFinite { which: which() });
    }
    let norm = vector
        .iter()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum::<f64>()
        .sqrt();
    if norm == 0.0 {
        return Err(AnalysisError::ZeroVector { which: which() });
    }
    Ok(norm)
}

/// Cosine distance of two validated vectors with their norms.
pub(super) fn distance(a: &[f32], norm_a: f64, b: &[f32], norm_b: f64) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| f64::from(x) * f64::from(y))
        .sum();
    let cosine = (dot / norm_a / norm_b).clamp(-1.0, 1.0);
    let d = 1.0 - cosine;
    // Float noise: identical (or exactly opposite) directions come out a few ulps off.
    if d < SNAP {
        0.0
    } else if d > 2.0 - SNAP {
        2.0
    } else {
        d
    }
}

/// Rounds to [`DECIMALS`] decimals, half away from zero; never returns `-0.0`.
pub(super) fn round(x: f64) -> f64 {
    let scale = 10f64.powi(DECIMALS);
    let rounded = (x * scale).round() / scale;
    if rounded == 0.0 { 0.0 } else { rounded }
}

pub(super) fn clamp01(x: f64) -> f64 {
    x.clamp(0.0, 1.0)
}

pub(super) fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

pub(super) fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}
