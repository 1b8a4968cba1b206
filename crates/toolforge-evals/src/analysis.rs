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

use serde_json::{Map, Value, json};

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
const SNAP: f64 = 1e-12;
/// Below this standard deviation a series counts as constant (no correlation).
const CONSTANT_STD: f64 = 1e-6;

/// Why an analysis refused its input.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnalysisError {
    /// Not enough sentences for the requested quantities.
    #[error("too few sentences in the {which}: need at least {needed}, got {got}")]
    TooFewSentences {
        which: &'static str,
        needed: usize,
        got: usize,
    },
    /// `baseline_label` names none of the variants.
    #[error("unknown baseline label {label:?}; the variants are: {}", labels.join(", "))]
    UnknownBaseline { label: String, labels: Vec<String> },
    /// `analyze_variants` got an empty list.
    #[error("no variants to analyze")]
    NoVariants,
    /// Two variants share a label (the result maps are keyed by label).
    #[error("duplicate variant label {label:?}")]
    DuplicateLabel { label: String },
    /// Embeddings of different lengths were compared.
    #[error("embedding dimension mismatch for {which}: expected {expected}, found {found}")]
    DimensionMismatch {
        which: String,
        expected: usize,
        found: usize,
    },
    /// A zero (or empty) embedding has no direction.
    #[error("the embedding of {which} is a zero or empty vector; cosine distance is undefined")]
    ZeroVector { which: String },
    /// NaN or infinity in an embedding.
    #[error("the embedding of {which} contains a non-finite value (NaN or infinity)")]
    NonFinite { which: String },
    /// Sentences and embeddings do not pair up.
    #[error("the {which} has {sentences} sentences but {embeddings} embeddings; they must pair up")]
    LengthMismatch {
        which: &'static str,
        sentences: usize,
        embeddings: usize,
    },
    /// The spike threshold is negative or not finite.
    #[error("acceleration_threshold must be a finite number ≥ 0, got {value}")]
    InvalidThreshold { value: f64 },
}

// ---------------------------------------------------------------------------------------------
// Sentences
// ---------------------------------------------------------------------------------------------

/// Abbreviations whose final period never ends a sentence (compared lowercased, without the
/// period). Titles and words that are normally followed by a name or a number. Words that often
/// end a sentence (`etc.`, `Inc.`, `no.`) are deliberately absent: a following capital splits
/// them, a following lowercase word does not (the general lowercase rule).
const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "mx", "dr", "prof", "sr", "jr", "st", "mt", "rev", "fr", "gen", "col",
    "capt", "lt", "sgt", "cmdr", "adm", "hon", "gov", "sen", "rep", "pres", "supt", "vs", "cf",
    "e.g", "i.e", "viz", "approx", "ca", "al", "fig", "figs", "eq", "eqs", "vol", "vols", "pp",
    "ch", "sec", "art", "dept", "univ", "est", "jan", "feb", "mar", "apr", "jun", "jul", "aug",
    "sep", "sept", "oct", "nov", "dec",
];

/// Characters that may close a sentence after its terminator: quotes and brackets.
const CLOSERS: &[char] = &['"', '\'', ')', ']', '}', '”', '’', '»', '›'];
/// Characters that may open a word before an abbreviation: quotes and brackets.
const OPENERS: &[char] = &['"', '\'', '(', '[', '{', '“', '‘', '«', '‹'];
/// Bullet markers at the start of a line (followed by whitespace).
const BULLETS: &[char] = &['-', '*', '+', '•', '‣', '◦', '▪', '–', '—'];

/// Splits a text into sentences (a rule-based stand-in for spaCy's segmenter).
///
/// Lines first: a blank line ends a paragraph; a line starting with a bullet (`-`, `*`, `+`, `•`,
/// `–`, ...) or a list number (`1.`, `12)`) starts a new item, and a Markdown heading (`# ...`) is
/// a sentence of its own; the markers are dropped. Other line breaks are plain spaces (hard-wrapped
/// prose). Then, inside each paragraph or item, a run of terminators (`.`, `!`, `?`, `…`),
/// optionally followed by closing quotes or brackets, ends a sentence when
///
/// - whitespace or the end of the text follows (so `3.14`, `example.com` and the inner dots of
///   `U.S.` never split);
/// - the next word does not start with a lowercase letter (so `Wait... what?` and `"Why?" he
///   asked.` stay whole, while `He left... The end.` splits);
/// - for a single period, the word before it is not an abbreviation: a known title or short form
///   (`Dr.`, `Mr.`, `vs.`, `e.g.`, `Jan.`, ...), a single letter (initials, `J. R. R.`) or an
///   initialism of one- or two-letter parts (`U.S.`, `i.e.`, `Ph.D.`, `a.m.`).
///
/// The CJK terminators `。！？` always end a sentence. Sentences are trimmed; pieces made only of
/// punctuation (`---`, `...`) are dropped, so the result never holds an empty string.
///
/// Known divergence from spaCy: an initialism or title at the real end of a sentence followed by
/// a capitalised word (`moved to the U.S. Then ...`) does not split.
pub fn split_sentences(text: &str) -> Vec<String> {
    let mut sentences = Vec::new();
    for block in blocks(text) {
        split_block(&block, &mut sentences);
    }
    sentences
}

/// What a line of text is, for paragraph and list structure.
enum Line<'a> {
    /// A list item; the marker removed.
    Item(&'a str),
    /// A Markdown heading; the hashes removed.
    Heading(&'a str),
    /// Anything else.
    Text(&'a str),
}

fn classify_line(line: &str) -> Line<'_> {
    if let Some(rest) = line.strip_prefix('#') {
        let rest = rest.trim_start_matches('#');
        if rest.is_empty() || rest.starts_with(char::is_whitespace) {
            return Line::Heading(rest.trim());
        }
    }
    let mut chars = line.chars();
    if let (Some(first), Some(second)) = (chars.next(), chars.next())
        && BULLETS.contains(&first)
        && second.is_whitespace()
    {
        return Line::Item(line[first.len_utf8()..].trim());
    }
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    if (1..=3).contains(&digits) {
        let rest = &line[digits..];
        let mut rest_chars = rest.chars();
        if let (Some(mark), Some(space)) = (rest_chars.next(), rest_chars.next())
            && (mark == '.' || mark == ')')
            && space.is_whitespace()
        {
            return Line::Item(rest[1..].trim());
        }
    }
    Line::Text(line)
}

/// Paragraphs, list items and headings, each as one line of text.
fn blocks(text: &str) -> Vec<String> {
    fn flush(current: &mut String, blocks: &mut Vec<String>) {
        if !current.is_empty() {
            blocks.push(std::mem::take(current));
        }
    }
    let mut blocks = Vec::new();
    let mut current = String::new();
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() {
            flush(&mut current, &mut blocks);
            continue;
        }
        match classify_line(line) {
            Line::Heading(content) => {
                flush(&mut current, &mut blocks);
                current.push_str(content);
                flush(&mut current, &mut blocks);
            }
            Line::Item(content) => {
                flush(&mut current, &mut blocks);
                current.push_str(content);
            }
            Line::Text(content) => {
                if !current.is_empty() {
                    current.push(' ');
                }
                current.push_str(content);
            }
        }
    }
    flush(&mut current, &mut blocks);
    blocks
}

fn is_terminator(c: char) -> bool {
    matches!(c, '.' | '!' | '?' | '…')
}

fn is_cjk_terminator(c: char) -> bool {
    matches!(c, '。' | '！' | '？')
}

fn skip_closers(chars: &[char], mut at: usize) -> usize {
    while at < chars.len() && CLOSERS.contains(&chars[at]) {
        at += 1;
    }
    at
}

/// Splits one paragraph (no line breaks) into sentences, appending them to `out`.
fn split_block(block: &str, out: &mut Vec<String>) {
    let chars: Vec<char> = block.chars().collect();
    let mut start = 0;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if is_cjk_terminator(c) {
            let end = skip_closers(&chars, i + 1);
            push_sentence(&chars[start..end], out);
            start = end;
            i = end;
            continue;
        }
        if !is_terminator(c) {
            i += 1;
            continue;
        }
        let mut run_end = i + 1;
        while run_end < chars.len() && is_terminator(chars[run_end]) {
            run_end += 1;
        }
        let end = skip_closers(&chars, run_end);
        if ends_sentence(&chars, i, run_end, end) {
            push_sentence(&chars[start..end], out);
            start = end;
        }
        i = end;
    }
    push_sentence(&chars[start..], out);
}

/// Whether the terminator run `chars[run_start..run_end]`, closers included up to `end`, ends a
/// sentence.
fn ends_sentence(chars: &[char], run_start: usize, run_end: usize, end: usize) -> bool {
    let Some(&after) = chars.get(end) else {
        return true;
    };
    if !after.is_whitespace() {
        return false;
    }
    let Some(next) = chars[end..].iter().find(|c| !c.is_whitespace()) else {
        return true;
    };
    if next.is_lowercase() {
        return false;
    }
    let single_period = run_end == run_start + 1 && chars[run_start] == '.';
    !(single_period && is_abbreviation(&word_before(chars, run_start)))
}

/// The word that ends just before `at`, without opening quotes or brackets.
fn word_before(chars: &[char], at: usize) -> String {
    let mut begin = at;
    while begin > 0 && !chars[begin - 1].is_whitespace() {
        begin -= 1;
    }
    let word: String = chars[begin..at].iter().collect();
    word.trim_start_matches(OPENERS).to_string()
}

fn is_abbreviation(word: &str) -> bool {
    let lower = word.to_lowercase();
    if ABBREVIATIONS.contains(&lower.as_str()) {
        return true;
    }
    let mut letters = word.chars();
    if let (Some(only), None) = (letters.next(), letters.next()) {
        return only.is_alphabetic();
    }
    // Initialisms: U.S, e.g, Ph.D, a.m (the final period is the one being judged).
    word.contains('.')
        && word.split('.').all(|part| {
            (1..=2).contains(&part.chars().count()) && part.chars().all(char::is_alphabetic)
        })
}

fn push_sentence(chars: &[char], out: &mut Vec<String>) {
    let sentence: String = chars.iter().collect();
    let sentence = sentence.trim();
    let punctuation_only = sentence.chars().all(|c| {
        c.is_whitespace()
            || c.is_ascii_punctuation()
            || matches!(
                c,
                '…' | '“' | '”' | '‘' | '’' | '«' | '»' | '–' | '—' | '•' | '·'
            )
    });
    if !punctuation_only {
        out.push(sentence.to_string());
    }
}

// ---------------------------------------------------------------------------------------------
// Distances
// ---------------------------------------------------------------------------------------------

/// Cosine distance `1 − cos(a, b)`: 0 same direction, 1 orthogonal, 2 opposite (unrounded;
/// within 1e-12 of 0 or 2 it snaps to the bound, so identical vectors give exactly 0). Errors on different lengths, a zero or empty vector, or a
/// non-finite component.
pub fn cosine_distance(a: &[f32], b: &[f32]) -> Result<f64, AnalysisError> {
    let norm_a = embedding_norm(a, a.len(), || "a".to_string())?;
    let norm_b = embedding_norm(b, a.len(), || "b".to_string())?;
    Ok(distance(a, norm_a, b, norm_b))
}

/// Validates one embedding against the expected dimension and returns its Euclidean norm.
fn embedding_norm(
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
fn distance(a: &[f32], norm_a: f64, b: &[f32], norm_b: f64) -> f64 {
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
fn round(x: f64) -> f64 {
    let scale = 10f64.powi(DECIMALS);
    let rounded = (x * scale).round() / scale;
    if rounded == 0.0 { 0.0 } else { rounded }
}

fn clamp01(x: f64) -> f64 {
    x.clamp(0.0, 1.0)
}

fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

fn median(values: &[f64]) -> f64 {
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

// ---------------------------------------------------------------------------------------------
// Variants
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Trajectories
// ---------------------------------------------------------------------------------------------

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
struct Spike {
    magnitude: f64,
    isolation: f64,
    position: f64,
}

/// Every quantity of one trajectory, unrounded.
#[derive(Debug, Clone)]
struct Profile {
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

fn check_threshold(threshold: f64) -> Result<(), AnalysisError> {
    if threshold.is_finite() && threshold >= 0.0 {
        Ok(())
    } else {
        Err(AnalysisError::InvalidThreshold { value: threshold })
    }
}

fn profile(
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

fn find_spikes(accelerations: &[f64], threshold: f64, n: usize) -> Vec<Spike> {
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

fn deadpan_score(
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

fn deceleration_score(velocities: &[f64]) -> f64 {
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

fn adams_interpretation(deadpan: f64, spikes: usize) -> String {
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

fn heller_interpretation(heller: f64) -> &'static str {
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
fn dtw(x: &[f64], y: &[f64]) -> f64 {
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
fn resample(series: &[f64], len: usize) -> Vec<f64> {
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
fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
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

fn spike_position_match(golden: &[Spike], synthetic: &[Spike]) -> f64 {
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

fn spike_count_match(golden: usize, synthetic: usize) -> f64 {
    let most = golden.max(synthetic);
    if most == 0 {
        1.0
    } else {
        golden.min(synthetic) as f64 / most as f64
    }
}

fn fitness_interpretation(fitness: f64) -> &'static str {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
        let out =
            analyze_trajectory(&texts(4), &angles(&[0.0, 90.0, 90.0, 0.0]), &options).unwrap();
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
}
