//! State arrays (treemask.h, section 6): with a plain trie (no decoding
//! modes, no rollback) the whole state of a sequence is one `u32`, so an
//! engine keeps the states itself, fills rows from them and advances them;
//! beam reordering is then a gather. The CUDA kernels follow the same rules.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
use treemask_sys as sys;

use crate::error::{check, Error, ErrorKind, Result};
use crate::matcher::{FailurePolicy, MatcherRef};
use crate::trie::Trie;

// bindgen types every macro constant as a signed integer (i32, or i64 when
// the value needs it); the casts restore the header's uint32_t.

/// The state of a sequence at the root (node 0).
///
/// *Experimental* (the C header's experimental tier): may change in any minor release.
pub const STATE_ROOT: u32 = sys::TREEMASK_STATE_ROOT as u32;
/// The state of a sequence a stop token ended: only stop tokens are allowed.
///
/// *Experimental* (the C header's experimental tier): may change in any minor release.
pub const STATE_TERMINATED: u32 = sys::TREEMASK_STATE_TERMINATED as u32;
/// The state after a rejection under [`FailurePolicy::FailClosed`] or
/// [`FailurePolicy::StickyError`]: only stop tokens are allowed (and, except
/// under `StickyError`, terminate).
///
/// *Experimental* (the C header's experimental tier): may change in any minor release.
pub const STATE_FAILED: u32 = sys::TREEMASK_STATE_FAILED as u32;

impl Trie {
    /// Writes bitmask row `i` (at `bitmask[i * bitmask_row_words..]`, every word)
    /// from `states[i]`: the children of a node state, plus the stop tokens
    /// if it is terminal; only the stop tokens for [`STATE_TERMINATED`] and
    /// [`STATE_FAILED`].
    ///
    /// ```
    /// use treemask::{FailurePolicy, Trie, TrieOptions, STATE_ROOT, STATE_TERMINATED};
    ///
    /// let trie = Trie::from_paths(&TrieOptions::new(40, [0]), [[3, 4], [5, 6]])?;
    /// let words = trie.bitmask_words();
    /// let mut states = [STATE_ROOT, STATE_ROOT];
    /// let mut accepted = [false; 2];
    /// trie.advance_states(&mut states, &[3, 7], FailurePolicy::Reject, Some(&mut accepted))?;
    /// assert_eq!(accepted, [true, false]); // 7 is not a child of the root
    /// let mut rows = vec![0; 2 * words];
    /// trie.fill_states(&states, &mut rows, words)?;
    /// assert!(treemask::is_token_allowed(&rows[..words], 4));
    /// assert!(treemask::is_token_allowed(&rows[words..], 5));
    /// trie.advance_states(&mut states, &[4, -1], FailurePolicy::Reject, None)?; // -1: no token
    /// trie.advance_states(&mut states, &[0, -1], FailurePolicy::Reject, None)?;
    /// assert_eq!(states[0], STATE_TERMINATED);
    /// # Ok::<(), treemask::Error>(())
    /// ```
    ///
    /// # Errors
    /// Nothing written: `bitmask` shorter than `states.len() *
    /// bitmask_row_words` or `bitmask_row_words` below [`bitmask_words`](Self::bitmask_words)
    /// (`BufferTooSmall`); a state that is neither a node id nor reserved
    /// (`OutOfRange`, naming its index).
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn fill_states(
        &self,
        states: &[u32],
        bitmask: &mut [i32],
        bitmask_row_words: usize,
    ) -> Result<()> {
        let needed = states.len().checked_mul(bitmask_row_words);
        if needed.map_or(true, |n| n > bitmask.len()) {
            return Err(Error::new(
                ErrorKind::BufferTooSmall,
                format!(
                    "bitmask has {} words; {} states of {bitmask_row_words} words per row need more",
                    bitmask.len(),
                    states.len()
                ),
            ));
        }
        // Safety: self is live (a trie is shared read-only); the library
        // reads states.len() states and writes states.len() rows of
        // bitmask_row_words words, which fit in bitmask (checked above).
        check(unsafe {
            sys::treemask_trie_fill_states(
                self.as_raw(),
                states.as_ptr(),
                states.len(),
                bitmask.as_mut_ptr(),
                bitmask_row_words,
            )
        })
    }

    /// Advances `states[i]` by `tokens[i]` in place, by the matcher's rules
    /// without modes, `terminate_without_stop_token` or a pad token; a token
    /// < 0 means no token for that state this step. `accepted` (one entry
    /// per state) is false only where a token was rejected.
    ///
    /// # Errors
    /// Nothing changed: `tokens` or `accepted` of another length than
    /// `states` (`InvalidArgument`); a state out of range (`OutOfRange`,
    /// naming its index).
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn advance_states(
        &self,
        states: &mut [u32],
        tokens: &[i32],
        failure_policy: FailurePolicy,
        accepted: Option<&mut [bool]>,
    ) -> Result<()> {
        let n = states.len();
        if tokens.len() != n {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("tokens has {} entries for {n} states", tokens.len()),
            ));
        }
        let accepted_ptr = match accepted {
            None => core::ptr::null_mut(),
            Some(a) if a.len() == n => a.as_mut_ptr(),
            Some(a) => {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("accepted has {} entries for {n} states", a.len()),
                ))
            }
        };
        // Safety: self is live; states, tokens and accepted (when given) all
        // have n entries (checked above), so the library reads and writes in
        // bounds; the borrows keep them from aliasing each other.
        check(unsafe {
            sys::treemask_trie_advance_states(
                self.as_raw(),
                states.as_mut_ptr(),
                tokens.as_ptr(),
                n,
                failure_policy.to_raw(),
                accepted_ptr,
            )
        })
    }
}

impl MatcherRef {
    /// The state-array form of this matcher's state: its node while active,
    /// [`STATE_TERMINATED`] once terminated, [`STATE_FAILED`] when closed or
    /// failed. Only a matcher without decoding modes continues identically as
    /// a state (history, pad token and `terminate_without_stop_token` stay
    /// with the matcher).
    ///
    /// # Errors
    /// `InvalidState` for a state the form cannot express (a matcher in a
    /// decoding mode).
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn state(&self) -> Result<u32> {
        let mut state = 0;
        // Safety: self is live; const functions may run concurrently; state
        // is written only on success.
        check(unsafe { sys::treemask_matcher_get_state(self.as_raw(), &mut state) })?;
        Ok(state)
    }
}
