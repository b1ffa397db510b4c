//! The bitmask layout (xgrammar's, verbatim): `i32` words, a row has
//! `ceil(vocab_size / 32)` words, token `t` is bit `t % 32` of word `t / 32`,
//! 1 = allowed; bits at or beyond `vocab_size` are 0.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
use treemask_sys as sys;

/// `ceil(vocab_size / 32)`: the `i32` words in one bitmask row; 0 when
/// `vocab_size <= 0`.
pub fn bitmask_words(vocab_size: i32) -> usize {
    // Safety: a pure function of its integer argument.
    unsafe { sys::treemask_bitmask_words(vocab_size) }
}

/// A zeroed `(batch, bitmask_words(vocab_size))` bitmask, row-major, as
/// xgrammar's `allocate_token_bitmask` makes it.
///
/// ```
/// let mask = treemask::allocate_token_bitmask(2, 151_936);
/// assert_eq!(mask.len(), 2 * 4748);
/// ```
pub fn allocate_token_bitmask(batch: usize, vocab_size: i32) -> Vec<i32> {
    vec![0; batch * bitmask_words(vocab_size)]
}

/// Whether token `t` is allowed in a bitmask row (false for `t` outside the
/// row).
///
/// ```
/// let row = [0b101, 0];
/// assert!(treemask::is_token_allowed(&row, 2));
/// assert!(!treemask::is_token_allowed(&row, 1));
/// assert!(!treemask::is_token_allowed(&row, 64));
/// ```
pub fn is_token_allowed(row: &[i32], token: i32) -> bool {
    usize::try_from(token)
        .ok()
        .and_then(|t| {
            row.get(t / 32)
                .map(|word| (*word as u32 >> (t % 32)) & 1 == 1)
        })
        .unwrap_or(false)
}
