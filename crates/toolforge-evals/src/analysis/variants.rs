//! `analyze_variants`: distances between prompt variants and the recommendations drawn from them.

use super::distances::*;
use super::error::AnalysisError;
use super::parameters::*;
use serde_json::{Map, Value, json};

/// Distances between prompt variants: `variants` are `(label, text, embedding)` in the caller's
/// order. Returns `{constraint_name, baseline_label, variants_count, from_baseline, pairwise,
/// recommendations}`; see the module docs for the rules.
pub fn analyze_variants(
    variants: &[(String, String, Vec<f32>)],
    baseline_label: &str,
    constraint_name: &str,
) -> Result<Value, AnalysisError> {
    let Some((_, _, first)) = variants.first() else {
        return Err(AnalysisError::NoVariants);
    };
    for (index, (label, _, _)) in variants.iter().enumerate() {
        if variants[..index].iter().any(|(other, _, _)| other == label) {
            return Err(AnalysisError::DuplicateLabel {
                label: label.clone(),
            });
        }
    }
    let Some(baseline) = variants
        .iter()
        .position(|(label, _, _)| label == baseline_label)
    else {
        return Err(AnalysisError::UnknownBaseline {
            label: baseline_label.to_string(),
            labels: variants.iter().map(|(label, _, _)| label.clone()).collect(),
        });
    };
    let mut norms = Vec::with_capacity(variants.len());
    for (label, _, embedding) in variants {
        norms.push(embedding_norm(embedding, first.len(), || {
            format!("variant {label:?}")
        })?);
    }
    let between =
        |i: usize, j: usize| round(distance(&variants[i].2, norms[i], &variants[j].2, norms[j]));

    let mut from_baseline = Map::new();
    let mut candidates = Vec::new();
    for (index, (label, text, _)) in variants.iter().enumerate() {
        if index == baseline {
            continue;
        }
        let d = between(baseline, index);
        from_baseline.insert(label.clone(), json!(d));
        candidates.push((label, text, d));
    }
    let mut pairwise = Map::new();
    for i in 0..variants.len() {
        for j in i + 1..variants.len() {
            let key = format!("({}, {})", variants[i].0, variants[j].0);
            pairwise.insert(key, json!(between(i, j)));
        }
    }
    let farthest = candidates.iter().map(|c| c.2).fold(0.0, f64::max);
    let mut recommended: Vec<_> = candidates
        .into_iter()
        .filter(|&(_, _, d)| d >= RECOMMENDATION_THRESHOLD || (d == farthest && d > 0.0))
        .collect();
    recommended.sort_by(|a, b| b.2.total_cmp(&a.2));
    let recommendations: Vec<Value> = recommended
        .into_iter()
        .map(|(label, text, d)| json!({"variant": label, "distance": d, "text": text}))
        .collect();

    Ok(json!({
        "constraint_name": constraint_name,
        "baseline_label": baseline_label,
        "variants_count": variants.len(),
        "from_baseline": from_baseline,
        "pairwise": pairwise,
        "recommendations": recommendations,
    }))
}
