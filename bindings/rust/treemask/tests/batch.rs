//! The batch and the state arrays through the safe API against per-matcher
//! results (the Rust twin of tests/batch/test_batch.cc): on random tries and
//! random walks every row a batch fills (bound or not, full or incremental,
//! with and without slot lists, on 0, 1 and 2 worker threads, after
//! reorders, scribbles and borrowed-matcher calls) must equal, bit for bit,
//! the row the same matcher fills on its own; every state-array row and
//! transition must equal the matcher's. Plus the ownership rules of the
//! bound buffer and borrowed slot matchers, and every bad argument.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
mod common;

use common::{
    expect_error, garbage, kind, message, own_row, random_feed, random_trie, scaled, Outcome,
    RandomTrie, Rng,
};
use treemask::{
    Batch, BatchOptions, ErrorKind, FailurePolicy, FillMode, Matcher, MatcherOptions, MatcherRef,
    Trie, TrieOptions, STATE_FAILED, STATE_ROOT, STATE_TERMINATED,
};

const VOCABS: [i32; 8] = [1, 2, 31, 32, 33, 100, 1000, 151_936];
const POLICIES: [FailurePolicy; 3] = [
    FailurePolicy::Reject,
    FailurePolicy::FailClosed,
    FailurePolicy::StickyError,
];

fn matcher_with(trie: &Trie, policy: FailurePolicy, terminate_at_leaf: bool) -> Matcher {
    let mut options = MatcherOptions::default();
    options.failure_policy = policy;
    options.terminate_without_stop_token = terminate_at_leaf;
    Matcher::with_options(trie, &options).expect("matcher")
}

/// Only a matcher in the StickyError failed state refuses to be cloned.
fn is_failed(m: &MatcherRef) -> bool {
    m.try_clone().is_err()
}

#[derive(Clone, Copy, Debug)]
enum Target {
    Bound(FillMode),
    Unbound,
}

/// One random walk of a batch beside its reference matchers.
struct BatchWalk {
    trie: Trie,
    vocab: i32,
    stops: Vec<i32>,
    batch: Batch,
    refs: Vec<Option<Matcher>>,
    words: usize,
    unbound: Vec<i32>,
    rng: Rng,
}

impl BatchWalk {
    fn new(rt: &RandomTrie, n_slots: usize, n_threads: usize, mut rng: Rng) -> BatchWalk {
        let trie = rt.build();
        let options = BatchOptions::new(n_slots).with_threads(n_threads);
        let mut batch = Batch::with_options(&options).expect("batch");
        let words = trie.bitmask_words() + rng.below(3);
        batch.bind_bitmask(words).expect("bind");
        let unbound = garbage(&mut rng, n_slots * words);
        let mut walk = BatchWalk {
            vocab: trie.vocab_size(),
            stops: rt.model.stops.clone(),
            trie,
            batch,
            refs: (0..n_slots).map(|_| None).collect(),
            words,
            unbound,
            rng,
        };
        for s in 0..n_slots {
            if !walk.rng.coin(8) {
                walk.put_new_matcher(s);
            }
        }
        walk
    }

    fn n(&self) -> usize {
        self.refs.len()
    }

    fn put_new_matcher(&mut self, s: usize) {
        let policy = POLICIES[self.rng.below(3)];
        let m = matcher_with(&self.trie, policy, self.rng.coin(4));
        self.batch.set_matcher(s, Some(&m)).expect("set_matcher");
        self.refs[s] = Some(m); // the batch holds a copy: the two are independent
    }

    fn step(&mut self) {
        match self.rng.below(20) {
            0..=5 => self.fill(Target::Bound(FillMode::Incremental)),
            6..=7 => self.fill(Target::Bound(FillMode::Full)),
            8 => self.fill(Target::Unbound),
            9..=13 => self.accept(),
            14..=15 => self.reorder(),
            16 => self.scribble(),
            17 => self.roll_back_or_reset(),
            _ => {
                let s = self.rng.below(self.n());
                if self.rng.coin(4) {
                    self.batch.set_matcher(s, None).expect("empty a slot");
                    self.refs[s] = None;
                } else {
                    self.put_new_matcher(s);
                }
            }
        }
    }

    fn random_slot_list(&mut self) -> Vec<i32> {
        let mut slots: Vec<i32> = (0..self.n())
            .filter(|&s| self.refs[s].is_some())
            .map(|s| s as i32)
            .collect();
        slots.retain(|_| self.rng.coin(2));
        for i in (1..slots.len()).rev() {
            slots.swap(i, self.rng.below(i + 1));
        }
        slots
    }

    fn buffer(&self, target: Target) -> Vec<i32> {
        match target {
            Target::Unbound => self.unbound.clone(),
            Target::Bound(_) => self.batch.bound_bitmask().expect("bound").to_vec(),
        }
    }

    fn fill(&mut self, target: Target) {
        let n = self.n();
        let all = self.rng.coin(2);
        let list = if all {
            Vec::new()
        } else {
            self.random_slot_list()
        };
        let mut listed: Vec<bool> = self.refs.iter().map(|m| all && m.is_some()).collect();
        for &s in &list {
            listed[s as usize] = true;
        }
        let slots = (!all).then_some(&list[..]);
        let before = self.buffer(target);
        let mut need_apply = vec![true; n];
        let got = match target {
            Target::Unbound => self.batch.fill_next_token_bitmask(
                &mut self.unbound,
                self.words,
                slots,
                Some(&mut need_apply),
            ),
            Target::Bound(mode) => self.batch.fill_bound(slots, mode, Some(&mut need_apply)),
        };
        let after = self.buffer(target);
        let mut want: Outcome<()> = Ok(());
        let words = self.words;
        for s in 0..n {
            let row = &after[s * words..(s + 1) * words];
            if !listed[s] {
                assert_eq!(
                    row,
                    &before[s * words..(s + 1) * words],
                    "unlisted slot {s}"
                );
                continue;
            }
            let m = self.refs[s]
                .as_mut()
                .expect("a listed slot holds a matcher");
            let (expected, own) = own_row(m, words, &mut self.rng);
            assert_eq!(row, &expected[..], "slot {s}, {target:?}");
            match own {
                Ok(need) => assert_eq!(need_apply[s], need, "need_apply of slot {s}"),
                Err(k) => want = want.and(Err(k)),
            }
        }
        assert_eq!(got.map_err(|e| e.kind), want, "{target:?}");
    }

    fn accept(&mut self) {
        let n = self.n();
        let mut tokens = vec![-1; n];
        for (token, m) in tokens.iter_mut().zip(&self.refs) {
            if let Some(m) = m {
                *token = random_feed(&mut self.rng, m, self.vocab, &self.stops);
            }
        }
        let mut accepted = vec![false; n];
        let got = self.batch.accept_tokens(&tokens, Some(&mut accepted));
        let mut want: Outcome<()> = Ok(());
        for s in 0..n {
            let m = match self.refs[s].as_mut() {
                Some(m) => m,
                None => continue,
            };
            if tokens[s] < 0 {
                assert!(accepted[s], "slot {s} given no token");
                continue;
            }
            match m.accept_token(tokens[s]) {
                Ok(ok) => assert_eq!(accepted[s], ok, "slot {s} token {}", tokens[s]),
                Err(e) => want = want.and(Err(e.kind)),
            }
        }
        assert_eq!(got.map_err(|e| e.kind), want);
    }

    fn reorder(&mut self) {
        let n = self.n();
        let src: Vec<i32> = (0..n)
            .map(|_| self.rng.range(-1, n as i64 - 1) as i32)
            .collect();
        let mut takes = vec![0; n];
        for &v in src.iter().filter(|&&v| v >= 0) {
            takes[v as usize] += 1;
        }
        // A failed matcher cannot be cloned: taking one twice must fail and
        // change nothing.
        let refused =
            (0..n).any(|s| takes[s] > 1 && self.refs[s].as_deref().map_or(false, is_failed));
        let got = self.batch.reorder(&src);
        if refused {
            assert_eq!(kind(got), ErrorKind::InvalidState);
            return;
        }
        got.expect("reorder");
        let mut next: Vec<Option<Matcher>> = (0..n).map(|_| None).collect();
        for (i, &from) in src.iter().enumerate() {
            if from >= 0 && takes[from as usize] > 1 {
                next[i] = self.refs[from as usize].clone();
            }
        }
        for (i, &from) in src.iter().enumerate() {
            if from >= 0 && takes[from as usize] == 1 {
                next[i] = self.refs[from as usize].take();
            }
        }
        self.refs = next;
    }

    /// Writes noise over the bound buffer the only way safe code can; the
    /// batch must not leave any of it behind in later incremental fills.
    fn scribble(&mut self) {
        if self.rng.coin(2) {
            let buffer = self.batch.bound_bitmask_mut().expect("bound");
            for word in buffer.iter_mut() {
                *word = (self.rng.next_u64() >> 7) as i32;
            }
        } else {
            let rows: Vec<i32> = (0..self.n() as i32).filter(|_| self.rng.coin(2)).collect();
            self.batch.invalidate(Some(&rows)).expect("invalidate");
        }
    }

    /// Matchers borrowed from the batch may be driven directly between calls.
    fn roll_back_or_reset(&mut self) {
        let s = self.rng.below(self.n());
        let reset = self.rng.coin(3);
        let n_tokens = self.rng.below(3);
        let m = match self.batch.matcher_mut(s) {
            Some(m) => m,
            None => return,
        };
        let reference = self.refs[s].as_mut().expect("same slots");
        if reset {
            m.reset();
            reference.reset();
        } else {
            assert_eq!(
                m.rollback(n_tokens).map_err(|e| e.kind),
                reference.rollback(n_tokens).map_err(|e| e.kind)
            );
        }
    }

    fn check_matchers(&self) {
        for s in 0..self.n() {
            let (got, want) = match (self.batch.matcher(s), &self.refs[s]) {
                (None, None) => continue,
                (Some(got), Some(want)) => (got, want),
                (got, want) => panic!("slot {s}: batch {got:?}, reference {want:?}"),
            };
            assert_eq!(got.next_tokens(), want.next_tokens(), "slot {s}");
            assert_eq!(got.is_terminated(), want.is_terminated(), "slot {s}");
            assert_eq!(got.rollback_depth(), want.rollback_depth(), "slot {s}");
            assert_eq!(got.state(), want.state(), "slot {s}");
        }
    }
}

fn run_walks(seed: u64, n_walks: usize, slots: impl Fn(&mut Rng, i32) -> usize, steps: usize) {
    let mut rng = Rng::new(seed);
    for i in 0..n_walks {
        let vocab = VOCABS[i % VOCABS.len()];
        let walk_seed = rng.next_u64();
        let mut local = Rng::new(walk_seed);
        let rt = random_trie(&mut local, vocab);
        let n_slots = slots(&mut local, vocab);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut walk = BatchWalk::new(&rt, n_slots, i % 3, local);
            let steps = if vocab > 10_000 { steps / 3 } else { steps };
            for _ in 0..steps {
                walk.step();
                walk.check_matchers();
            }
        }));
        if let Err(panic) = result {
            eprintln!(
                "walk {i}: vocab {vocab} seed {walk_seed} threads {} paths {:?}",
                i % 3,
                rt.paths
            );
            std::panic::resume_unwind(panic);
        }
    }
}

#[test]
fn batch_walks_equal_per_matcher_results() {
    run_walks(2026, scaled(600), |rng, _| 1 + rng.below(12), 60);
}

// Enough slots that fills and accepts are split into chunks across the
// worker threads.
#[test]
fn many_slots_split_across_threads() {
    run_walks(
        404,
        scaled(8),
        |_, vocab| if vocab > 10_000 { 40 } else { 400 },
        24,
    );
}

#[test]
fn the_bound_buffer_belongs_to_the_batch() {
    let trie = Trie::from_paths(&TrieOptions::new(64, [0]), [&[1, 2][..], &[1, 3], &[40]]).unwrap();
    let mut batch = Batch::new(2).unwrap();
    assert_eq!(batch.bound_bitmask(), None);
    assert_eq!(batch.bound_row(0), None);
    assert_eq!(
        kind(batch.fill_bound(None, FillMode::Full, None)),
        ErrorKind::InvalidState
    );
    assert!(message(batch.bound_bitmask_mut()).contains("no bitmask is bound"));
    assert_eq!(batch.unbind_bitmask(), None);

    let m = Matcher::new(&trie).unwrap();
    batch.set_matcher(0, Some(&m)).unwrap();
    batch.set_matcher(1, Some(&m)).unwrap();
    batch.bind_bitmask(3).unwrap(); // wider than the 2 words vocab 64 needs
    assert_eq!(batch.bound_bitmask_row_words(), Some(3));
    assert_eq!(
        batch.bound_bitmask(),
        Some(&[0; 6][..]),
        "a new binding is zeroed"
    );
    batch.accept_tokens(&[1, -1], None).unwrap();
    batch.fill_bound(None, FillMode::Incremental, None).unwrap();
    let after_1 = [(1 << 2) | (1 << 3), 0, 0];
    let root = [1 << 1, 1 << 8, 0];
    assert_eq!(batch.bound_row(0), Some(&after_1[..]));
    assert_eq!(batch.bound_row(1), Some(&root[..]));
    assert_eq!(batch.bound_row(2), None);

    // Writing through the safe API makes the batch forget the rows, so an
    // incremental fill repairs every word it owns.
    for word in batch.bound_bitmask_mut().unwrap() {
        *word = -1;
    }
    batch.fill_bound(None, FillMode::Incremental, None).unwrap();
    assert_eq!(batch.bound_row(0), Some(&after_1[..]));
    assert_eq!(batch.bound_row(1), Some(&root[..]));

    // A fill into another buffer with the bound layout leaves the bound one alone.
    let mut other = vec![7; 6];
    batch
        .fill_next_token_bitmask(&mut other, 3, Some(&[1]), None)
        .unwrap();
    assert_eq!(other, [7, 7, 7, root[0], root[1], root[2]]);

    // Binding again replaces (and frees) the old buffer; unbinding hands the
    // buffer back, with what the batch wrote.
    batch.bind_bitmask(2).unwrap();
    batch
        .fill_bound(Some(&[0]), FillMode::Incremental, None)
        .unwrap();
    let buffer = batch.unbind_bitmask().expect("bound");
    assert_eq!(buffer, vec![after_1[0], 0, 0, 0]);
    assert_eq!(batch.bound_bitmask(), None);
    assert_eq!(
        kind(batch.fill_bound(None, FillMode::Full, None)),
        ErrorKind::InvalidState
    );

    // A batch dropped while its buffer is bound frees the buffer after itself.
    batch.bind_bitmask(2).unwrap();
    drop(batch);
}

#[test]
fn slot_matchers_are_borrowed_from_the_batch() {
    let trie = Trie::from_paths(&TrieOptions::new(8, [0]), [&[1, 2, 3][..], &[1, 4]]).unwrap();
    let mut batch = Batch::with_options(&BatchOptions::new(3).with_threads(1)).unwrap();
    let mut m = Matcher::new(&trie).unwrap();
    for s in 0..3 {
        batch.set_matcher(s, Some(&m)).unwrap();
    }
    batch.accept_tokens(&[1, -1, 1], None).unwrap();
    assert_eq!(
        m.next_tokens(),
        vec![1],
        "the caller's matcher is not the slot's"
    );

    // A borrowed matcher has the whole matcher API.
    let slot = batch.matcher_mut(0).unwrap();
    assert_eq!(slot.next_tokens(), vec![2, 4]);
    assert!(slot.accept_token(2).unwrap());
    slot.rollback(2).unwrap();
    assert_eq!(slot.rollback_depth(), 0);
    let owned: Matcher = batch.matcher(2).unwrap().to_owned();
    assert_eq!(owned.next_tokens(), vec![2, 4]);
    assert!(owned.trie().ptr_eq(&trie));
    // A slot matcher can seed another batch, and an owned one a slot.
    let mut other = Batch::new(1).unwrap();
    other.set_matcher(0, batch.matcher(2)).unwrap();
    assert_eq!(other.matcher(0).unwrap().next_tokens(), vec![2, 4]);
    assert!(m.accept_token(1).unwrap());
    batch.set_matcher(0, Some(&*m)).unwrap();

    // A permutation keeps the very same matcher objects; fan-out clones
    // share the history, so the clones still roll back.
    let first = batch.matcher(0).unwrap().as_raw();
    batch.reorder(&[2, 0, 1]).unwrap();
    assert_eq!(batch.matcher(1).unwrap().as_raw(), first);
    batch.reorder(&[1, 1, -1]).unwrap();
    assert!(batch.matcher(2).is_none());
    for s in 0..2 {
        let c = batch.matcher_mut(s).unwrap();
        assert_eq!(c.next_tokens(), vec![2, 4]);
        c.rollback(1).unwrap();
        assert_eq!(c.next_tokens(), vec![1]);
    }
    assert!(
        format!("{batch:?}").contains("filled_slots: 2"),
        "{batch:?}"
    );
}

#[test]
fn batches_cross_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Batch>();
    assert_send_sync::<MatcherRef>();
    let trie = Trie::from_paths(&TrieOptions::new(100, [0]), [[5, 6], [5, 7]]).unwrap();
    let mut batch = Batch::with_options(&BatchOptions::new(4).with_threads(2)).unwrap();
    let m = Matcher::new(&trie).unwrap();
    for s in 0..4 {
        batch.set_matcher(s, Some(&m)).unwrap();
    }
    batch.bind_bitmask(trie.bitmask_words()).unwrap();
    let mut batch = std::thread::spawn(move || {
        batch.accept_tokens(&[5, 5, -1, 5], None).unwrap();
        batch.fill_bound(None, FillMode::Incremental, None).unwrap();
        batch
    })
    .join()
    .unwrap();
    let lists = std::thread::scope(|scope| {
        let shared = &batch;
        let handles: Vec<_> = (0..4)
            .map(|s| scope.spawn(move || shared.matcher(s).unwrap().next_tokens()))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    assert_eq!(lists, vec![vec![6, 7], vec![6, 7], vec![5], vec![6, 7]]);
    batch.fill_bound(None, FillMode::Incremental, None).unwrap();
    assert!(treemask::is_token_allowed(batch.bound_row(2).unwrap(), 5));
}

#[test]
fn batch_arguments_are_checked_and_named() {
    assert!(message(Batch::new(0)).contains("n_slots must be in [1, 2^31 - 1], got 0"));
    let too_many = BatchOptions::new(2).with_threads(1000);
    assert!(
        message(Batch::with_options(&too_many)).contains("n_threads must be at most 256, got 1000")
    );
    assert_eq!(BatchOptions::new(5).n_threads, 0, "the library's default");

    let trie = Trie::from_paths(&TrieOptions::new(40, [0]), [[1, 2]]).unwrap();
    let mut b = Batch::new(3).unwrap();
    assert_eq!(b.n_slots(), 3);
    let mut options = MatcherOptions::default();
    options.failure_policy = FailurePolicy::StickyError;
    let mut m = Matcher::with_options(&trie, &options).unwrap();
    expect_error(
        b.set_matcher(3, Some(&m)),
        ErrorKind::OutOfRange,
        "slot 3 is out of range [0, n_slots=3)",
    );
    b.set_matcher(0, Some(&m)).unwrap();
    b.set_matcher(2, Some(&m)).unwrap();
    assert!(b.matcher(1).is_none() && b.matcher(9).is_none() && b.matcher_mut(9).is_none());

    let mut buf = vec![0; 6];
    expect_error(
        b.fill_next_token_bitmask(&mut buf, 3, None, None),
        ErrorKind::BufferTooSmall,
        "bitmask has 6 words; n_slots = 3 rows of 3 words",
    );
    let huge = b.fill_next_token_bitmask(&mut buf, usize::MAX, None, None);
    assert_eq!(kind(huge), ErrorKind::BufferTooSmall);
    let mut two = [false; 2];
    let need = b
        .fill_next_token_bitmask(&mut buf, 2, None, Some(&mut two))
        .unwrap_err();
    assert!(
        need.message
            .contains("need_apply has 2 entries for n_slots = 3"),
        "{need}"
    );
    let cases: [(&[i32], ErrorKind, &str); 3] = [
        (
            &[3],
            ErrorKind::OutOfRange,
            "slots[0] = 3 is out of range [0, n_slots=3)",
        ),
        (&[1], ErrorKind::InvalidArgument, "slots[0] = 1 is empty"),
        (
            &[2, 2],
            ErrorKind::InvalidArgument,
            "slots[1] = 2 is listed twice",
        ),
    ];
    for (slots, want, text) in cases {
        let err = b
            .fill_next_token_bitmask(&mut buf, 2, Some(slots), None)
            .unwrap_err();
        assert_eq!(err.kind, want, "{slots:?}");
        assert!(err.message.contains(text), "{err}");
    }
    let narrow = message(b.fill_next_token_bitmask(&mut buf, 1, None, None));
    assert!(
        narrow.contains("bitmask_row_words 1 < 2, the words slot 0's vocab_size 40 needs"),
        "{narrow}"
    );
    assert_eq!(buf, vec![0; 6], "nothing written by a refused fill");
    b.fill_next_token_bitmask(&mut buf, 2, Some(&[]), None)
        .unwrap();
    assert_eq!(buf, vec![0; 6], "Some(&[]) lists no slot");
    assert_eq!(kind(b.bind_bitmask(0)), ErrorKind::InvalidArgument);
    assert_eq!(kind(b.bind_bitmask(usize::MAX)), ErrorKind::OutOfRange);
    b.bind_bitmask(2).unwrap();
    assert!(message(b.invalidate(Some(&[3]))).contains("rows[0] = 3 is out of range"));

    // Accept: one token per slot, none for empty slots.
    assert!(
        message(b.accept_tokens(&[1, -1], None)).contains("tokens has 2 entries for n_slots = 3")
    );
    assert!(
        message(b.accept_tokens(&[1, 1, -1], None)).contains("tokens[1] = 1 but slot 1 is empty")
    );
    let mut accepted = [true; 2];
    assert_eq!(
        kind(b.accept_tokens(&[1, -1, 1], Some(&mut accepted))),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        b.matcher(0).unwrap().next_tokens(),
        vec![1],
        "nothing accepted"
    );

    // A rejection is no error; StickyError then fails, naming the slot.
    let mut accepted = [true, false, true];
    b.accept_tokens(&[7, -1, 9], Some(&mut accepted)).unwrap();
    assert_eq!(accepted, [false, true, false]);
    // Rejections are not errors: the last error is the earlier failure's.
    let why = treemask::last_error_message();
    assert!(!why.contains("token 7"), "{why}");
    let failed = message(b.accept_tokens(&[7, -1, 9], None));
    assert!(
        failed.contains("slot 0: the matcher failed after rejecting token 7"),
        "{failed}"
    );
    // Its row is still written (stop tokens only), with the error.
    assert_eq!(
        kind(b.fill_bound(None, FillMode::Incremental, None)),
        ErrorKind::InvalidState
    );
    assert_eq!(b.bound_row(0), Some(&[1, 0][..]));
    assert_eq!(kind(b.reorder(&[0, 0, 2])), ErrorKind::InvalidState);
    assert!(message(b.reorder(&[0, -2, 1])).contains("src[1] = -2 is out of range [-1, n_slots=3)"));
    assert_eq!(kind(b.reorder(&[0, 1])), ErrorKind::InvalidArgument);
    assert!(b.matcher(0).is_some(), "a refused reorder changes nothing");
    // A failed matcher cannot be put in a slot.
    assert!(m.accept_token(9).is_ok());
    assert_eq!(kind(b.set_matcher(1, Some(&m))), ErrorKind::InvalidState);
}

// ---- State arrays ----

#[test]
fn state_array_walks_equal_per_matcher_results() {
    let mut rng = Rng::new(77);
    for i in 0..scaled(1500) {
        let vocab = VOCABS[i % VOCABS.len()];
        let policy = POLICIES[i % 3];
        let seed = rng.next_u64();
        let mut local = Rng::new(seed);
        let rt = random_trie(&mut local, vocab);
        let trie = rt.build();
        let n = 1 + local.below(6);
        let words = trie.bitmask_words() + local.below(2);
        let mut states = vec![STATE_ROOT; n];
        let mut refs: Vec<Matcher> = (0..n).map(|_| matcher_with(&trie, policy, false)).collect();
        let why = format!("walk {i} vocab {vocab} policy {policy:?} seed {seed}");
        for _ in 0..(if vocab > 10_000 { 8 } else { 30 }) {
            let mut rows = garbage(&mut local, n * words);
            trie.fill_states(&states, &mut rows, words)
                .expect("fill_states");
            let mut tokens = vec![0; n];
            for k in 0..n {
                assert_eq!(refs[k].state(), Ok(states[k]), "{why}: row {k}");
                let (want, _) = own_row(&mut refs[k], words, &mut local);
                assert_eq!(rows[k * words..(k + 1) * words], want[..], "{why}: row {k}");
                tokens[k] = random_feed(&mut local, &refs[k], vocab, &rt.model.stops);
            }
            let mut accepted = vec![false; n];
            trie.advance_states(&mut states, &tokens, policy, Some(&mut accepted))
                .expect("advance_states");
            for k in 0..n {
                let ok = if tokens[k] < 0 {
                    true
                } else {
                    refs[k].accept_token(tokens[k]).unwrap_or(false)
                };
                assert_eq!(accepted[k], ok, "{why}: row {k} token {}", tokens[k]);
            }
            if local.coin(5) {
                // A beam reorder is a gather of states.
                let from: Vec<usize> = (0..n).map(|_| local.below(n)).collect();
                states = from.iter().map(|&f| states[f]).collect();
                refs = from
                    .iter()
                    .map(|&f| {
                        refs[f].try_clone().unwrap_or_else(|_| {
                            // A failed matcher cannot be cloned; a fresh failed one is the same.
                            let mut fresh = matcher_with(&trie, policy, false);
                            assert_eq!(fresh.accept_token(-1), Ok(false));
                            fresh
                        })
                    })
                    .collect();
            }
        }
    }
}

#[test]
fn matcher_states_map_onto_the_reserved_values() {
    assert_eq!(
        (STATE_ROOT, STATE_TERMINATED, STATE_FAILED),
        (0, 0xFFFF_FFFE, 0xFFFF_FFFF)
    );
    let trie = Trie::from_paths(&TrieOptions::new(16, [1]), [&[3, 4][..], &[3]]).unwrap();
    let mut m = matcher_with(&trie, FailurePolicy::FailClosed, false);
    assert_eq!(m.state(), Ok(STATE_ROOT));
    assert!(m.accept_token(3).unwrap());
    assert_eq!(m.state(), Ok(1), "breadth-first: the root's only child");
    assert!(m.accept_token(1).unwrap());
    assert_eq!(m.state(), Ok(STATE_TERMINATED));
    m.reset();
    assert!(!m.accept_token(9).unwrap());
    assert_eq!(m.state(), Ok(STATE_FAILED));
    // FAILED then a stop token: terminated unless StickyError.
    let mut states = [STATE_FAILED, STATE_FAILED, STATE_TERMINATED];
    let mut accepted = [false; 3];
    trie.advance_states(
        &mut states[..1],
        &[1],
        FailurePolicy::FailClosed,
        Some(&mut accepted[..1]),
    )
    .unwrap();
    trie.advance_states(
        &mut states[1..],
        &[1, 1],
        FailurePolicy::StickyError,
        Some(&mut accepted[1..]),
    )
    .unwrap();
    assert_eq!(states, [STATE_TERMINATED, STATE_FAILED, STATE_TERMINATED]);
    assert_eq!(accepted, [true, false, true]);
    // A matcher in a decoding mode has no state-array form.
    let mut options = MatcherOptions::default();
    options.label_separator = vec![7];
    let moded = Matcher::with_options(&trie, &options).unwrap();
    assert_eq!(kind(moded.state()), ErrorKind::InvalidState);
}

#[test]
fn state_array_arguments_are_checked_and_named() {
    let trie = Trie::from_paths(&TrieOptions::new(40, [1]), [[3, 4]]).unwrap(); // nodes 0, 1, 2
    let mut rows = vec![0x1234_5678; 4];
    expect_error(
        trie.fill_states(&[0, 3], &mut rows, 2),
        ErrorKind::OutOfRange,
        "states[1] = 3 is neither a node id (< n_nodes = 3)",
    );
    assert_eq!(rows, vec![0x1234_5678; 4], "nothing written");
    expect_error(
        trie.fill_states(&[0, 2], &mut rows[..3], 2),
        ErrorKind::BufferTooSmall,
        "bitmask has 3 words; 2 states of 2 words per row",
    );
    assert!(message(trie.fill_states(&[0, 2], &mut rows, 1)).contains("bitmask_row_words 1 < 2"));
    assert_eq!(
        kind(trie.fill_states(&[0], &mut rows, usize::MAX)),
        ErrorKind::BufferTooSmall
    );
    trie.fill_states(&[], &mut [], 2).unwrap();

    let mut states = [0, 0xFFFF_FFFD];
    let bad_state = message(trie.advance_states(&mut states, &[3, 3], FailurePolicy::Reject, None));
    assert!(bad_state.contains("states[1] = 4294967293"), "{bad_state}");
    assert_eq!(states[0], 0, "nothing advances when a state is bad");
    let mut states = [0, 0];
    let tokens = message(trie.advance_states(&mut states, &[3], FailurePolicy::Reject, None));
    assert!(
        tokens.contains("tokens has 1 entries for 2 states"),
        "{tokens}"
    );
    let mut one = [false];
    let accepted =
        message(trie.advance_states(&mut states, &[3, 3], FailurePolicy::Reject, Some(&mut one)));
    assert!(
        accepted.contains("accepted has 1 entries for 2 states"),
        "{accepted}"
    );
    assert_eq!(states, [0, 0]);
}
