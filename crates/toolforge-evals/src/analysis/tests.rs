use super::distances::*;
use super::parameters::*;
use super::sentences::*;
use super::trajectories::*;
use super::*;
use proptest::prelude::*;
use serde_json::{Value, json};

// ----- helpers -----

fn texts(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("Sentence {i}.")).collect()
}

/// Unit vectors in the plane at the given angles (degrees).
fn angles(degrees: &[f64]) -> Vec<Vec<f32>> {
    degrees
        .iter()
        .map(|d| {
            let r = d.to_radians();
            vec![r.cos() as f32, r.sin() as f32]
        })
        .collect()
}

fn trajectory(embeddings: &[Vec<f32>]) -> Value {
    analyze_trajectory(
        &texts(embeddings.len()),
        embeddings,
        &TrajectoryOptions::default(),
    )
    .unwrap()
}

fn num(value: &Value, key: &str) -> f64 {
    value[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {value}"))
}

fn assert_close(actual: f64, expected: f64) {
    assert!(
        (actual - expected).abs() <= 0.0015,
        "expected ≈{expected}, got {actual}"
    );
}

fn split(text: &str) -> Vec<String> {
    split_sentences(text)
}

fn check_split(text: &str, expected: &[&str]) {
    assert_eq!(split(text), expected, "splitting {text:?}");
}

// ----- cosine distance -----

#[test]
fn drift_of_identical_vectors_is_zero() {
    assert_eq!(
        cosine_distance(&[0.3, 0.4, 0.5], &[0.3, 0.4, 0.5]).unwrap(),
        0.0
    );
    // Same direction, different length.
    assert!(cosine_distance(&[1.0, 2.0], &[2.0, 4.0]).unwrap() < 1e-12);
}

#[test]
fn drift_of_orthogonal_vectors_is_one() {
    assert_eq!(cosine_distance(&[1.0, 0.0], &[0.0, 3.0]).unwrap(), 1.0);
    assert_eq!(
        cosine_distance(&[1.0, 1.0, 0.0], &[0.0, 0.0, 2.0]).unwrap(),
        1.0
    );
}

#[test]
fn drift_of_opposite_vectors_is_two() {
    assert_eq!(cosine_distance(&[1.0, -2.0], &[-1.0, 2.0]).unwrap(), 2.0);
}

#[test]
fn drift_at_sixty_degrees_is_one_half() {
    // cos 60° = 0.5 with (1, 0) and (1, √3).
    let d = cosine_distance(&[1.0, 0.0], &[1.0, 3f32.sqrt()]).unwrap();
    assert!((d - 0.5).abs() < 1e-6, "{d}");
}

#[test]
fn drift_rejects_bad_vectors() {
    assert!(matches!(
        cosine_distance(&[0.0, 0.0], &[1.0, 0.0]),
        Err(AnalysisError::ZeroVector { which }) if which == "a"
    ));
    assert!(matches!(
        cosine_distance(&[], &[]),
        Err(AnalysisError::ZeroVector { .. })
    ));
    assert!(matches!(
        cosine_distance(&[1.0, 0.0], &[1.0, 0.0, 0.0]),
        Err(AnalysisError::DimensionMismatch {
            expected: 2,
            found: 3,
            ..
        })
    ));
    assert!(matches!(
        cosine_distance(&[1.0, f32::NAN], &[1.0, 0.0]),
        Err(AnalysisError::NonFinite { .. })
    ));
    assert!(matches!(
        cosine_distance(&[1.0, 0.0], &[f32::INFINITY, 0.0]),
        Err(AnalysisError::NonFinite { which }) if which == "b"
    ));
}

// ----- variants -----

fn variant(label: &str, text: &str, embedding: &[f32]) -> (String, String, Vec<f32>) {
    (label.to_string(), text.to_string(), embedding.to_vec())
}

#[test]
fn variants_hand_computed() {
    // d(base, polite) = 1 − 0.6 = 0.4; d(base, passive) = 1; d(polite, passive) = 1 − 0.8.
    let variants = [
        variant("imperative", "Delete the file", &[1.0, 0.0]),
        variant("polite", "Please delete the file", &[0.6, 0.8]),
        variant("passive", "The file should be deleted", &[0.0, 1.0]),
    ];
    let out = analyze_variants(&variants, "imperative", "deletion_request").unwrap();
    assert_eq!(
        out,
        json!({
            "constraint_name": "deletion_request",
            "baseline_label": "imperative",
            "variants_count": 3,
            "from_baseline": {"polite": 0.4, "passive": 1.0},
            "pairwise": {
                "(imperative, polite)": 0.4,
                "(imperative, passive)": 1.0,
                "(polite, passive)": 0.2
            },
            "recommendations": [
                {"variant": "passive", "distance": 1.0, "text": "The file should be deleted"},
                {"variant": "polite", "distance": 0.4, "text": "Please delete the file"}
            ]
        })
    );
    // Key order follows the seed and the input.
    let keys: Vec<_> = out.as_object().unwrap().keys().cloned().collect();
    assert_eq!(
        keys,
        [
            "constraint_name",
            "baseline_label",
            "variants_count",
            "from_baseline",
            "pairwise",
            "recommendations"
        ]
    );
    let pairs: Vec<_> = out["pairwise"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        pairs,
        [
            "(imperative, polite)",
            "(imperative, passive)",
            "(polite, passive)"
        ]
    );
}

#[test]
fn variants_below_threshold_recommend_only_the_farthest() {
    // (1, 0.1): cos = 1/√1.01 → d ≈ 0.004963 → 0.005; (1, 0.3): d ≈ 0.042174 → 0.042.
    let variants = [
        variant("imperative", "a", &[1.0, 0.0]),
        variant("near", "b", &[1.0, 0.1]),
        variant("farther", "c", &[1.0, 0.3]),
    ];
    let out = analyze_variants(&variants, "imperative", "unnamed").unwrap();
    assert_eq!(
        out["from_baseline"],
        json!({"near": 0.005, "farther": 0.042})
    );
    assert_eq!(
        out["recommendations"],
        json!([{"variant": "farther", "distance": 0.042, "text": "c"}])
    );
}

#[test]
fn identical_variants_have_zero_drift_and_no_recommendation() {
    let variants = [
        variant("imperative", "same", &[0.2, 0.7, 0.1]),
        variant("copy", "same", &[0.2, 0.7, 0.1]),
    ];
    let out = analyze_variants(&variants, "imperative", "unnamed").unwrap();
    assert_eq!(out["from_baseline"], json!({"copy": 0.0}));
    assert_eq!(out["pairwise"], json!({"(imperative, copy)": 0.0}));
    assert_eq!(out["recommendations"], json!([]));
}

#[test]
fn variants_with_only_the_baseline() {
    let variants = [variant("imperative", "Do it", &[1.0, 0.0])];
    let out = analyze_variants(&variants, "imperative", "x").unwrap();
    assert_eq!(out["variants_count"], json!(1));
    assert_eq!(out["from_baseline"], json!({}));
    assert_eq!(out["pairwise"], json!({}));
    assert_eq!(out["recommendations"], json!([]));
}

#[test]
fn variants_errors() {
    assert_eq!(
        analyze_variants(&[], "imperative", "x").unwrap_err(),
        AnalysisError::NoVariants
    );
    let variants = [
        variant("polite", "a", &[1.0, 0.0]),
        variant("passive", "b", &[0.0, 1.0]),
    ];
    let err = analyze_variants(&variants, "imperative", "x").unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown baseline label \"imperative\"; the variants are: polite, passive"
    );
    let duplicated = [
        variant("a", "x", &[1.0, 0.0]),
        variant("a", "y", &[0.0, 1.0]),
    ];
    assert!(matches!(
        analyze_variants(&duplicated, "a", "x"),
        Err(AnalysisError::DuplicateLabel { .. })
    ));
    let mismatched = [
        variant("imperative", "x", &[1.0, 0.0]),
        variant("short", "y", &[1.0]),
    ];
    let err = analyze_variants(&mismatched, "imperative", "x").unwrap_err();
    assert_eq!(
        err.to_string(),
        "embedding dimension mismatch for variant \"short\": expected 2, found 1"
    );
    let zero = [
        variant("imperative", "x", &[1.0, 0.0]),
        variant("zero", "y", &[0.0, 0.0]),
    ];
    assert!(matches!(
        analyze_variants(&zero, "imperative", "x"),
        Err(AnalysisError::ZeroVector { which }) if which == "variant \"zero\""
    ));
}

// ----- trajectories -----

#[test]
fn trajectory_out_and_back_hand_computed() {
    // e = (1,0) (0,1) (0,1) (1,0): v = [1, 0, 1]; a = [1, 1], both spikes.
    // Spike isolation: 1 − 1/1 = 0; positions (0+2)/3 and (1+2)/3.
    // Deadpan: rarity 1 − 1/2 = 0.5, isolation 0, stability 0 (no background),
    //   calm 1 − median(1, 0, 1) = 0 → 0.125.
    // Circularity: d(e0, e3) = 0 → 1. Tautology: 1 of 3 velocities < 0.1.
    // Deceleration: h = 1, F = v0 = 1, L = v2 = 1 → 0.
    // Heller: 0.35·1 + 0.40·(1/3) = 0.48333.
    let out = trajectory(&angles(&[0.0, 90.0, 90.0, 0.0]));
    assert_eq!(
        out,
        json!({
            "n_sentences": 4,
            "mean_velocity": 0.667,
            "mean_acceleration": 1.0,
            "max_acceleration": 1.0,
            "acceleration_spikes": [
                {"magnitude": 1.0, "isolation_score": 0.0, "position_ratio": 0.667},
                {"magnitude": 1.0, "isolation_score": 0.0, "position_ratio": 1.0}
            ],
            "deadpan_score": 0.125,
            "heller_score": 0.483,
            "circularity_score": 1.0,
            "tautology_density": 0.333,
            "deceleration_score": 0.0,
            "adams_interpretation":
                "Weak deadpan structure — spikes are crowded or the background is unstable",
            "heller_interpretation": "Moderate circular reasoning"
        })
    );
    let keys: Vec<_> = out.as_object().unwrap().keys().cloned().collect();
    assert_eq!(
        keys,
        [
            "n_sentences",
            "mean_velocity",
            "mean_acceleration",
            "max_acceleration",
            "acceleration_spikes",
            "deadpan_score",
            "heller_score",
            "circularity_score",
            "tautology_density",
            "deceleration_score",
            "adams_interpretation",
            "heller_interpretation"
        ]
    );
}

#[test]
fn trajectory_decelerating_half_turn_hand_computed() {
    // Angles 0°, 90°, 150°, 180°: v = [1, 1 − cos 60° = 0.5, 1 − cos 30° = 0.133975].
    // a = [0.5, 0.366025]; both > 0.3. Isolation: 1 − 0.366/0.5 = 0.267949 and 0.
    // Deceleration: (1 − 0.133975)/1 = 0.866025. Circularity: d(e0, e3) = 2 = R → 0.
    // Heller: 0.25·0.866025 = 0.216506. Deadpan: 0.25·0.5 + 0.35·0.133975 + 0 + 0.20·0.5.
    let out = trajectory(&angles(&[0.0, 90.0, 150.0, 180.0]));
    assert_eq!(num(&out, "mean_velocity"), 0.545);
    assert_eq!(num(&out, "mean_acceleration"), 0.433);
    assert_eq!(num(&out, "max_acceleration"), 0.5);
    assert_eq!(
        out["acceleration_spikes"],
        json!([
            {"magnitude": 0.5, "isolation_score": 0.268, "position_ratio": 0.667},
            {"magnitude": 0.366, "isolation_score": 0.0, "position_ratio": 1.0}
        ])
    );
    assert_eq!(num(&out, "deceleration_score"), 0.866);
    assert_eq!(num(&out, "circularity_score"), 0.0);
    assert_eq!(num(&out, "tautology_density"), 0.0);
    assert_eq!(num(&out, "heller_score"), 0.217);
    assert_eq!(num(&out, "deadpan_score"), 0.272);
    assert_eq!(out["heller_interpretation"], "Low circular reasoning");
}

#[test]
fn trajectory_of_two_sentences_has_no_acceleration() {
    let out = trajectory(&angles(&[0.0, 60.0]));
    assert_eq!(num(&out, "n_sentences"), 2.0);
    assert_eq!(num(&out, "mean_velocity"), 0.5);
    assert_eq!(num(&out, "mean_acceleration"), 0.0);
    assert_eq!(num(&out, "max_acceleration"), 0.0);
    assert_eq!(out["acceleration_spikes"], json!([]));
    assert_eq!(num(&out, "deadpan_score"), 0.0);
    // Circularity 1 − 0.5 / max(0.5, 0.5) = 0; one velocity: no deceleration.
    assert_eq!(num(&out, "circularity_score"), 0.0);
    assert_eq!(num(&out, "deceleration_score"), 0.0);
    assert_eq!(
        out["adams_interpretation"],
        "No deadpan structure — no acceleration spike above the threshold"
    );
}

#[test]
fn circular_path_scores_high_circularity() {
    // Around the circle and back to 10° short of the start: d(e0, e4) = 1 − cos 10°, R = 2.
    let out = trajectory(&angles(&[0.0, 90.0, 180.0, 270.0, 350.0]));
    let expected = 1.0 - (1.0 - 10f64.to_radians().cos()) / 2.0;
    assert_close(num(&out, "circularity_score"), expected);
    assert!(num(&out, "circularity_score") > 0.99);
    // A straight half turn ends at its farthest point.
    let out = trajectory(&angles(&[0.0, 45.0, 90.0, 135.0, 180.0]));
    assert_eq!(num(&out, "circularity_score"), 0.0);
}

#[test]
fn restating_the_same_thing_is_tautological_and_circular() {
    let same = vec![vec![1.0, 1.0, 0.0]; 4];
    let out = trajectory(&same);
    assert_eq!(num(&out, "tautology_density"), 1.0);
    assert_eq!(num(&out, "circularity_score"), 1.0);
    assert_eq!(num(&out, "deceleration_score"), 0.0);
    assert_eq!(num(&out, "heller_score"), 0.75);
    assert_eq!(num(&out, "deadpan_score"), 0.0);
    assert_eq!(out["heller_interpretation"], "High circular reasoning");
}

/// A steady walk along a great circle (0.5 rad a step) with one orthogonal outlier.
fn isolated_spike_path() -> Vec<Vec<f32>> {
    (0..7)
        .map(|i| {
            if i == 3 {
                vec![0.0, 0.0, 1.0]
            } else {
                let t = 0.5 * f64::from(i);
                vec![t.cos() as f32, t.sin() as f32, 0.0]
            }
        })
        .collect()
}

#[test]
fn single_isolated_spike_in_a_flat_path_is_strong_deadpan() {
    // v = [s, s, 1, 1, s, s] with s = 1 − cos 0.5; a = [0, 1 − s, 0, 1 − s, 0].
    // Spikes at a1 and a3, isolation 1 each, positions 3/6 and 5/6.
    // Deadpan: 0.25·(1 − 1/5) + 0.35·1 + 0.20·1 + 0.20·(1 − s).
    let s = 1.0 - 0.5f64.cos();
    let out = trajectory(&isolated_spike_path());
    let spikes = out["acceleration_spikes"].as_array().unwrap();
    assert_eq!(spikes.len(), 2);
    assert_close(num(&spikes[0], "magnitude"), 1.0 - s);
    assert_eq!(num(&spikes[0], "isolation_score"), 1.0);
    assert_eq!(num(&spikes[0], "position_ratio"), 0.5);
    assert_eq!(num(&spikes[1], "isolation_score"), 1.0);
    assert_eq!(num(&spikes[1], "position_ratio"), 0.833);
    let deadpan = 0.25 * 0.8 + 0.35 + 0.20 + 0.20 * (1.0 - s);
    assert_close(num(&out, "deadpan_score"), deadpan);
    assert!(num(&out, "deadpan_score") >= 0.9);
    assert_eq!(
        out["adams_interpretation"],
        "Strong deadpan structure — isolated semantic spikes in stable background"
    );
    assert_eq!(num(&out, "tautology_density"), 0.0);
    assert_eq!(num(&out, "circularity_score"), 0.0);
    assert_eq!(out["heller_interpretation"], "Low circular reasoning");
}

#[test]
fn threshold_decides_what_is_a_spike() {
    let path = angles(&[0.0, 90.0, 150.0, 180.0]); // a = [0.5, 0.366]
    let options = TrajectoryOptions {
        acceleration_threshold: 0.4,
        include_sentences: false,
    };
    let out = analyze_trajectory(&texts(4), &path, &options).unwrap();
    assert_eq!(
        out["acceleration_spikes"],
        json!([{"magnitude": 0.5, "isolation_score": 0.268, "position_ratio": 0.667}])
    );
    let options = TrajectoryOptions {
        acceleration_threshold: 1.0,
        include_sentences: false,
    };
    // a = [1, 1] exactly: a spike must be strictly above the threshold.
    let out = analyze_trajectory(&texts(4), &angles(&[0.0, 90.0, 90.0, 0.0]), &options).unwrap();
    assert_eq!(out["acceleration_spikes"], json!([]), "strictly above");
}

#[test]
fn sentence_breakdown() {
    let options = TrajectoryOptions {
        include_sentences: true,
        ..TrajectoryOptions::default()
    };
    let sentences = texts(4);
    let out =
        analyze_trajectory(&sentences, &angles(&[0.0, 90.0, 150.0, 180.0]), &options).unwrap();
    assert_eq!(
        out["sentences"],
        json!([
            {"index": 0, "text": "Sentence 0.", "velocity": null, "acceleration": null, "spike": false},
            {"index": 1, "text": "Sentence 1.", "velocity": 1.0, "acceleration": null, "spike": false},
            {"index": 2, "text": "Sentence 2.", "velocity": 0.5, "acceleration": 0.5, "spike": true},
            {"index": 3, "text": "Sentence 3.", "velocity": 0.134, "acceleration": 0.366, "spike": true}
        ])
    );
    assert!(trajectory(&angles(&[0.0, 90.0])).get("sentences").is_none());
}

#[test]
fn trajectory_errors() {
    let options = TrajectoryOptions::default();
    let err = analyze_trajectory(&texts(1), &angles(&[0.0]), &options).unwrap_err();
    assert_eq!(
        err,
        AnalysisError::TooFewSentences {
            which: "text",
            needed: 2,
            got: 1
        }
    );
    assert_eq!(
        err.to_string(),
        "too few sentences in the text: need at least 2, got 1"
    );
    assert!(matches!(
        analyze_trajectory(&[], &[], &options),
        Err(AnalysisError::TooFewSentences { got: 0, .. })
    ));
    assert!(matches!(
        analyze_trajectory(&texts(3), &angles(&[0.0, 1.0]), &options),
        Err(AnalysisError::LengthMismatch {
            sentences: 3,
            embeddings: 2,
            ..
        })
    ));
    let with_zero = vec![vec![1.0, 0.0], vec![0.0, 0.0], vec![0.0, 1.0]];
    let err = analyze_trajectory(&texts(3), &with_zero, &options).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the embedding of sentence 1 of the text is a zero or empty vector; cosine distance \
         is undefined"
    );
    let ragged = vec![vec![1.0, 0.0], vec![0.0, 1.0, 0.0]];
    assert!(matches!(
        analyze_trajectory(&texts(2), &ragged, &options),
        Err(AnalysisError::DimensionMismatch { .. })
    ));
    let nan = vec![vec![1.0, 0.0], vec![f32::NAN, 1.0]];
    assert!(matches!(
        analyze_trajectory(&texts(2), &nan, &options),
        Err(AnalysisError::NonFinite { .. })
    ));
    for bad in [-0.1, f64::NAN, f64::INFINITY] {
        let options = TrajectoryOptions {
            acceleration_threshold: bad,
            include_sentences: false,
        };
        assert!(matches!(
            analyze_trajectory(&texts(2), &angles(&[0.0, 1.0]), &options),
            Err(AnalysisError::InvalidThreshold { .. })
        ));
    }
}

// ----- comparison pieces -----

#[test]
fn dtw_hand_computed() {
    // A warped copy aligns at no cost: (0,0) (0,1) (1,2) (2,3).
    assert_eq!(dtw(&[0.0, 1.0, 0.0], &[0.0, 0.0, 1.0, 0.0]), 0.0);
    // Anti-phase: the best path (0,1) (1,0)... costs 2 over max(2, 2).
    assert_eq!(dtw(&[0.0, 1.0], &[1.0, 0.0]), 1.0);
    // Diagonal path: |0 − 0| + |0.5 − 1|, over max(2, 2).
    assert_eq!(dtw(&[0.0, 0.5], &[0.0, 1.0]), 0.25);
    // One point against three: |0.5−0| + |0.5−1| + |0.5−0.5| over 3.
    assert_eq!(dtw(&[0.5], &[0.0, 1.0, 0.5]), 1.0 / 3.0);
}

#[test]
fn resample_and_pearson_hand_computed() {
    assert_eq!(resample(&[0.0, 1.0, 0.0], 5), [0.0, 0.5, 1.0, 0.5, 0.0]);
    assert_eq!(resample(&[2.0, 4.0], 3), [2.0, 3.0, 4.0]);
    assert_eq!(resample(&[0.7], 3), [0.7, 0.7, 0.7]);
    assert_close(pearson(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]).unwrap(), 1.0);
    assert_close(pearson(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]).unwrap(), -1.0);
    // x = [1, 2, 3], y = [1, 3, 2]: cov = 1, var = 2 each → 0.5.
    assert_close(pearson(&[1.0, 2.0, 3.0], &[1.0, 3.0, 2.0]).unwrap(), 0.5);
    assert_eq!(pearson(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0]), None);
    assert_eq!(pearson(&[1.0], &[2.0]), None);
}

fn spike_at(position: f64) -> Spike {
    Spike {
        magnitude: 1.0,
        isolation: 1.0,
        position,
    }
}

#[test]
fn spike_matches_hand_computed() {
    assert_eq!(spike_position_match(&[], &[]), 1.0);
    assert_eq!(spike_position_match(&[spike_at(0.5)], &[]), 0.0);
    assert_eq!(spike_position_match(&[], &[spike_at(0.5)]), 0.0);
    assert_eq!(
        spike_position_match(&[spike_at(0.5)], &[spike_at(0.5)]),
        1.0
    );
    // Golden [0.5, 1.0] vs synthetic [0.75]: golden side (0.25 + 0.25)/2, synthetic 0.25.
    assert_close(
        spike_position_match(&[spike_at(0.5), spike_at(1.0)], &[spike_at(0.75)]),
        0.75,
    );
    assert_eq!(spike_count_match(0, 0), 1.0);
    assert_eq!(spike_count_match(2, 1), 0.5);
    assert_eq!(spike_count_match(0, 3), 0.0);
    assert_eq!(spike_count_match(3, 3), 1.0);
}

// ----- compare_trajectories -----

#[test]
fn comparing_a_trajectory_with_itself_is_a_perfect_match() {
    let path = angles(&[0.0, 90.0, 150.0, 180.0]);
    let sentences = texts(4);
    let out = compare_trajectories(
        (&sentences, &path),
        (&sentences, &path),
        DEFAULT_ACCELERATION_THRESHOLD,
    )
    .unwrap();
    assert_eq!(
        out,
        json!({
            "fitness_score": 0.0,
            "synthetic_deadpan": 0.272,
            "synthetic_heller": 0.217,
            "acceleration_dtw": 0.0,
            "acceleration_correlation": 1.0,
            "spike_position_match": 1.0,
            "spike_count_match": 1.0,
            "interpretation": "Excellent structural match",
            "golden_summary": {"n_sentences": 4, "deadpan_score": 0.272, "mean_velocity": 0.545},
            "synthetic_summary": {"n_sentences": 4, "deadpan_score": 0.272, "mean_velocity": 0.545}
        })
    );
}

#[test]
fn comparing_a_flat_trajectory_with_itself_is_a_perfect_match() {
    // Constant accelerations: the correlation is undefined (0), its weight moves to DTW.
    let path = angles(&[0.0, 30.0, 60.0, 90.0]);
    let sentences = texts(4);
    let out = compare_trajectories((&sentences, &path), (&sentences, &path), 0.3).unwrap();
    assert_eq!(num(&out, "acceleration_correlation"), 0.0);
    assert_eq!(num(&out, "fitness_score"), 0.0);
}

#[test]
fn spiky_golden_against_flat_synthetic_hand_computed() {
    // Golden: a = [0, m, 0, m, 0] with m = 1 − s, spikes at 0.5 and 0.833, deadpan as above.
    // Synthetic: the same walk without the outlier: a ≈ 0, no spike, deadpan 0, heller 0.
    // DTW: golden scaled to [0, 1, 0, 1, 0] vs zeros, diagonal → 2/5 = 0.4.
    // Correlation undefined → fitness = 0.5·0.4 + 0.15 + 0.15 + 0.10·deadpan.
    let golden = isolated_spike_path();
    let synthetic: Vec<Vec<f32>> = (0..7)
        .map(|i| {
            let t = 0.5 * f64::from(i);
            vec![t.cos() as f32, t.sin() as f32, 0.0]
        })
        .collect();
    let s = 1.0 - 0.5f64.cos();
    let deadpan = 0.25 * 0.8 + 0.35 + 0.20 + 0.20 * (1.0 - s);
    let out = compare_trajectories((&texts(7), &golden), (&texts(7), &synthetic), 0.3).unwrap();
    assert_close(num(&out, "acceleration_dtw"), 0.4);
    assert_eq!(num(&out, "acceleration_correlation"), 0.0);
    assert_eq!(num(&out, "spike_position_match"), 0.0);
    assert_eq!(num(&out, "spike_count_match"), 0.0);
    assert_eq!(num(&out, "synthetic_deadpan"), 0.0);
    assert_eq!(num(&out, "synthetic_heller"), 0.0);
    assert_close(num(&out, "fitness_score"), 0.2 + 0.3 + 0.1 * deadpan);
    assert_eq!(
        out["interpretation"],
        "Partial structural match — rhythm and spike placement differ"
    );
    assert_eq!(out["golden_summary"]["n_sentences"], json!(7));
    assert_close(num(&out["synthetic_summary"], "mean_velocity"), s);
}

#[test]
fn compare_errors_name_the_text() {
    let three = angles(&[0.0, 90.0, 180.0]);
    let two = angles(&[0.0, 90.0]);
    let err = compare_trajectories((&texts(2), &two), (&texts(3), &three), 0.3).unwrap_err();
    assert_eq!(
        err.to_string(),
        "too few sentences in the golden text: need at least 3, got 2"
    );
    let err = compare_trajectories((&texts(3), &three), (&texts(2), &two), 0.3).unwrap_err();
    assert!(matches!(
        err,
        AnalysisError::TooFewSentences {
            which: "synthetic text",
            ..
        }
    ));
    let other_dimension = vec![vec![1.0, 0.0, 0.0]; 3];
    assert!(matches!(
        compare_trajectories((&texts(3), &three), (&texts(3), &other_dimension), 0.3),
        Err(AnalysisError::DimensionMismatch { .. })
    ));
    assert!(matches!(
        compare_trajectories((&texts(3), &three), (&texts(3), &three), -1.0),
        Err(AnalysisError::InvalidThreshold { .. })
    ));
}

// ----- sentence splitting -----

#[test]
fn splits_plain_sentences() {
    check_split(
        "The cat sat. The dog ran! Did it rain?",
        &["The cat sat.", "The dog ran!", "Did it rain?"],
    );
    check_split("Really?! Yes.", &["Really?!", "Yes."]);
    check_split("", &[]);
    check_split("   \n\n  ", &[]);
}

#[test]
fn keeps_abbreviations_together() {
    check_split(
        "Dr. Smith met Mr. Jones in the U.S. last week. They talked.",
        &[
            "Dr. Smith met Mr. Jones in the U.S. last week.",
            "They talked.",
        ],
    );
    check_split(
        "Use a verb, e.g. Delete or Remove. Avoid nouns, i.e. Deletion.",
        &[
            "Use a verb, e.g. Delete or Remove.",
            "Avoid nouns, i.e. Deletion.",
        ],
    );
    check_split(
        "J. R. R. Tolkien wrote it. Mrs. Dalloway did not.",
        &["J. R. R. Tolkien wrote it.", "Mrs. Dalloway did not."],
    );
    check_split(
        "It ships on Jan. 5 at 9 a.m. Eastern. Prof. Lee approved.",
        &[
            "It ships on Jan. 5 at 9 a.m. Eastern.",
            "Prof. Lee approved.",
        ],
    );
    check_split(
        "Bring apples, pears, etc. and come early. We buy fruit etc. Then we eat.",
        &[
            "Bring apples, pears, etc. and come early.",
            "We buy fruit etc.",
            "Then we eat.",
        ],
    );
    check_split("He moved to the U.S.", &["He moved to the U.S."]);
}

#[test]
fn keeps_decimals_and_dotted_names_together() {
    check_split(
        "Pi is about 3.14. The version is v1.2.3 on example.com today.",
        &[
            "Pi is about 3.14.",
            "The version is v1.2.3 on example.com today.",
        ],
    );
    check_split(
        "It rose 2.5% in 2024. Then it fell.",
        &["It rose 2.5% in 2024.", "Then it fell."],
    );
}

#[test]
fn handles_ellipses() {
    check_split("Wait... what happened?", &["Wait... what happened?"]);
    check_split("He left... The end.", &["He left...", "The end."]);
    check_split("He paused… Then spoke.", &["He paused…", "Then spoke."]);
    check_split("...", &[]);
}

#[test]
fn keeps_closing_quotes_and_brackets() {
    check_split(
        "He said \"Stop.\" Then he left. (It was late.) Nobody noticed.",
        &[
            "He said \"Stop.\"",
            "Then he left.",
            "(It was late.)",
            "Nobody noticed.",
        ],
    );
    check_split(
        "“Why?” he asked. ‘Because.’ She smiled.",
        &["“Why?” he asked.", "‘Because.’", "She smiled."],
    );
}

#[test]
fn splits_paragraphs_bullets_and_headings() {
    check_split(
        "# Plan\nFirst paragraph without a stop\n\nSecond paragraph.",
        &[
            "Plan",
            "First paragraph without a stop",
            "Second paragraph.",
        ],
    );
    check_split(
        "Steps:\n- Buy milk\n- Call mom\n* Pay rent\n• Rest",
        &["Steps:", "Buy milk", "Call mom", "Pay rent", "Rest"],
    );
    check_split(
        "1. Open the file.\n2) Edit it\n10. Save it. Close it.",
        &["Open the file.", "Edit it", "Save it.", "Close it."],
    );
    // Hard-wrapped prose and wrapped bullets are joined.
    check_split(
        "This sentence is\nwrapped over lines.\n- An item that\n  continues here",
        &[
            "This sentence is wrapped over lines.",
            "An item that continues here",
        ],
    );
    check_split(
        "Windows line\r\nbreaks work.\r\n\r\nYes.",
        &["Windows line breaks work.", "Yes."],
    );
    check_split("Above.\n\n---\n\nBelow.", &["Above.", "Below."]);
}

#[test]
fn keeps_text_without_a_final_terminator() {
    check_split("One. Two without a stop", &["One.", "Two without a stop"]);
    check_split("no terminator at all", &["no terminator at all"]);
}

#[test]
fn splits_cjk_terminators() {
    check_split("今日は晴れ。明日は雨！", &["今日は晴れ。", "明日は雨！"]);
}

// ----- properties -----

fn embedding_sets(min: usize, max: usize) -> impl Strategy<Value = Vec<Vec<f32>>> {
    (1usize..6).prop_flat_map(move |dim| {
        prop::collection::vec(prop::collection::vec(-1.0f32..1.0, dim), min..=max)
    })
}

fn nonzero(embeddings: &[Vec<f32>]) -> bool {
    embeddings
        .iter()
        .all(|e| e.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>() > 1e-6)
}

fn assert_in(value: &Value, key: &str, low: f64, high: f64) {
    let x = value[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing or not a number in {value}"));
    assert!(
        x.is_finite() && (low..=high).contains(&x),
        "{key} = {x} not in [{low}, {high}]"
    );
}

fn assert_trajectory_in_range(out: &Value) {
    assert_in(out, "mean_velocity", 0.0, 2.0);
    assert_in(out, "mean_acceleration", 0.0, 2.0);
    assert_in(out, "max_acceleration", 0.0, 2.0);
    for key in [
        "deadpan_score",
        "heller_score",
        "circularity_score",
        "tautology_density",
        "deceleration_score",
    ] {
        assert_in(out, key, 0.0, 1.0);
    }
    for spike in out["acceleration_spikes"].as_array().unwrap() {
        assert_in(spike, "magnitude", 0.0, 2.0);
        assert_in(spike, "isolation_score", 0.0, 1.0);
        assert_in(spike, "position_ratio", 0.0, 1.0);
    }
}

proptest! {
    #[test]
    fn trajectory_scores_stay_in_range(
        embeddings in embedding_sets(2, 12),
        threshold in 0.0f64..1.0,
    ) {
        prop_assume!(nonzero(&embeddings));
        let options = TrajectoryOptions { acceleration_threshold: threshold, include_sentences: true };
        let out = analyze_trajectory(&texts(embeddings.len()), &embeddings, &options).unwrap();
        assert_trajectory_in_range(&out);
        prop_assert_eq!(out["n_sentences"].as_u64(), Some(embeddings.len() as u64));
    }

    #[test]
    fn comparison_scores_stay_in_range(
        golden in embedding_sets(3, 10),
        synthetic_len in 3usize..10,
        seed in prop::collection::vec(-1.0f32..1.0, 60),
        threshold in 0.0f64..1.0,
    ) {
        prop_assume!(nonzero(&golden));
        let dim = golden[0].len();
        let synthetic: Vec<Vec<f32>> = seed
            .chunks(dim)
            .take(synthetic_len)
            .map(<[f32]>::to_vec)
            .filter(|c| c.len() == dim)
            .collect();
        prop_assume!(synthetic.len() >= 3 && nonzero(&synthetic));
        let out = compare_trajectories(
            (&texts(golden.len()), &golden),
            (&texts(synthetic.len()), &synthetic),
            threshold,
        ).unwrap();
        for key in [
            "fitness_score",
            "synthetic_deadpan",
            "synthetic_heller",
            "acceleration_dtw",
            "spike_position_match",
            "spike_count_match",
        ] {
            assert_in(&out, key, 0.0, 1.0);
        }
        assert_in(&out, "acceleration_correlation", -1.0, 1.0);
        assert_in(&out["golden_summary"], "deadpan_score", 0.0, 1.0);
        assert_in(&out["synthetic_summary"], "mean_velocity", 0.0, 2.0);
        // A text compared with itself is always a perfect match.
        let same = compare_trajectories(
            (&texts(golden.len()), &golden),
            (&texts(golden.len()), &golden),
            threshold,
        ).unwrap();
        prop_assert_eq!(same["fitness_score"].as_f64(), Some(0.0));
    }

    #[test]
    fn variant_distances_stay_in_range(embeddings in embedding_sets(1, 6)) {
        prop_assume!(nonzero(&embeddings));
        let variants: Vec<_> = embeddings
            .iter()
            .enumerate()
            .map(|(i, e)| (format!("v{i}"), format!("text {i}"), e.clone()))
            .collect();
        let out = analyze_variants(&variants, "v0", "prop").unwrap();
        let from = out["from_baseline"].as_object().unwrap();
        prop_assert_eq!(from.len(), variants.len() - 1);
        let pairs = out["pairwise"].as_object().unwrap();
        prop_assert_eq!(pairs.len(), variants.len() * (variants.len() - 1) / 2);
        for d in from.values().chain(pairs.values()) {
            let d = d.as_f64().unwrap();
            prop_assert!((0.0..=2.0).contains(&d));
        }
        let recommended: Vec<f64> = out["recommendations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["distance"].as_f64().unwrap())
            .collect();
        prop_assert!(recommended.windows(2).all(|w| w[0] >= w[1]));
    }

    #[test]
    fn splitter_never_returns_empty_sentences(text in "[a-zA-Z0-9 .!?…\"'()\\-*#\n]{0,120}") {
        for sentence in split_sentences(&text) {
            prop_assert!(!sentence.trim().is_empty());
            prop_assert_eq!(sentence.trim(), sentence.as_str());
        }
    }

    #[test]
    fn splitter_keeps_every_word(words in prop::collection::vec("[A-Za-z][a-z]{0,7}", 1..20)) {
        let text = words.iter().map(|w| format!("{w}.")).collect::<Vec<_>>().join(" ");
        let rejoined = split_sentences(&text).join(" ");
        prop_assert_eq!(rejoined, text);
    }
}
