//! The CPU masking kernels through the safe API (the Rust twin of
//! tests/kernels/test_kernels.cc): every dtype against a scalar reference
//! written here from the header's rules, on awkward vocabulary sizes, padded
//! and narrow logits, strides and row indices; the candidate form against
//! the same sets; matcher rows end to end; and every shape the wrapper must
//! refuse before the library could touch memory it does not own.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
mod common;

use common::{expect_error, kind, message, random_trie, scaled, Rng};
use treemask::{
    apply_token_bitmask_cpu, apply_token_bitmask_cpu_half, apply_token_candidates_cpu,
    apply_token_candidates_cpu_half, ApplyShape, ErrorKind, Half, Matcher,
};

const VOCABS: [i32; 6] = [1, 31, 32, 33, 4097, 151_936];

/// A dtype of the test: f32, or one of the halves.
#[derive(Clone, Copy, Debug)]
enum DType {
    F32,
    Half(Half),
}

const DTYPES: [DType; 3] = [DType::F32, DType::Half(Half::F16), DType::Half(Half::Bf16)];

/// Logits of any dtype, kept as raw bits so one reference serves all.
#[derive(Clone, Debug, PartialEq)]
enum Logits {
    F32(Vec<f32>),
    Half(Vec<u16>),
}

impl Logits {
    fn random(dtype: DType, len: usize, rng: &mut Rng) -> Logits {
        match dtype {
            // Finite values only, so that == compares what was kept.
            DType::F32 => Logits::F32(
                (0..len)
                    .map(|_| (rng.next_u64() % 20_000) as f32 - 1e4)
                    .collect(),
            ),
            DType::Half(_) => {
                Logits::Half((0..len).map(|_| (rng.next_u64() % 0x7C00) as u16).collect())
            }
        }
    }

    fn mask(&mut self, dtype: DType, index: usize) {
        match (self, dtype) {
            (Logits::F32(v), _) => v[index] = f32::NEG_INFINITY,
            (Logits::Half(v), DType::Half(half)) => v[index] = half.neg_infinity_bits(),
            _ => unreachable!(),
        }
    }
}

fn apply_bitmask(
    logits: &mut Logits,
    dtype: DType,
    mask: &[i32],
    shape: ApplyShape,
    indices: Option<&[i32]>,
) -> treemask::Result<()> {
    match (logits, dtype) {
        (Logits::F32(v), _) => apply_token_bitmask_cpu(v, mask, shape, indices),
        (Logits::Half(v), DType::Half(half)) => {
            apply_token_bitmask_cpu_half(v, half, mask, shape, indices)
        }
        _ => unreachable!(),
    }
}

fn apply_candidates(
    logits: &mut Logits,
    dtype: DType,
    offsets: &[i32],
    candidates: &[i32],
    shape: ApplyShape,
    indices: Option<&[i32]>,
) -> treemask::Result<()> {
    match (logits, dtype) {
        (Logits::F32(v), _) => apply_token_candidates_cpu(v, offsets, candidates, shape, indices),
        (Logits::Half(v), DType::Half(half)) => {
            apply_token_candidates_cpu_half(v, half, offsets, candidates, shape, indices)
        }
        _ => unreachable!(),
    }
}

/// What the header says the result must be, element by element.
fn reference(
    input: &Logits,
    dtype: DType,
    mask: &[i32],
    shape: ApplyShape,
    indices: Option<&[i32]>,
) -> Logits {
    let mut out = input.clone();
    let touched: Vec<bool> = match indices {
        None => vec![true; shape.rows],
        Some(list) => (0..shape.rows)
            .map(|r| list.contains(&(r as i32)))
            .collect(),
    };
    for r in (0..shape.rows).filter(|&r| touched[r]) {
        for c in 0..shape.logits_width {
            let allowed = c < shape.vocab_size as usize
                && (mask[r * shape.bitmask_row_words + c / 32] as u32 >> (c % 32)) & 1 == 1;
            if !allowed {
                out.mask(dtype, r * shape.logits_row_stride + c);
            }
        }
    }
    out
}

/// A mask mixing the word kinds the kernel treats differently.
fn random_mask(rng: &mut Rng, words: usize) -> Vec<i32> {
    (0..words)
        .map(|_| match rng.below(6) {
            0 => rng.next_u64() as i32,
            1 => 0,
            2 => -1,
            3 => 1 << rng.below(32),
            4 => !(1 << rng.below(32)),
            _ => (0xFF00_FF00u32 >> rng.below(9)) as i32,
        })
        .collect()
}

#[test]
fn bitmask_apply_matches_the_reference_on_awkward_shapes() {
    let mut rng = Rng::new(7);
    for vocab in VOCABS {
        let v = vocab as usize;
        // Logits exactly V wide, padded wider (columns >= V masked), narrower.
        let mut widths = vec![v, v + 1 + rng.below(70)];
        if v > 1 {
            widths.push(v - 1 - rng.below((v - 1).min(40)));
        }
        for width in widths {
            for dtype in DTYPES {
                for extra_stride in [0, 5] {
                    let rows = if v > 5000 { 2 } else { 4 };
                    // Extra words past the vocab carry garbage the kernel must ignore.
                    let words = treemask::bitmask_words(vocab) + rng.below(2);
                    let shape = ApplyShape::new(rows, vocab)
                        .with_logits_width(width)
                        .with_logits_row_stride(width + extra_stride)
                        .with_bitmask_row_words(words);
                    let mask = random_mask(&mut rng, rows * words);
                    let input = Logits::random(dtype, rows * (width + extra_stride), &mut rng);
                    let repeats = [rows as i32 - 1, 0, rows as i32 - 1];
                    let indices = rng.coin(2).then_some(&repeats[..]);
                    let want = reference(&input, dtype, &mask, shape, indices);
                    let mut got = input.clone();
                    apply_bitmask(&mut got, dtype, &mask, shape, indices).expect("apply");
                    assert!(
                        got == want,
                        "vocab {vocab} width {width} {dtype:?} {shape:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn candidate_apply_equals_the_bitmask_of_the_same_sets() {
    let mut rng = Rng::new(5);
    for _ in 0..scaled(2) {
        for vocab in VOCABS {
            for dtype in DTYPES {
                let rows = 3;
                let v = vocab as usize;
                let width =
                    v + if rng.coin(2) { 13 } else { 0 } - if v > 9 && rng.coin(2) { 9 } else { 0 };
                let shape = ApplyShape::new(rows, vocab)
                    .with_logits_width(width)
                    .with_logits_row_stride(width + rng.below(4));
                let words = shape.bitmask_row_words;
                let mut offsets = vec![0];
                let mut candidates = Vec::new();
                let mut mask = vec![0i32; rows * words];
                for r in 0..rows {
                    let k = if r == 0 { 0 } else { rng.below(70.min(2 * v)) };
                    for _ in 0..k {
                        let t = rng.below(v); // any order, repeats allowed
                        candidates.push(t as i32);
                        mask[r * words + t / 32] |= 1 << (t % 32);
                    }
                    offsets.push(candidates.len() as i32);
                }
                let order = [2, 1];
                let indices = rng.coin(2).then_some(&order[..]);
                let input = Logits::random(dtype, rows * shape.logits_row_stride, &mut rng);
                let want = reference(&input, dtype, &mask, shape, indices);
                let mut got = input.clone();
                apply_candidates(&mut got, dtype, &offsets, &candidates, shape, indices)
                    .expect("apply");
                assert!(got == want, "vocab {vocab} {dtype:?} {shape:?}");
                let mut via_mask = input.clone();
                apply_bitmask(&mut via_mask, dtype, &mask, shape, indices).unwrap();
                assert!(via_mask == got, "vocab {vocab} {dtype:?}");
            }
        }
    }
}

/// Matcher rows end to end: masking with the row a matcher fills keeps
/// exactly its next tokens, and the candidate form agrees.
#[test]
fn masking_with_matcher_rows_keeps_exactly_the_next_tokens() {
    let mut rng = Rng::new(31);
    for i in 0..scaled(60) {
        let vocab = [100, 1000, 151_936][i % 3];
        let rt = random_trie(&mut rng, vocab);
        let trie = rt.build();
        let mut m = Matcher::new(&trie).unwrap();
        let mut row = vec![0; trie.bitmask_words()];
        for _ in 0..6 {
            m.fill_next_token_bitmask(&mut row).unwrap();
            let allowed = m.next_tokens();
            let mut logits = vec![1.0f32; vocab as usize];
            apply_token_bitmask_cpu(&mut logits, &row, ApplyShape::new(1, vocab), None).unwrap();
            let kept: Vec<i32> = (0..vocab).filter(|&t| logits[t as usize] == 1.0).collect();
            assert_eq!(kept, allowed, "trie {i}");
            let mut sparse = vec![1.0f32; vocab as usize];
            apply_token_candidates_cpu(
                &mut sparse,
                &[0, allowed.len() as i32],
                &allowed,
                ApplyShape::new(1, vocab),
                None,
            )
            .unwrap();
            assert_eq!(sparse, logits, "trie {i}");
            match allowed.iter().find(|&&t| !rt.model.is_stop(t)) {
                Some(&t) => assert!(m.accept_token(t).unwrap()),
                None => break,
            }
        }
    }
}

#[test]
fn neg_inf_patterns_are_the_ieee_ones() {
    let mut logits = [1.5f32, 2.5, 3.5];
    apply_token_bitmask_cpu(&mut logits, &[0b010], ApplyShape::new(1, 3), None).unwrap();
    assert_eq!(logits, [f32::NEG_INFINITY, 2.5, f32::NEG_INFINITY]);
    // bf16 is the top half of an f32; f16 has a 5-bit exponent.
    assert_eq!(
        (Half::Bf16.neg_infinity_bits() as u32) << 16,
        f32::NEG_INFINITY.to_bits()
    );
    assert_eq!(Half::F16.neg_infinity_bits(), 0xFC00);
    for half in [Half::F16, Half::Bf16] {
        let mut bits = [0x3C00u16, 0x3C00];
        apply_token_bitmask_cpu_half(&mut bits, half, &[0b01], ApplyShape::new(1, 2), None)
            .unwrap();
        assert_eq!(bits, [0x3C00, half.neg_infinity_bits()]);
    }
    assert!(["avx2", "scalar"].contains(&treemask::cpu_kernel_isa()));
}

#[test]
fn shapes_are_checked_before_the_library_touches_memory() {
    let mut logits = vec![1.0f32; 64];
    let mask = [0, 0];
    let shape = ApplyShape::new(2, 32);
    assert_eq!(
        (
            shape.logits_width,
            shape.logits_row_stride,
            shape.bitmask_row_words
        ),
        (32, 32, 1)
    );

    expect_error(
        apply_token_bitmask_cpu(&mut logits[..63], &mask, shape, None),
        ErrorKind::BufferTooSmall,
        "logits has 63 elements; 2 rows of logits_width 32 at logits_row_stride 32 need 64",
    );
    // The last row needs only its width, not a whole stride.
    let mut wide = vec![1.0f32; 72];
    let strided = ApplyShape::new(2, 32).with_logits_row_stride(40);
    assert_eq!(
        kind(apply_token_bitmask_cpu(
            &mut wide[..71],
            &mask,
            strided,
            None
        )),
        ErrorKind::BufferTooSmall
    );
    apply_token_bitmask_cpu(&mut wide, &mask, strided, None).unwrap();
    assert!(
        wide[32..40].iter().all(|&x| x == 1.0),
        "the stride gap is never touched"
    );
    assert!(wide[..32]
        .iter()
        .chain(&wide[40..])
        .all(|&x| x == f32::NEG_INFINITY));

    let narrow = ApplyShape::new(2, 32)
        .with_logits_width(32)
        .with_logits_row_stride(16);
    assert!(
        message(apply_token_bitmask_cpu(&mut logits, &mask, narrow, None))
            .contains("logits_row_stride 16 is smaller than logits_width 32")
    );
    expect_error(
        apply_token_bitmask_cpu(&mut logits, &mask[..1], shape, None),
        ErrorKind::BufferTooSmall,
        "bitmask has 1 words; 2 rows of bitmask_row_words 1 need 2",
    );
    let overflow = ApplyShape::new(usize::MAX, 32).with_logits_row_stride(usize::MAX / 2);
    assert!(
        message(apply_token_bitmask_cpu(&mut logits, &mask, overflow, None))
            .contains("more than usize holds")
    );
    // Rows too narrow for the columns, bad indices and vocabulary sizes are
    // refused too, with the library's own wording.
    let row_words = ApplyShape::new(1, 64).with_bitmask_row_words(1);
    assert!(
        message(apply_token_bitmask_cpu(&mut logits, &mask, row_words, None))
            .contains("bitmask_row_words 1 < 2")
    );
    let padded = ApplyShape::new(1, 33)
        .with_logits_width(64)
        .with_bitmask_row_words(1);
    assert!(
        message(apply_token_bitmask_cpu(&mut logits, &mask, padded, None))
            .contains("min(vocab_size=33, logits_width=64)")
    );
    expect_error(
        apply_token_candidates_cpu(&mut logits, &[0, 0, 0], &[], shape, Some(&[-1])),
        ErrorKind::OutOfRange,
        "indices[0] = -1 is out of range",
    );
    expect_error(
        apply_token_bitmask_cpu(&mut logits, &mask, shape, Some(&[1, 2])),
        ErrorKind::OutOfRange,
        "indices[1] = 2 is out of range [0, n_rows=2)",
    );
    assert!(message(apply_token_bitmask_cpu(
        &mut logits,
        &mask,
        ApplyShape::new(2, 0).with_logits_width(32),
        None
    ))
    .contains("vocab_size must be positive, got 0"));
    assert_eq!(logits, vec![1.0; 64], "no refused call wrote anything");
    // Nothing to touch: empty buffers are fine; Some(&[]) touches no row.
    apply_token_bitmask_cpu(&mut [], &[], ApplyShape::new(0, 32), None).unwrap();
    apply_token_bitmask_cpu(&mut logits, &mask, shape, Some(&[])).unwrap();
    assert_eq!(logits, vec![1.0; 64]);

    let cases: [(&[i32], &[i32], ErrorKind, &str); 4] = [
        (
            &[0, 2],
            &[1, 2],
            ErrorKind::InvalidArgument,
            "row_offsets has 2 entries; 2 rows need rows + 1 = 3",
        ),
        (
            &[0, 2, 1],
            &[1, 2],
            ErrorKind::InvalidArgument,
            "row_offsets[2] = 1 < row_offsets[1] = 2",
        ),
        (
            &[0, 2, 4],
            &[1, 2, 3],
            ErrorKind::OutOfRange,
            "row_offsets[2] = 4 is out of range [0, n_candidates=3]",
        ),
        (
            &[0, 1, 3],
            &[1, 40, 5],
            ErrorKind::OutOfRange,
            "row 1, candidate 0: token 40 is out of range [0, vocab_size=32)",
        ),
    ];
    for (offsets, candidates, want, text) in cases {
        let err =
            apply_token_candidates_cpu(&mut logits, offsets, candidates, shape, None).unwrap_err();
        assert_eq!(err.kind, want, "{offsets:?}");
        assert!(err.message.contains(text), "{err}");
    }
    let mut halves = vec![0u16; 63];
    assert_eq!(
        kind(apply_token_candidates_cpu_half(
            &mut halves,
            Half::Bf16,
            &[0, 0, 0],
            &[],
            shape,
            None
        )),
        ErrorKind::BufferTooSmall
    );
    assert_eq!(logits, vec![1.0; 64]);
}

/// Issue 14 item 14: as in xgrammar, logits and bitmask may have different
/// row counts when indices pick the rows; index `i` masks logits row `i`
/// with bitmask row `i`, and both must have it.
#[test]
fn indices_may_address_logits_and_bitmask_of_different_row_counts() {
    // 4 logits rows, a bitmask of 2 rows: row 1 keeps token 0, row 0 token 1.
    let mut logits = vec![1.0f32; 4 * 32];
    let mask = [0b10, 0b01];
    apply_token_bitmask_cpu(&mut logits, &mask, ApplyShape::new(4, 32), Some(&[1])).unwrap();
    let row = |r: usize, logits: &[f32]| -> Vec<bool> {
        logits[r * 32..(r + 1) * 32]
            .iter()
            .map(|v| v.is_finite())
            .collect()
    };
    let mut only0 = vec![false; 32];
    only0[0] = true;
    assert_eq!(row(1, &logits), only0);
    for r in [0, 2, 3] {
        assert!(row(r, &logits).iter().all(|&f| f), "row {r} untouched");
    }
    // An index past the bitmask's rows is refused, naming both counts.
    expect_error(
        apply_token_bitmask_cpu(&mut logits, &mask, ApplyShape::new(4, 32), Some(&[3])),
        ErrorKind::OutOfRange,
        "indices[0] = 3 is out of range [0, bitmask rows=2)",
    );
    // More bitmask rows than logits rows is fine with indices.
    let mut two = vec![1.0f32; 2 * 32];
    let big_mask = [0, 0, 0, 0b100];
    apply_token_bitmask_cpu(&mut two, &big_mask, ApplyShape::new(2, 32), Some(&[0])).unwrap();
    assert!(two[..32].iter().all(|v| v.is_infinite()));
    // Without indices the bitmask needs a row per logits row.
    expect_error(
        apply_token_bitmask_cpu(&mut logits, &mask, ApplyShape::new(4, 32), None),
        ErrorKind::BufferTooSmall,
        "bitmask has 2 words; 4 rows of bitmask_row_words 1 need 4",
    );
}
