//! [`Trie`]: the immutable, shared set of allowed token sequences.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
use core::fmt;
use core::mem::MaybeUninit;
use core::ptr::{self, NonNull};

use treemask_sys as sys;

use crate::error::{check, Error, ErrorKind, Result};
use crate::list::read_list;

/// How a trie is built: the vocabulary size and stop tokens every source
/// needs, plus tuning. Start from [`TrieOptions::new`]; fields may be added in
/// later versions (hence `#[non_exhaustive]`).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrieOptions {
    /// Every token id in the trie and every stop token must be below it.
    pub vocab_size: i32,
    /// Tokens that end a sequence at a terminal node (several EOS ids are
    /// fine; duplicates merge). At least one is required.
    pub stop_tokens: Vec<i32>,
    /// Memory budget for cached dense bitmask rows of high-fanout nodes;
    /// 0 disables the cache. Defaults to the C library's default (64 MiB).
    pub dense_row_cache_bytes: usize,
    /// Terminals carry no label ids (`Trie::from_paths` then takes no
    /// labels): a catalogue whose paths are the items themselves saves the
    /// label array. Defaults to false.
    pub no_labels: bool,
}

impl TrieOptions {
    /// Options with the library's defaults for everything but the two
    /// required fields.
    pub fn new(vocab_size: i32, stop_tokens: impl Into<Vec<i32>>) -> TrieOptions {
        let defaults = raw_trie_options_defaults();
        TrieOptions {
            vocab_size,
            stop_tokens: stop_tokens.into(),
            dense_row_cache_bytes: defaults.dense_row_cache_bytes,
            no_labels: defaults.no_labels != 0,
        }
    }

    /// The C options struct. It borrows `self.stop_tokens`, so it must not
    /// outlive `self`.
    pub(crate) fn to_raw(&self) -> sys::treemask_trie_options {
        let mut raw = raw_trie_options_defaults();
        raw.vocab_size = self.vocab_size;
        raw.stop_tokens = self.stop_tokens.as_ptr();
        raw.n_stop_tokens = self.stop_tokens.len();
        raw.dense_row_cache_bytes = self.dense_row_cache_bytes;
        raw.no_labels = i32::from(self.no_labels);
        raw
    }
}

fn raw_trie_options_defaults() -> sys::treemask_trie_options {
    let mut raw = MaybeUninit::<sys::treemask_trie_options>::uninit();
    // Safety: treemask_trie_options_init writes struct_size and every field
    // of the struct it is given, so it is fully initialised afterwards.
    unsafe {
        sys::treemask_trie_options_init(raw.as_mut_ptr());
        raw.assume_init()
    }
}

/// Counts and memory of a built trie ([`Trie::stats`]).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TrieStats {
    /// Nodes, the root included.
    pub n_nodes: u64,
    /// Edges (`n_nodes - 1`).
    pub n_edges: u64,
    /// Nodes at which a sequence may end.
    pub n_terminals: u64,
    /// Label ids stored over all terminal nodes.
    pub n_labels: u64,
    /// The longest path, in tokens.
    pub max_depth: u32,
    /// The most children of one node.
    pub max_fanout: u32,
    /// Memory of the flat arrays (the dense-row cache not included).
    pub bytes: u64,
    /// Memory the lazily built dense-row cache uses now.
    pub dense_row_cache_bytes: u64,
    /// Problems a loader tolerated: unknown top-level fields, `prefix_dict`
    /// keys the root cannot reach, unknown JSONL fields. Always 0 for tries
    /// built from paths or loaded from `.tmtrie` files.
    pub n_warnings: u64,
    /// The largest label id a terminal carries; -1 for a trie without
    /// labels (computed on first use, then cached).
    pub max_label_id: i64,
}

/// An immutable set of allowed token sequences plus the stop tokens that may
/// end them, shared by any number of [`Matcher`](crate::Matcher)s.
///
/// The C trie is reference counted: `clone` adds a reference (no copy), drop
/// releases one, and every matcher holds its own, so a matcher may outlive
/// the `Trie` value it was made from. `Trie` is `Send + Sync`.
///
/// ```
/// use treemask::{Trie, TrieOptions};
///
/// let eos = 99;
/// let options = TrieOptions::new(100, [eos]);
/// let trie = Trie::from_paths(&options, [&[1, 2, 3][..], &[1, 4]])?;
/// assert_eq!(trie.vocab_size(), 100);
/// assert_eq!(trie.stop_tokens(), vec![eos]);
/// assert_eq!(trie.stats()?.n_terminals, 2);
/// # Ok::<(), treemask::Error>(())
/// ```
pub struct Trie {
    raw: NonNull<sys::treemask_trie>,
}

// Safety: a treemask_trie is immutable after construction and its refcount is
// atomic; the header declares every function taking a trie safe to call from
// any number of threads at once (the lazily built dense-row cache is
// internally synchronised). So the handle may move to and be shared by other
// threads.
unsafe impl Send for Trie {}
// Safety: as for Send; `&Trie` only reaches thread-safe C functions.
unsafe impl Sync for Trie {}

impl Trie {
    /// Builds a trie from token paths, path `i` carrying label id `i`.
    /// Duplicate paths merge; the empty path makes the root terminal.
    ///
    /// # Errors
    /// With a message naming the path and position: a token or stop token
    /// outside `[0, vocab_size)` (`OutOfRange`), a stop token inside a path,
    /// no paths, no stop tokens, `vocab_size <= 0` (`InvalidArgument`).
    pub fn from_paths<P: AsRef<[i32]>>(
        options: &TrieOptions,
        paths: impl IntoIterator<Item = P>,
    ) -> Result<Trie> {
        let (tokens, offsets) = to_csr(paths);
        Trie::from_csr(options, &tokens, &offsets, None)
    }

    /// Builds a trie from token paths, each with its own label id (one id may
    /// sit on several paths; duplicate paths keep every label given).
    ///
    /// # Errors
    /// As [`from_paths`](Self::from_paths).
    pub fn from_labeled_paths<P: AsRef<[i32]>>(
        options: &TrieOptions,
        paths: impl IntoIterator<Item = (P, i64)>,
    ) -> Result<Trie> {
        let mut labels = Vec::new();
        let (tokens, offsets) = to_csr(paths.into_iter().map(|(path, label)| {
            labels.push(label);
            path
        }));
        Trie::from_csr(options, &tokens, &offsets, Some(&labels))
    }

    /// Builds a trie from paths in CSR form, without copying them first:
    /// path `i` is `tokens[offsets[i]..offsets[i + 1]]`, so `offsets` has
    /// one entry more than there are paths, starts at 0, never decreases and
    /// ends at `tokens.len()`. `label_ids`: `None` (path `i` carries label
    /// `i`) or one id per path.
    ///
    /// # Errors
    /// `InvalidArgument` when `offsets` is empty, does not end at
    /// `tokens.len()`, does not start at 0 or decreases, or `label_ids` has
    /// the wrong length; otherwise as [`from_paths`](Self::from_paths).
    pub fn from_csr(
        options: &TrieOptions,
        tokens: &[i32],
        offsets: &[usize],
        label_ids: Option<&[i64]>,
    ) -> Result<Trie> {
        let n_paths = match offsets.len().checked_sub(1) {
            Some(n) => n,
            None => {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    "offsets is empty; it needs one entry per path plus one",
                ))
            }
        };
        let end = offsets[n_paths];
        if end != tokens.len() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "offsets[{n_paths}] = {end} but tokens has {} entries",
                    tokens.len()
                ),
            ));
        }
        if let Some(labels) = label_ids {
            if labels.len() != n_paths {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("label_ids has {} entries for {n_paths} paths", labels.len()),
                ));
            }
        }
        let raw_options = options.to_raw();
        let mut out = ptr::null_mut();
        // Safety: raw_options borrows options.stop_tokens, alive for the call.
        // The library reads offsets[0..=n_paths] (in bounds by construction),
        // checks every offset against offsets[n_paths] before reading tokens,
        // and offsets[n_paths] == tokens.len(); label_ids, when given, has
        // n_paths entries. out is written only on success.
        let status = unsafe {
            sys::treemask_trie_from_paths(
                &raw_options,
                tokens.as_ptr(),
                offsets.as_ptr(),
                n_paths,
                label_ids.map_or(ptr::null(), <[i64]>::as_ptr),
                &mut out,
            )
        };
        check(status)?;
        // Safety: on success `out` is a new trie whose one reference we own.
        Ok(unsafe { Trie::from_raw(out) })
    }

    /// Takes over one reference to a C trie (the `treemask_*` loaders return
    /// one). Dropping the result releases it.
    ///
    /// # Safety
    /// `raw` must be a valid `treemask_trie*` whose reference the caller owns
    /// and gives up.
    ///
    /// # Panics
    /// If `raw` is NULL.
    pub unsafe fn from_raw(raw: *mut sys::treemask_trie) -> Trie {
        Trie {
            raw: NonNull::new(raw).expect("Trie::from_raw: NULL treemask_trie"),
        }
    }

    /// The C handle, still owned by `self` (do not free it); for calling
    /// treemask-sys functions this crate does not wrap.
    pub fn as_raw(&self) -> *mut sys::treemask_trie {
        self.raw.as_ptr()
    }

    /// True if both values refer to the same C trie.
    pub fn ptr_eq(&self, other: &Trie) -> bool {
        self.raw == other.raw
    }

    /// The `vocab_size` the trie was built with.
    pub fn vocab_size(&self) -> i32 {
        // Safety: self.raw is a live trie for as long as self exists.
        unsafe { sys::treemask_trie_vocab_size(self.raw.as_ptr()) }
    }

    /// `ceil(vocab_size / 32)`: the `i32` words of one bitmask row.
    pub fn bitmask_words(&self) -> usize {
        crate::bitmask::bitmask_words(self.vocab_size())
    }

    /// The stop tokens, ascending and distinct.
    pub fn stop_tokens(&self) -> Vec<i32> {
        let mut out = Vec::new();
        // Safety: self.raw is live; treemask_trie_stop_tokens writes
        // min(cap, n) tokens to a buffer with room for cap and returns n.
        unsafe {
            read_list(&mut out, |buf, cap| {
                sys::treemask_trie_stop_tokens(self.raw.as_ptr(), buf, cap)
            })
        };
        out
    }

    /// Node, edge, terminal and label counts, depth, fanout and memory.
    ///
    /// # Errors
    /// None with this library version; the `Result` keeps the C contract.
    pub fn stats(&self) -> Result<TrieStats> {
        // Safety: every field of treemask_trie_stats is an integer, for which
        // all-zero bytes are a valid value.
        let mut raw: sys::treemask_trie_stats = unsafe { core::mem::zeroed() };
        raw.struct_size = core::mem::size_of::<sys::treemask_trie_stats>();
        // Safety: self.raw is live; raw is a writable stats struct whose
        // struct_size says how many bytes the library may write.
        check(unsafe { sys::treemask_trie_get_stats(self.raw.as_ptr(), &mut raw) })?;
        Ok(TrieStats {
            n_nodes: raw.n_nodes,
            n_edges: raw.n_edges,
            n_terminals: raw.n_terminals,
            n_labels: raw.n_labels,
            max_depth: raw.max_depth,
            max_fanout: raw.max_fanout,
            bytes: raw.bytes,
            dense_row_cache_bytes: raw.dense_row_cache_bytes,
            n_warnings: raw.n_warnings,
            max_label_id: raw.max_label_id,
        })
    }
}

impl Clone for Trie {
    /// Another reference to the same trie (nothing is copied).
    fn clone(&self) -> Trie {
        // Safety: self.raw is live, and retain returns its argument with one
        // more reference, which the new value owns.
        unsafe { Trie::from_raw(sys::treemask_trie_retain(self.raw.as_ptr())) }
    }
}

impl Drop for Trie {
    fn drop(&mut self) {
        // Safety: self owns exactly one reference and gives it up here;
        // matchers hold references of their own.
        unsafe { sys::treemask_trie_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Trie {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Trie")
            .field("vocab_size", &self.vocab_size())
            .field("stop_tokens", &self.stop_tokens())
            .finish_non_exhaustive()
    }
}

/// Concatenated tokens and the offsets that delimit each path.
fn to_csr<P: AsRef<[i32]>>(paths: impl IntoIterator<Item = P>) -> (Vec<i32>, Vec<usize>) {
    let mut tokens = Vec::new();
    let mut offsets = vec![0];
    for path in paths {
        tokens.extend_from_slice(path.as_ref());
        offsets.push(tokens.len());
    }
    (tokens, offsets)
}
