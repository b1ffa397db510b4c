//! Decoding modes (treemask.h, section 5, "Decoding modes"): exclusion sets
//! and label filters, the length budget, produced labels, think state,
//! speculative decoding, jump-forward in one call, and xgrammar-parity
//! queries. The mode options themselves are fields of
//! [`MatcherOptions`](crate::MatcherOptions).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
use core::fmt;
use core::ptr::{self, NonNull};

use treemask_sys as sys;

use crate::error::{check, Error, ErrorKind, Result};
use crate::list::read_list;
use crate::matcher::{optional_count, MatcherRef};
use crate::trie::Trie;

/// An immutable set of label ids that must not be produced (out-of-stock
/// items, items already shown), made once for a trie and shared by any
/// number of matchers and threads with no trie rebuild. Give it to
/// [`MatcherRef::set_label_filter`].
///
/// Reference counted in C: `clone` adds a reference, and a matcher using the
/// set keeps what it needs alive, so the value may be dropped at any time.
///
/// ```
/// use treemask::{ExclusionSet, Matcher, Trie, TrieOptions};
///
/// // Items 0 = [5 1], 1 = [5 2], 2 = [6 1].
/// let trie = Trie::from_paths(&TrieOptions::new(10, [0]), [[5, 1], [5, 2], [6, 1]])?;
/// let out_of_stock = ExclusionSet::new(&trie, &[0, 1, 99])?; // 99: no such item, ignored
/// assert_eq!(out_of_stock.n_terminals(), 2);
/// let mut m = Matcher::new(&trie)?;
/// m.set_label_filter(Some(&out_of_stock), &[], None)?;
/// assert_eq!(m.next_tokens(), vec![6]); // every item under 5 is excluded
/// # Ok::<(), treemask::Error>(())
/// ```
///
/// *Experimental* (the C header's experimental tier): may change in any minor release.
pub struct ExclusionSet {
    raw: NonNull<sys::treemask_exclusion_set>,
}

// Safety: an exclusion set is immutable after creation and atomically
// refcounted; the header declares every function taking one thread-safe, so
// the handle may move to and be shared by other threads.
unsafe impl Send for ExclusionSet {}
// Safety: as for Send; `&ExclusionSet` only reaches thread-safe C functions.
unsafe impl Sync for ExclusionSet {}

impl ExclusionSet {
    /// An exclusion set for `trie` banning `label_ids`. Ids that no path
    /// carries are ignored, so one catalogue-wide list serves every trie; for
    /// a trie without labels (an RTP-LLM dictionary) the ids are terminal
    /// node ids.
    ///
    /// # Errors
    /// `OutOfMemory`.
    pub fn new(trie: &Trie, label_ids: &[i64]) -> Result<ExclusionSet> {
        let mut out = ptr::null_mut();
        // Safety: trie is live (the set retains its own reference); the
        // library reads label_ids.len() ids; out is written only on success.
        check(unsafe {
            sys::treemask_exclusion_set_create(
                trie.as_raw(),
                label_ids.as_ptr(),
                label_ids.len(),
                &mut out,
            )
        })?;
        // Safety: on success out is a new set whose one reference we own.
        Ok(unsafe { ExclusionSet::from_raw(out) })
    }

    /// Takes over one reference to a C exclusion set.
    ///
    /// # Safety
    /// `raw` must be a valid `treemask_exclusion_set*` whose reference the
    /// caller owns and gives up.
    ///
    /// # Panics
    /// If `raw` is NULL.
    pub unsafe fn from_raw(raw: *mut sys::treemask_exclusion_set) -> ExclusionSet {
        ExclusionSet {
            raw: NonNull::new(raw).expect("ExclusionSet::from_raw: NULL treemask_exclusion_set"),
        }
    }

    /// The C handle, still owned by `self` (do not free it).
    pub fn as_raw(&self) -> *mut sys::treemask_exclusion_set {
        self.raw.as_ptr()
    }

    /// True if both values refer to the same C set.
    pub fn ptr_eq(&self, other: &ExclusionSet) -> bool {
        self.raw == other.raw
    }

    /// How many terminal nodes (label paths) the set bans.
    pub fn n_terminals(&self) -> usize {
        // Safety: self.raw is live; the function only reads it.
        unsafe { sys::treemask_exclusion_set_n_terminals(self.raw.as_ptr()) }
    }
}

impl Clone for ExclusionSet {
    /// Another reference to the same set (nothing is copied).
    fn clone(&self) -> ExclusionSet {
        // Safety: self.raw is live, and retain returns its argument with one
        // more reference, which the new value owns.
        unsafe { ExclusionSet::from_raw(sys::treemask_exclusion_set_retain(self.raw.as_ptr())) }
    }
}

impl Drop for ExclusionSet {
    fn drop(&mut self) {
        // Safety: self owns exactly one reference and gives it up here;
        // matchers using the set hold what they need themselves.
        unsafe { sys::treemask_exclusion_set_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for ExclusionSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExclusionSet")
            .field("n_terminals", &self.n_terminals())
            .finish_non_exhaustive()
    }
}

impl MatcherRef {
    /// Sets which labels this matcher may produce, replacing any earlier
    /// filter: nothing carrying an id of `shared` (an [`ExclusionSet`] of the
    /// same trie) or of `banned`, and, with `allowed`, only paths all of whose
    /// ids are in it. A prefix whose every path is unavailable is never
    /// offered (no dead ends). `reset` and clones keep the filter.
    ///
    /// # Errors
    /// With the old filter kept: after the first accepted token
    /// (`InvalidState`; call it after create or [`reset`](Self::reset)); a set
    /// of another trie, or a filter that leaves no label available
    /// (`InvalidArgument`).
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn set_label_filter(
        &mut self,
        shared: Option<&ExclusionSet>,
        banned: &[i64],
        allowed: Option<&[i64]>,
    ) -> Result<()> {
        // A Rust slice pointer is never NULL, so Some(&[]) stays an empty
        // subset (which the library refuses) rather than becoming "no subset".
        let (allowed_ptr, n_allowed) = allowed.map_or((ptr::null(), 0), |a| (a.as_ptr(), a.len()));
        // Safety: self is live and exclusively borrowed; shared is live or
        // NULL; the library reads banned.len() and n_allowed ids and keeps
        // its own copies (and a reference to the set).
        check(unsafe {
            sys::treemask_matcher_set_label_filter(
                self.as_raw(),
                shared.map_or(ptr::null(), |s| s.as_raw()),
                banned.as_ptr(),
                banned.len(),
                allowed_ptr,
                n_allowed,
            )
        })
    }

    /// Removes the label filter.
    ///
    /// # Errors
    /// After the first accepted token (`InvalidState`).
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn clear_label_filter(&mut self) -> Result<()> {
        self.set_label_filter(None, &[], None)
    }

    /// Sets the length budget: the engine will generate at most `remaining`
    /// more tokens (`None`: no budget). Each later accept that changes the
    /// state uses one; rollback gives them back; reset restores
    /// `max_new_tokens`.
    ///
    /// # Errors
    /// `OutOfRange` for a count above `i64::MAX`.
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn set_remaining_tokens(&mut self, remaining: Option<u64>) -> Result<()> {
        let raw = optional_count("remaining", remaining)?;
        // Safety: self is live and exclusively borrowed.
        check(unsafe { sys::treemask_matcher_set_remaining_tokens(self.as_raw(), raw) })
    }

    /// The length budget left now, or `None` when there is none.
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn remaining_tokens(&self) -> Option<u64> {
        // Safety: self is live; const functions may run concurrently.
        let raw = unsafe { sys::treemask_matcher_remaining_tokens(self.as_raw()) };
        u64::try_from(raw).ok()
    }

    /// [`fill_next_token_bitmask`](Self::fill_next_token_bitmask) with a
    /// length budget for this fill only (the engine will generate at most
    /// `remaining_tokens` more tokens, this one included), overriding the
    /// matcher's own; accepts keep using the matcher's.
    ///
    /// # Errors
    /// As the plain fill; `OutOfRange` for a budget above `i64::MAX`.
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn fill_next_token_bitmask_with_budget(
        &mut self,
        row: &mut [i32],
        remaining_tokens: u64,
    ) -> Result<bool> {
        let budget = optional_count("remaining_tokens", Some(remaining_tokens))?;
        // Safety: treemask_budget_fill_options is plain data; init writes every
        // field.
        let mut options: sys::treemask_budget_fill_options = unsafe { core::mem::zeroed() };
        // Safety: options is a valid, writable struct.
        unsafe { sys::treemask_budget_fill_options_init(&mut options) };
        options.remaining_tokens = budget;
        let mut need_apply = true;
        // Safety: self is live and exclusively borrowed; the library writes
        // at most row.len() words and only reads options during the call.
        check(unsafe {
            sys::treemask_matcher_fill_next_token_bitmask(
                self.as_raw(),
                row.as_mut_ptr(),
                row.len(),
                &options.fill, // its struct_size covers the budget
                &mut need_apply,
            )
        })?;
        Ok(need_apply)
    }

    /// The labels produced so far, in order. Multi-label: the ids of each
    /// produced label; otherwise the ids of the node the sequence terminated
    /// at, once terminated.
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn produced_labels(&self) -> Vec<i64> {
        let mut out = Vec::new();
        // Safety: produced_labels follows the list convention.
        unsafe { self.read_into(&mut out, sys::treemask_matcher_produced_labels) };
        out
    }

    /// True while inside thinking (think mode).
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn is_thinking(&self) -> bool {
        // Safety: self is live; const functions may run concurrently.
        unsafe { sys::treemask_matcher_is_thinking(self.as_raw()) }
    }

    /// Speculative decoding: accepts `tokens` in order until one is not
    /// allowed or the sequence terminates, and returns how many were
    /// accepted (`rollback` of that many undoes the call). A rejected draft
    /// token is not a failure: the failure policy does not apply, and
    /// [`last_error_message`](crate::last_error_message) is not set.
    ///
    /// # Errors
    /// `InvalidState` in the `StickyError` failed state.
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn accept_tokens(&mut self, tokens: &[i32]) -> Result<usize> {
        let mut n_accepted = 0;
        // Safety: self is live and exclusively borrowed; the library reads
        // tokens.len() tokens.
        check(unsafe {
            sys::treemask_matcher_accept_tokens(
                self.as_raw(),
                tokens.as_ptr(),
                tokens.len(),
                &mut n_accepted,
            )
        })?;
        Ok(n_accepted)
    }

    /// Fills the masks of a draft without changing the matcher: row 0 is the
    /// mask of the current state, row `i + 1` the mask after draft node `i`,
    /// whose state is its parent's plus `tokens[i]`. `parents`: `None` for a
    /// chain, or one entry per token with `parents[i]` in `-1..i` (-1 = the
    /// current state) for a draft tree listed in DFS or BFS order. A node
    /// whose token is not allowed after its parent, and every node below it,
    /// gets an all-zero row. `bitmask` holds `tokens.len() + 1` rows of
    /// `bitmask_row_words` words. Returns how many rows are real masks.
    ///
    /// # Errors
    /// Nothing written: `parents` of another length than `tokens`
    /// (`InvalidArgument`), a bad parent (named), a buffer shorter than the
    /// rows or rows narrower than the vocabulary (`BufferTooSmall`); in the
    /// `StickyError` failed state `InvalidState`.
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn fill_draft_bitmasks(
        &self,
        tokens: &[i32],
        parents: Option<&[i32]>,
        bitmask: &mut [i32],
        bitmask_row_words: usize,
    ) -> Result<usize> {
        if let Some(parents) = parents {
            if parents.len() != tokens.len() {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "parents has {} entries for {} draft tokens",
                        parents.len(),
                        tokens.len()
                    ),
                ));
            }
        }
        let rows = tokens.len() + 1;
        if rows
            .checked_mul(bitmask_row_words)
            .map_or(true, |n| n > bitmask.len())
        {
            return Err(Error::new(
                ErrorKind::BufferTooSmall,
                format!(
                    "bitmask has {} words; {rows} rows (one per draft token plus one) of \
                     {bitmask_row_words} words need more",
                    bitmask.len()
                ),
            ));
        }
        let mut n_valid = 0;
        // Safety: self is live (a const function: it changes no matcher
        // state); tokens and parents (same length) are read for tokens.len()
        // entries; tokens.len() + 1 rows of bitmask_row_words words fit in bitmask
        // (all checked above), and the library also gets bitmask.len().
        check(unsafe {
            sys::treemask_matcher_fill_draft_bitmasks(
                self.as_raw(),
                tokens.as_ptr(),
                parents.map_or(ptr::null(), <[i32]>::as_ptr),
                tokens.len(),
                bitmask.as_mut_ptr(),
                bitmask.len(),
                bitmask_row_words,
                &mut n_valid,
            )
        })?;
        Ok(n_valid)
    }

    /// Jump-forward in one call: accepts the whole
    /// [`forced_tokens`](Self::forced_tokens) chain and returns it.
    ///
    /// # Errors
    /// `InvalidState` in the `StickyError` failed state.
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn accept_forced_tokens(&mut self) -> Result<Vec<i32>> {
        let mut out = Vec::new();
        self.accept_forced_tokens_into(&mut out)?;
        Ok(out)
    }

    /// [`accept_forced_tokens`](Self::accept_forced_tokens) into a caller's
    /// vector, replacing its contents and reusing its allocation.
    ///
    /// # Errors
    /// As `accept_forced_tokens`.
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn accept_forced_tokens_into(&mut self, out: &mut Vec<i32>) -> Result<()> {
        out.clear();
        // Safety: self is live; a size query (cap 0) writes nothing.
        let n = unsafe { sys::treemask_matcher_forced_tokens(self.as_raw(), ptr::null_mut(), 0) };
        out.reserve(n);
        let cap = out.capacity();
        let mut n_accepted = 0;
        // Safety: self is live and exclusively borrowed; the library writes
        // at most cap tokens into out's spare capacity.
        check(unsafe {
            sys::treemask_matcher_accept_forced_tokens(
                self.as_raw(),
                out.as_mut_ptr(),
                cap,
                &mut n_accepted,
            )
        })?;
        // Safety: the library initialised the first min(cap, n_accepted)
        // tokens.
        unsafe { out.set_len(n_accepted.min(cap)) };
        if n_accepted > cap {
            // The header promises the accepted chain is the forced chain just
            // measured; the matcher has advanced either way.
            return Err(Error::new(
                ErrorKind::Internal,
                format!("accepted {n_accepted} forced tokens but measured the chain as {n}"),
            ));
        }
        Ok(())
    }

    /// The stop tokens of this matcher (`override_stop_tokens`, or the
    /// trie's), ascending and distinct.
    pub fn stop_tokens(&self) -> Vec<i32> {
        let mut out = Vec::new();
        // Safety: stop_tokens follows the list convention.
        unsafe { self.read_into(&mut out, sys::treemask_matcher_stop_tokens) };
        out
    }

    /// The `max_rollback_tokens` this matcher was created with (0 =
    /// unlimited).
    pub fn max_rollback_tokens(&self) -> usize {
        // Safety: self is live; const functions may run concurrently.
        unsafe { sys::treemask_matcher_max_rollback_tokens(self.as_raw()) }
    }

    /// A one-line description for logs: phase, node and path, allowed count,
    /// think / separator progress, produced labels, budget, rollback depth.
    /// The format is for humans and may change.
    pub fn debug_string(&self) -> String {
        let mut text = Vec::new();
        // Safety: self is live; treemask_matcher_debug_string writes
        // min(cap - 1, n) bytes plus a NUL when cap > 0 and returns n, the
        // full length; read_list keeps the first n items once cap > n, so
        // the NUL (byte n) is never kept.
        unsafe {
            read_list(&mut text, |buf: *mut u8, cap| {
                let n = sys::treemask_matcher_debug_string(self.as_raw(), buf.cast(), cap);
                if n < cap {
                    n
                } else {
                    n + 1 // ask for room for the NUL too
                }
            })
        };
        String::from_utf8_lossy(&text).into_owned()
    }
}
