//! Trie sources through the safe API (the Rust twin of tests/formats/): the
//! RTP-LLM fixtures in tests/data/rtp-llm checked against RTP-LLM's masking
//! rule, JSON Lines, `.tmtrie` round trips and metadata, damaged files, and
//! the errors that name the key, line or path.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{expect_error, kind, message, random_trie, scaled, Rng};
use treemask::{ErrorKind, Matcher, MatcherRef, RtpOptions, Trie, TrieOptions};

/// The structural counts of a trie (memory figures may differ between a
/// built and a mapped trie).
fn structure(trie: &Trie) -> (u64, u64, u64, u64, u32, u32) {
    let s = trie.stats().expect("stats");
    (
        s.n_nodes,
        s.n_edges,
        s.n_terminals,
        s.n_labels,
        s.max_depth,
        s.max_fanout,
    )
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../tests/data/rtp-llm")
        .join(name)
}

/// RTP-LLM options: a vocabulary and no stop tokens (end_token_id is then
/// the stop token).
fn rtp_options(vocab: i32) -> TrieOptions {
    TrieOptions::new(vocab, Vec::new())
}

/// A directory of its own under cargo's scratch space, emptied first.
fn scratch_dir(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("formats-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Whether the library has its JSON loaders. Without them both must say so
/// (Unsupported) instead of loading; meson says which to expect.
fn have_json() -> bool {
    let probe = Trie::from_rtp_json(
        &rtp_options(10),
        &RtpOptions::new(),
        r#"{"start_token_id": 1, "end_token_id": 2, "prefix_dict": {}}"#,
    );
    let supported = !matches!(&probe, Err(e) if e.kind == ErrorKind::Unsupported);
    if let Ok(flag) = std::env::var("TREEMASK_HAVE_JSON") {
        assert_eq!(
            supported,
            flag == "1",
            "TREEMASK_HAVE_JSON={flag} but the probe gave {probe:?}"
        );
    }
    if !supported {
        assert_eq!(
            kind(Trie::from_jsonl(&TrieOptions::new(10, [0]), "[1]")),
            ErrorKind::Unsupported
        );
        eprintln!("libtreemask has no JSON support: checked that the JSON loaders say so");
    }
    supported
}

/// A prefix dictionary as RTP-LLM reads it.
struct Dict {
    start: i32,
    end: i32,
    sep: &'static str,
    entries: BTreeMap<String, Vec<i64>>,
}

impl Dict {
    fn key(&self, generated: &[i32]) -> String {
        let mut key = self.start.to_string();
        for t in generated {
            key.push_str(self.sep);
            key.push_str(&t.to_string());
        }
        key
    }
}

/// RTP-LLM's rule at every prefix the root reaches: the allowed next tokens
/// are the key's list, or only end_token_id when the key is missing or its
/// list is empty. Returns how many keys were reached.
fn expect_trie_follows_rule(trie: &Trie, dict: &Dict) -> usize {
    let mut reached = 0;
    let mut stack = vec![(Matcher::new(trie).unwrap(), Vec::<i32>::new())];
    while let Some((m, generated)) = stack.pop() {
        let key = dict.key(&generated);
        let mut allowed: Vec<i32> = match dict.entries.get(&key) {
            Some(ids) if !ids.is_empty() => {
                reached += 1;
                ids.iter().map(|&id| id as i32).collect()
            }
            Some(_) => {
                reached += 1;
                vec![dict.end]
            }
            None => vec![dict.end],
        };
        allowed.sort_unstable();
        allowed.dedup();
        assert_eq!(m.next_tokens(), allowed, "key {key}");
        assert_eq!(m.can_terminate(), allowed.contains(&dict.end), "key {key}");
        for &t in allowed.iter().filter(|&&t| t != dict.end) {
            let mut child = m.clone();
            assert!(child.accept_token(t).unwrap(), "key {key} token {t}");
            let mut next = generated.clone();
            next.push(t);
            stack.push((child, next));
        }
    }
    reached
}

fn gir_json_dict() -> Dict {
    let entries: [(&str, &[i64]); 9] = [
        ("225", &[64000, 64003, 64006, 64008, 64011]),
        ("225_64000", &[64001]),
        ("225_64003", &[64001]),
        ("225_64006", &[64004]),
        ("225_64008", &[64001]),
        ("225_64000_64001", &[2]),
        ("225_64003_64001", &[2]),
        ("225_64006_64004", &[2]),
        ("225_64008_64001", &[2]),
    ];
    Dict {
        start: 225,
        end: 2,
        sep: "_",
        entries: entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_vec()))
            .collect(),
    }
}

#[test]
fn gir_json_fixture_masks_like_rtp_llm() {
    if !have_json() {
        return;
    }
    let path = fixture("gir_prefix_dict.json");
    let from_file =
        Trie::from_rtp_json_file(&rtp_options(100_000), &RtpOptions::new(), &path).expect("load");
    let from_bytes = Trie::from_rtp_json(
        &rtp_options(100_000),
        &RtpOptions::new(),
        std::fs::read(&path).unwrap(),
    )
    .expect("load");
    let dict = gir_json_dict();
    for trie in [&from_file, &from_bytes] {
        assert_eq!(expect_trie_follows_rule(trie, &dict), dict.entries.len());
        // Root, 5 first-level nodes (64011 has no key: a leaf), 4 second-level leaves.
        let stats = trie.stats().unwrap();
        assert_eq!(
            (stats.n_nodes, stats.n_terminals, stats.max_depth),
            (10, 5, 2)
        );
        assert_eq!((stats.n_labels, stats.n_warnings), (0, 0));
        assert_eq!(trie.stop_tokens(), vec![2]);
    }
}

#[test]
fn gir_tsv_fixture_masks_like_rtp_llm() {
    let path = fixture("gir_prefix_dict.txt");
    let text = std::fs::read_to_string(&path).expect("fixture");
    let mut dict = Dict {
        start: 225,
        end: 2,
        sep: "_",
        entries: BTreeMap::new(),
    };
    for line in text.lines().filter(|l| !l.is_empty()) {
        let (key, ids) = line.split_once('\t').expect("a tab");
        let ids = ids
            .split('\x02')
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().unwrap())
            .collect();
        dict.entries.insert(key.to_string(), ids);
    }
    assert_eq!(dict.entries.len(), 9);
    let trie =
        Trie::from_rtp_tsv(&rtp_options(100_000), &RtpOptions::tsv(225, 2), &text).expect("load");
    assert_eq!(expect_trie_follows_rule(&trie, &dict), 9);
    let stats = trie.stats().unwrap();
    assert_eq!((stats.max_fanout, stats.n_warnings), (7835, 0));
    let from_file = Trie::from_rtp_tsv_file(
        &rtp_options(100_000),
        &RtpOptions::tsv(225, 2).with_sep("_"),
        &path,
    )
    .expect("load");
    assert_eq!(from_file.stats().unwrap().n_nodes, stats.n_nodes);
}

#[test]
fn rtp_dictionaries_follow_the_rule_with_any_separator() {
    let mut rng = Rng::new(20_260_401);
    for round in 0..scaled(100) {
        let vocab = rng.range(8, 400) as i32;
        let sep = ["_", ",", "::", "|", " "][rng.below(5)];
        let mut dict = Dict {
            start: rng.range(0, 100_000) as i32,
            end: rng.range(0, vocab as i64 - 1) as i32,
            sep,
            entries: BTreeMap::new(),
        };
        let mut frontier = vec![Vec::<i32>::new()];
        while let Some(generated) = frontier.pop() {
            let mut ids = Vec::new();
            for _ in 0..if rng.coin(4) { 0 } else { rng.range(1, 5) } {
                let id = if rng.coin(6) {
                    dict.end
                } else {
                    rng.range(0, vocab as i64 - 1) as i32
                };
                ids.push(id as i64);
                if rng.coin(5) {
                    ids.push(id as i64); // a duplicate id
                }
                if id != dict.end && generated.len() < 4 && rng.below(10) < 6 {
                    let mut child = generated.clone();
                    child.push(id);
                    frontier.push(child);
                }
            }
            dict.entries.entry(dict.key(&generated)).or_insert(ids);
        }
        let mut tsv = String::new();
        for (key, ids) in &dict.entries {
            let ids: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
            tsv.push_str(&format!("{key}\t{}\r\n", ids.join("\x02")));
        }
        let trie = Trie::from_rtp_tsv(
            &rtp_options(vocab),
            &RtpOptions::tsv(dict.start, dict.end).with_sep(sep),
            &tsv,
        )
        .unwrap_or_else(|e| panic!("round {round}: {e}\n{tsv:?}"));
        let reached = expect_trie_follows_rule(&trie, &dict);
        assert_eq!(
            reached,
            dict.entries.len(),
            "round {round}: every key is reachable"
        );
        if have_json() {
            let mut json = format!(
                r#"{{"start_token_id": {}, "end_token_id": {}, "sep": "{sep}", "prefix_dict": {{"#,
                dict.start, dict.end
            );
            let entries: Vec<String> = dict
                .entries
                .iter()
                .map(|(k, ids)| format!("\"{k}\": {ids:?}"))
                .collect();
            json.push_str(&entries.join(", "));
            json.push_str("}}");
            let from_json = Trie::from_rtp_json(&rtp_options(vocab), &RtpOptions::new(), &json)
                .unwrap_or_else(|e| panic!("round {round}: {e}\n{json}"));
            expect_trie_follows_rule(&from_json, &dict);
            assert_eq!(structure(&from_json), structure(&trie), "round {round}");
        }
    }
}

#[test]
fn rtp_errors_name_the_key_line_and_path() {
    let tsv_cases: [(&str, ErrorKind, &str); 4] = [
        (
            "225\t1\x023\n\n225_1 2\n",
            ErrorKind::Parse,
            "line 3: no tab",
        ),
        (
            "225\t1\x02x\n",
            ErrorKind::Parse,
            "line 1: key \"225\": list element \"x\"",
        ),
        (
            "225\t1\n225\t3\n",
            ErrorKind::InvalidArgument,
            "duplicate key \"225\"",
        ),
        ("", ErrorKind::Parse, "empty input"),
    ];
    for (text, want, part) in tsv_cases {
        let err =
            Trie::from_rtp_tsv(&rtp_options(100_000), &RtpOptions::tsv(225, 2), text).unwrap_err();
        assert_eq!(err.kind, want, "{text:?}");
        assert!(err.message.contains(part), "{err}");
    }
    assert!(message(Trie::from_rtp_tsv(
        &rtp_options(10),
        &RtpOptions::tsv(1, 2).with_sep("a\0b"),
        "1\t3\n"
    ))
    .contains("sep \"a\\0b\" contains a NUL byte at byte 1"));
    let missing = message(Trie::from_rtp_tsv_file(
        &rtp_options(10),
        &RtpOptions::tsv(1, 2),
        "/nonexistent/dict.txt",
    ));
    assert!(missing.contains("\"/nonexistent/dict.txt\""), "{missing}");

    if !have_json() {
        return;
    }
    let utils = Trie::from_rtp_json_file(
        &rtp_options(100_000),
        &RtpOptions::new(),
        fixture("utils_test_gir_prefix_dict.json"),
    )
    .unwrap_err();
    assert_eq!(utils.kind, ErrorKind::InvalidArgument);
    assert!(
        utils.message.contains("key \"1_2\"") && utils.message.contains("start_token_id 225"),
        "{utils}"
    );
    let json_cases: [(&str, ErrorKind, &str); 3] = [
        (
            r#"{"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"1_500": [3]}}"#,
            ErrorKind::OutOfRange,
            "key \"1_500\": id 500 is out of range [0, vocab_size=100)",
        ),
        (
            r#"{"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"1": [3]}} x"#,
            ErrorKind::Parse,
            "malformed JSON at byte 68",
        ),
        (
            r#"{"end_token_id": 2, "prefix_dict": {}}"#,
            ErrorKind::InvalidArgument,
            "missing top-level field \"start_token_id\"",
        ),
    ];
    for (json, want, part) in json_cases {
        let err = Trie::from_rtp_json(&rtp_options(100), &RtpOptions::new(), json).unwrap_err();
        assert_eq!(err.kind, want, "{json}");
        assert!(err.message.contains(part), "{err}");
    }
    expect_error(
        Trie::from_rtp_json_file(
            &rtp_options(100),
            &RtpOptions::new(),
            "/nonexistent/dict.json",
        ),
        ErrorKind::Io,
        "\"/nonexistent/dict.json\"",
    );
    assert!(message(Trie::from_rtp_json_file(
        &rtp_options(100),
        &RtpOptions::new(),
        "bad\0path"
    ))
    .contains("contains a NUL byte at byte 3"));

    // rtp_llm_defaults fills in RTP-LLM's start 225 and end 2.
    let no_ids = r#"{"prefix_dict": {"225": [10], "225_10": [2]}}"#;
    assert_eq!(
        kind(Trie::from_rtp_json(
            &rtp_options(100),
            &RtpOptions::new(),
            no_ids
        )),
        ErrorKind::InvalidArgument
    );
    let mut defaults = RtpOptions::new();
    defaults.rtp_llm_defaults = true;
    let trie = Trie::from_rtp_json(&rtp_options(100), &defaults, no_ids).unwrap();
    let dict = Dict {
        start: 225,
        end: 2,
        sep: "_",
        entries: [
            ("225".to_string(), vec![10]),
            ("225_10".to_string(), vec![2]),
        ]
        .into_iter()
        .collect(),
    };
    assert_eq!(expect_trie_follows_rule(&trie, &dict), 2);
}

#[test]
fn jsonl_builds_the_same_trie_as_paths() {
    if !have_json() {
        return;
    }
    let text = "[5, 6, 7]\n\n{\"tokens\": [5, 6], \"label\": 40}\r\n{\"label\": 41, \"tokens\": [9]}\n[5, 6, 7]\n[]";
    let options = TrieOptions::new(10, [0]);
    let from_text = Trie::from_jsonl(&options, text).expect("jsonl");
    let dir = scratch_dir("jsonl");
    let path = dir.join("paths.jsonl");
    std::fs::write(&path, text).unwrap();
    let from_file = Trie::from_jsonl_file(&options, &path).expect("jsonl file");
    let paths: [(&[i32], i64); 5] = [
        (&[5, 6, 7], 0),
        (&[5, 6], 40),
        (&[9], 41),
        (&[5, 6, 7], 3),
        (&[], 4),
    ];
    let from_paths = Trie::from_labeled_paths(&options, paths).unwrap();
    for trie in [&from_text, &from_file] {
        assert_eq!(structure(trie), structure(&from_paths));
        for (path, _) in paths {
            let (mut a, mut b) = (
                Matcher::new(trie).unwrap(),
                Matcher::new(&from_paths).unwrap(),
            );
            for &t in path {
                assert_eq!(a.next_tokens(), b.next_tokens());
                assert!(a.accept_token(t).unwrap() && b.accept_token(t).unwrap());
            }
            assert_eq!(a.label_ids(), b.label_ids(), "{path:?}");
        }
    }
    let cases: [(&str, ErrorKind, &str); 3] = [
        (
            "[1]\n[2, 10]\n",
            ErrorKind::OutOfRange,
            "line 2: token 10 at position 1 is out of range",
        ),
        (
            "[1]\n\n[3, 0]\n",
            ErrorKind::InvalidArgument,
            "line 3: stop token 0 at position 1",
        ),
        (
            "[1]\n[1, 2\n",
            ErrorKind::Parse,
            "malformed JSON on line 2 at byte",
        ),
    ];
    for (text, want, part) in cases {
        let err = Trie::from_jsonl(&options, text).unwrap_err();
        assert_eq!(err.kind, want, "{text:?}");
        assert!(err.message.contains(part), "{err}");
    }
    let unknown_field = Trie::from_jsonl(&options, "{\"tokens\": [1], \"score\": 0.5}\n").unwrap();
    assert_eq!(unknown_field.stats().unwrap().n_warnings, 1);
    std::fs::remove_dir_all(dir).unwrap();
}

/// Walks a pair of matchers with the same random tokens; every answer must
/// be equal.
fn expect_same_behaviour(a: &mut MatcherRef, b: &mut MatcherRef, rng: &mut Rng, steps: usize) {
    let words = a.trie().bitmask_words();
    let (mut row_a, mut row_b) = (vec![0; words], vec![-1; words]);
    for _ in 0..steps {
        assert_eq!(
            a.fill_next_token_bitmask(&mut row_a),
            b.fill_next_token_bitmask(&mut row_b)
        );
        assert_eq!(row_a, row_b);
        assert_eq!(a.next_tokens(), b.next_tokens());
        assert_eq!(a.label_ids(), b.label_ids());
        assert_eq!(a.forced_tokens(), b.forced_tokens());
        let allowed = a.next_tokens();
        if allowed.is_empty() || a.is_terminated() {
            break;
        }
        let t = allowed[rng.below(allowed.len())];
        assert_eq!(a.accept_token(t), b.accept_token(t));
    }
}

#[test]
fn tmtrie_round_trips_behave_the_same() {
    let dir = scratch_dir("round-trip");
    let mut rng = Rng::new(7);
    for round in 0..scaled(40) {
        let vocab = rng.range(1, 5000) as i32;
        let rt = random_trie(&mut rng, vocab);
        let built = rt.build();
        let path = dir.join(format!("t{round}.tmtrie"));
        built.save(&path).expect("save");
        for trusted in [false, true] {
            let loaded = Trie::load(&path, trusted).expect("load");
            assert_eq!(loaded.vocab_size(), vocab);
            assert_eq!(loaded.stop_tokens(), built.stop_tokens());
            assert_eq!(structure(&loaded), structure(&built), "round {round}");
            assert!(loaded.metadata().is_empty());
            let (mut a, mut b) = (
                Matcher::new(&loaded).unwrap(),
                Matcher::new(&built).unwrap(),
            );
            expect_same_behaviour(&mut a, &mut b, &mut rng, 12);
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn tmtrie_metadata_travels_and_merges() {
    let dir = scratch_dir("metadata");
    let trie = Trie::from_paths(&TrieOptions::new(10, [0]), [&[1, 2][..], &[3]]).unwrap();
    assert!(trie.metadata().is_empty());
    let a = dir.join("a.tmtrie");
    trie.save_with_metadata(&a, [("tokenizer", "sha256:abc"), ("labels", "cat\ndog")])
        .unwrap();
    let loaded = Trie::load(&a, false).unwrap();
    let pairs = |list: &[(&str, &str)]| {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        loaded.metadata(),
        pairs(&[("labels", "cat\ndog"), ("tokenizer", "sha256:abc")])
    );
    assert_eq!(
        loaded.metadata_value("tokenizer").as_deref(),
        Some("sha256:abc")
    );
    assert_eq!(loaded.metadata_value("missing"), None);
    assert_eq!(loaded.metadata_value("tok\0enizer"), None);
    // Saving the loaded trie keeps its metadata; a key given again wins.
    let b = dir.join("b.tmtrie");
    loaded
        .save_with_metadata(
            &b,
            vec![("tokenizer".to_string(), "sha256:def".to_string())],
        )
        .unwrap();
    let again = Trie::load(&b, true).unwrap();
    assert_eq!(
        again.metadata(),
        pairs(&[("labels", "cat\ndog"), ("tokenizer", "sha256:def")])
    );
    // Bad metadata is refused with a name, and nothing is written.
    let c = dir.join("c.tmtrie");
    let dup = message(trie.save_with_metadata(&c, [("x", "1"), ("x", "2")]));
    assert!(dup.contains("duplicate metadata key \"x\""), "{dup}");
    assert_eq!(
        kind(trie.save_with_metadata(&c, [("", "1")])),
        ErrorKind::InvalidArgument
    );
    assert!(message(trie.save_with_metadata(&c, [("k", "a\0b")]))
        .contains("metadata value \"a\\0b\" contains a NUL byte"));
    assert!(!c.exists());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn damaged_and_missing_files_are_clear_errors() {
    let dir = scratch_dir("damaged");
    let trie = Trie::from_paths(
        &TrieOptions::new(1000, [0]),
        [&[1, 2, 3][..], &[1, 4], &[900]],
    )
    .unwrap();
    let good = dir.join("good.tmtrie");
    trie.save(&good).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let truncated = dir.join("truncated.tmtrie");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    assert_eq!(kind(Trie::load(&truncated, false)), ErrorKind::CorruptFile);
    assert_eq!(kind(Trie::load(&truncated, true)), ErrorKind::CorruptFile);
    // A flipped payload byte fails verification; trusted it may load, and
    // then must not crash.
    let mut flipped = bytes.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 0x40;
    let flipped_path = dir.join("flipped.tmtrie");
    std::fs::write(&flipped_path, &flipped).unwrap();
    assert_eq!(
        kind(Trie::load(&flipped_path, false)),
        ErrorKind::CorruptFile
    );
    if let Ok(t) = Trie::load(&flipped_path, true) {
        let mut m = Matcher::new(&t).unwrap();
        let mut row = vec![0; t.bitmask_words()];
        let _ = m.fill_next_token_bitmask(&mut row);
        let _ = m.next_tokens();
    }
    let not_a_trie = dir.join("text.tmtrie");
    std::fs::write(&not_a_trie, "hello, world").unwrap();
    assert_eq!(kind(Trie::load(&not_a_trie, false)), ErrorKind::CorruptFile);
    expect_error(
        Trie::load(dir.join("missing.tmtrie"), false),
        ErrorKind::Io,
        "missing.tmtrie",
    );
    assert_eq!(kind(Trie::load(&dir, false)), ErrorKind::Io);
    assert_eq!(
        kind(trie.save(dir.join("no-such-dir/x.tmtrie"))),
        ErrorKind::Io
    );
    assert_eq!(kind(trie.save("x\0y")), ErrorKind::InvalidArgument);
    // The good file still loads after all that.
    assert_eq!(
        structure(&Trie::load(&good, false).unwrap()),
        structure(&trie)
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// Issue 14 item 15: RTP-LLM's own utils fixture (keys without the start
/// token), negative and huge ids and the separator "-" load in
/// compatibility mode, each a counted warning, and mask as RTP-LLM does.
#[test]
fn rtp_llm_compat_loads_what_rtp_llm_loads() {
    if !have_json() {
        return;
    }
    let path = fixture("utils_test_gir_prefix_dict.json");
    assert_eq!(
        kind(Trie::from_rtp_json_file(
            &rtp_options(100),
            &RtpOptions::new(),
            &path
        )),
        ErrorKind::InvalidArgument
    );
    let compat = RtpOptions::new().with_rtp_llm_compat();
    let trie = Trie::from_rtp_json_file(&rtp_options(100), &compat, &path).unwrap();
    assert_eq!(trie.stats().unwrap().n_warnings, 3); // two keys ignored, no root key
    let json = r#"{"start_token_id": 7, "end_token_id": 2, "sep": "-",
                   "prefix_dict": {"7": [5, -3, 99999999999999999999999], "7-5": [2]}}"#;
    assert!(Trie::from_rtp_json(&rtp_options(10), &RtpOptions::new(), json).is_err());
    let trie = Trie::from_rtp_json(&rtp_options(10), &compat, json).unwrap();
    let mut m = Matcher::new(&trie).unwrap();
    assert_eq!(m.next_tokens(), vec![5]);
    assert!(m.accept_token(5).unwrap());
    assert_eq!(m.next_tokens(), vec![2]);
    let tsv = "7\t5\x02-3\n7-5\t2\n";
    let trie = Trie::from_rtp_tsv(
        &rtp_options(10),
        &RtpOptions::tsv(7, 2).with_sep("-").with_rtp_llm_compat(),
        tsv,
    )
    .unwrap();
    assert_eq!(trie.stats().unwrap().n_warnings, 1);
}
