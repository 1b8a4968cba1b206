//! Splitting a text into sentences: [`split_sentences`], the rule-based stand-in for spaCy's
//! segmenter.

/// Abbreviations whose final period never ends a sentence (compared lowercased, without the
/// period). Titles and words that are normally followed by a name or a number. Words that often
/// end a sentence (`etc.`, `Inc.`, `no.`) are deliberately absent: a following capital splits
/// them, a following lowercase word does not (the general lowercase rule).
pub(super) const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "mx", "dr", "prof", "sr", "jr", "st", "mt", "rev", "fr", "gen", "col",
    "capt", "lt", "sgt", "cmdr", "adm", "hon", "gov", "sen", "rep", "pres", "supt", "vs", "cf",
    "e.g", "i.e", "viz", "approx", "ca", "al", "fig", "figs", "eq", "eqs", "vol", "vols", "pp",
    "ch", "sec", "art", "dept", "univ", "est", "jan", "feb", "mar", "apr", "jun", "jul", "aug",
    "sep", "sept", "oct", "nov", "dec",
];

/// Characters that may close a sentence after its terminator: quotes and brackets.
pub(super) const CLOSERS: &[char] = &['"', '\'', ')', ']', '}', '”', '’', '»', '›'];
/// Characters that may open a word before an abbreviation: quotes and brackets.
pub(super) const OPENERS: &[char] = &['"', '\'', '(', '[', '{', '“', '‘', '«', '‹'];
/// Bullet markers at the start of a line (followed by whitespace).
pub(super) const BULLETS: &[char] = &['-', '*', '+', '•', '‣', '◦', '▪', '–', '—'];

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
pub(super) enum Line<'a> {
    /// A list item; the marker removed.
    Item(&'a str),
    /// A Markdown heading; the hashes removed.
    Heading(&'a str),
    /// Anything else.
    Text(&'a str),
}

pub(super) fn classify_line(line: &str) -> Line<'_> {
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
pub(super) fn blocks(text: &str) -> Vec<String> {
    pub(super) fn flush(current: &mut String, blocks: &mut Vec<String>) {
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

pub(super) fn is_terminator(c: char) -> bool {
    matches!(c, '.' | '!' | '?' | '…')
}

pub(super) fn is_cjk_terminator(c: char) -> bool {
    matches!(c, '。' | '！' | '？')
}

pub(super) fn skip_closers(chars: &[char], mut at: usize) -> usize {
    while at < chars.len() && CLOSERS.contains(&chars[at]) {
        at += 1;
    }
    at
}

/// Splits one paragraph (no line breaks) into sentences, appending them to `out`.
pub(super) fn split_block(block: &str, out: &mut Vec<String>) {
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
pub(super) fn ends_sentence(chars: &[char], run_start: usize, run_end: usize, end: usize) -> bool {
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
pub(super) fn word_before(chars: &[char], at: usize) -> String {
    let mut begin = at;
    while begin > 0 && !chars[begin - 1].is_whitespace() {
        begin -= 1;
    }
    let word: String = chars[begin..at].iter().collect();
    word.trim_start_matches(OPENERS).to_string()
}

pub(super) fn is_abbreviation(word: &str) -> bool {
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

pub(super) fn push_sentence(chars: &[char], out: &mut Vec<String>) {
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
