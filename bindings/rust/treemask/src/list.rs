//! The C "list" convention: `f(out, cap)` writes `min(cap, n)` items and
//! returns `n`, so a short buffer is grown and the call repeated.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0

/// Replaces the contents of `out` with the list `fill` reports, reusing
/// `out`'s allocation when it is large enough.
///
/// # Safety
/// `fill(buf, cap)` must write at most `cap` items to `buf`, initialise the
/// first `min(cap, n)` of them, and return the full count `n`.
pub(crate) unsafe fn read_list<T: Copy>(
    out: &mut Vec<T>,
    mut fill: impl FnMut(*mut T, usize) -> usize,
) {
    out.clear();
    loop {
        let cap = out.capacity();
        let n = fill(out.as_mut_ptr(), cap);
        if n <= cap {
            // Safety: fill initialised the first n items (n <= cap), as the
            // caller promised.
            unsafe { out.set_len(n) };
            return;
        }
        // The list may change between calls only through &mut access to its
        // owner, which the callers' borrows rule out; looping is just defensive.
        out.reserve(n);
    }
}
