//! String sets through the safe API: a Vocab, Trie::from_strings and the
//! entry points that take a trie (matchers, state arrays, .tmtrie files with
//! their vocabulary), every allowed set compared with a brute-force model
//! over random walks; the modes a string set refuses.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
mod common;

use std::collections::BTreeSet;

use common::{expect_error, Rng};
use treemask::{
    ErrorKind, FailurePolicy, Matcher, MatcherOptions, Trie, TrieOptions, Vocab, STATE_ROOT,
    STATE_TERMINATED,
};

const EOS: i32 = 0;
const PIECES: [&str; 16] = [
    "<eos>", "", "a", "b", "c", "ab", "abc", "ca", "bc", " ", " a", "é", "\u{e9}a", "x", "ba",
    "cab",
];
const WIDTH: i32 = 20; // four padded ids

fn vocab() -> Vocab {
    Vocab::new(PIECES, &[true], WIDTH).expect("vocab")
}

/// The rules: a state is the bytes so far.
struct Model {
    full: BTreeSet<Vec<u8>>,
}

impl Model {
    fn new(strings: &[&str], prefix: &str) -> Model {
        Model {
            full: strings
                .iter()
                .map(|s| format!("{prefix}{s}").into_bytes())
                .collect(),
        }
    }
    fn allowed(&self, w: &[u8]) -> Vec<i32> {
        (0..WIDTH)
            .filter(|&t| {
                if t == EOS {
                    return self.full.contains(w);
                }
                let piece = PIECES.get(t as usize).map_or(&b""[..], |p| p.as_bytes());
                if piece.is_empty() {
                    return false;
                }
                let mut next = w.to_vec();
                next.extend_from_slice(piece);
                self.full.iter().any(|f| f.starts_with(&next))
            })
            .collect()
    }
}

#[test]
fn random_walks_match_the_model() {
    let v = vocab();
    let mut rng = Rng::new(23);
    let strings = ["abc", "ab", "cab", "", "éa", "bca", "a b"];
    for prefix in ["", " "] {
        let model = Model::new(&strings, prefix);
        let trie = Trie::from_strings(&TrieOptions::new(0, [EOS]), &v, strings, prefix.as_bytes())
            .expect("string set");
        assert!(trie.is_string_set());
        assert_eq!(trie.vocab().expect("vocab"), v);
        for _ in 0..common::scaled(40) {
            let mut m = Matcher::new(&trie).expect("matcher");
            let mut w = Vec::new();
            let mut state = STATE_ROOT;
            loop {
                let allowed = model.allowed(&w);
                assert_eq!(m.next_tokens(), allowed, "at {w:?}");
                let mut row = vec![0; trie.bitmask_words()];
                trie.fill_states(&[state], &mut row, trie.bitmask_words())
                    .unwrap();
                let bits: Vec<i32> = (0..WIDTH)
                    .filter(|&t| treemask::is_token_allowed(&row, t))
                    .collect();
                assert_eq!(bits, allowed);
                if allowed.is_empty() {
                    break;
                }
                let t = allowed[rng.below(allowed.len())];
                assert!(m.accept_token(t).unwrap());
                let mut s = [state];
                trie.advance_states(&mut s, &[t], FailurePolicy::Reject, None)
                    .unwrap();
                state = s[0];
                if t == EOS {
                    assert_eq!(state, STATE_TERMINATED);
                    assert!(m.is_terminated());
                    break;
                }
                w.extend_from_slice(PIECES[t as usize].as_bytes());
            }
        }
    }
}

#[test]
fn labels_forced_bytes_and_files() {
    let v = vocab();
    let trie = Trie::from_labeled_strings(
        &TrieOptions::new(WIDTH, [EOS]),
        &v,
        [("abc", 7i64), ("abc", 8), ("cab", 9)],
        b"",
    )
    .expect("trie");
    let mut m = Matcher::new(&trie).unwrap();
    assert!(m.accept_token(4).unwrap()); // "c"
    assert_eq!(m.forced_bytes(), b"ab");
    assert_eq!(m.forced_tokens(), vec![5]); // "ab", the longest match
    assert_eq!(m.accept_forced_tokens().unwrap(), vec![5]);
    assert!(m.accept_token(EOS).unwrap());
    assert_eq!(m.label_ids(), vec![9]);
    let mut both = Matcher::new(&trie).unwrap();
    assert_eq!(both.accept_tokens(&[6, EOS]), Ok(2)); // "abc" + EOS
    assert_eq!(both.label_ids(), vec![7, 8]);

    let path = std::env::temp_dir().join(format!("strings-{}.tmtrie", std::process::id()));
    trie.save(&path).unwrap();
    let loaded = Trie::load(&path, false).unwrap();
    assert!(loaded.is_string_set() && loaded.vocab().unwrap() == v);
    let shared = Trie::load_with_vocab(&path, true, &v).unwrap();
    assert_eq!(
        Matcher::new(&shared).unwrap().next_tokens(),
        Matcher::new(&trie).unwrap().next_tokens()
    );
    let other = Vocab::new(PIECES, &[true], WIDTH + 1).unwrap();
    expect_error(
        Trie::load_with_vocab(&path, false, &other),
        ErrorKind::InvalidArgument,
        "fingerprint",
    );
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn what_a_string_set_refuses() {
    let v = vocab();
    let trie = Trie::from_strings(&TrieOptions::new(0, [EOS]), &v, ["ab"], b"").unwrap();
    let mut options = MatcherOptions::default();
    options.max_new_tokens = Some(3);
    expect_error(
        Matcher::with_options(&trie, &options),
        ErrorKind::Unsupported,
        "string-set trie",
    );
    let mut options = MatcherOptions::default();
    options.override_stop_tokens = vec![19];
    let mut m = Matcher::with_options(&trie, &options).unwrap();
    assert_eq!(m.accept_tokens(&[5, 19]), Ok(2));
    expect_error(
        Trie::from_strings(&TrieOptions::new(WIDTH + 1, [EOS]), &v, ["ab"], b""),
        ErrorKind::InvalidArgument,
        "vocab_size",
    );
    expect_error(
        Trie::from_strings(&TrieOptions::new(0, [EOS]), &v, Vec::<&str>::new(), b""),
        ErrorKind::InvalidArgument,
        "at least one string",
    );
    expect_error(
        Vocab::new(["a"], &[false, true], 2),
        ErrorKind::InvalidArgument,
        "special has 2",
    );
    expect_error(
        Vocab::new(["a", "b"], &[], 1),
        ErrorKind::InvalidArgument,
        "vocab_size 1",
    );
    // A token-path trie is no string set.
    let paths = Trie::from_paths(&TrieOptions::new(WIDTH, [EOS]), [&[1, 2][..]]).unwrap();
    assert!(!paths.is_string_set() && paths.vocab().is_none());
    assert!(Matcher::new(&paths).unwrap().forced_bytes().is_empty());
    assert_eq!(v.token_bytes(6), b"abc");
    assert!(v.token_bytes(17).is_empty());
    assert_eq!((v.vocab_size(), v.n_tokens()), (WIDTH, PIECES.len() as i32));
}
