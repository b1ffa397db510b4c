//! Shared test helpers: a seeded generator, TREEMASK_TEST_SCALE, and a
//! brute-force model of a trie and a matcher written from the rules in
//! treemask.h (the Rust twin of tests/common/oracle.h): the allowed sequences
//! are a `BTreeSet<Vec<i32>>`, a matcher is a prefix plus a phase.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#![allow(dead_code)] // each test binary uses its own subset

use std::collections::{BTreeMap, BTreeSet};

use treemask::{MatcherRef, Trie, TrieOptions};

/// splitmix64: small, seeded, good enough to pick test cases.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [lo, hi].
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as i64
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn coin(&mut self, one_in: u64) -> bool {
        self.next_u64() % one_in == 0
    }
}

/// An iteration count scaled by TREEMASK_TEST_SCALE (at least 1).
pub fn scaled(n: usize) -> usize {
    let scale = std::env::var("TREEMASK_TEST_SCALE")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(1.0);
    ((n as f64 * scale) as usize).max(1)
}

pub type Seq = Vec<i32>;

pub struct ModelTrie {
    pub seqs: BTreeSet<Seq>,
    pub labels: BTreeMap<Seq, BTreeSet<i64>>,
    pub stops: Vec<i32>, // ascending, distinct
    pub vocab: i32,
}

impl ModelTrie {
    pub fn terminal(&self, prefix: &[i32]) -> bool {
        self.seqs.contains(prefix)
    }

    /// Tokens t such that prefix + [t] is a prefix of some sequence.
    pub fn children(&self, prefix: &[i32]) -> Vec<i32> {
        let kids: BTreeSet<i32> = self
            .seqs
            .range(prefix.to_vec()..)
            .take_while(|s| s.starts_with(prefix))
            .filter_map(|s| s.get(prefix.len()).copied())
            .collect();
        kids.into_iter().collect()
    }

    pub fn is_stop(&self, t: i32) -> bool {
        self.stops.binary_search(&t).is_ok()
    }
}

/// What a call returned: Ok(value) or the error kind.
pub type Outcome<T> = Result<T, treemask::ErrorKind>;

/// The kind of the error a call must have returned.
pub fn kind<T: std::fmt::Debug>(result: treemask::Result<T>) -> treemask::ErrorKind {
    result.expect_err("expected an error").kind
}

/// Checks that a call failed with `want` and a message containing `text`.
pub fn expect_error<T: std::fmt::Debug>(
    result: treemask::Result<T>,
    want: treemask::ErrorKind,
    text: &str,
) {
    let err = result.expect_err("expected an error");
    assert_eq!(err.kind, want, "{err}");
    assert!(err.message.contains(text), "wanted {text:?} in: {err}");
}

/// The message of the error a call must have returned.
pub fn message<T: std::fmt::Debug>(result: treemask::Result<T>) -> String {
    result.expect_err("expected an error").message
}

/// A random trie description: paths (with labels when `explicit_labels`),
/// stop tokens as given (maybe with a duplicate), and the model.
pub struct RandomTrie {
    pub paths: Vec<Seq>,
    pub labels: Option<Vec<i64>>,
    pub options: TrieOptions,
    pub model: ModelTrie,
}

impl RandomTrie {
    /// The trie the description makes, through the labelled or unlabelled
    /// builder.
    pub fn build(&self) -> Trie {
        let built = match &self.labels {
            None => Trie::from_paths(&self.options, &self.paths),
            Some(labels) => Trie::from_labeled_paths(
                &self.options,
                self.paths.iter().zip(labels.iter().copied()),
            ),
        };
        built.unwrap_or_else(|e| panic!("building {:?} failed: {e}", self.paths))
    }
}

pub fn random_trie(rng: &mut Rng, vocab: i32) -> RandomTrie {
    let pick = |rng: &mut Rng, lo: i32, hi: i32| rng.range(lo as i64, hi as i64) as i32;
    // Stop tokens first; the path alphabet avoids them.
    let n_stops = vocab.min(pick(rng, 1, 3));
    let mut stop_set = BTreeSet::new();
    while (stop_set.len() as i32) < n_stops {
        stop_set.insert(pick(rng, 0, vocab - 1));
    }
    let mut stops: Vec<i32> = stop_set.iter().copied().collect();
    if rng.coin(4) {
        stops.push(stops[0]); // a duplicate, merged by the library
    }
    let want = (vocab - n_stops).min(pick(rng, 1, 8));
    let mut alphabet = BTreeSet::new();
    while (alphabet.len() as i32) < want {
        // Favour the ends of the id space (word boundaries, the last word).
        let t = if rng.coin(3) {
            vocab - 1 - pick(rng, 0, (vocab - 1).min(40))
        } else {
            pick(rng, 0, vocab - 1)
        };
        if !stop_set.contains(&t) {
            alphabet.insert(t);
        }
    }
    let alphabet: Vec<i32> = alphabet.into_iter().collect();
    let n_paths = pick(rng, 1, 24) as usize;
    let explicit_labels = rng.coin(2);
    let mut paths: Vec<Seq> = Vec::new();
    let mut labels = Vec::new();
    let mut model = ModelTrie {
        seqs: BTreeSet::new(),
        labels: BTreeMap::new(),
        stops: stop_set.into_iter().collect(),
        vocab,
    };
    for i in 0..n_paths {
        let len = if alphabet.is_empty() {
            0
        } else {
            pick(rng, 0, 6)
        };
        let mut path: Seq = (0..len)
            .map(|_| alphabet[rng.below(alphabet.len())])
            .collect();
        if i > 0 && rng.coin(6) {
            // a duplicate or a prefix of an earlier path
            path = paths[rng.below(i)].clone();
            if !path.is_empty() && rng.coin(2) {
                path.truncate(rng.below(path.len() + 1));
            }
        }
        let label = if explicit_labels {
            rng.range(-3, 9)
        } else {
            i as i64
        };
        labels.push(label);
        model.seqs.insert(path.clone());
        model.labels.entry(path.clone()).or_default().insert(label);
        paths.push(path);
    }
    let mut options = TrieOptions::new(vocab, stops);
    if rng.coin(2) {
        options.dense_row_cache_bytes = 0;
    }
    RandomTrie {
        paths,
        labels: explicit_labels.then_some(labels),
        options,
        model,
    }
}

/// The bitmask row (bitmask_row_words words) that allows exactly `allowed`.
pub fn expected_row(allowed: &[i32], bitmask_row_words: usize) -> Vec<i32> {
    let mut row = vec![0u32; bitmask_row_words];
    for &t in allowed {
        row[t as usize / 32] |= 1 << (t % 32);
    }
    row.into_iter().map(|w| w as i32).collect()
}

/// `n` words of noise: a fill must overwrite every word it owns.
pub fn garbage(rng: &mut Rng, n: usize) -> Vec<i32> {
    (0..n).map(|_| rng.next_u64() as i32).collect()
}

/// The row a matcher fills on its own (over garbage), and what the fill
/// returned.
pub fn own_row(m: &mut MatcherRef, words: usize, rng: &mut Rng) -> (Vec<i32>, Outcome<bool>) {
    let mut row = garbage(rng, words);
    let got = m.fill_next_token_bitmask(&mut row).map_err(|e| e.kind);
    (row, got)
}

/// A token a decoder might feed a matcher: mostly allowed ones, sometimes
/// stop tokens, random ids, out-of-range ids and "no token" (-1).
pub fn random_feed(rng: &mut Rng, m: &MatcherRef, vocab: i32, stops: &[i32]) -> i32 {
    let allowed = m.next_tokens();
    match rng.below(20) {
        k if k < 13 && !allowed.is_empty() => allowed[rng.below(allowed.len())],
        k if k < 15 => stops[rng.below(stops.len())],
        15 => -1,
        16 => vocab + rng.below(3) as i32,
        _ => rng.range(0, vocab as i64 - 1) as i32,
    }
}
