//! The log callback and per-matcher counters through the safe API. The log
//! sink is process-wide, so the tests that install one take LOG_TESTS.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
use std::sync::{Arc, Mutex, MutexGuard};

use treemask::{
    Batch, FailurePolicy, LogLevel, Matcher, MatcherCounters, MatcherOptions, Trie, TrieOptions,
};

static LOG_TESTS: Mutex<()> = Mutex::new(());

type Lines = Arc<Mutex<Vec<(LogLevel, String)>>>;

/// Installs a sink collecting every line; holds LOG_TESTS while alive and
/// clears the sink when dropped.
struct Capture {
    lines: Lines,
    _serial: MutexGuard<'static, ()>,
}

impl Capture {
    fn new() -> Capture {
        let serial = LOG_TESTS.lock().unwrap_or_else(|p| p.into_inner());
        let lines: Lines = Arc::default();
        let sink = Arc::clone(&lines);
        treemask::set_log_callback(move |level, message| {
            sink.lock().unwrap().push((level, message.to_owned()))
        });
        Capture {
            lines,
            _serial: serial,
        }
    }

    fn take(&self) -> Vec<(LogLevel, String)> {
        core::mem::take(&mut *self.lines.lock().unwrap())
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        treemask::clear_log_callback();
    }
}

fn shape(trie: &Trie) -> String {
    let s = trie.stats().unwrap();
    format!(
        "{} paths, {} nodes, {} bytes",
        s.n_terminals, s.n_nodes, s.bytes
    )
}

#[test]
fn builds_saves_and_loads_are_logged_with_the_trie_shape() {
    let capture = Capture::new();
    let trie = Trie::from_paths(&TrieOptions::new(10, [0]), [&[1, 2][..], &[1, 3], &[4]]).unwrap();
    let dir = std::env::temp_dir().join(format!("treemask-rust-log-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.tmtrie");
    trie.save(&path).unwrap();
    let loaded = Trie::load(&path, false).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let lines = capture.take();
    let shape = shape(&loaded);
    let expected = vec![
        (
            LogLevel::Info,
            format!("built trie from 3 token paths: {shape}"),
        ),
        (LogLevel::Info, format!("saved {}: {shape}", path.display())),
        (
            LogLevel::Info,
            format!("loaded {}: {shape}", path.display()),
        ),
    ];
    assert_eq!(lines, expected);
}

#[test]
fn loader_warnings_arrive_as_warnings() {
    let capture = Capture::new();
    let json = br#"{"start_token_id": 225, "end_token_id": 2, "weight_dict": {},
                    "prefix_dict": {"225": [7], "225_7": [2], "225_8": [9]}}"#;
    let trie = Trie::from_rtp_json(
        &TrieOptions::new(1000, Vec::new()),
        &treemask::RtpOptions::new(),
        json,
    )
    .unwrap();
    let lines = capture.take();
    let warnings: Vec<&String> = lines
        .iter()
        .filter(|(level, _)| *level == LogLevel::Warning)
        .map(|(_, m)| m)
        .collect();
    assert_eq!(warnings.len() as u64, trie.stats().unwrap().n_warnings);
    assert_eq!(warnings.len(), 2, "{lines:?}");
    assert!(warnings[0].contains("weight_dict"), "{}", warnings[0]);
    assert!(
        warnings[1].contains("key \"225_8\" is unreachable"),
        "{}",
        warnings[1]
    );
    assert_eq!(lines.last().unwrap().0, LogLevel::Info);
}

#[test]
fn nothing_arrives_after_the_callback_is_cleared() {
    let capture = Capture::new();
    let options = TrieOptions::new(4, [0]);
    Trie::from_paths(&options, [[1]]).unwrap();
    treemask::clear_log_callback();
    Trie::from_paths(&options, [[2]]).unwrap();
    let lines = capture.take();
    assert_eq!(lines.len(), 1, "{lines:?}");
}

#[test]
fn a_panicking_callback_does_not_unwind_into_the_library() {
    let _serial = LOG_TESTS.lock().unwrap_or_else(|p| p.into_inner());
    treemask::set_log_callback(|_, _| panic!("callback bug"));
    let built = Trie::from_paths(&TrieOptions::new(8, [0]), [[1, 2]]);
    treemask::clear_log_callback();
    assert_eq!(built.unwrap().stats().unwrap().n_terminals, 1);
}

#[test]
fn a_callback_may_replace_itself_while_it_runs() {
    let capture = Capture::new();
    let lines = Arc::clone(&capture.lines);
    // The first event swaps in the collecting sink from inside the callback:
    // the running closure must survive its own replacement.
    let once = Mutex::new(Some(lines));
    treemask::set_log_callback(move |level, message| {
        if let Some(lines) = once.lock().unwrap().take() {
            let sink = Arc::clone(&lines);
            treemask::set_log_callback(move |l, m| sink.lock().unwrap().push((l, m.to_owned())));
            lines
                .lock()
                .unwrap()
                .push((level, format!("first: {message}")));
        }
    });
    let options = TrieOptions::new(8, [0]);
    Trie::from_paths(&options, [[1]]).unwrap();
    Trie::from_paths(&options, [[2]]).unwrap();
    let lines = capture.take();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].1.starts_with("first: built trie"));
    assert!(lines[1].1.starts_with("built trie"));
}

#[test]
fn events_from_other_threads_reach_the_callback() {
    let capture = Capture::new();
    let threads: Vec<_> = (1..=8)
        .map(|t| std::thread::spawn(move || Trie::from_paths(&TrieOptions::new(64, [0]), [[t]])))
        .collect();
    for t in threads {
        t.join().unwrap().unwrap();
    }
    let lines = capture.take();
    assert_eq!(lines.len(), 8);
    assert!(lines
        .iter()
        .all(|(l, m)| *l == LogLevel::Info && m.starts_with("built trie")));
}

#[test]
fn matcher_counters_follow_every_event() {
    // Builds tries, whose log events would reach another test's capture.
    let _serial = LOG_TESTS.lock().unwrap_or_else(|p| p.into_inner());
    let trie = Trie::from_paths(&TrieOptions::new(8, [0]), [[1, 2], [1, 3]]).unwrap();
    let mut options = MatcherOptions::default();
    options.failure_policy = FailurePolicy::FailClosed;
    let mut m = Matcher::with_options(&trie, &options).unwrap();
    assert_eq!(m.counters().unwrap(), MatcherCounters::default());
    let mut row = treemask::allocate_token_bitmask(1, 8);
    m.fill_next_token_bitmask(&mut row).unwrap();
    assert!(m.accept_token(1).unwrap());
    m.rollback(1).unwrap();
    assert!(m.accept_token(1).unwrap());
    assert!(!m.accept_token(5).unwrap()); // rejected, and the matcher closes
    m.reset();
    let c = m.counters().unwrap();
    assert_eq!(
        (
            c.n_fills,
            c.n_accepted_tokens,
            c.n_rejected_tokens,
            c.n_fail_closed
        ),
        (1, 2, 1, 1)
    );
    assert_eq!((c.n_rolled_back_tokens, c.n_resets), (1, 1));
    let clone = m.clone();
    assert_eq!(clone.counters().unwrap().n_accepted_tokens, 0);
}

#[test]
fn batch_fills_count_for_the_slot_matchers() {
    // Builds tries, whose log events would reach another test's capture.
    let _serial = LOG_TESTS.lock().unwrap_or_else(|p| p.into_inner());
    let trie = Trie::from_paths(&TrieOptions::new(8, [0]), [&[1, 2][..], &[3]]).unwrap();
    let mut batch = Batch::new(2).unwrap();
    let m = Matcher::new(&trie).unwrap();
    batch.set_matcher(0, Some(&m)).unwrap();
    batch.set_matcher(1, Some(&m)).unwrap();
    let words = treemask::bitmask_words(8);
    let mut bitmask = vec![0; 2 * words];
    for _ in 0..3 {
        batch
            .fill_next_token_bitmask(&mut bitmask, words, None, None)
            .unwrap();
    }
    for slot in 0..2 {
        assert_eq!(batch.matcher(slot).unwrap().counters().unwrap().n_fills, 3);
    }
    assert_eq!(m.counters().unwrap().n_fills, 0); // the batch holds clones
}
