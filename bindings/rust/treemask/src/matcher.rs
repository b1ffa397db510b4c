//! [`Matcher`]: the decoding state of one sequence (one beam), and
//! [`MatcherRef`], the borrowed form every matcher method lives on.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
use core::borrow::{Borrow, BorrowMut};
use core::fmt;
use core::marker::{PhantomData, PhantomPinned};
use core::mem::MaybeUninit;
use core::ops::{Deref, DerefMut};
use core::ptr::{self, NonNull};

use treemask_sys as sys;

use crate::error::{check, Error, ErrorKind, Result};
use crate::list::read_list;
use crate::trie::Trie;

/// What one matcher did ([`MatcherRef::counters`], `treemask_matcher_counters`).
///
/// *Experimental* (the C header's experimental tier): may change in any minor release.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MatcherCounters {
    /// Bitmask rows written for it: its own fills and batch fills of its slot.
    pub n_fills: u64,
    /// Accepted tokens that advanced the state (what rollback can undo).
    pub n_accepted_tokens: u64,
    /// Tokens refused (`accept_token` returned `Ok(false)`), in every policy.
    pub n_rejected_tokens: u64,
    /// Rejections that closed (`FailClosed`) or failed (`StickyError`) it.
    pub n_fail_closed: u64,
    /// Accepts undone by rollback.
    pub n_rolled_back_tokens: u64,
    /// Resets.
    pub n_resets: u64,
}

/// What [`MatcherRef::accept_token`] does with a token that is not allowed.
/// In every policy the call returns `Ok(false)`; a rejection is not an
/// error, so [`last_error_message`](crate::last_error_message) is not set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FailurePolicy {
    /// The state is unchanged (xgrammar).
    #[default]
    Reject,
    /// From then on only stop tokens are allowed (RTP-LLM).
    FailClosed,
    /// The matcher is failed until [`MatcherRef::reset`] (llguidance): fills
    /// write only the stop tokens and return `InvalidState`, accepts and
    /// rollbacks return `InvalidState`.
    StickyError,
}

impl FailurePolicy {
    pub(crate) fn to_raw(self) -> i32 {
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
///
/// The decoding modes (multi-label, hierarchical labels, think mode, length
/// budget, stop-token override) compose freely; see "Decoding modes" in
/// `treemask.h` for the full rules. An inconsistent combination is an error
/// at [`Matcher::with_options`] that names the option and token.
///
/// *Experimental* (the C header's experimental tier): every field after
/// `pad_token` (the C `treemask_mode_options`) may change in any minor
/// release.
///
/// ```
/// use treemask::{Matcher, MatcherOptions, Trie, TrieOptions};
///
/// // Labels [10], [12 13]; "10, 12 13" separated by token 20.
/// let trie = Trie::from_paths(&TrieOptions::new(32, [0]), [&[10][..], &[12, 13]])?;
/// let mut options = MatcherOptions::default();
/// options.label_separator = vec![20];
/// options.max_labels = 2;
/// let mut m = Matcher::with_options(&trie, &options)?;
/// assert_eq!(m.accept_tokens(&[10, 20, 12, 13])?, 4);
/// assert_eq!(m.next_tokens(), vec![0]); // max_labels reached: only the stop token
/// assert!(m.accept_token(0)? && m.is_terminated());
/// assert_eq!(m.produced_labels(), vec![0, 1]);
/// # Ok::<(), treemask::Error>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatcherOptions {
    /// What a rejected token does (default: [`FailurePolicy::Reject`]).
    pub failure_policy: FailurePolicy,
    /// Terminate as soon as a node without children is reached (with modes:
    /// as soon as only stop tokens are allowed), in the accept that reached
    /// it, with no stop token needed (default: false).
    pub terminate_without_stop_token: bool,
    /// How many accepts [`MatcherRef::rollback`] may undo; 0 = unlimited (the
    /// history is then bounded by the longest path). Default: 0.
    pub max_rollback_tokens: usize,
    /// After termination this token is accepted and changes nothing, like a
    /// stop token (for engines that pad finished rows). Default: none.
    pub pad_token: Option<i32>,
    /// Multi-label mode: after a complete label this token sequence (e.g. the
    /// tokens of `" |"`) leads back to the root for another label; each label
    /// is produced at most once. Empty (default): one label per sequence.
    pub label_separator: Vec<i32>,
    /// At most this many labels per sequence; 0 = unlimited (default). Needs
    /// `label_separator`.
    pub max_labels: usize,
    /// Hierarchical labels: true = a sequence may end (or take the separator)
    /// only at a leaf; false (default) = at any terminal node.
    pub leaves_only: bool,
    /// Think mode: the token sequence that closes thinking (e.g.
    /// `"</think>"` plus a newline). While thinking every token is allowed.
    /// Empty (default): no think mode.
    pub think_end_tokens: Vec<i32>,
    /// A token that opens thinking when it is the first token (e.g.
    /// `"<think>"`). Default: none.
    pub think_begin_token: Option<i32>,
    /// True: the sequence starts inside thinking (the prompt ended with
    /// `"<think>"`). Default: false.
    pub start_in_thinking: bool,
    /// Thinking tokens allowed before the end sequence is forced; `Some(0)`
    /// forces it at once. Default: `None` (unlimited).
    pub max_thinking_tokens: Option<u64>,
    /// Length budget: the engine's `max_new_tokens`. Only branches that reach
    /// a label end within the tokens left are offered, so the budget never
    /// cuts a label in half. Default: `None`.
    pub max_new_tokens: Option<u64>,
    /// Replaces the trie's stop tokens for this matcher (xgrammar's
    /// `override_stop_tokens`). Empty (default): the trie's.
    pub override_stop_tokens: Vec<i32>,
    /// Think mode: once a prefix of `think_end_tokens` is emitted naturally,
    /// force the rest, as RTP-LLM does. Default: false (only a spent budget
    /// forces; end sequences often start with a token ordinary thinking text
    /// contains). `max_thinking_tokens: Some(0)` forces the end at once;
    /// `None` is RTP-LLM's `<= 0` (no think processor, no budget).
    pub think_force_end_after_prefix: bool,
}

impl Default for MatcherOptions {
    fn default() -> MatcherOptions {
        let raw = raw_matcher_options_defaults();
        MatcherOptions {
            failure_policy: FailurePolicy::default(),
            terminate_without_stop_token: raw.matcher.terminate_without_stop_token,
            max_rollback_tokens: raw.matcher.max_rollback_tokens,
            pad_token: None,
            label_separator: Vec::new(),
            max_labels: raw.max_labels,
            leaves_only: raw.leaves_only,
            think_end_tokens: Vec::new(),
            think_begin_token: None,
            start_in_thinking: raw.start_in_thinking,
            max_thinking_tokens: None,
            max_new_tokens: None,
            override_stop_tokens: Vec::new(),
            think_force_end_after_prefix: raw.think_force_end_after_prefix,
        }
    }
}

impl MatcherOptions {
    /// The C options struct. It borrows the vectors of `self`, so it must
    /// not outlive `self` (the library copies them at create).
    /// The experimental extension of the stable options (`treemask.h`,
    /// "Stability tiers"): the library reads the mode fields because
    /// `raw.matcher.struct_size` covers them.
    fn to_raw(&self) -> Result<sys::treemask_mode_options> {
        let mut raw = raw_matcher_options_defaults();
        raw.matcher.failure_policy = self.failure_policy.to_raw();
        raw.matcher.terminate_without_stop_token = self.terminate_without_stop_token;
        raw.matcher.max_rollback_tokens = self.max_rollback_tokens;
        raw.matcher.pad_token = optional_token("pad_token", self.pad_token)?;
        raw.label_separator = self.label_separator.as_ptr();
        raw.n_label_separator = self.label_separator.len();
        raw.max_labels = self.max_labels;
        raw.leaves_only = self.leaves_only;
        raw.think_end_tokens = self.think_end_tokens.as_ptr();
        raw.n_think_end_tokens = self.think_end_tokens.len();
        raw.think_begin_token = optional_token("think_begin_token", self.think_begin_token)?;
        raw.start_in_thinking = self.start_in_thinking;
        raw.max_thinking_tokens = optional_count("max_thinking_tokens", self.max_thinking_tokens)?;
        raw.max_new_tokens = optional_count("max_new_tokens", self.max_new_tokens)?;
        raw.override_stop_tokens = self.override_stop_tokens.as_ptr();
        raw.n_override_stop_tokens = self.override_stop_tokens.len();
        raw.think_force_end_after_prefix = self.think_force_end_after_prefix;
        Ok(raw)
    }
}

/// An optional token as the C library spells it: -1 = none. A negative
/// `Some` would silently mean "none", so it is refused.
fn optional_token(name: &str, token: Option<i32>) -> Result<i32> {
    match token {
        None => Ok(-1),
        Some(t) if t < 0 => Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("{name} is Some({t}); use None for no {name}"),
        )),
        Some(t) => Ok(t),
    }
}

/// An optional count as the C library spells it: -1 = none.
pub(crate) fn optional_count(name: &str, count: Option<u64>) -> Result<i64> {
    match count {
        None => Ok(-1),
        Some(n) => i64::try_from(n).map_err(|_| {
            Error::new(
                ErrorKind::OutOfRange,
                format!("{name} is {n}, more than the library's limit {}", i64::MAX),
            )
        }),
    }
}

fn raw_matcher_options_defaults() -> sys::treemask_mode_options {
    let mut raw = MaybeUninit::<sys::treemask_mode_options>::uninit();
    // Safety: treemask_mode_options_init writes every field of the struct it
    // is given (the stable part included), so it is fully initialised
    // afterwards.
    unsafe {
        sys::treemask_mode_options_init(raw.as_mut_ptr());
        raw.assume_init()
    }
}

/// Follows one generated sequence through a [`Trie`]: every decode step, fill
/// the next-token bitmask, sample, and [`accept_token`](MatcherRef::accept_token)
/// the sampled token.
///
/// `Matcher` owns its C matcher; every method lives on [`MatcherRef`], which
/// `Matcher` dereferences to (so does a matcher borrowed from a
/// [`Batch`](crate::Batch) slot). A matcher holds its own reference to the
/// trie, so it may outlive the `Trie` value it was made from. `Clone` makes an
/// independent copy with the same state (cheap: the rollback history is
/// shared copy-on-write).
///
/// Threads: a `Matcher` is `Send` and `Sync`, and the borrow checker already
/// keeps every mutating call (`&mut self`) to one thread at a time. Code that
/// gets around it (raw pointers to the C matcher, `unsafe` aliasing) and lets
/// two threads mutate one matcher at once corrupts the heap, as the C header
/// says: give each thread its own clone.
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
// Safety: `&Matcher` reaches only `&MatcherRef` methods, which call only
// functions taking a const matcher; the header allows those to run
// concurrently with each other.
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
    /// `InvalidArgument` for a negative one); an inconsistent decoding-mode
    /// option (a separator or stop-token override that is out of range or
    /// occurs inside a path, a separator that is ambiguous after a label,
    /// `max_labels` without a separator, ...: the message names the option
    /// and token); `OutOfMemory`.
    pub fn with_options(trie: &Trie, options: &MatcherOptions) -> Result<Matcher> {
        let raw_options = options.to_raw()?;
        let mut out = ptr::null_mut();
        // Safety: trie.as_raw() is a live trie (the matcher retains its own
        // reference); raw_options is a fully initialised options struct whose
        // arrays borrow `options`, alive for the call (the library copies
        // them), and its `matcher` member starts it, with a struct_size that
        // covers the whole; out is written only on success.
        check(unsafe {
            sys::treemask_matcher_create(trie.as_raw(), &raw_options.matcher, &mut out)
        })?;
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
}

impl Deref for Matcher {
    type Target = MatcherRef;

    fn deref(&self) -> &MatcherRef {
        // Safety: self.raw is a live matcher for as long as self exists, and
        // the shared borrow of self keeps it alive and unchanged through the
        // returned reference's lifetime.
        unsafe { MatcherRef::from_ptr(self.raw.as_ptr()) }
    }
}

impl DerefMut for Matcher {
    fn deref_mut(&mut self) -> &mut MatcherRef {
        // Safety: as in deref; the exclusive borrow of self makes the
        // returned reference the only way to reach the matcher.
        unsafe { MatcherRef::from_ptr_mut(self.raw.as_ptr()) }
    }
}

impl Borrow<MatcherRef> for Matcher {
    fn borrow(&self) -> &MatcherRef {
        self
    }
}

impl BorrowMut<MatcherRef> for Matcher {
    fn borrow_mut(&mut self) -> &mut MatcherRef {
        self
    }
}

impl AsRef<MatcherRef> for Matcher {
    fn as_ref(&self) -> &MatcherRef {
        self
    }
}

impl AsMut<MatcherRef> for Matcher {
    fn as_mut(&mut self) -> &mut MatcherRef {
        self
    }
}

impl Clone for Matcher {
    /// See [`try_clone`](MatcherRef::try_clone).
    ///
    /// # Panics
    /// In the `StickyError` failed state, or when out of memory; use
    /// `try_clone` to handle those.
    fn clone(&self) -> Matcher {
        (**self).to_owned()
    }
}

impl Drop for Matcher {
    fn drop(&mut self) {
        // Safety: self owns the matcher; nothing else uses it afterwards (every
        // &MatcherRef borrowed from self has ended). The matcher releases its
        // own trie reference.
        unsafe { sys::treemask_matcher_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// A matcher borrowed: `&MatcherRef` and `&mut MatcherRef` are the C
/// `const treemask_matcher*` and `treemask_matcher*`, so a [`Matcher`] and a
/// [`Batch`](crate::Batch) slot lend theirs without copying. Every matcher
/// method lives here; `&self` methods are the header's const functions (safe
/// to call from several threads at once), `&mut self` ones change the state.
///
/// A `MatcherRef` cannot be created, moved or dropped by value, only
/// borrowed; `to_owned()` / [`try_clone`](Self::try_clone) copy the matcher
/// into an owned [`Matcher`].
pub struct MatcherRef {
    // Zero-sized and never constructed: the reference's address is the C
    // handle. PhantomPinned and the raw pointer keep the type !Unpin and
    // !Send/!Sync unless declared below with a reason.
    _opaque: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

// Safety: as for Matcher: a matcher has no thread affinity, and `&mut
// MatcherRef` is exclusive. A matcher borrowed from a batch is not touched by
// the batch's workers outside the batch's own calls, which the borrow of the
// batch rules out.
unsafe impl Send for MatcherRef {}
// Safety: `&MatcherRef` methods call only functions taking a const matcher,
// which may run concurrently with each other.
unsafe impl Sync for MatcherRef {}

impl MatcherRef {
    /// # Safety
    /// `raw` must be a live matcher that stays valid, and is changed by
    /// nothing else, for `'a`.
    pub(crate) unsafe fn from_ptr<'a>(raw: *mut sys::treemask_matcher) -> &'a MatcherRef {
        debug_assert!(!raw.is_null());
        // Safety: MatcherRef is zero-sized with alignment 1, so any non-NULL
        // pointer is a valid reference to it; the caller vouches for the
        // lifetime.
        unsafe { &*(raw as *const MatcherRef) }
    }

    /// # Safety
    /// As [`from_ptr`](Self::from_ptr), and nothing else may reach the
    /// matcher for `'a`.
    pub(crate) unsafe fn from_ptr_mut<'a>(raw: *mut sys::treemask_matcher) -> &'a mut MatcherRef {
        debug_assert!(!raw.is_null());
        // Safety: as in from_ptr; the caller vouches for exclusivity.
        unsafe { &mut *(raw as *mut MatcherRef) }
    }

    /// Replaces `out` with a list the C library reports for this matcher,
    /// reusing `out`'s allocation.
    ///
    /// # Safety
    /// `query` must follow the header's list convention: given the matcher,
    /// a buffer and its capacity `cap`, it writes `min(cap, n)` items and
    /// returns the full count `n`.
    pub(crate) unsafe fn read_into<T: Copy>(
        &self,
        out: &mut Vec<T>,
        query: unsafe extern "C" fn(*const sys::treemask_matcher, *mut T, usize) -> usize,
    ) {
        // Safety: self is live (const queries may run concurrently); the
        // caller vouches that query follows the list convention, which is
        // what read_list needs.
        unsafe { read_list(out, |buf, cap| query(self.as_raw(), buf, cap)) }
    }

    /// The C handle (do not free it); for calling treemask-sys functions this
    /// crate does not wrap.
    pub fn as_raw(&self) -> *mut sys::treemask_matcher {
        self as *const MatcherRef as *mut sys::treemask_matcher
    }

    /// A copy with the same state, history and options.
    ///
    /// # Errors
    /// `InvalidState` in the [`FailurePolicy::StickyError`] failed state;
    /// `OutOfMemory`.
    pub fn try_clone(&self) -> Result<Matcher> {
        let mut out = ptr::null_mut();
        // Safety: self is a live matcher; out is written only on success.
        check(unsafe { sys::treemask_matcher_clone(self.as_raw(), &mut out) })?;
        // Safety: on success out is a new matcher that we own.
        Ok(unsafe { Matcher::from_raw(out) })
    }

    /// Writes the next-token bitmask into `row` (all of it, whatever it held;
    /// bits at or beyond `vocab_size` are 0): bit `t` is set iff `t` is a child
    /// token of the current node, or a stop token at a terminal node. Once
    /// terminated (or closed after a `FailClosed` rejection) only the stop
    /// tokens are set. Decoding modes change the set as the header describes.
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
        // Safety: self is live and exclusively borrowed; the library writes
        // at most row.len() words.
        check(unsafe {
            sys::treemask_matcher_fill_next_token_bitmask(
                self.as_raw(),
                row.as_mut_ptr(),
                row.len(),
                core::ptr::null(),
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
    /// vocabulary included); the [`FailurePolicy`] then applies. A
    /// rejection is not an error: [`last_error_message`](crate::last_error_message)
    /// stays as it was.
    ///
    /// # Errors
    /// `InvalidState` in the `StickyError` failed state.
    pub fn accept_token(&mut self, token: i32) -> Result<bool> {
        let mut accepted = false;
        // Safety: self is live and exclusively borrowed.
        check(unsafe { sys::treemask_matcher_accept_token(self.as_raw(), token, &mut accepted) })?;
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
        // Safety: self is live and exclusively borrowed.
        check(unsafe { sys::treemask_matcher_rollback(self.as_raw(), n_tokens) })
    }

    /// Back to the root with an empty history, whatever the state (the label
    /// filter and `max_new_tokens` budget are kept).
    pub fn reset(&mut self) {
        // Safety: self is live and exclusively borrowed.
        unsafe { sys::treemask_matcher_reset(self.as_raw()) }
    }

    /// True once a stop token (or, with `terminate_without_stop_token`, a
    /// leaf) ended the sequence. False in the `StickyError` failed state.
    pub fn is_terminated(&self) -> bool {
        // Safety: self is live; const functions may run concurrently.
        unsafe { sys::treemask_matcher_is_terminated(self.as_raw()) }
    }

    /// True iff accepting a stop token now would terminate: the current node
    /// is terminal, or the matcher is closed after a `FailClosed` rejection.
    pub fn can_terminate(&self) -> bool {
        // Safety: self is live; const functions may run concurrently.
        unsafe { sys::treemask_matcher_can_terminate(self.as_raw()) }
    }

    /// How many accepts [`rollback`](Self::rollback) can undo right now.
    pub fn rollback_depth(&self) -> usize {
        // Safety: self is live; const functions may run concurrently.
        unsafe { sys::treemask_matcher_rollback_depth(self.as_raw()) }
    }

    /// The allowed next tokens, ascending (stop tokens included when
    /// allowed): exactly the bits a fill sets. Empty in the `StickyError`
    /// failed state.
    pub fn next_tokens(&self) -> Vec<i32> {
        let mut out = Vec::new();
        self.next_tokens_into(&mut out);
        out
    }

    /// [`next_tokens`](Self::next_tokens) into a caller's vector, replacing its
    /// contents and reusing its allocation (no allocation per decode step once
    /// it is large enough).
    pub fn next_tokens_into(&self, out: &mut Vec<i32>) {
        // Safety: next_tokens follows the list convention.
        unsafe { self.read_into(out, sys::treemask_matcher_next_tokens) }
    }

    /// Jump-forward: the longest chain of tokens each of which is the only
    /// token allowed (no stop token) where it is taken, starting here. Stop
    /// tokens are never included; empty once terminated, closed or failed.
    pub fn forced_tokens(&self) -> Vec<i32> {
        let mut out = Vec::new();
        self.forced_tokens_into(&mut out);
        out
    }

    /// [`forced_tokens`](Self::forced_tokens) into a caller's vector, reusing
    /// its allocation.
    pub fn forced_tokens_into(&self, out: &mut Vec<i32>) {
        // Safety: forced_tokens follows the list convention.
        unsafe { self.read_into(out, sys::treemask_matcher_forced_tokens) }
    }

    /// The label ids of the current node, ascending and distinct; empty at a
    /// non-terminal node, when closed or failed. Still readable after
    /// termination (the labels of the node the sequence ended at).
    pub fn label_ids(&self) -> Vec<i64> {
        let mut out = Vec::new();
        // Safety: label_ids follows the list convention.
        unsafe { self.read_into(&mut out, sys::treemask_matcher_label_ids) };
        out
    }

    /// What this matcher did since it was created (a clone starts at zero),
    /// for export as metrics. O(1).
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn counters(&self) -> Result<MatcherCounters> {
        // Safety: every field of treemask_matcher_counters is an integer, for
        // which all-zero bytes are a valid value.
        let mut raw: sys::treemask_matcher_counters = unsafe { core::mem::zeroed() };
        raw.struct_size = core::mem::size_of::<sys::treemask_matcher_counters>();
        // Safety: self is live (const functions may run concurrently); raw is
        // writable and its struct_size says how much the library may write.
        check(unsafe { sys::treemask_matcher_get_counters(self.as_raw(), &mut raw) })?;
        Ok(MatcherCounters {
            n_fills: raw.n_fills,
            n_accepted_tokens: raw.n_accepted_tokens,
            n_rejected_tokens: raw.n_rejected_tokens,
            n_fail_closed: raw.n_fail_closed,
            n_rolled_back_tokens: raw.n_rolled_back_tokens,
            n_resets: raw.n_resets,
        })
    }

    /// The trie this matcher follows (another reference to it).
    pub fn trie(&self) -> Trie {
        // Safety: self is live and treemask_matcher_trie returns its trie,
        // borrowed and non-NULL; retain gives the new value its own
        // reference, so it stays valid after the matcher is gone.
        unsafe {
            Trie::from_raw(sys::treemask_trie_retain(sys::treemask_matcher_trie(
                self.as_raw(),
            )))
        }
    }
}

impl ToOwned for MatcherRef {
    type Owned = Matcher;

    /// See [`try_clone`](MatcherRef::try_clone).
    ///
    /// # Panics
    /// In the `StickyError` failed state, or when out of memory.
    fn to_owned(&self) -> Matcher {
        self.try_clone()
            .unwrap_or_else(|e| panic!("Matcher::clone failed: {e}"))
    }
}

impl fmt::Debug for MatcherRef {
    /// `Matcher("<debug_string>")`: phase, node, path, allowed count, modes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Matcher")
            .field(&self.debug_string())
            .finish()
    }
}
