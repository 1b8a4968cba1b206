//! `analyze_trajectory` (one text's velocity, acceleration, spikes, deadpan and Heller scores)
//! and `compare_trajectories` (a golden text against a synthetic one: DTW, correlation, spike
//! matches, fitness).

use super::distances::*;
use super::error::AnalysisError;
use super::parameters::*;
use serde_json::{Value, json};

/// Options of `analyze_trajectory`, with the seed's defaults (0.3, no sentence breakdown).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrajectoryOptions {
    /// Accelerations strictly above this are spikes.
    pub acceleration_threshold: f64,
    /// Add the per-sentence breakdown under `sentences`.
    pub include_sentences: bool,
}

impl Default for TrajectoryOptions {
    fn default() -> Self {
        Self {
            acceleration_threshold: DEFAULT_ACCELERATION_THRESHOLD,
            include_sentences: false,
        }
    }
}

/// One acceleration above the threshold.
#[derive(Debug, Clone, Copy)]
pub(super) struct Spike {
    pub(super) magnitude: f64,
    pub(super) isolation: f64,
    pub(super) position: f64,
}

/// Every quantity of one trajectory, unrounded.
#[derive(Debug, Clone)]
pub(super) struct Profile {
    n: usize,
    velocities: Vec<f64>,
    accelerations: Vec<f64>,
    spikes: Vec<Spike>,
    mean_velocity: f64,
    mean_acceleration: f64,
    max_acceleration: f64,
    deadpan: f64,
    heller: f64,
    circularity: f64,
    tautology: f64,
    deceleration: f64,
}

pub(super) fn check_threshold(threshold: f64) -> Result<(), AnalysisError> {
    if threshold.is_finite() && threshold >= 0.0 {
        Ok(())
    } else {
        Err(AnalysisError::InvalidThreshold { value: threshold })
    }
}

pub(super) fn profile(
    which: &'static str,
    sentences: &[String],
    embeddings: &[Vec<f32>],
    threshold: f64,
    min_sentences: usize,
) -> Result<Profile, AnalysisError> {
    if sentences.len() != embeddings.len() {
        return Err(AnalysisError::LengthMismatch {
            which,
            sentences: sentences.len(),
            embeddings: embeddings.len(),
        });
    }
    let n = embeddings.len();
    if n < min_sentences {
        return Err(AnalysisError::TooFewSentences {
            which,
            needed: min_sentences,
            got: n,
        });
    }
    let dimension = embeddings[0].len();
    let mut norms = Vec::with_capacity(n);
    for (index, embedding) in embeddings.iter().enumerate() {
        norms.push(embedding_norm(embedding, dimension, || {
            format!("sentence {index} of the {which}")
        })?);
    }
    let between = |i: usize, j: usize| distance(&embeddings[i], norms[i], &embeddings[j], norms[j]);

    let velocities: Vec<f64> = (0..n - 1).map(|i| between(i, i + 1)).collect();
    let accelerations: Vec<f64> = velocities.windows(2).map(|w| (w[1] - w[0]).abs()).collect();
    let spikes = find_spikes(&accelerations, threshold, n);

    let deadpan = deadpan_score(&velocities, &accelerations, &spikes, threshold);
    let reach = (1..n).map(|j| between(0, j)).fold(0.0, f64::max);
    let circularity = clamp01(1.0 - between(0, n - 1) / reach.max(CIRCULARITY_MIN_RADIUS));
    let restatements = velocities
        .iter()
        .filter(|&&v| v < TAUTOLOGY_EPSILON)
        .count();
    let tautology = restatements as f64 / velocities.len() as f64;
    let deceleration = deceleration_score(&velocities);
    let heller = clamp01(0.35 * circularity + 0.40 * tautology + 0.25 * deceleration);

    Ok(Profile {
        n,
        mean_velocity: mean(&velocities),
        mean_acceleration: mean(&accelerations),
        max_acceleration: accelerations.iter().copied().fold(0.0, f64::max),
        velocities,
        accelerations,
        spikes,
        deadpan,
        heller,
        circularity,
        tautology,
        deceleration,
    })
}

pub(super) fn find_spikes(accelerations: &[f64], threshold: f64, n: usize) -> Vec<Spike> {
    let mut spikes = Vec::new();
    for (index, &magnitude) in accelerations.iter().enumerate() {
        if magnitude <= threshold {
            continue;
        }
        let neighbours: Vec<f64> = [index.checked_sub(1), Some(index + 1)]
            .into_iter()
            .flatten()
            .filter_map(|j| accelerations.get(j).copied())
            .collect();
        let isolation = if neighbours.is_empty() {
            1.0
        } else {
            clamp01(1.0 - mean(&neighbours) / magnitude)
        };
        spikes.push(Spike {
            magnitude,
            isolation,
            position: (index + 2) as f64 / (n - 1) as f64,
        });
    }
    spikes
}

pub(super) fn deadpan_score(
    velocities: &[f64],
    accelerations: &[f64],
    spikes: &[Spike],
    threshold: f64,
) -> f64 {
    if spikes.is_empty() {
        return 0.0;
    }
    let k = spikes.len() as f64;
    let m = accelerations.len() as f64;
    let rarity = clamp01(1.0 - (k - 1.0) / m);
    let isolation = mean(&spikes.iter().map(|s| s.isolation).collect::<Vec<_>>());
    let background: Vec<f64> = accelerations
        .iter()
        .copied()
        .filter(|&a| a <= threshold)
        .collect();
    let stability = if background.is_empty() {
        0.0
    } else if threshold > 0.0 {
        clamp01(1.0 - mean(&background) / threshold)
    } else {
        1.0
    };
    let calm = clamp01(1.0 - median(velocities));
    clamp01(0.25 * rarity + 0.35 * isolation + 0.20 * stability + 0.20 * calm)
}

pub(super) fn deceleration_score(velocities: &[f64]) -> f64 {
    let half = velocities.len() / 2;
    if half == 0 {
        return 0.0;
    }
    let first = mean(&velocities[..half]);
    let last = mean(&velocities[velocities.len() - half..]);
    if first <= 0.0 {
        return 0.0;
    }
    clamp01((first - last) / first)
}

pub(super) fn adams_interpretation(deadpan: f64, spikes: usize) -> String {
    let what = if spikes == 1 {
        "isolated semantic spike in stable background"
    } else {
        "isolated semantic spikes in stable background"
    };
    if spikes == 0 {
        "No deadpan structure — no acceleration spike above the threshold".to_string()
    } else if deadpan >= 0.7 {
        format!("Strong deadpan structure — {what}")
    } else if deadpan >= 0.4 {
        format!("Moderate deadpan structure — {what}")
    } else {
        "Weak deadpan structure — spikes are crowded or the background is unstable".to_string()
    }
}

pub(super) fn heller_interpretation(heller: f64) -> &'static str {
    if heller >= 0.5 {
        "High circular reasoning"
    } else if heller >= 0.35 {
        "Moderate circular reasoning"
    } else {
        "Low circular reasoning"
    }
}

/// The kinematics of a text: `sentences` and their `embeddings` pair up, at least 2. Returns
/// `{n_sentences, mean_velocity, mean_acceleration, max_acceleration, acceleration_spikes,
/// deadpan_score, heller_score, circularity_score, tautology_density, deceleration_score,
/// adams_interpretation, heller_interpretation}`, plus `sentences` when asked; see the module
/// docs for every formula.
pub fn analyze_trajectory(
    sentences: &[String],
    embeddings: &[Vec<f32>],
    options: &TrajectoryOptions,
) -> Result<Value, AnalysisError> {
    let threshold = options.acceleration_threshold;
    check_threshold(threshold)?;
    let p = profile(
        "text",
        sentences,
        embeddings,
        threshold,
        MIN_TRAJECTORY_SENTENCES,
    )?;
    let spikes: Vec<Value> = p
        .spikes
        .iter()
        .map(|s| {
            json!({
                "magnitude": round(s.magnitude),
                "isolation_score": round(s.isolation),
                "position_ratio": round(s.position),
            })
        })
        .collect();
    let deadpan = round(p.deadpan);
    let heller = round(p.heller);
    let mut out = json!({
        "n_sentences": p.n,
        "mean_velocity": round(p.mean_velocity),
        "mean_acceleration": round(p.mean_acceleration),
        "max_acceleration": round(p.max_acceleration),
        "acceleration_spikes": spikes,
        "deadpan_score": deadpan,
        "heller_score": heller,
        "circularity_score": round(p.circularity),
        "tautology_density": round(p.tautology),
        "deceleration_score": round(p.deceleration),
        "adams_interpretation": adams_interpretation(deadpan, p.spikes.len()),
        "heller_interpretation": heller_interpretation(heller),
    });
    if options.include_sentences {
        let breakdown: Vec<Value> = sentences
            .iter()
            .enumerate()
            .map(|(index, text)| {
                let velocity = index.checked_sub(1).map(|i| round(p.velocities[i]));
                let acceleration = index.checked_sub(2).map(|i| p.accelerations[i]);
                json!({
                    "index": index,
                    "text": text,
                    "velocity": velocity,
                    "acceleration": acceleration.map(round),
                    "spike": acceleration.is_some_and(|a| a > threshold),
                })
            })
            .collect();
        out["sentences"] = Value::Array(breakdown);
    }
    Ok(out)
}

/// DTW of two series already scaled to `[0, 1]`: the minimum total cost `Σ|xᵢ − yⱼ|` over
/// warping paths, divided by `max(len x, len y)`, the length of the shortest warping path (so
/// the result is at most 1). Dividing by a fixed length rather than by the chosen path's length
/// keeps the score from jumping when float noise picks a longer path of almost equal cost.
pub(super) fn dtw(x: &[f64], y: &[f64]) -> f64 {
    let (n, m) = (x.len(), y.len());
    if n == 0 || m == 0 {
        return 0.0;
    }
    // Cost of the best path ending at (i, j), one row at a time.
    let mut previous: Vec<f64> = Vec::with_capacity(m);
    let mut current: Vec<f64> = Vec::with_capacity(m);
    for (i, &xi) in x.iter().enumerate() {
        current.clear();
        for (j, &yj) in y.iter().enumerate() {
            let before = [
                (i > 0 && j > 0).then(|| previous[j - 1]),
                (i > 0).then(|| previous[j]),
                (j > 0).then(|| current[j - 1]),
            ]
            .into_iter()
            .flatten()
            .fold(None, |best: Option<f64>, c| {
                Some(best.map_or(c, |b| b.min(c)))
            });
            current.push(before.unwrap_or(0.0) + (xi - yj).abs());
        }
        std::mem::swap(&mut previous, &mut current);
    }
    clamp01(previous[m - 1] / n.max(m) as f64)
}

/// Linear interpolation of `series` (non-empty) at `len` evenly spaced relative positions.
pub(super) fn resample(series: &[f64], len: usize) -> Vec<f64> {
    if series.len() == 1 || len < 2 {
        return vec![series.first().copied().unwrap_or(0.0); len];
    }
    let last = (series.len() - 1) as f64;
    (0..len)
        .map(|k| {
            let position = k as f64 / (len - 1) as f64 * last;
            let lower = (position.floor() as usize).min(series.len() - 2);
            let fraction = position - lower as f64;
            series[lower] + (series[lower + 1] - series[lower]) * fraction
        })
        .collect()
}

/// Pearson's r of two equally long series; `None` when either is (nearly) constant.
pub(super) fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() < 2 || x.len() != y.len() {
        return None;
    }
    let (mean_x, mean_y) = (mean(x), mean(y));
    let mut covariance = 0.0;
    let mut var_x = 0.0;
    let mut var_y = 0.0;
    for (&a, &b) in x.iter().zip(y) {
        covariance += (a - mean_x) * (b - mean_y);
        var_x += (a - mean_x).powi(2);
        var_y += (b - mean_y).powi(2);
    }
    let len = x.len() as f64;
    if (var_x / len).sqrt() < CONSTANT_STD || (var_y / len).sqrt() < CONSTANT_STD {
        return None;
    }
    Some((covariance / (var_x.sqrt() * var_y.sqrt())).clamp(-1.0, 1.0))
}

pub(super) fn spike_position_match(golden: &[Spike], synthetic: &[Spike]) -> f64 {
    match (golden.is_empty(), synthetic.is_empty()) {
        (true, true) => return 1.0,
        (true, false) | (false, true) => return 0.0,
        (false, false) => {}
    }
    let nearest = |from: &[Spike], to: &[Spike]| {
        let gaps: Vec<f64> = from
            .iter()
            .map(|s| {
                to.iter()
                    .map(|t| (s.position - t.position).abs())
                    .fold(f64::INFINITY, f64::min)
            })
            .collect();
        mean(&gaps)
    };
    clamp01(1.0 - (nearest(golden, synthetic) + nearest(synthetic, golden)) / 2.0)
}

pub(super) fn spike_count_match(golden: usize, synthetic: usize) -> f64 {
    let most = golden.max(synthetic);
    if most == 0 {
        1.0
    } else {
        golden.min(synthetic) as f64 / most as f64
    }
}

pub(super) fn fitness_interpretation(fitness: f64) -> &'static str {
    if fitness < 0.2 {
        "Excellent structural match"
    } else if fitness < 0.4 {
        "Good structural match with some rhythm deviation"
    } else if fitness < 0.6 {
        "Partial structural match — rhythm and spike placement differ"
    } else {
        "Poor structural match — different trajectory shape"
    }
}

/// Compares the trajectory of a synthetic text with a golden one; each side is `(sentences,
/// embeddings)` with at least 3 sentences. Returns `{fitness_score, synthetic_deadpan,
/// synthetic_heller, acceleration_dtw, acceleration_correlation, spike_position_match,
/// spike_count_match, interpretation, golden_summary, synthetic_summary}`; see the module docs.
pub fn compare_trajectories(
    golden: (&[String], &[Vec<f32>]),
    synthetic: (&[String], &[Vec<f32>]),
    acceleration_threshold: f64,
) -> Result<Value, AnalysisError> {
    check_threshold(acceleration_threshold)?;
    let g = profile(
        "golden text",
        golden.0,
        golden.1,
        acceleration_threshold,
        MIN_COMPARE_SENTENCES,
    )?;
    let s = profile(
        "synthetic text",
        synthetic.0,
        synthetic.1,
        acceleration_threshold,
        MIN_COMPARE_SENTENCES,
    )?;
    if let (Some(a), Some(b)) = (golden.1.first(), synthetic.1.first())
        && a.len() != b.len()
    {
        return Err(AnalysisError::DimensionMismatch {
            which: "the synthetic text".to_string(),
            expected: a.len(),
            found: b.len(),
        });
    }

    let scale = g
        .max_acceleration
        .max(s.max_acceleration)
        .max(DTW_MIN_SCALE);
    let scaled = |series: &[f64]| series.iter().map(|a| a / scale).collect::<Vec<_>>();
    let warp = dtw(&scaled(&g.accelerations), &scaled(&s.accelerations));

    let len = g.accelerations.len().max(s.accelerations.len());
    let correlation = pearson(
        &resample(&g.accelerations, len),
        &resample(&s.accelerations, len),
    );
    let positions = spike_position_match(&g.spikes, &s.spikes);
    let counts = spike_count_match(g.spikes.len(), s.spikes.len());

    let shape = match correlation {
        Some(r) => 0.30 * warp + 0.20 * (1.0 - r) / 2.0,
        None => 0.50 * warp,
    };
    let fitness = clamp01(
        shape
            + 0.15 * (1.0 - positions)
            + 0.15 * (1.0 - counts)
            + 0.10 * (g.deadpan - s.deadpan).abs()
            + 0.10 * (g.heller - s.heller).abs(),
    );
    let fitness = round(fitness);
    let summary = |p: &Profile| {
        json!({
            "n_sentences": p.n,
            "deadpan_score": round(p.deadpan),
            "mean_velocity": round(p.mean_velocity),
        })
    };
    Ok(json!({
        "fitness_score": fitness,
        "synthetic_deadpan": round(s.deadpan),
        "synthetic_heller": round(s.heller),
        "acceleration_dtw": round(warp),
        "acceleration_correlation": round(correlation.unwrap_or(0.0)),
        "spike_position_match": round(positions),
        "spike_count_match": round(counts),
        "interpretation": fitness_interpretation(fitness),
        "golden_summary": summary(&g),
        "synthetic_summary": summary(&s),
    }))
}
