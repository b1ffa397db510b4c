//! Decoding modes through the safe API (the Rust twin of
//! tests/modes/test_modes.cc, basic behaviour of each mode): multi-label,
//! hierarchical labels, think mode, the length budget, stop-token override,
//! exclusion sets and label filters, speculative decoding, jump-forward in
//! one call, the parity getters; and the options the wrapper refuses itself.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
mod common;

use common::expect_error;

use treemask::{
    ErrorKind, ExclusionSet, FailurePolicy, Matcher, MatcherOptions, MatcherRef, Trie, TrieOptions,
};

fn trie(vocab: i32, stops: &[i32], paths: &[&[i32]]) -> Trie {
    Trie::from_paths(&TrieOptions::new(vocab, stops.to_vec()), paths).expect("trie")
}

fn matcher(trie: &Trie, options: &MatcherOptions) -> Matcher {
    Matcher::with_options(trie, options).unwrap_or_else(|e| panic!("matcher: {e}"))
}

/// The tokens a fill allows, decoded from the row (and checked against
/// next_tokens, which must list exactly the bits fill sets).
fn fill(m: &mut MatcherRef) -> Vec<i32> {
    let vocab = m.trie().vocab_size();
    let mut row = vec![-1; treemask::bitmask_words(vocab)];
    m.fill_next_token_bitmask(&mut row).expect("fill");
    let allowed: Vec<i32> = (0..vocab)
        .filter(|&t| treemask::is_token_allowed(&row, t))
        .collect();
    assert_eq!(allowed, m.next_tokens(), "fill and next_tokens disagree");
    allowed
}

fn accept_all(m: &mut MatcherRef, tokens: &[i32]) {
    assert_eq!(
        m.accept_tokens(tokens),
        Ok(tokens.len()),
        "{}",
        treemask::last_error_message()
    );
}

fn all_but(vocab: i32, excluded: &[i32]) -> Vec<i32> {
    (0..vocab).filter(|t| !excluded.contains(t)).collect()
}

fn create_error(trie: &Trie, options: &MatcherOptions) -> treemask::Error {
    Matcher::with_options(trie, options).expect_err("options must be refused")
}

#[test]
fn multi_label_produces_each_label_once() {
    // Labels: 0 = [10], 1 = [10 11] (label 0 is a prefix of it), 2 = [12 13].
    let t = trie(32, &[0], &[&[10], &[10, 11], &[12, 13]]);
    let mut options = MatcherOptions::default();
    options.label_separator = vec![20, 21];
    let mut m = matcher(&t, &options);
    assert_eq!(fill(&mut m), [10, 12]);
    accept_all(&mut m, &[10]);
    assert_eq!(fill(&mut m), [0, 11, 20]); // end, continue to [10 11], or separate
    accept_all(&mut m, &[20]);
    assert_eq!(m.produced_labels(), [0]);
    assert_eq!(fill(&mut m), [21]); // the rest of the separator is forced
    accept_all(&mut m, &[21, 10]);
    assert_eq!(fill(&mut m), [11]); // [10] was produced: no stop, no separator
    assert_eq!(m.forced_tokens(), [11, 20, 21, 12, 13]);
    accept_all(&mut m, &[11, 0]);
    assert!(m.is_terminated());
    assert_eq!(m.produced_labels(), [0, 1]);
    assert_eq!(m.label_ids(), [1]);
    // Rollback across label boundaries makes labels available again.
    m.rollback(4).unwrap();
    assert_eq!(m.produced_labels(), [0]);

    options.max_labels = 2;
    let mut two = matcher(&t, &options);
    accept_all(&mut two, &[12, 13, 20, 21, 10]);
    assert_eq!(fill(&mut two), [0, 11]);
    assert_eq!(two.accept_token(20), Ok(false));

    options.label_separator = vec![11, 21];
    let ambiguous = create_error(&t, &options);
    assert_eq!(ambiguous.kind, ErrorKind::InvalidArgument);
    assert!(
        ambiguous
            .message
            .contains("label_separator[0] = 11 is also a child token of a terminal node"),
        "{ambiguous}"
    );
    let mut no_separator = MatcherOptions::default();
    no_separator.max_labels = 3;
    assert!(create_error(&t, &no_separator)
        .message
        .contains("max_labels = 3 needs a label_separator"));
}

#[test]
fn leaves_only_ends_only_at_leaves_of_a_shared_trie() {
    // "A", "A > B", "A > B > C", "A > D": A=1, " >"=2, B=3, C=4, D=5.
    let t = trie(8, &[0], &[&[1], &[1, 2, 3], &[1, 2, 3, 2, 4], &[1, 2, 5]]);
    let mut leaves = MatcherOptions::default();
    leaves.leaves_only = true;
    let mut any_level = matcher(&t, &MatcherOptions::default());
    let mut leaf = matcher(&t, &leaves);
    accept_all(&mut any_level, &[1]);
    accept_all(&mut leaf, &[1]);
    assert_eq!(fill(&mut any_level), [0, 2]);
    assert_eq!(fill(&mut leaf), [2]);
    accept_all(&mut leaf, &[2, 3]);
    assert_eq!(leaf.accept_token(0), Ok(false));
    assert_eq!(leaf.forced_tokens(), [2, 4]);
    accept_all(&mut leaf, &[2, 4, 0]);
    assert_eq!(leaf.produced_labels(), [2]);
}

#[test]
fn think_mode_is_free_until_the_end_sequence() {
    // Labels [1 2] and [3]; "</think>" = 7 8, "<think>" = 6.
    let t = trie(16, &[0], &[&[1, 2], &[3]]);
    let mut options = MatcherOptions::default();
    options.think_end_tokens = vec![7, 8];
    options.start_in_thinking = true;
    let mut m = matcher(&t, &options);
    assert!(m.is_thinking());
    let mut row = vec![0; 1];
    assert_eq!(
        m.fill_next_token_bitmask(&mut row),
        Ok(false),
        "nothing to mask while thinking"
    );
    assert_eq!(m.next_tokens(), all_but(16, &[]));
    accept_all(&mut m, &[5, 7]);
    assert!(m.is_thinking(), "a partial match forces nothing");
    accept_all(&mut m, &[8]);
    assert!(!m.is_thinking());
    assert_eq!(fill(&mut m), [1, 3]);
    m.rollback(1).unwrap();
    assert!(m.is_thinking(), "rollback crosses the boundary");

    // A budget of 0 forces the end at once; jump forward through it.
    options.max_thinking_tokens = Some(0);
    let mut forced = matcher(&t, &options);
    assert_eq!(fill(&mut forced), [7]);
    assert_eq!(forced.accept_token(0), Ok(false), "not even a stop token");
    assert_eq!(forced.accept_forced_tokens(), Ok(vec![7, 8]));
    assert!(!forced.is_thinking());
    assert_eq!(fill(&mut forced), [1, 3]);

    // The begin token opens thinking only as the first token.
    options.max_thinking_tokens = None;
    options.start_in_thinking = false;
    options.think_begin_token = Some(6);
    let mut begin = matcher(&t, &options);
    assert!(!begin.is_thinking());
    assert_eq!(fill(&mut begin), [1, 3, 6]);
    accept_all(&mut begin, &[6]);
    assert!(begin.is_thinking());
    assert_eq!(fill(&mut begin), all_but(16, &[6]));

    options.think_begin_token = Some(1);
    assert!(create_error(&t, &options)
        .message
        .contains("think_begin_token = 1 is also a child token of the root"));
    options.think_begin_token = Some(-1);
    let negative = create_error(&t, &options);
    assert_eq!(negative.kind, ErrorKind::InvalidArgument);
    assert_eq!(
        negative.message,
        "think_begin_token is Some(-1); use None for no think_begin_token"
    );
    options.think_begin_token = None;
    options.max_thinking_tokens = Some(u64::MAX);
    assert_eq!(create_error(&t, &options).kind, ErrorKind::OutOfRange);
    let mut no_end = MatcherOptions::default();
    no_end.max_thinking_tokens = Some(5);
    assert!(create_error(&t, &no_end)
        .message
        .contains("need think_end_tokens"));
}

#[test]
fn the_length_budget_offers_only_branches_that_fit() {
    // [1] is one token; [2 3 4] three; [2 5] two.
    let t = trie(8, &[0], &[&[1], &[2, 3, 4], &[2, 5]]);
    let mut options = MatcherOptions::default();
    options.max_new_tokens = Some(2);
    let mut m = matcher(&t, &options);
    assert_eq!(m.remaining_tokens(), Some(2));
    assert_eq!(fill(&mut m), [1, 2]);
    accept_all(&mut m, &[2]);
    assert_eq!(m.remaining_tokens(), Some(1));
    assert_eq!(fill(&mut m), [5]); // [2 3 4] no longer fits
    assert_eq!(m.accept_token(3), Ok(false));
    // A budget for one fill only.
    let mut row = vec![0; 1];
    assert_eq!(m.fill_next_token_bitmask_with_budget(&mut row, 5), Ok(true));
    assert_eq!(row[0], (1 << 3) | (1 << 5));
    assert_eq!(
        m.remaining_tokens(),
        Some(1),
        "the matcher's own budget is unchanged"
    );
    m.set_remaining_tokens(None).unwrap();
    assert_eq!(m.remaining_tokens(), None);
    assert_eq!(fill(&mut m), [3, 5]);
    assert_eq!(
        m.set_remaining_tokens(Some(u64::MAX)).unwrap_err().kind,
        ErrorKind::OutOfRange
    );
    m.set_remaining_tokens(Some(1)).unwrap();
    m.rollback(1).unwrap();
    assert_eq!(m.remaining_tokens(), Some(2), "rollback gives tokens back");
    accept_all(&mut m, &[1]);
    m.reset();
    assert_eq!(
        m.remaining_tokens(),
        Some(2),
        "reset restores max_new_tokens"
    );
    assert_eq!(
        matcher(&t, &MatcherOptions::default()).remaining_tokens(),
        None
    );
}

#[test]
fn override_stop_tokens_and_parity_getters() {
    let t = trie(40, &[0, 33], &[&[1, 2], &[1]]);
    let mut options = MatcherOptions::default();
    options.override_stop_tokens = vec![34, 3];
    options.max_rollback_tokens = 7;
    let mut custom = matcher(&t, &options);
    let plain = matcher(&t, &MatcherOptions::default());
    assert_eq!(custom.stop_tokens(), [3, 34]);
    assert_eq!(plain.stop_tokens(), [0, 33]);
    assert_eq!(
        (custom.max_rollback_tokens(), plain.max_rollback_tokens()),
        (7, 0)
    );
    accept_all(&mut custom, &[1]);
    assert_eq!(fill(&mut custom), [2, 3, 34]);
    assert_eq!(
        custom.accept_token(0),
        Ok(false),
        "the trie's stop token is not this matcher's"
    );
    accept_all(&mut custom, &[34]);
    assert_eq!(
        fill(&mut custom),
        [3, 34],
        "a finished row allows only the stop tokens"
    );
    let debug = custom.debug_string();
    assert!(debug.starts_with("phase="), "{debug}");
    assert_eq!(format!("{custom:?}"), format!("Matcher({debug:?})"));
    assert!(
        plain.debug_string().contains("path=[]"),
        "{}",
        plain.debug_string()
    );

    options.override_stop_tokens = vec![9, 2];
    let inside = create_error(&t, &options);
    assert!(
        inside
            .message
            .contains("override_stop_tokens[1] = 2 occurs inside a path"),
        "{inside}"
    );
    options.override_stop_tokens = vec![40];
    assert_eq!(create_error(&t, &options).kind, ErrorKind::OutOfRange);
}

#[test]
fn exclusion_sets_hide_prefixes_whose_labels_are_all_banned() {
    // Labels 0 = [1 2], 1 = [1 3], 2 = [4], 3 = [1 3 5].
    let t = trie(8, &[0], &[&[1, 2], &[1, 3], &[4], &[1, 3, 5]]);
    let set = ExclusionSet::new(&t, &[0, 1, 42]).unwrap();
    assert_eq!(set.n_terminals(), 2, "42 is carried by no path");
    let shared = set.clone();
    assert!(shared.ptr_eq(&set));
    drop(set); // the clone keeps the C set alive
    let mut m = matcher(&t, &MatcherOptions::default());
    m.set_label_filter(Some(&shared), &[], None).unwrap();
    assert_eq!(fill(&mut m), [1, 4]); // [1 3 5] is still there
    m.set_label_filter(Some(&shared), &[3], None).unwrap();
    assert_eq!(fill(&mut m), [4]);
    m.set_label_filter(Some(&shared), &[], Some(&[1, 3]))
        .unwrap();
    assert_eq!(fill(&mut m), [1]);
    assert_eq!(m.forced_tokens(), [1, 3, 5]);
    // A matcher keeps what it needs of the set; reset and clones keep the filter.
    drop(shared);
    m.reset();
    assert_eq!(fill(&mut m.clone()), [1]);
    m.clear_label_filter().unwrap();
    assert_eq!(fill(&mut m), [1, 4]);

    expect_error(
        m.set_label_filter(None, &[0, 1, 2, 3], None),
        ErrorKind::InvalidArgument,
        "leaves no label available",
    );
    assert_eq!(
        m.set_label_filter(None, &[], Some(&[])).unwrap_err().kind,
        ErrorKind::InvalidArgument,
        "Some(&[]) is an empty subset"
    );
    let other = trie(8, &[0], &[&[1]]);
    let foreign = ExclusionSet::new(&other, &[]).unwrap();
    assert!(m
        .set_label_filter(Some(&foreign), &[], None)
        .unwrap_err()
        .message
        .contains("another trie"));
    assert_eq!(fill(&mut m), [1, 4], "failed calls changed nothing");
    accept_all(&mut m, &[1]);
    assert_eq!(
        m.set_label_filter(None, &[0], None).unwrap_err().kind,
        ErrorKind::InvalidState
    );
    assert!(format!("{foreign:?}").contains("n_terminals: 0"));
}

#[test]
fn one_exclusion_set_serves_matchers_on_many_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<ExclusionSet>();
    let mut paths = Vec::new();
    for a in 1..=40 {
        for b in 1..=40 {
            paths.push(vec![a, 100 + b]);
        }
    }
    let t = Trie::from_paths(&TrieOptions::new(200, [0]), &paths).unwrap();
    // Every label under first token 7, and half of those under 8.
    let banned: Vec<i64> = (0..40)
        .map(|b| 6 * 40 + b)
        .chain((0..40).step_by(2).map(|b| 7 * 40 + b))
        .collect();
    let set = ExclusionSet::new(&t, &banned).unwrap();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            let (t, set) = (t.clone(), set.clone());
            scope.spawn(move || {
                for _ in 0..common::scaled(20) {
                    let mut m = Matcher::new(&t).unwrap();
                    m.set_label_filter(Some(&set), &[], None).unwrap();
                    let root = m.next_tokens();
                    assert_eq!(root.len(), 39);
                    assert!(!root.contains(&7));
                    assert!(m.accept_token(8).unwrap());
                    assert_eq!(m.next_tokens().len(), 20);
                }
            });
        }
    });
}

#[test]
fn speculative_drafts_are_checked_and_filled_without_moving() {
    let t = trie(40, &[0], &[&[1, 2, 3], &[1, 4]]);
    let mut options = MatcherOptions::default();
    options.failure_policy = FailurePolicy::FailClosed;
    let mut m = matcher(&t, &options);
    assert_eq!(m.accept_tokens(&[1, 2, 5, 3]), Ok(2));
    assert_eq!(fill(&mut m), [3], "a draft miss is not a failure");
    assert_eq!(
        m.accept_tokens(&[3, 0, 0]),
        Ok(2),
        "stops after the terminating token"
    );
    m.rollback(4).unwrap();
    assert_eq!(m.accept_tokens(&[]), Ok(0));

    // Root -> 1 -> {2 -> 3, 5 (invalid) -> 3 (unreachable), 4}.
    let tokens = [1, 2, 3, 5, 3, 4];
    let parents = [-1, 0, 1, 0, 3, 0];
    let w = 2;
    let mut rows = vec![-1; (tokens.len() + 1) * w];
    assert_eq!(
        m.fill_draft_bitmasks(&tokens, Some(&parents), &mut rows, w),
        Ok(5)
    );
    let want: [&[i32]; 7] = [&[1], &[2, 4], &[3], &[0], &[], &[], &[0]];
    for (r, allowed) in want.iter().enumerate() {
        let row = &rows[r * w..(r + 1) * w];
        let got: Vec<i32> = (0..40)
            .filter(|&t| treemask::is_token_allowed(row, t))
            .collect();
        assert_eq!(got, *allowed, "row {r}");
    }
    assert_eq!(fill(&mut m), [1], "the matcher did not move");
    // A chain equals accepting and filling step by step.
    let mut chain = vec![0; 4 * w];
    assert_eq!(
        m.fill_draft_bitmasks(&[1, 2, 3], None, &mut chain, w),
        Ok(4)
    );
    let mut stepper = m.clone();
    for (i, &token) in [1, 2, 3].iter().enumerate() {
        let mut row = vec![0; w];
        stepper.fill_next_token_bitmask(&mut row).unwrap();
        assert_eq!(chain[i * w..(i + 1) * w], row[..], "row {i}");
        assert!(stepper.accept_token(token).unwrap());
    }

    let bad = m
        .fill_draft_bitmasks(&tokens, Some(&[-1, 1, 0, 0, 0, 0]), &mut rows, w)
        .unwrap_err();
    assert!(
        bad.message
            .contains("parents[1] = 1; a draft node's parent must be -1"),
        "{bad}"
    );
    let length = m
        .fill_draft_bitmasks(&tokens, Some(&[-1]), &mut rows, w)
        .unwrap_err();
    assert_eq!(length.message, "parents has 1 entries for 6 draft tokens");
    let short = m
        .fill_draft_bitmasks(&tokens, None, &mut rows[1..], w)
        .unwrap_err();
    assert_eq!(short.kind, ErrorKind::BufferTooSmall);
    assert!(
        short.message.contains("bitmask has 13 words; 7 rows"),
        "{short}"
    );
    let narrow = m
        .fill_draft_bitmasks(&tokens, None, &mut rows, 1)
        .unwrap_err();
    assert_eq!(narrow.kind, ErrorKind::BufferTooSmall, "{narrow}");
}

#[test]
fn accept_forced_tokens_reuses_the_callers_buffer() {
    let t = trie(8, &[0], &[&[1, 2, 3], &[1, 2, 4]]);
    let mut m = matcher(&t, &MatcherOptions::default());
    let mut out = Vec::with_capacity(8);
    out.push(-7);
    let buffer = out.as_ptr();
    m.accept_forced_tokens_into(&mut out).unwrap();
    assert_eq!(out, [1, 2]);
    assert_eq!(out.as_ptr(), buffer, "no reallocation when it fits");
    assert_eq!(
        m.accept_forced_tokens(),
        Ok(vec![]),
        "two children: nothing forced"
    );
    assert_eq!(m.rollback_depth(), 2);
    let mut empty = Vec::new();
    accept_all(&mut m, &[3]);
    m.accept_forced_tokens_into(&mut empty).unwrap();
    assert!(empty.is_empty());
    let mut sticky = MatcherOptions::default();
    sticky.failure_policy = FailurePolicy::StickyError;
    let mut failed = matcher(&t, &sticky);
    assert_eq!(failed.accept_token(5), Ok(false));
    assert_eq!(
        failed.accept_forced_tokens().unwrap_err().kind,
        ErrorKind::InvalidState
    );
    assert_eq!(
        failed.accept_tokens(&[1]).unwrap_err().kind,
        ErrorKind::InvalidState
    );
}

#[test]
fn mode_defaults_come_from_the_library() {
    let defaults = MatcherOptions::default();
    assert!(defaults.label_separator.is_empty() && defaults.think_end_tokens.is_empty());
    assert!(defaults.override_stop_tokens.is_empty());
    assert_eq!(defaults.max_labels, 0);
    assert!(!defaults.leaves_only && !defaults.start_in_thinking);
    assert_eq!(defaults.think_begin_token, None);
    assert_eq!(
        (defaults.max_thinking_tokens, defaults.max_new_tokens),
        (None, None)
    );
    let t = trie(8, &[0], &[&[1]]);
    let m = matcher(&t, &defaults);
    assert!(!m.is_thinking());
    assert!(m.produced_labels().is_empty());
}
