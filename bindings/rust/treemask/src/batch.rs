//! [`Batch`] (treemask.h, section 6): matchers in slots, filled and advanced
//! together on the batch's own threads, with an optional bound bitmask for
//! O(fanout) incremental fills.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
use core::fmt;
use core::mem::MaybeUninit;
use core::ptr::{self, NonNull};

use treemask_sys as sys;

use crate::error::{check, Error, ErrorKind, Result};
use crate::matcher::MatcherRef;

/// How a batch is made. Start from [`BatchOptions::new`]; fields may be added
/// in later versions (hence `#[non_exhaustive]`).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchOptions {
    /// Slots, fixed for the life of the batch: `1..=2^31 - 1`.
    pub n_slots: usize,
    /// Worker threads the batch starts at creation and keeps until it is
    /// dropped; a call uses them plus the caller's thread (small calls stay on
    /// the caller's). 0 (default): the caller's thread only. At most 256.
    pub n_threads: usize,
}

impl BatchOptions {
    /// `n_slots` slots, the library's defaults for everything else.
    pub fn new(n_slots: usize) -> BatchOptions {
        let mut raw = MaybeUninit::<sys::treemask_batch_options>::uninit();
        // Safety: treemask_batch_options_init writes struct_size and every
        // field of the struct it is given, so it is fully initialised
        // afterwards.
        let raw = unsafe {
            sys::treemask_batch_options_init(raw.as_mut_ptr());
            raw.assume_init()
        };
        BatchOptions {
            n_slots,
            n_threads: raw.n_threads,
        }
    }

    /// The same options with `n_threads` worker threads.
    pub fn with_threads(mut self, n_threads: usize) -> BatchOptions {
        self.n_threads = n_threads;
        self
    }
}

/// How [`Batch::fill_bound`] writes the rows of the bound bitmask.
///
/// *Experimental* (the C header's experimental tier): may change in any minor release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FillMode {
    /// Every word of each row.
    #[default]
    Full,
    /// O(fanout) per row where the batch knows what the row holds: it clears
    /// the words it set last time and sets the new bits. The rows written are
    /// always exactly what a full fill writes.
    Incremental,
}

impl FillMode {
    fn to_raw(self) -> i32 {
        match self {
            FillMode::Full => sys::TREEMASK_FILL_FULL,
            FillMode::Incremental => sys::TREEMASK_FILL_INCREMENTAL,
        }
    }
}

/// A fixed number of slots, each empty or holding a matcher, filled and
/// advanced together: slot `s` always writes row `s` of a bitmask of
/// [`n_slots`](Self::n_slots) rows. Every matcher feature (rollback, failure
/// policies, decoding modes) works in a batch.
///
/// The batch can own a *bound* bitmask ([`bind_bitmask`](Self::bind_bitmask)),
/// which [`fill_bound`](Self::fill_bound) updates in O(fanout) per row with
/// [`FillMode::Incremental`]. The promise that makes that correct (nothing
/// but the batch writes the bound rows) is kept by the type system: the
/// buffer is only lent out read-only, or mutably through
/// [`bound_bitmask_mut`](Self::bound_bitmask_mut), which first makes the batch
/// forget what the rows hold.
///
/// ```
/// use treemask::{Batch, FillMode, Matcher, Trie, TrieOptions};
///
/// let trie = Trie::from_paths(&TrieOptions::new(100, [0]), [&[1, 2][..], &[1, 3], &[4]])?;
/// let mut batch = Batch::new(3)?;
/// let fresh = Matcher::new(&trie)?;
/// for slot in 0..3 {
///     batch.set_matcher(slot, Some(&fresh))?; // the slot gets a copy
/// }
/// batch.bind_bitmask(trie.bitmask_words())?;
/// let mut accepted = [false; 3];
/// batch.accept_tokens(&[1, 4, -1], Some(&mut accepted))?; // -1: no token for slot 2
/// assert_eq!(accepted, [true, true, true]);
/// batch.fill_bound(None, FillMode::Incremental, None)?;
/// let row0 = batch.bound_row(0).unwrap();
/// assert!(treemask::is_token_allowed(row0, 2) && treemask::is_token_allowed(row0, 3));
/// assert_eq!(batch.matcher(1).unwrap().next_tokens(), vec![0]);
/// batch.reorder(&[0, 0, -1])?; // beam search: slot 1 takes slot 0's state, slot 2 empties
/// assert!(batch.matcher(2).is_none());
/// assert_eq!(batch.matcher(1).unwrap().next_tokens(), vec![2, 3]);
/// # Ok::<(), treemask::Error>(())
/// ```
pub struct Batch {
    raw: NonNull<sys::treemask_batch>,
    // The bound buffer (empty when none is bound). The C batch keeps a
    // pointer into it, so it is owned here, never moved while bound (a Vec's
    // heap buffer stays put when the Batch moves), and freed only after the
    // C batch is (fields drop after Drop::drop).
    bound: Vec<i32>,
    bound_bitmask_row_words: usize,
}

// Safety: the batch's worker threads are its own and work only inside its
// calls; the batch has no affinity to the thread that created it, and &mut
// self keeps use to one thread at a time.
unsafe impl Send for Batch {}
// Safety: `&Batch` methods only read: n_slots, borrowed matchers (used only
// through their const functions, which may run concurrently) and the bound
// buffer.
unsafe impl Sync for Batch {}

impl Batch {
    /// A batch of `n_slots` empty slots that works on the caller's thread.
    ///
    /// # Errors
    /// `n_slots` outside `1..=2^31 - 1` (`InvalidArgument`).
    pub fn new(n_slots: usize) -> Result<Batch> {
        Batch::with_options(&BatchOptions::new(n_slots))
    }

    /// A batch with every slot empty; starts its worker threads.
    ///
    /// # Errors
    /// `n_slots` outside `1..=2^31 - 1` or `n_threads` above 256
    /// (`InvalidArgument`); a thread that cannot be started (`Internal`).
    pub fn with_options(options: &BatchOptions) -> Result<Batch> {
        let mut raw_options = MaybeUninit::<sys::treemask_batch_options>::uninit();
        // Safety: init writes every field, so the struct is fully initialised
        // afterwards.
        let mut raw_options = unsafe {
            sys::treemask_batch_options_init(raw_options.as_mut_ptr());
            raw_options.assume_init()
        };
        raw_options.n_slots = options.n_slots;
        raw_options.n_threads = options.n_threads;
        let mut out = ptr::null_mut();
        // Safety: raw_options is initialised; out is written only on success.
        check(unsafe { sys::treemask_batch_create(&raw_options, &mut out) })?;
        Ok(Batch {
            raw: NonNull::new(out).expect("treemask_batch_create returned OK and NULL"),
            bound: Vec::new(),
            bound_bitmask_row_words: 0,
        })
    }

    /// The C handle, still owned by `self` (do not free it, and do not bind
    /// a buffer through it: the batch manages its binding).
    pub fn as_raw(&self) -> *mut sys::treemask_batch {
        self.raw.as_ptr()
    }

    /// The number of slots.
    pub fn n_slots(&self) -> usize {
        // Safety: self.raw is live; the function only reads it.
        unsafe { sys::treemask_batch_n_slots(self.raw.as_ptr()) }
    }

    /// Puts a copy of `matcher` (same state, history and options; cheap, the
    /// history is shared copy-on-write) in `slot`, replacing what was there;
    /// `None` empties the slot. Matchers of different tries may share a
    /// batch.
    ///
    /// # Errors
    /// The slot unchanged: `slot >= n_slots` (`OutOfRange`); a matcher in the
    /// `StickyError` failed state (`InvalidState`).
    pub fn set_matcher(&mut self, slot: usize, matcher: Option<&MatcherRef>) -> Result<()> {
        // Safety: self.raw is live and exclusively borrowed (so no borrowed
        // slot matcher is alive); matcher is live or NULL, and only read (the
        // batch stores a clone).
        check(unsafe {
            sys::treemask_batch_set_matcher(
                self.raw.as_ptr(),
                slot,
                matcher.map_or(ptr::null(), |m| m.as_raw()),
            )
        })
    }

    /// The matcher in `slot`, borrowed; `None` when the slot is empty or out
    /// of range.
    pub fn matcher(&self, slot: usize) -> Option<&MatcherRef> {
        // Safety: self.raw is live; get_matcher only reads the batch.
        let raw = unsafe { sys::treemask_batch_get_matcher(self.raw.as_ptr(), slot) };
        // Safety: a non-NULL result is the slot's matcher, which stays valid
        // until the slot changes (set_matcher, reorder) or the batch is freed,
        // all of which need &mut self, which the returned borrow of self rules
        // out.
        (!raw.is_null()).then(|| unsafe { MatcherRef::from_ptr(raw) })
    }

    /// The matcher in `slot`, mutably: every matcher method works on it
    /// (rollback, reset, accept, a label filter, ...) between batch calls.
    /// `None` when the slot is empty or out of range.
    pub fn matcher_mut(&mut self, slot: usize) -> Option<&mut MatcherRef> {
        // Safety: self.raw is live; get_matcher only reads the batch.
        let raw = unsafe { sys::treemask_batch_get_matcher(self.raw.as_ptr(), slot) };
        // Safety: as in matcher(); the exclusive borrow of self also keeps
        // every other path to this matcher (batch calls, other borrows) away
        // while the returned reference lives.
        (!raw.is_null()).then(|| unsafe { MatcherRef::from_ptr_mut(raw) })
    }

    /// Writes the next-token bitmask of the listed slots into `bitmask`, row
    /// `s` at `bitmask[s * bitmask_row_words..]`, exactly as each matcher's own
    /// fill does (every word of each listed row); other rows are untouched.
    ///
    /// - `bitmask`: at least `n_slots * bitmask_row_words` words; `bitmask_row_words`
    ///   must cover every listed slot's vocabulary.
    /// - `slots`: the slots to fill (each non-empty, none twice), or `None`
    ///   for every non-empty slot (`Some(&[])` fills nothing).
    /// - `need_apply`: optional, `n_slots` entries indexed by slot; written
    ///   for the filled slots (false iff the row allows every token).
    ///
    /// # Errors
    /// Nothing written: a short buffer, a bad slot list (the message names
    /// the entry), `need_apply` of another length (`InvalidArgument`). A slot
    /// in the `StickyError` failed state gets its row (stop tokens only) and
    /// the call returns `InvalidState` naming it, after every listed row is
    /// written.
    pub fn fill_next_token_bitmask(
        &mut self,
        bitmask: &mut [i32],
        bitmask_row_words: usize,
        slots: Option<&[i32]>,
        need_apply: Option<&mut [bool]>,
    ) -> Result<()> {
        let n_slots = self.n_slots();
        let needed = n_slots.checked_mul(bitmask_row_words);
        if needed.map_or(true, |n| n > bitmask.len()) {
            return Err(Error::new(
                ErrorKind::BufferTooSmall,
                format!(
                    "bitmask has {} words; n_slots = {n_slots} rows of {bitmask_row_words} words need more",
                    bitmask.len()
                ),
            ));
        }
        let need_apply = per_slot("need_apply", need_apply, n_slots)?;
        let (slots_ptr, n_listed) = slot_list(slots);
        // Safety: self.raw is live and exclusively borrowed; the library writes
        // only rows s < n_slots of bitmask_row_words words, which fit in bitmask
        // (checked above); bitmask cannot alias the bound buffer (it is owned
        // by self, which is borrowed mutably here); slots has n_listed
        // entries; need_apply is NULL or has n_slots entries.
        check(unsafe {
            sys::treemask_batch_fill_next_token_bitmask(
                self.raw.as_ptr(),
                bitmask.as_mut_ptr(),
                bitmask_row_words,
                slots_ptr,
                n_listed,
                need_apply,
            )
        })
    }

    /// Allocates a zeroed bitmask of `n_slots` rows of `bitmask_row_words` words,
    /// owned by the batch, and binds it for [`fill_bound`](Self::fill_bound),
    /// replacing (and freeing) any earlier bound buffer.
    ///
    /// # Errors
    /// `bitmask_row_words` 0 (`InvalidArgument`) or a size that overflows
    /// (`OutOfRange`); the earlier binding then stays.
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn bind_bitmask(&mut self, bitmask_row_words: usize) -> Result<()> {
        let n_slots = self.n_slots();
        let len = n_slots.checked_mul(bitmask_row_words).ok_or_else(|| {
            Error::new(
                ErrorKind::OutOfRange,
                format!("n_slots = {n_slots} rows of {bitmask_row_words} words overflow usize"),
            )
        })?;
        let mut buffer = vec![0; len];
        // Safety: self.raw is live and exclusively borrowed; buffer holds
        // n_slots rows of bitmask_row_words words and, once bound, is kept in
        // self.bound (its heap storage never moves) until it is unbound or the
        // batch is freed.
        check(unsafe {
            sys::treemask_batch_bind_bitmask(
                self.raw.as_ptr(),
                buffer.as_mut_ptr(),
                bitmask_row_words,
            )
        })?;
        // The batch no longer refers to the old buffer, which is freed here.
        self.bound = buffer;
        self.bound_bitmask_row_words = bitmask_row_words;
        Ok(())
    }

    /// Unbinds the bound bitmask and hands it back (`None` if none was
    /// bound).
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn unbind_bitmask(&mut self) -> Option<Vec<i32>> {
        if self.bound_bitmask_row_words == 0 {
            return None;
        }
        // Safety: self.raw is live and exclusively borrowed; NULL unbinds and
        // cannot fail for a live batch.
        let status =
            unsafe { sys::treemask_batch_bind_bitmask(self.raw.as_ptr(), ptr::null_mut(), 0) };
        debug_assert_eq!(status, sys::TREEMASK_OK);
        self.bound_bitmask_row_words = 0;
        Some(core::mem::take(&mut self.bound))
    }

    /// The bound bitmask (`n_slots * bitmask_row_words` words), or `None`.
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn bound_bitmask(&self) -> Option<&[i32]> {
        (self.bound_bitmask_row_words > 0).then_some(&self.bound[..])
    }

    /// Row `slot` of the bound bitmask, or `None` (nothing bound, or `slot`
    /// out of range).
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn bound_row(&self, slot: usize) -> Option<&[i32]> {
        let words = self.bound_bitmask_row_words;
        let start = slot.checked_mul(words)?;
        self.bound_bitmask()?.get(start..start.checked_add(words)?)
    }

    /// The `bitmask_row_words` of the bound bitmask, or `None`.
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn bound_bitmask_row_words(&self) -> Option<usize> {
        (self.bound_bitmask_row_words > 0).then_some(self.bound_bitmask_row_words)
    }

    /// The bound bitmask, writable (e.g. to hand it to a sampler that masks
    /// in place). The batch first forgets what every row holds, so the next
    /// incremental fill writes each row in full: whatever you write cannot
    /// leave stale bits behind.
    ///
    /// # Errors
    /// No bitmask is bound (`InvalidState`).
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn bound_bitmask_mut(&mut self) -> Result<&mut [i32]> {
        if self.bound_bitmask_row_words == 0 {
            return Err(no_bound_bitmask());
        }
        self.invalidate(None)?;
        Ok(&mut self.bound[..])
    }

    /// Fills the listed slots' rows of the bound bitmask (`slots` and
    /// `need_apply` as in
    /// [`fill_next_token_bitmask`](Self::fill_next_token_bitmask)). The rows
    /// written are always exactly what a full fill writes; `mode` only
    /// chooses how (see [`FillMode`]). Rows whose allowed set is large (a
    /// high-fanout node, thinking) are written in full either way.
    ///
    /// # Errors
    /// As `fill_next_token_bitmask`, plus no bitmask bound (`InvalidState`).
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn fill_bound(
        &mut self,
        slots: Option<&[i32]>,
        mode: FillMode,
        need_apply: Option<&mut [bool]>,
    ) -> Result<()> {
        if self.bound_bitmask_row_words == 0 {
            return Err(no_bound_bitmask());
        }
        let need_apply = per_slot("need_apply", need_apply, self.n_slots())?;
        let (slots_ptr, n_listed) = slot_list(slots);
        // Safety: self.raw is live and exclusively borrowed, so nothing else
        // reads or writes the bound buffer (owned by self) during the call;
        // the library writes only rows of it; slots has n_listed entries;
        // need_apply is NULL or has n_slots entries.
        check(unsafe {
            sys::treemask_batch_fill_bound(
                self.raw.as_ptr(),
                slots_ptr,
                n_listed,
                mode.to_raw(),
                need_apply,
            )
        })
    }

    /// Makes the batch forget what the listed rows (`None`: every row) of the
    /// bound bitmask hold, so their next fill writes them in full. Safe code
    /// seldom needs it: only the batch can write the bound buffer, except
    /// through [`bound_bitmask_mut`](Self::bound_bitmask_mut), which
    /// invalidates every row itself.
    ///
    /// # Errors
    /// A row outside `0..n_slots` (`OutOfRange`, nothing forgotten).
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn invalidate(&mut self, rows: Option<&[i32]>) -> Result<()> {
        let (rows_ptr, n_rows) = slot_list(rows);
        // Safety: self.raw is live and exclusively borrowed; rows has n_rows
        // entries (or is NULL with 0).
        check(unsafe { sys::treemask_batch_invalidate(self.raw.as_ptr(), rows_ptr, n_rows) })
    }

    /// Feeds `tokens[s]` to the matcher in slot `s`, for every slot, like
    /// [`MatcherRef::accept_token`]; a token < 0 means no token for that slot
    /// this step (required for empty slots). `accepted` (optional, `n_slots`
    /// entries) is false only for a slot that rejected its token (not an
    /// error: [`last_error_message`](crate::last_error_message) is not set).
    ///
    /// # Errors
    /// Nothing accepted: `tokens` or `accepted` not of `n_slots` entries
    /// (`InvalidArgument`), a token for an empty slot (`InvalidArgument`,
    /// named). A slot in the `StickyError` failed state gives `InvalidState`
    /// naming the lowest such slot, after every other slot took its token.
    pub fn accept_tokens(&mut self, tokens: &[i32], accepted: Option<&mut [bool]>) -> Result<()> {
        let n_slots = self.n_slots();
        if tokens.len() != n_slots {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "tokens has {} entries for n_slots = {n_slots}",
                    tokens.len()
                ),
            ));
        }
        let accepted = per_slot("accepted", accepted, n_slots)?;
        // Safety: self.raw is live and exclusively borrowed; tokens and
        // accepted (when given) have n_slots entries.
        check(unsafe {
            sys::treemask_batch_accept_tokens(
                self.raw.as_ptr(),
                tokens.as_ptr(),
                tokens.len(),
                accepted,
            )
        })
    }

    /// Beam reordering: slot `i` takes the matcher state of slot `src[i]`
    /// (`-1` empties slot `i`), all at once. A source taken once moves; one
    /// taken several times is cloned (its history shared copy-on-write).
    /// What the batch knows about bound rows stays valid.
    ///
    /// # Errors
    /// The batch unchanged: `src` not of `n_slots` entries
    /// (`InvalidArgument`), an entry outside `-1..n_slots` (`OutOfRange`,
    /// named), a `StickyError` failed matcher taken twice (`InvalidState`).
    pub fn reorder(&mut self, src: &[i32]) -> Result<()> {
        // Safety: self.raw is live and exclusively borrowed (no borrowed slot
        // matcher survives the call); the library reads src.len() entries.
        check(unsafe { sys::treemask_batch_reorder(self.raw.as_ptr(), src.as_ptr(), src.len()) })
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        // Safety: self owns the batch; freeing it stops its threads and frees
        // the slot matchers. The bound buffer is dropped afterwards, with the
        // other fields, so the batch never outlives it.
        unsafe { sys::treemask_batch_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Batch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.n_slots();
        f.debug_struct("Batch")
            .field("n_slots", &n)
            .field(
                "filled_slots",
                &(0..n).filter(|&s| self.matcher(s).is_some()).count(),
            )
            .field("bound_bitmask_row_words", &self.bound_bitmask_row_words())
            .finish_non_exhaustive()
    }
}

fn no_bound_bitmask() -> Error {
    Error::new(
        ErrorKind::InvalidState,
        "no bitmask is bound; call Batch::bind_bitmask first",
    )
}

/// A slot (or row) list as the C API takes it: NULL with 0 = every slot. A
/// Rust slice's pointer is never NULL, so `Some(&[])` stays "no slots".
fn slot_list(slots: Option<&[i32]>) -> (*const i32, usize) {
    slots.map_or((ptr::null(), 0), |s| (s.as_ptr(), s.len()))
}

/// An optional per-slot output array as a C pointer, checked to hold exactly
/// `n_slots` entries.
fn per_slot(name: &str, out: Option<&mut [bool]>, n_slots: usize) -> Result<*mut bool> {
    match out {
        None => Ok(ptr::null_mut()),
        Some(out) if out.len() == n_slots => Ok(out.as_mut_ptr()),
        Some(out) => Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("{name} has {} entries for n_slots = {n_slots}", out.len()),
        )),
    }
}
