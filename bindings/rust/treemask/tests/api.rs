//! The safe wrapper's own promises: error mapping and messages, ownership
//! (drop order, clones), thread safety, buffer reuse, versions.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
mod common;

use common::{expect_error, kind, message, scaled, Rng};
use treemask::{sys, Error, ErrorKind, FailurePolicy, Matcher, MatcherOptions, Trie, TrieOptions};

const EOS: i32 = 9;

fn small_trie() -> Trie {
    // [1 2], [1 3], [4]; label i on path i.
    Trie::from_paths(&TrieOptions::new(10, [EOS]), [&[1, 2][..], &[1, 3], &[4]]).expect("trie")
}

#[test]
fn every_status_maps_to_a_kind_and_back() {
    let statuses = [
        (
            sys::TREEMASK_ERR_INVALID_ARGUMENT,
            ErrorKind::InvalidArgument,
        ),
        (sys::TREEMASK_ERR_OUT_OF_RANGE, ErrorKind::OutOfRange),
        (
            sys::TREEMASK_ERR_BUFFER_TOO_SMALL,
            ErrorKind::BufferTooSmall,
        ),
        (sys::TREEMASK_ERR_INVALID_STATE, ErrorKind::InvalidState),
        (sys::TREEMASK_ERR_OUT_OF_MEMORY, ErrorKind::OutOfMemory),
        (sys::TREEMASK_ERR_PARSE, ErrorKind::Parse),
        (sys::TREEMASK_ERR_IO, ErrorKind::Io),
        (sys::TREEMASK_ERR_CORRUPT_FILE, ErrorKind::CorruptFile),
        (
            sys::TREEMASK_ERR_VERSION_MISMATCH,
            ErrorKind::VersionMismatch,
        ),
        (sys::TREEMASK_ERR_UNSUPPORTED, ErrorKind::Unsupported),
        (sys::TREEMASK_ERR_INTERNAL, ErrorKind::Internal),
        (4242, ErrorKind::Unknown(4242)),
    ];
    for (status, want) in statuses {
        assert_eq!(ErrorKind::from_status(status), want);
        assert_eq!(want.status(), status);
        let c_text = {
            // Safety: treemask_status_string returns a static C string.
            unsafe { std::ffi::CStr::from_ptr(sys::treemask_status_string(status)) }
        };
        assert_eq!(want.to_string(), c_text.to_str().unwrap());
    }
    assert_eq!(ErrorKind::OutOfRange.to_string(), "out of range");
    assert_eq!(ErrorKind::Unknown(4242).to_string(), "unknown status");
}

#[test]
fn build_errors_carry_the_library_message() {
    let options = TrieOptions::new(10, [EOS]);
    let err = Trie::from_paths(&options, [&[1, 2][..], &[3, 12]]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::OutOfRange);
    assert!(
        err.message.starts_with("treemask_trie_from_paths: "),
        "{}",
        err.message
    );
    assert!(
        err.message.contains("path 1, position 1: token 12"),
        "{}",
        err.message
    );
    assert_eq!(err.to_string(), format!("out of range: {}", err.message));

    let inside = message(Trie::from_paths(&options, [&[1, EOS, 2][..]]));
    assert!(
        inside.contains(&format!(
            "path 0, position 1: stop token {EOS} may not appear in a path"
        )),
        "{inside}"
    );

    let no_paths: [&[i32]; 0] = [];
    assert_eq!(
        kind(Trie::from_paths(&options, no_paths)),
        ErrorKind::InvalidArgument
    );
    let no_stops = TrieOptions::new(10, Vec::new());
    assert_eq!(
        kind(Trie::from_paths(&no_stops, [[1]])),
        ErrorKind::InvalidArgument
    );
    let bad_vocab = message(Trie::from_paths(&TrieOptions::new(0, [0]), [[1]]));
    assert!(bad_vocab.contains("vocab_size"), "{bad_vocab}");
    let bad_stop = TrieOptions::new(10, [10]);
    assert_eq!(
        kind(Trie::from_paths(&bad_stop, [[1]])),
        ErrorKind::OutOfRange
    );
}

#[test]
fn csr_shapes_are_checked_before_the_library_reads_them() {
    let options = TrieOptions::new(10, [EOS]);
    let tokens = [1, 2, 3];
    let empty = message(Trie::from_csr(&options, &tokens, &[], None));
    assert!(empty.contains("offsets is empty"), "{empty}");
    // An offset past the end would make the library read past `tokens`.
    expect_error(
        Trie::from_csr(&options, &tokens, &[0, 2, 5], None),
        ErrorKind::InvalidArgument,
        "offsets[2] = 5 but tokens has 3 entries",
    );
    let short = message(Trie::from_csr(&options, &tokens, &[0, 2], None));
    assert!(
        short.contains("offsets[1] = 2 but tokens has 3 entries"),
        "{short}"
    );
    let labels = message(Trie::from_csr(&options, &tokens, &[0, 2, 3], Some(&[7])));
    assert!(
        labels.contains("label_ids has 1 entries for 2 paths"),
        "{labels}"
    );
    // The library checks the order of the offsets.
    let order = message(Trie::from_csr(&options, &tokens, &[0, 3, 1, 3], None));
    assert!(order.contains("non-decreasing"), "{order}");
    let start = message(Trie::from_csr(&options, &tokens, &[1, 3], None));
    assert!(start.contains("offsets[0] must be 0"), "{start}");

    let trie = Trie::from_csr(&options, &tokens, &[0, 2, 3], Some(&[70, 71])).expect("trie");
    let mut m = Matcher::new(&trie).unwrap();
    assert!(m.accept_token(3).unwrap());
    assert_eq!(m.label_ids(), vec![71]);
}

#[test]
fn matcher_errors_map_to_kinds() {
    let trie = small_trie();
    let mut m = Matcher::new(&trie).unwrap();
    let mut empty_row: [i32; 0] = [];
    expect_error(
        m.fill_next_token_bitmask(&mut empty_row),
        ErrorKind::BufferTooSmall,
        "bitmask_row_words is 0",
    );

    assert!(m.accept_token(1).unwrap());
    expect_error(
        m.rollback(2),
        ErrorKind::OutOfRange,
        "cannot roll back 2 tokens",
    );
    assert_eq!(m.rollback_depth(), 1, "a failed rollback changes nothing");

    let mut options = MatcherOptions::default();
    options.pad_token = Some(10);
    assert_eq!(
        kind(Matcher::with_options(&trie, &options)),
        ErrorKind::OutOfRange
    );
    options.pad_token = Some(-1);
    let negative = message(Matcher::with_options(&trie, &options));
    assert!(negative.contains("use None"), "{negative}");
}

#[test]
fn rejections_are_not_errors() {
    let trie = small_trie();
    let mut m = Matcher::new(&trie).unwrap();
    assert!(Matcher::new(&trie).unwrap().rollback(5).is_err());
    let failure = treemask::last_error_message();
    assert!(failure.contains("rollback"), "{failure}");
    assert_eq!(m.accept_token(7), Ok(false));
    assert_eq!(m.accept_token(-5), Ok(false));
    assert_eq!(
        treemask::last_error_message(),
        failure,
        "rejections leave it"
    );
    assert_eq!(
        m.next_tokens(),
        vec![1, 4],
        "Reject leaves the state unchanged"
    );
}

/// A StickyError matcher that has just rejected a token.
fn failed_matcher(trie: &Trie) -> Matcher {
    let mut options = MatcherOptions::default();
    options.failure_policy = FailurePolicy::StickyError;
    let mut m = Matcher::with_options(trie, &options).unwrap();
    assert_eq!(m.accept_token(5), Ok(false));
    m
}

#[test]
fn sticky_error_state_fails_every_call_until_reset() {
    let trie = small_trie();
    let mut m = failed_matcher(&trie);
    let mut row = vec![-1; trie.bitmask_words()];
    assert_eq!(
        kind(m.fill_next_token_bitmask(&mut row)),
        ErrorKind::InvalidState
    );
    assert_eq!(
        row,
        vec![1 << EOS],
        "the row is still written: stop tokens only"
    );
    assert_eq!(kind(m.accept_token(1)), ErrorKind::InvalidState);
    assert_eq!(kind(m.rollback(0)), ErrorKind::InvalidState);
    assert_eq!(kind(m.try_clone()), ErrorKind::InvalidState);
    assert!(m.next_tokens().is_empty());
    m.reset();
    assert_eq!(m.accept_token(1), Ok(true));
}

#[test]
#[should_panic(expected = "Matcher::clone failed: invalid state")]
fn cloning_a_failed_matcher_panics() {
    let _ = failed_matcher(&small_trie()).clone();
}

#[test]
fn clones_are_independent() {
    let trie = small_trie();
    let mut a = Matcher::new(&trie).unwrap();
    assert!(a.accept_token(1).unwrap());
    let mut b = a.clone();
    assert!(b.accept_token(3).unwrap());
    assert!(b.accept_token(EOS).unwrap());
    assert!(b.is_terminated());
    assert!(!a.is_terminated());
    assert_eq!(a.next_tokens(), vec![2, 3]);
    assert_eq!(b.rollback_depth(), 3);
    assert_eq!(a.rollback_depth(), 1);
    b.rollback(2).unwrap();
    assert_eq!(b.next_tokens(), a.next_tokens());

    let t2 = trie.clone();
    assert!(t2.ptr_eq(&trie), "Trie::clone shares the C trie");
    assert!(a.trie().ptr_eq(&trie));
    assert!(!small_trie().ptr_eq(&trie));
}

#[test]
fn a_matcher_outlives_its_trie_value() {
    let mut m = {
        let trie = small_trie();
        let m = Matcher::new(&trie).unwrap();
        drop(trie);
        m
    };
    let mut row = vec![0; 1];
    assert!(m.fill_next_token_bitmask(&mut row).unwrap());
    assert_eq!(row[0], (1 << 1) | (1 << 4));
    assert!(m.accept_token(4).unwrap() && m.accept_token(EOS).unwrap());
    assert_eq!(m.label_ids(), vec![2]);

    // The trie a matcher hands out outlives the matcher too.
    let trie = m.trie();
    drop(m);
    assert_eq!(trie.stop_tokens(), vec![EOS]);
    assert_eq!(trie.stats().unwrap().n_terminals, 3);
    let mut again = Matcher::new(&trie).unwrap();
    assert!(again.accept_token(1).unwrap());
}

#[test]
fn tries_and_matchers_cross_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Trie>();
    assert_send_sync::<Matcher>();
    assert_send_sync::<Error>();

    // One large-fanout trie (the dense-row cache is built lazily, racing).
    let vocab = 151_936;
    let mut rng = Rng::new(11);
    let paths: Vec<Vec<i32>> = (0..3000)
        .map(|_| {
            (0..2)
                .map(|_| 1 + rng.below(vocab as usize - 1) as i32)
                .collect()
        })
        .collect();
    let trie = Trie::from_paths(&TrieOptions::new(vocab, [0]), &paths).unwrap();
    let mut root = Matcher::new(&trie).unwrap();
    let mut want = vec![0; trie.bitmask_words()];
    root.fill_next_token_bitmask(&mut want).unwrap();

    let rounds = scaled(20);
    let handles: Vec<_> = (0..4)
        .map(|thread| {
            let trie = trie.clone(); // moved into the thread
            let paths = paths.clone();
            let want = want.clone();
            std::thread::spawn(move || {
                let mut row = vec![0; trie.bitmask_words()];
                for round in 0..rounds {
                    let mut m = Matcher::new(&trie).unwrap();
                    m.fill_next_token_bitmask(&mut row).unwrap();
                    assert_eq!(row, want);
                    let path = &paths[(thread * 7919 + round * 31) % paths.len()];
                    for &t in path {
                        assert!(m.accept_token(t).unwrap());
                    }
                    assert!(m.accept_token(0).unwrap() && m.is_terminated());
                }
                // The trie value is dropped here, on another thread.
            })
        })
        .collect();
    for h in handles {
        h.join().expect("worker thread");
    }
    drop(trie);

    // A matcher moves to another thread and back; &Matcher is shared.
    let first = paths[0][0];
    let m = std::thread::spawn(move || {
        let mut m = root;
        assert!(m.accept_token(first).unwrap());
        m
    })
    .join()
    .unwrap();
    let listed = std::thread::scope(|s| {
        let a = s.spawn(|| m.next_tokens());
        let b = s.spawn(|| m.next_tokens());
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!(listed.0, listed.1);
    assert!(listed.0.contains(&paths[0][1]));
}

#[test]
fn list_variants_reuse_the_callers_buffer() {
    let trie = small_trie();
    let mut m = Matcher::new(&trie).unwrap();
    let mut out = Vec::with_capacity(16);
    out.extend_from_slice(&[-7; 5]);
    let buffer = out.as_ptr();
    m.next_tokens_into(&mut out);
    assert_eq!(out, vec![1, 4], "old contents replaced");
    assert_eq!(out.as_ptr(), buffer, "no reallocation when it fits");
    let mut small = Vec::new();
    m.next_tokens_into(&mut small);
    assert_eq!(small, vec![1, 4], "grown when too small");
    m.accept_token(1).unwrap();
    m.forced_tokens_into(&mut out);
    assert!(out.is_empty(), "two children: nothing forced");
    m.accept_token(2).unwrap();
    m.next_tokens_into(&mut out);
    assert_eq!(out, vec![EOS]);
}

#[test]
fn bitmask_helpers_follow_the_xgrammar_layout() {
    for (vocab, words) in [(0, 0), (-3, 0), (1, 1), (32, 1), (33, 2), (151_936, 4748)] {
        assert_eq!(treemask::bitmask_words(vocab), words, "vocab {vocab}");
    }
    assert_eq!(treemask::allocate_token_bitmask(3, 33), vec![0; 6]);
    let row = [i32::MIN, 1];
    assert!(treemask::is_token_allowed(&row, 31));
    assert!(treemask::is_token_allowed(&row, 32));
    assert!(!treemask::is_token_allowed(&row, 30));
    assert!(!treemask::is_token_allowed(&row, -1));
}

#[test]
fn library_version_matches_the_bindings() {
    assert_eq!(treemask::version(), sys::TREEMASK_VERSION_NUMBER as u32);
    let want = format!(
        "{}.{}.{}",
        sys::TREEMASK_VERSION_MAJOR,
        sys::TREEMASK_VERSION_MINOR,
        sys::TREEMASK_VERSION_PATCH
    );
    assert_eq!(treemask::version_string(), want);
}

#[test]
fn options_defaults_come_from_the_library() {
    let options = TrieOptions::new(5, [1, 1]);
    assert_eq!(options.dense_row_cache_bytes, 64 << 20);
    let trie = Trie::from_paths(&options, [[2]]).unwrap();
    assert_eq!(trie.stop_tokens(), vec![1], "duplicates merge");
    let defaults = MatcherOptions::default();
    assert_eq!(defaults.failure_policy, FailurePolicy::Reject);
    assert!(!defaults.terminate_without_stop_token);
    assert_eq!(defaults.max_rollback_tokens, 0);
    assert_eq!(defaults.pad_token, None);
    assert!(format!("{trie:?}").contains("stop_tokens: [1]"));
}

#[test]
fn a_catalogue_without_labels_keeps_its_paths_and_drops_the_label_array() {
    let items: Vec<Vec<i32>> = (0..300)
        .map(|i| vec![10 + i % 7, 20 + i % 11, 40 + i])
        .collect();
    let mut options = TrieOptions::new(400, [0]);
    let labelled = Trie::from_paths(&options, &items).unwrap();
    options.no_labels = true;
    let plain = Trie::from_paths(&options, &items).unwrap();
    let (a, b) = (labelled.stats().unwrap(), plain.stats().unwrap());
    assert_eq!(b.n_labels, 0);
    assert_eq!(a.bytes - b.bytes, 4 * items.len() as u64); // path indices fit 32 bits
    for item in items.iter().step_by(37) {
        let mut m = Matcher::new(&plain).unwrap();
        for &t in item {
            assert!(m.accept_token(t).unwrap());
        }
        assert!(m.can_terminate());
        assert!(m.label_ids().is_empty());
    }
    let err = Trie::from_labeled_paths(&options, items.iter().map(|p| (p, 1i64))).unwrap_err();
    assert!(err.to_string().contains("no_labels"), "{err}");
}
