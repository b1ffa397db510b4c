//! String sets at the byte level (treemask.h, section 8): a [`Vocab`] gives
//! every token id its bytes, and [`Trie::from_strings`] allows any token
//! sequence whose bytes spell one of the strings (any tokenization, as
//! engines match `choice`), where [`Trie::from_paths`] allows exactly the
//! given token paths (one tokenization).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
use core::fmt;
use core::mem::MaybeUninit;
use core::ptr::{self, NonNull};
use std::path::Path;

use treemask_sys as sys;

use crate::error::{check, Error, ErrorKind, Result};
use crate::list::read_list;
use crate::matcher::MatcherRef;
use crate::trie::{Trie, TrieOptions};

/// The token flag of a token that is never text (a control or added token):
/// it is allowed only as a stop token.
pub const TOKEN_SPECIAL: u8 = sys::TREEMASK_TOKEN_SPECIAL as u8;

/// A tokenizer's vocabulary at the byte level: each token id's bytes and
/// flags, with the vocabulary trie that string-set masks walk (~0.1 s to build
/// for a 150k vocabulary). Immutable and reference counted: `clone` adds a
/// reference, and every string-set trie built over it keeps it alive. `Send
/// + Sync`.
///
/// *Experimental* (the C header's experimental tier): may change in any minor release.
pub struct Vocab {
    raw: NonNull<sys::treemask_vocab>,
}

// Safety: a treemask_vocab is immutable after construction and its refcount
// is atomic; every function taking one is thread-safe.
unsafe impl Send for Vocab {}
// Safety: as for Send; `&Vocab` only reaches thread-safe C functions.
unsafe impl Sync for Vocab {}

impl Vocab {
    /// A vocabulary of `tokens` (token `i`'s bytes: what it adds to the
    /// decoded text), `special[i]` marking the tokens that are never text
    /// (`special` may be shorter: the rest are text). `vocab_size` is the
    /// model's logits width, `>= tokens.len()`; ids past the tokens are
    /// padding, never allowed.
    ///
    /// # Errors
    /// `InvalidArgument` naming the token: no tokens, a `vocab_size` below
    /// their count; `OutOfRange`: a text token over 65,535 bytes.
    pub fn new<T: AsRef<[u8]>>(
        tokens: impl IntoIterator<Item = T>,
        special: &[bool],
        vocab_size: i32,
    ) -> Result<Vocab> {
        let mut bytes = Vec::new();
        let mut offsets = vec![0u64];
        for token in tokens {
            bytes.extend_from_slice(token.as_ref());
            offsets.push(bytes.len() as u64);
        }
        let n = offsets.len() - 1;
        if special.len() > n {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("special has {} entries for {n} tokens", special.len()),
            ));
        }
        let mut flags = vec![0u8; n];
        for (flag, &s) in flags.iter_mut().zip(special) {
            *flag = if s { TOKEN_SPECIAL } else { 0 };
        }
        Vocab::from_csr(&bytes, &offsets, Some(&flags), vocab_size)
    }

    /// A vocabulary from its arrays, not copied first: token `i` is
    /// `bytes[offsets[i]..offsets[i + 1]]` (`offsets` starts at 0, never
    /// decreases, ends at `bytes.len()`), with `flags[i]` ([`TOKEN_SPECIAL`]
    /// or 0) when given.
    ///
    /// # Errors
    /// `InvalidArgument` when `offsets` is empty or does not end at
    /// `bytes.len()`, `flags` has another length, or a flag bit is unknown;
    /// otherwise as [`new`](Self::new).
    pub fn from_csr(
        bytes: &[u8],
        offsets: &[u64],
        flags: Option<&[u8]>,
        vocab_size: i32,
    ) -> Result<Vocab> {
        let n = offsets.len().checked_sub(1).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidArgument,
                "offsets is empty; it needs one entry per token plus one",
            )
        })?;
        if offsets[n] != bytes.len() as u64 {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "offsets[{n}] = {} but bytes has {} entries",
                    offsets[n],
                    bytes.len()
                ),
            ));
        }
        if let Some(f) = flags {
            if f.len() != n {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("flags has {} entries for {n} tokens", f.len()),
                ));
            }
        }
        let mut out = ptr::null_mut();
        // Safety: offsets has n + 1 entries and offsets[n] == bytes.len(), so
        // every read of bytes the library makes after checking the offsets
        // is in bounds; flags, when given, has n entries; out is written only
        // on success.
        let status = unsafe {
            sys::treemask_vocab_create(
                bytes.as_ptr(),
                offsets.as_ptr(),
                n,
                flags.map_or(ptr::null(), <[u8]>::as_ptr),
                vocab_size,
                &mut out,
            )
        };
        check(status)?;
        // Safety: on success `out` is a new vocabulary whose one reference we own.
        Ok(unsafe { Vocab::from_raw(out) })
    }

    /// Takes over one reference to a C vocabulary.
    ///
    /// # Safety
    /// `raw` must be a valid `treemask_vocab*` whose reference the caller
    /// owns and gives up.
    ///
    /// # Panics
    /// If `raw` is NULL.
    pub unsafe fn from_raw(raw: *mut sys::treemask_vocab) -> Vocab {
        Vocab {
            raw: NonNull::new(raw).expect("Vocab::from_raw: NULL treemask_vocab"),
        }
    }

    /// The C handle, still owned by `self`.
    pub fn as_raw(&self) -> *mut sys::treemask_vocab {
        self.raw.as_ptr()
    }

    /// The logits width every mask row covers.
    pub fn vocab_size(&self) -> i32 {
        // Safety: self.raw is live.
        unsafe { sys::treemask_vocab_size(self.raw.as_ptr()) }
    }

    /// The tokenizer's tokens (ids past them are padding).
    pub fn n_tokens(&self) -> i32 {
        // Safety: self.raw is live.
        unsafe { sys::treemask_vocab_n_tokens(self.raw.as_ptr()) }
    }

    /// XXH64 of everything a mask depends on: equal fingerprints, equal
    /// masks. A saved string-set trie records its vocabulary's.
    pub fn fingerprint(&self) -> u64 {
        // Safety: self.raw is live.
        unsafe { sys::treemask_vocab_fingerprint(self.raw.as_ptr()) }
    }

    /// Bytes held: token bytes, offsets, flags and the vocabulary trie.
    pub fn memory_bytes(&self) -> u64 {
        // Safety: self.raw is live.
        unsafe { sys::treemask_vocab_memory_bytes(self.raw.as_ptr()) }
    }

    /// The bytes of a token id (empty for padding ids and ids out of range).
    pub fn token_bytes(&self, token: i32) -> Vec<u8> {
        let mut out = Vec::new();
        // Safety: self.raw is live; token_bytes follows the list convention.
        unsafe {
            read_list(&mut out, |buf, cap| {
                sys::treemask_vocab_token_bytes(self.raw.as_ptr(), token, buf, cap)
            })
        };
        out
    }
}

impl Clone for Vocab {
    /// Another reference to the same vocabulary (nothing is copied).
    fn clone(&self) -> Vocab {
        // Safety: self.raw is live; retain returns it with one more reference.
        unsafe { Vocab::from_raw(sys::treemask_vocab_retain(self.raw.as_ptr())) }
    }
}

impl Drop for Vocab {
    fn drop(&mut self) {
        // Safety: self owns exactly one reference and gives it up here.
        unsafe { sys::treemask_vocab_free(self.raw.as_ptr()) }
    }
}

impl PartialEq for Vocab {
    /// Equal fingerprints: the same tokens, flags and width.
    fn eq(&self, other: &Vocab) -> bool {
        self.fingerprint() == other.fingerprint()
    }
}

impl Eq for Vocab {}

impl fmt::Debug for Vocab {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Vocab")
            .field("vocab_size", &self.vocab_size())
            .field("n_tokens", &self.n_tokens())
            .field("fingerprint", &format_args!("{:016x}", self.fingerprint()))
            .finish()
    }
}

impl Trie {
    /// A string set at the byte level: any token sequence over `vocab` whose
    /// bytes spell `prefix` + one of `strings` is allowed (a token may end
    /// inside a string, or run from one string's end into a longer one);
    /// a stop token where a string ends. String `i` carries label `i`;
    /// repeated strings merge. No tokenizer runs.
    ///
    /// `options.vocab_size` must be 0 or the vocabulary's; its stop tokens,
    /// cache budget and `no_labels` apply. The trie works with matchers,
    /// batches, state arrays and `.tmtrie` files; the decoding modes but
    /// `override_stop_tokens` refuse it (`Unsupported`).
    ///
    /// ```
    /// use treemask::{Matcher, Trie, TrieOptions, Vocab};
    ///
    /// let vocab = Vocab::new(["<eos>", "pos", "itive", "positive", "p", "o", "s"], &[true], 8)?;
    /// let trie = Trie::from_strings(&TrieOptions::new(0, [0]), &vocab, ["positive"], b"")?;
    /// let mut m = Matcher::new(&trie)?;
    /// assert_eq!(m.next_tokens(), vec![1, 3, 4]); // pos, positive, p
    /// assert!(m.accept_token(1)? && m.accept_token(2)? && m.accept_token(0)?);
    /// assert_eq!(m.label_ids(), vec![0]);
    /// # Ok::<(), treemask::Error>(())
    /// ```
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    ///
    /// # Errors
    /// `InvalidArgument`: no strings, a `vocab_size` other than 0 or the
    /// vocabulary's, no stop token; `OutOfRange`: a stop token outside the
    /// vocabulary.
    pub fn from_strings<S: AsRef<[u8]>>(
        options: &TrieOptions,
        vocab: &Vocab,
        strings: impl IntoIterator<Item = S>,
        prefix: &[u8],
    ) -> Result<Trie> {
        let (bytes, offsets) = concat(strings);
        Trie::strings_raw(options, vocab, &bytes, &offsets, prefix, None)
    }

    /// [`from_strings`](Self::from_strings) with a label id per string.
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    ///
    /// # Errors
    /// As `from_strings`.
    pub fn from_labeled_strings<S: AsRef<[u8]>>(
        options: &TrieOptions,
        vocab: &Vocab,
        strings: impl IntoIterator<Item = (S, i64)>,
        prefix: &[u8],
    ) -> Result<Trie> {
        let mut labels = Vec::new();
        let (bytes, offsets) = concat(strings.into_iter().map(|(s, label)| {
            labels.push(label);
            s
        }));
        Trie::strings_raw(options, vocab, &bytes, &offsets, prefix, Some(&labels))
    }

    fn strings_raw(
        options: &TrieOptions,
        vocab: &Vocab,
        bytes: &[u8],
        offsets: &[usize],
        prefix: &[u8],
        labels: Option<&[i64]>,
    ) -> Result<Trie> {
        let raw_options = options.to_raw();
        let mut sopts = MaybeUninit::<sys::treemask_strings_options>::uninit();
        // Safety: init writes every field of the struct.
        let mut sopts = unsafe {
            sys::treemask_strings_options_init(sopts.as_mut_ptr());
            sopts.assume_init()
        };
        sopts.prefix = prefix.as_ptr().cast();
        sopts.prefix_len = prefix.len();
        sopts.label_ids = labels.map_or(ptr::null(), <[i64]>::as_ptr);
        let n = offsets.len() - 1;
        let mut out = ptr::null_mut();
        // Safety: raw_options borrows options.stop_tokens; offsets has n + 1
        // entries ending at bytes.len() (concat made them); prefix has
        // prefix_len bytes; labels, when given, has n entries (one per string
        // concat saw); all alive for the call. out is written only on success.
        let status = unsafe {
            sys::treemask_trie_from_strings(
                &raw_options,
                vocab.as_raw(),
                bytes.as_ptr().cast(),
                offsets.as_ptr(),
                n,
                &sopts,
                &mut out,
            )
        };
        check(status)?;
        // Safety: on success `out` is a new trie whose one reference we own.
        Ok(unsafe { Trie::from_raw(out) })
    }

    /// Whether this is a string set ([`from_strings`](Self::from_strings)).
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn is_string_set(&self) -> bool {
        // Safety: self is live.
        unsafe { sys::treemask_trie_is_string_set(self.as_raw()) }
    }

    /// The vocabulary of a string set (another reference to it), or `None`.
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn vocab(&self) -> Option<Vocab> {
        // Safety: self is live; the vocabulary it returns is borrowed, so we
        // retain one reference of our own before wrapping it.
        unsafe {
            let raw = sys::treemask_trie_vocab(self.as_raw());
            (!raw.is_null()).then(|| Vocab::from_raw(sys::treemask_vocab_retain(raw)))
        }
    }

    /// [`load`](Self::load) sharing `vocab`: a string-set file's vocabulary
    /// is `vocab` (its fingerprint must be the file's) instead of a rebuilt
    /// copy of the one the file holds. A token-path file ignores it.
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    ///
    /// # Errors
    /// As `load`; `InvalidArgument` naming both fingerprints when the file
    /// was built over another vocabulary.
    pub fn load_with_vocab(path: impl AsRef<Path>, trusted: bool, vocab: &Vocab) -> Result<Trie> {
        let path = crate::files::c_path(path.as_ref())?;
        let flags = if trusted {
            sys::TREEMASK_LOAD_TRUSTED as u32
        } else {
            0
        };
        let mut out = ptr::null_mut();
        // Safety: path is a NUL-terminated string and vocab a live
        // vocabulary, both alive for the call; out is written only on success.
        check(unsafe {
            sys::treemask_trie_load_with_vocab(path.as_ptr(), flags, vocab.as_raw(), &mut out)
        })?;
        // Safety: on success `out` is a new trie whose one reference we own.
        Ok(unsafe { Trie::from_raw(out) })
    }
}

impl MatcherRef {
    /// The bytes every continuation of a string set shares from here (the
    /// forced bytes of jump-forward; empty where a string may end, and for
    /// a token-path trie). [`forced_tokens`](Self::forced_tokens) tokenizes
    /// them by longest match where that is unambiguous.
    ///
    /// *Experimental* (the C header's experimental tier): may change in any minor release.
    pub fn forced_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        // Safety: forced_bytes follows the list convention.
        unsafe { self.read_into(&mut out, sys::treemask_matcher_forced_bytes) };
        out
    }
}

/// Concatenated bytes and the offsets that delimit each string.
fn concat<S: AsRef<[u8]>>(strings: impl IntoIterator<Item = S>) -> (Vec<u8>, Vec<usize>) {
    let mut bytes = Vec::new();
    let mut offsets = vec![0];
    for s in strings {
        bytes.extend_from_slice(s.as_ref());
        offsets.push(bytes.len());
    }
    (bytes, offsets)
}
