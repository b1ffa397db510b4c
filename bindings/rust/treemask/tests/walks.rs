//! Random walks through the safe API. The rules themselves are tested once,
//! in C++, against the brute-force oracle (tests/property); here every
//! channel of the binding must agree with every other and with the API's
//! contract: the bitmask row (written over garbage, tail words included),
//! `next_tokens` and `next_tokens_into`, `forced_tokens`, `can_terminate`,
//! accept and rollback, clones and reset.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
mod common;

use common::{expected_row, random_trie, scaled, RandomTrie, Rng};
use treemask::{ErrorKind, FailurePolicy, Matcher, MatcherOptions, Trie};

const VOCABS: [i32; 9] = [1, 2, 31, 32, 33, 64, 100, 1000, 151_936];

/// A matcher and what the walk has seen of it.
struct Walker {
    m: Matcher,
    // The allowed lists of the states rollback can return to, oldest first,
    // and the current one last; None once a rejection closed the matcher
    // (FAIL_CLOSED), which cannot roll back.
    seen: Option<Vec<Vec<i32>>>,
    failed: bool, // STICKY_ERROR after a rejection
}

/// Every channel of one state agrees; returns the allowed tokens.
fn check_state(w: &mut Walker, vocab: i32, stops: &[i32], rng: &mut Rng) -> Vec<i32> {
    let words = treemask::bitmask_words(vocab);
    // Longer rows must be written whole (extra words become 0).
    let bitmask_row_words = words + rng.below(3);
    let mut row: Vec<i32> = (0..bitmask_row_words)
        .map(|_| rng.next_u64() as i32)
        .collect();
    let filled = w.m.fill_next_token_bitmask(&mut row);
    let allowed = w.m.next_tokens();
    let mut scratch = vec![7; 3];
    w.m.next_tokens_into(&mut scratch);
    assert_eq!(scratch, allowed, "next_tokens_into");
    if w.failed {
        assert_eq!(filled.map_err(|e| e.kind), Err(ErrorKind::InvalidState));
        assert!(allowed.is_empty(), "a failed matcher offers nothing");
        // Its row allows the stop tokens, as a reserved state does.
        assert_eq!(row, expected_row(stops, bitmask_row_words));
        return allowed;
    }
    assert_eq!(filled, Ok(allowed.len() != vocab as usize));
    assert_eq!(row, expected_row(&allowed, bitmask_row_words));
    assert!(allowed.windows(2).all(|p| p[0] < p[1]), "ascending");
    let any_stop = allowed.iter().any(|t| stops.contains(t));
    if w.m.is_terminated() {
        assert_eq!(allowed, stops, "a finished sequence allows its stop tokens");
        assert!(!w.m.can_terminate());
    } else {
        assert_eq!(w.m.can_terminate(), any_stop);
    }
    let forced = w.m.forced_tokens();
    if let Some(first) = forced.first() {
        assert_eq!(
            allowed,
            vec![*first],
            "a forced token is the only one allowed"
        );
    } else if !w.m.is_terminated() && allowed.len() == 1 {
        assert!(
            any_stop,
            "one allowed token that is not forced is a stop token"
        );
    }
    if let Some(seen) = &w.seen {
        assert_eq!(w.m.rollback_depth(), seen.len() - 1);
    }
    allowed
}

fn random_token(rng: &mut Rng, allowed: &[i32], vocab: i32, stops: &[i32]) -> i32 {
    match rng.below(20) {
        k if k < 13 && !allowed.is_empty() => allowed[rng.below(allowed.len())],
        k if k < 15 => stops[rng.below(stops.len())],
        15 => -1 - rng.below(3) as i32,
        16 => vocab + rng.below(3) as i32,
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
    options.pad_token = rng.coin(3).then(|| rng.below(vocab as usize) as i32);
    options
}

fn walk(rt: &RandomTrie, trie: &Trie, rng: &mut Rng, steps: usize) {
    let vocab = rt.model.vocab;
    let stops = rt.model.stops.clone();
    let options = random_options(rng, vocab);
    let policy = options.failure_policy;
    let m = Matcher::with_options(trie, &options).expect("matcher");
    let root = m.next_tokens();
    let mut walkers = vec![Walker {
        m,
        seen: Some(vec![root.clone()]),
        failed: false,
    }];
    for _ in 0..steps {
        let i = rng.below(walkers.len());
        let w = &mut walkers[i];
        let allowed = check_state(w, vocab, &stops, rng);
        match rng.below(100) {
            0..=69 => {
                let t = random_token(rng, &allowed, vocab, &stops);
                let terminated = w.m.is_terminated();
                let before = treemask::last_error_message();
                let got = w.m.accept_token(t).map_err(|e| e.kind);
                if w.failed {
                    assert_eq!(got, Err(ErrorKind::InvalidState), "token {t}");
                    continue;
                }
                let pad = options.pad_token == Some(t);
                let want = allowed.contains(&t) || (terminated && pad);
                assert_eq!(got, Ok(want), "token {t}, allowed {allowed:?}");
                if !want {
                    // A rejection is not an error: the last error stays.
                    assert_eq!(treemask::last_error_message(), before, "token {t}");
                    if !terminated && policy != FailurePolicy::Reject {
                        w.failed = policy == FailurePolicy::StickyError;
                        w.seen = None;
                        if !w.failed {
                            assert_eq!(w.m.next_tokens(), stops, "closed: only stop tokens");
                        }
                    }
                } else if !terminated {
                    let now = w.m.next_tokens();
                    if let Some(seen) = &mut w.seen {
                        seen.push(now);
                    }
                }
            }
            70..=81 => {
                let n = rng.below(4);
                let got = w.m.rollback(n).map_err(|e| e.kind);
                match &mut w.seen {
                    _ if w.failed => assert_eq!(got, Err(ErrorKind::InvalidState)),
                    // Closed, or ended after closing: rollback errs or
                    // returns to a state the walk no longer tracks.
                    None => {}
                    Some(seen) if n >= seen.len() => {
                        assert_eq!(got, Err(ErrorKind::OutOfRange), "rollback {n}");
                    }
                    Some(seen) => {
                        assert_eq!(got, Ok(()), "rollback {n}");
                        seen.truncate(seen.len() - n);
                        assert_eq!(
                            &w.m.next_tokens(),
                            seen.last().unwrap(),
                            "after rollback {n}"
                        );
                    }
                }
            }
            82..=91 => match w.m.try_clone() {
                Err(e) => assert!(w.failed && e.kind == ErrorKind::InvalidState),
                Ok(copy) => {
                    assert!(!w.failed);
                    assert_eq!(copy.next_tokens(), allowed, "a clone starts where it was");
                    let seen = w.seen.clone();
                    walkers.push(Walker {
                        m: copy,
                        seen,
                        failed: false,
                    });
                    if walkers.len() > 4 {
                        walkers.remove(rng.below(walkers.len()));
                    }
                }
            },
            92..=94 => {
                w.m.reset();
                w.failed = false;
                w.seen = Some(vec![root.clone()]);
                assert_eq!(w.m.next_tokens(), root, "reset returns to the root");
            }
            _ => {
                if w.failed {
                    continue;
                }
                for t in w.m.forced_tokens() {
                    assert_eq!(
                        w.m.accept_token(t).map_err(|e| e.kind),
                        Ok(true),
                        "forced {t}"
                    );
                    let now = w.m.next_tokens();
                    if let Some(seen) = &mut w.seen {
                        seen.push(now);
                    }
                }
            }
        }
    }
    for w in &mut walkers {
        check_state(w, vocab, &stops, rng);
    }
}

#[test]
fn random_walks_agree_across_channels() {
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
