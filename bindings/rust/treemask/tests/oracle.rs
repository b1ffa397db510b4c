//! Random tries and random walks through the safe API, compared at every step
//! with the BTreeSet model in common/mod.rs (the Rust twin of
//! tests/property/test_matcher_property.cc). Bitmask rows are written over
//! garbage and compared bit for bit, tail words included.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
mod common;

use common::{expected_row, random_trie, scaled, ModelMatcher, Phase, RandomTrie, Rng};
use treemask::{ErrorKind, FailurePolicy, Matcher, MatcherOptions, Trie};

const VOCABS: [i32; 9] = [1, 2, 31, 32, 33, 64, 100, 1000, 151_936];

fn describe(m: &ModelMatcher) -> String {
    format!("prefix {:?} phase {:?}", m.prefix, m.phase)
}

fn check_state(real: &mut Matcher, model: &ModelMatcher, rng: &mut Rng, scratch: &mut Vec<i32>) {
    let vocab = model.trie.vocab;
    let why = describe(model);
    let words = treemask::bitmask_words(vocab);
    // Longer rows must be written whole (extra words become 0).
    let bitmask_row_words = words + rng.below(3);
    let mut row: Vec<i32> = (0..bitmask_row_words)
        .map(|_| rng.next_u64() as i32)
        .collect();
    let filled = real.fill_next_token_bitmask(&mut row);
    let allowed = model.allowed();
    match model.phase {
        Phase::Failed => assert_eq!(
            filled.map_err(|e| e.kind),
            Err(ErrorKind::InvalidState),
            "{why}"
        ),
        _ => assert_eq!(filled, Ok(allowed.len() != vocab as usize), "{why}"),
    }
    assert_eq!(row, expected_row(&allowed, bitmask_row_words), "{why}");

    assert_eq!(real.next_tokens(), model.next_tokens(), "{why}");
    real.next_tokens_into(scratch);
    assert_eq!(*scratch, model.next_tokens(), "{why} (next_tokens_into)");
    assert_eq!(real.forced_tokens(), model.forced_tokens(), "{why}");
    assert_eq!(real.label_ids(), model.label_ids(), "{why}");
    assert_eq!(real.is_terminated(), model.is_terminated(), "{why}");
    assert_eq!(real.can_terminate(), model.can_terminate(), "{why}");
    assert_eq!(real.rollback_depth(), model.rollback_depth(), "{why}");
}

fn random_token(rng: &mut Rng, model: &ModelMatcher) -> i32 {
    let vocab = model.trie.vocab;
    let allowed = model.allowed();
    match rng.below(20) {
        k if k < 13 && !allowed.is_empty() => allowed[rng.below(allowed.len())],
        k if k < 15 => model.trie.stops[rng.below(model.trie.stops.len())],
        15 => -1 - rng.below(3) as i32,
        16 => vocab + rng.below(3) as i32,
        17 if model.options.pad_token.is_some() => model.options.pad_token.unwrap(),
        _ => rng.range(0, vocab as i64 - 1) as i32,
    }
}

fn random_options(rng: &mut Rng, vocab: i32) -> MatcherOptions {
    let mut options = MatcherOptions::default();
    options.failure_policy = [
        FailurePolicy::Reject,
        FailurePolicy::FailClosed,
        FailurePolicy::StickyError,
    ][rng.below(3)];
    options.terminate_without_stop_token = rng.coin(4);
    options.max_rollback_tokens = if rng.coin(3) { 1 + rng.below(4) } else { 0 };
    options.pad_token = rng.coin(3).then(|| rng.below(vocab as usize) as i32);
    options
}

fn walk(rt: &RandomTrie, trie: &Trie, rng: &mut Rng, steps: usize) {
    let options = random_options(rng, rt.model.vocab);
    let mut pairs = vec![(
        Matcher::with_options(trie, &options).expect("matcher"),
        ModelMatcher::new(&rt.model, options),
    )];
    let mut scratch = Vec::new();
    for _ in 0..steps {
        let i = rng.below(pairs.len());
        let (real, model) = &mut pairs[i];
        check_state(real, model, rng, &mut scratch);
        let why = describe(model);
        match rng.below(100) {
            0..=69 => {
                let t = random_token(rng, model);
                let before = treemask::last_error_message();
                let got = real.accept_token(t).map_err(|e| e.kind);
                assert_eq!(got, model.accept(t), "{why}: token {t}");
                if got == Ok(false) {
                    // A rejection is not an error: the last error stays.
                    assert_eq!(treemask::last_error_message(), before, "{why}: token {t}");
                }
            }
            70..=81 => {
                let n = rng.below(4);
                let got = real.rollback(n).map_err(|e| e.kind);
                assert_eq!(got, model.rollback(n), "{why}: rollback {n}");
            }
            82..=91 => {
                let clone = real.try_clone();
                if model.phase == Phase::Failed {
                    assert_eq!(
                        clone.map(|_| ()).map_err(|e| e.kind),
                        Err(ErrorKind::InvalidState)
                    );
                } else {
                    let copy = (clone.expect("clone"), model.clone());
                    pairs.push(copy);
                    if pairs.len() > 4 {
                        pairs.remove(rng.below(pairs.len()));
                    }
                }
            }
            92..=94 => {
                real.reset();
                model.reset();
            }
            _ => {
                for t in model.forced_tokens() {
                    let want = model.accept(t);
                    assert_eq!(want, Ok(true), "{why}: forced token {t}");
                    assert_eq!(
                        real.accept_token(t).map_err(|e| e.kind),
                        want,
                        "{why}: forced {t}"
                    );
                }
            }
        }
    }
    for (real, model) in &mut pairs {
        check_state(real, model, rng, &mut scratch);
    }
}

#[test]
fn random_tries_agree_with_the_model() {
    let mut rng = Rng::new(20_261_122);
    for i in 0..scaled(4000) {
        let vocab = VOCABS[i % VOCABS.len()];
        let seed = rng.next_u64();
        let mut local = Rng::new(seed);
        let rt = random_trie(&mut local, vocab);
        let trie = rt.build();
        assert_eq!(trie.vocab_size(), vocab, "trie {i} seed {seed}");
        assert_eq!(trie.stop_tokens(), rt.model.stops, "trie {i} seed {seed}");
        let steps = if vocab > 10_000 { 16 } else { 60 };
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            walk(&rt, &trie, &mut local, steps)
        }));
        if let Err(panic) = result {
            eprintln!("trie {i}: vocab {vocab} seed {seed} paths {:?}", rt.paths);
            std::panic::resume_unwind(panic);
        }
    }
}

#[test]
fn stats_match_the_model() {
    let mut rng = Rng::new(7);
    for _ in 0..scaled(300) {
        let rt = random_trie(&mut rng, 1000);
        let trie = rt.build();
        let stats = trie.stats().expect("stats");
        // Every distinct non-empty prefix of a sequence is one node.
        let mut prefixes = std::collections::BTreeSet::new();
        for seq in &rt.model.seqs {
            for len in 0..=seq.len() {
                prefixes.insert(&seq[..len]);
            }
        }
        assert_eq!(stats.n_nodes, prefixes.len() as u64, "{:?}", rt.paths);
        assert_eq!(stats.n_edges, stats.n_nodes - 1);
        assert_eq!(stats.n_terminals, rt.model.seqs.len() as u64);
        let n_labels: usize = rt.model.labels.values().map(|l| l.len()).sum();
        assert_eq!(stats.n_labels, n_labels as u64);
        let depth = rt.model.seqs.iter().map(|s| s.len()).max().unwrap_or(0);
        assert_eq!(stats.max_depth as usize, depth);
        let fanout = prefixes
            .iter()
            .map(|p| rt.model.children(p).len())
            .max()
            .unwrap_or(0);
        assert_eq!(stats.max_fanout as usize, fanout);
    }
}
