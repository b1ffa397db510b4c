//! [`Matcher`]: the decoding state of one sequence (one beam).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
use core::fmt;
use core::mem::MaybeUninit;
use core::ptr::{self, NonNull};

use treemask_sys as sys;

use crate::error::{check, Error, ErrorKind, Result};
use crate::list::read_list;
use crate::trie::Trie;

/// What [`Matcher::accept_token`] does with a token that is not allowed. In
/// every policy the call returns `Ok(false)` and
/// [`last_error_message`](crate::last_error_message) says why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FailurePolicy {
    /// The state is unchanged (xgrammar).
    #[default]
    Reject,
    /// From then on only stop tokens are allowed (RTP-LLM).
    FailClosed,
    /// The matcher is failed until [`Matcher::reset`] (llguidance): fills
    /// write only the stop tokens and return `InvalidState`, accepts and
    /// rollbacks return `InvalidState`.
    StickyError,
}

impl FailurePolicy {
    fn to_raw(self) -> i32 {
        match self {
            FailurePolicy::Reject => sys::TREEMASK_FAILURE_REJECT,
            FailurePolicy::FailClosed => sys::TREEMASK_FAILURE_FAIL_CLOSED,
            FailurePolicy::StickyError => sys::TREEMASK_FAILURE_STICKY_ERROR,
        }
    }
}

/// How a matcher behaves. `MatcherOptions::default()` gives the library's
/// defaults; fields may be added in later versions (hence
/// `#[non_exhaustive]`).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatcherOptions {
    /// What a rejected token does (default: [`FailurePolicy::Reject`]).
    pub failure_policy: FailurePolicy,
    /// Terminate as soon as a node without children is reached, in the accept
    /// that reached it, with no stop token needed (default: false).
    pub terminate_without_stop_token: bool,
    /// How many accepts [`Matcher::rollback`] may undo; 0 = unlimited (the
    /// history is then bounded by the longest path). Default: 0.
    pub max_rollback_tokens: usize,
    /// After termination this token is accepted and changes nothing, like a
    /// stop token (for engines that pad finished rows). Default: none.
    pub pad_token: Option<i32>,
}

impl Default for MatcherOptions {
    fn default() -> MatcherOptions {
        let raw = raw_matcher_options_defaults();
        MatcherOptions {
            failure_policy: FailurePolicy::default(),
            terminate_without_stop_token: raw.terminate_without_stop_token,
            max_rollback_tokens: raw.max_rollback_tokens,
            pad_token: None,
        }
    }
}

impl MatcherOptions {
    fn to_raw(&self) -> Result<sys::treemask_matcher_options> {
        let mut raw = raw_matcher_options_defaults();
        raw.failure_policy = self.failure_policy.to_raw();
        raw.terminate_without_stop_token = self.terminate_without_stop_token;
        raw.max_rollback_tokens = self.max_rollback_tokens;
        raw.pad_token = match self.pad_token {
            None => -1,
            // -1 means "none" to the C library; a negative Some is a mistake.
            Some(token) if token < 0 => {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("pad_token is Some({token}); use None for no pad token"),
                ))
            }
            Some(token) => token,
        };
        Ok(raw)
    }
}

fn raw_matcher_options_defaults() -> sys::treemask_matcher_options {
    let mut raw = MaybeUninit::<sys::treemask_matcher_options>::uninit();
    // Safety: treemask_matcher_options_init writes struct_size and every
    // field of the struct it is given, so it is fully initialised afterwards.
    unsafe {
        sys::treemask_matcher_options_init(raw.as_mut_ptr());
        raw.assume_init()
    }
}

/// Follows one generated sequence through a [`Trie`]: every decode step, fill
/// the next-token bitmask, sample, and [`accept_token`](Self::accept_token)
/// the sampled token.
///
/// A matcher holds its own reference to the trie, so it may outlive the
/// `Trie` value it was made from. `Clone` makes an independent copy with the
/// same state (cheap: the rollback history is shared copy-on-write).
///
/// ```
/// use treemask::{Matcher, Trie, TrieOptions};
///
/// let eos = 9;
/// let trie = Trie::from_paths(&TrieOptions::new(10, [eos]), [[1, 2], [1, 3]])?;
/// let mut matcher = Matcher::new(&trie)?;
/// let mut row = vec![0; trie.bitmask_words()];
/// assert!(matcher.fill_next_token_bitmask(&mut row)?); // need_apply
/// assert_eq!(row[0], 1 << 1);
/// assert!(matcher.accept_token(1)?);
/// assert_eq!(matcher.next_tokens(), vec![2, 3]);
/// assert!(!matcher.accept_token(4)?); // rejected, state unchanged
/// assert!(matcher.accept_token(3)? && matcher.accept_token(eos)?);
/// assert!(matcher.is_terminated());
/// assert_eq!(matcher.label_ids(), vec![1]); // path 1 = [1, 3]
/// # Ok::<(), treemask::Error>(())
/// ```
pub struct Matcher {
    raw: NonNull<sys::treemask_matcher>,
}

// Safety: a treemask_matcher has no affinity to the thread that made it (no
// thread-local state; its trie is thread-safe and atomically refcounted), so
// it may be moved to another thread; &mut self keeps use to one thread at a
// time.
unsafe impl Send for Matcher {}
// Safety: `&Matcher` methods call only functions taking a const matcher,
// which the header allows to run concurrently with each other; everything
// that changes the state takes `&mut self`.
unsafe impl Sync for Matcher {}

impl Matcher {
    /// A matcher at the root of `trie`, with default options.
    ///
    /// # Errors
    /// `OutOfMemory`.
    pub fn new(trie: &Trie) -> Result<Matcher> {
        Matcher::with_options(trie, &MatcherOptions::default())
    }

    /// A matcher at the root of `trie`.
    ///
    /// # Errors
    /// A `pad_token` outside `[0, vocab_size)` (`OutOfRange`, or
    /// `InvalidArgument` for a negative one); `OutOfMemory`.
    pub fn with_options(trie: &Trie, options: &MatcherOptions) -> Result<Matcher> {
        let raw_options = options.to_raw()?;
        let mut out = ptr::null_mut();
        // Safety: trie.as_raw() is a live trie (the matcher retains its own
        // reference); raw_options is a fully initialised options struct; out
        // is written only on success.
        check(unsafe { sys::treemask_matcher_create(trie.as_raw(), &raw_options, &mut out) })?;
        // Safety: on success out is a new matcher that we own.
        Ok(unsafe { Matcher::from_raw(out) })
    }

    /// Takes ownership of a C matcher.
    ///
    /// # Safety
    /// `raw` must be a valid `treemask_matcher*` that the caller owns and
    /// gives up (nothing else may use or free it afterwards).
    ///
    /// # Panics
    /// If `raw` is NULL.
    pub unsafe fn from_raw(raw: *mut sys::treemask_matcher) -> Matcher {
        Matcher {
            raw: NonNull::new(raw).expect("Matcher::from_raw: NULL treemask_matcher"),
        }
    }

    /// The C handle, still owned by `self` (do not free it); for calling
    /// treemask-sys functions this crate does not wrap.
    pub fn as_raw(&self) -> *mut sys::treemask_matcher {
        self.raw.as_ptr()
    }

    /// A copy with the same state, history and options.
    ///
    /// # Errors
    /// `InvalidState` in the [`FailurePolicy::StickyError`] failed state;
    /// `OutOfMemory`.
    pub fn try_clone(&self) -> Result<Matcher> {
        let mut out = ptr::null_mut();
        // Safety: self.raw is live; out is written only on success.
        check(unsafe { sys::treemask_matcher_clone(self.raw.as_ptr(), &mut out) })?;
        // Safety: on success out is a new matcher that we own.
        Ok(unsafe { Matcher::from_raw(out) })
    }

    /// Writes the next-token bitmask into `row` (all of it, whatever it held;
    /// bits at or beyond `vocab_size` are 0): bit `t` is set iff `t` is a child
    /// token of the current node, or a stop token at a terminal node. Once
    /// terminated (or closed after a `FailClosed` rejection) only the stop
    /// tokens are set.
    ///
    /// Returns `need_apply`: false iff every token is allowed, so masking the
    /// logits can be skipped.
    ///
    /// # Errors
    /// `row` shorter than [`Trie::bitmask_words`] (`BufferTooSmall`,
    /// nothing written); in the `StickyError` failed state `InvalidState`,
    /// with the row written (stop tokens only).
    pub fn fill_next_token_bitmask(&mut self, row: &mut [i32]) -> Result<bool> {
        let mut need_apply = true;
        // Safety: self.raw is live and exclusively borrowed; the library
        // writes at most row.len() words.
        check(unsafe {
            sys::treemask_matcher_fill_next_token_bitmask(
                self.raw.as_ptr(),
                row.as_mut_ptr(),
                row.len(),
                &mut need_apply,
            )
        })?;
        Ok(need_apply)
    }

    /// Feeds the sampled token: `Ok(true)` if it was accepted (a child token
    /// advances; a stop token at a terminal node terminates; after
    /// termination stop tokens and the pad token change nothing).
    ///
    /// `Ok(false)` if it was rejected (any other token, ids outside the
    /// vocabulary included); [`last_error_message`](crate::last_error_message)
    /// then says why, and the [`FailurePolicy`] applies.
    ///
    /// # Errors
    /// `InvalidState` in the `StickyError` failed state.
    pub fn accept_token(&mut self, token: i32) -> Result<bool> {
        let mut accepted = false;
        // Safety: self.raw is live and exclusively borrowed.
        check(unsafe {
            sys::treemask_matcher_accept_token(self.raw.as_ptr(), token, &mut accepted)
        })?;
        Ok(accepted)
    }

    /// Undoes the last `n_tokens` accepts that changed the state (a
    /// terminating stop token counts, and un-terminates). 0 does nothing.
    ///
    /// # Errors
    /// With the state unchanged: more than
    /// [`rollback_depth`](Self::rollback_depth) (`OutOfRange`); closed after a
    /// `FailClosed` rejection or failed after a `StickyError` one
    /// (`InvalidState`: use [`reset`](Self::reset)).
    pub fn rollback(&mut self, n_tokens: usize) -> Result<()> {
        // Safety: self.raw is live and exclusively borrowed.
        check(unsafe { sys::treemask_matcher_rollback(self.raw.as_ptr(), n_tokens) })
    }

    /// Back to the root with an empty history, whatever the state.
    pub fn reset(&mut self) {
        // Safety: self.raw is live and exclusively borrowed.
        unsafe { sys::treemask_matcher_reset(self.raw.as_ptr()) }
    }

    /// True once a stop token (or, with `terminate_without_stop_token`, a
    /// leaf) ended the sequence. False in the `StickyError` failed state.
    pub fn is_terminated(&self) -> bool {
        // Safety: self.raw is live; const functions may run concurrently.
        unsafe { sys::treemask_matcher_is_terminated(self.raw.as_ptr()) }
    }

    /// True iff accepting a stop token now would terminate: the current node
    /// is terminal, or the matcher is closed after a `FailClosed` rejection.
    pub fn can_terminate(&self) -> bool {
        // Safety: self.raw is live; const functions may run concurrently.
        unsafe { sys::treemask_matcher_can_terminate(self.raw.as_ptr()) }
    }

    /// How many accepts [`rollback`](Self::rollback) can undo right now.
    pub fn rollback_depth(&self) -> usize {
        // Safety: self.raw is live; const functions may run concurrently.
        unsafe { sys::treemask_matcher_rollback_depth(self.raw.as_ptr()) }
    }

    /// The allowed next tokens, ascending (stop tokens included when
    /// allowed). Empty in the `StickyError` failed state.
    pub fn next_tokens(&self) -> Vec<i32> {
        let mut out = Vec::new();
        self.next_tokens_into(&mut out);
        out
    }

    /// [`next_tokens`](Self::next_tokens) into a caller's vector, replacing its
    /// contents and reusing its allocation (no allocation per decode step once
    /// it is large enough).
    pub fn next_tokens_into(&self, out: &mut Vec<i32>) {
        // Safety: self.raw is live; treemask_matcher_next_tokens writes
        // min(cap, n) tokens to a buffer with room for cap and returns n.
        unsafe {
            read_list(out, |buf, cap| {
                sys::treemask_matcher_next_tokens(self.raw.as_ptr(), buf, cap)
            })
        }
    }

    /// Jump-forward: the longest chain of tokens each of which is the only
    /// child of a non-terminal node, starting here. Stop tokens are never
    /// included; empty once terminated, closed or failed.
    pub fn forced_tokens(&self) -> Vec<i32> {
        let mut out = Vec::new();
        self.forced_tokens_into(&mut out);
        out
    }

    /// [`forced_tokens`](Self::forced_tokens) into a caller's vector, reusing
    /// its allocation.
    pub fn forced_tokens_into(&self, out: &mut Vec<i32>) {
        // Safety: self.raw is live; treemask_matcher_forced_tokens writes
        // min(cap, n) tokens to a buffer with room for cap and returns n.
        unsafe {
            read_list(out, |buf, cap| {
                sys::treemask_matcher_forced_tokens(self.raw.as_ptr(), buf, cap)
            })
        }
    }

    /// The label ids of the current node, ascending and distinct; empty at a
    /// non-terminal node, when closed or failed. Still readable after
    /// termination (the labels of the node the sequence ended at).
    pub fn label_ids(&self) -> Vec<i64> {
        let mut out = Vec::new();
        // Safety: self.raw is live; treemask_matcher_label_ids writes
        // min(cap, n) ids to a buffer with room for cap and returns n.
        unsafe {
            read_list(&mut out, |buf, cap| {
                sys::treemask_matcher_label_ids(self.raw.as_ptr(), buf, cap)
            })
        };
        out
    }

    /// The trie this matcher follows (another reference to it).
    pub fn trie(&self) -> Trie {
        // Safety: self.raw is live and treemask_matcher_trie returns its
        // trie, borrowed and non-NULL; retain gives the new value its own
        // reference, so it stays valid after the matcher is gone.
        unsafe {
            Trie::from_raw(sys::treemask_trie_retain(sys::treemask_matcher_trie(
                self.raw.as_ptr(),
            )))
        }
    }
}

impl Clone for Matcher {
    /// See [`try_clone`](Matcher::try_clone).
    ///
    /// # Panics
    /// In the `StickyError` failed state, or when out of memory; use
    /// `try_clone` to handle those.
    fn clone(&self) -> Matcher {
        self.try_clone()
            .unwrap_or_else(|e| panic!("Matcher::clone failed: {e}"))
    }
}

impl Drop for Matcher {
    fn drop(&mut self) {
        // Safety: self owns the matcher; nothing else uses it afterwards. The
        // matcher releases its own trie reference.
        unsafe { sys::treemask_matcher_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Matcher")
            .field("can_terminate", &self.can_terminate())
            .field("is_terminated", &self.is_terminated())
            .field("rollback_depth", &self.rollback_depth())
            .finish_non_exhaustive()
    }
}
