//! Trie sources other than token paths (treemask.h, section 4): RTP-LLM
//! prefix dictionaries (JSON and TSV), JSON Lines paths, compiled `.tmtrie`
//! files and their metadata strings.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
use core::ffi::{c_char, CStr};
use core::mem::MaybeUninit;
use core::ptr;
use std::ffi::CString;
use std::path::Path;

use treemask_sys as sys;

use crate::error::{check, Error, ErrorKind, Result};
use crate::trie::{Trie, TrieOptions};

/// The RTP-LLM loaders' own settings ([`Trie::from_rtp_json`],
/// [`Trie::from_rtp_tsv`]): the key prefix, the fallback token, the key
/// separator and how strictly to read. Start from [`RtpOptions::new`] (JSON:
/// everything from the file) or [`RtpOptions::tsv`] (the TSV form has no
/// header); fields may be added in later versions (hence
/// `#[non_exhaustive]`).
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RtpOptions {
    /// The key prefix. `None`: the JSON's `"start_token_id"`. A value fills
    /// a field the JSON lacks and must agree with one it has.
    pub start_token_id: Option<i32>,
    /// The fallback token that ends a sequence; as `start_token_id`.
    pub end_token_id: Option<i32>,
    /// The key separator. `None`: the JSON's `"sep"`, else `"_"`.
    pub sep: Option<String>,
    /// Use RTP-LLM's defaults 225 / 2 for a start / end token that neither
    /// the file nor these options give.
    pub rtp_llm_defaults: bool,
    /// RTP-LLM compatibility: load exactly what RTP-LLM loads. Negative and
    /// non-int32 list ids are skipped, keys that do not start with
    /// `start_token_id` + `sep` are ignored and the separator `"-"` is
    /// allowed; each is a counted warning
    /// ([`TrieStats::n_warnings`](crate::TrieStats::n_warnings)) instead of
    /// an error. Default: false (strict).
    pub rtp_llm_compat: bool,
}

impl RtpOptions {
    /// Everything from the file, strict.
    pub fn new() -> RtpOptions {
        RtpOptions::default()
    }

    /// For the TSV form: its start and end tokens (it has no header).
    pub fn tsv(start_token_id: i32, end_token_id: i32) -> RtpOptions {
        RtpOptions {
            start_token_id: Some(start_token_id),
            end_token_id: Some(end_token_id),
            ..RtpOptions::default()
        }
    }

    /// The same options with the key separator `sep`.
    pub fn with_sep(mut self, sep: impl Into<String>) -> RtpOptions {
        self.sep = Some(sep.into());
        self
    }

    /// The same options in RTP-LLM compatibility mode
    /// ([`rtp_llm_compat`](Self::rtp_llm_compat)).
    pub fn with_rtp_llm_compat(mut self) -> RtpOptions {
        self.rtp_llm_compat = true;
        self
    }

    /// Calls `f` with the C struct, which borrows a NUL-terminated copy of
    /// `sep` for the duration of the call.
    fn with_raw<T>(&self, f: impl FnOnce(&sys::treemask_rtp_options) -> Result<T>) -> Result<T> {
        let sep = self
            .sep
            .as_deref()
            .map(|s| c_string("sep", s))
            .transpose()?;
        let mut raw = MaybeUninit::<sys::treemask_rtp_options>::uninit();
        // Safety: treemask_rtp_options_init writes struct_size and every
        // field of the struct it is given.
        let mut raw = unsafe {
            sys::treemask_rtp_options_init(raw.as_mut_ptr());
            raw.assume_init()
        };
        for (field, value) in [
            (&mut raw.start_token_id, self.start_token_id),
            (&mut raw.end_token_id, self.end_token_id),
        ] {
            match value {
                Some(v) if v < 0 => {
                    return Err(Error::new(
                        ErrorKind::InvalidArgument,
                        format!("RtpOptions: a token id must be >= 0, got {v}"),
                    ))
                }
                Some(v) => *field = v,
                None => {}
            }
        }
        raw.sep = sep.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        raw.rtp_llm_defaults = self.rtp_llm_defaults;
        raw.rtp_llm_compat = self.rtp_llm_compat;
        f(&raw)
    }
}

impl Trie {
    /// Builds a trie from an RTP-LLM tree-decode dictionary in JSON:
    /// `{"start_token_id": 225, "end_token_id": 2, "sep": "_", "prefix_dict":
    /// {"225": [64000, ...], "225_64000": [...], ...}}`, exactly as RTP-LLM
    /// masks with it: the allowed next tokens at a key are its list; a key
    /// that is missing or has an empty list allows only `end_token_id`;
    /// `end_token_id` inside a list makes the node terminal. The trie has no
    /// labels.
    ///
    /// `options.vocab_size` is required. With no stop tokens in `options`,
    /// `end_token_id` is the stop token. `rtp` holds the RTP-specific
    /// settings ([`RtpOptions`]: values the file lacks, RTP-LLM's defaults,
    /// the compatibility mode).
    ///
    /// ```
    /// use treemask::{Matcher, RtpOptions, Trie, TrieOptions};
    ///
    /// let json = r#"{"start_token_id": 225, "end_token_id": 2,
    ///                "prefix_dict": {"225": [64000, 64003], "225_64000": [64001]}}"#;
    /// let trie =
    ///     Trie::from_rtp_json(&TrieOptions::new(100_000, Vec::new()), &RtpOptions::new(), json)?;
    /// let mut m = Matcher::new(&trie)?;
    /// assert_eq!(m.next_tokens(), vec![64000, 64003]);
    /// assert!(m.accept_token(64003)?);
    /// assert_eq!(m.next_tokens(), vec![2]); // no key "225_64003": only end_token_id
    /// # Ok::<(), treemask::Error>(())
    /// ```
    ///
    /// # Errors
    /// With a message naming the key (and the byte offset for malformed
    /// JSON): a key that does not start with `start_token_id` and `sep`
    /// (`InvalidArgument`), a part that is not a canonical integer or
    /// malformed JSON (`Parse`), ids outside int32 or `vocab_size`
    /// (`OutOfRange`), duplicate keys, a bad `sep`; `Unsupported` when the
    /// library was built without JSON support. Unknown top-level fields and
    /// unreachable keys are tolerated and counted in
    /// [`TrieStats::n_warnings`](crate::TrieStats::n_warnings).
    pub fn from_rtp_json(
        options: &TrieOptions,
        rtp: &RtpOptions,
        json: impl AsRef<[u8]>,
    ) -> Result<Trie> {
        let json = json.as_ref();
        let raw_options = options.to_raw();
        rtp.with_raw(|raw_rtp| {
            // Safety: raw_options and raw_rtp borrow options and rtp, alive
            // for the call; the library reads json.len() bytes.
            build(|out| unsafe {
                sys::treemask_trie_from_rtp_json(
                    &raw_options,
                    raw_rtp,
                    json.as_ptr().cast(),
                    json.len(),
                    out,
                )
            })
        })
    }

    /// [`from_rtp_json`](Self::from_rtp_json) reading the file at `path`.
    ///
    /// # Errors
    /// As `from_rtp_json`; `Io` naming the path when it cannot be read or is
    /// not a regular file.
    pub fn from_rtp_json_file(
        options: &TrieOptions,
        rtp: &RtpOptions,
        path: impl AsRef<Path>,
    ) -> Result<Trie> {
        let path = c_path(path.as_ref())?;
        let raw_options = options.to_raw();
        rtp.with_raw(|raw_rtp| {
            // Safety: raw_options and raw_rtp borrow options and rtp, and
            // path is a NUL-terminated string, all alive for the call.
            build(|out| unsafe {
                sys::treemask_trie_from_rtp_json_file(&raw_options, raw_rtp, path.as_ptr(), out)
            })
        })
    }

    /// Builds a trie from RTP-LLM's text form of a prefix dictionary: lines
    /// `key<TAB>id\x02id\x02...` (LF or CRLF; blank lines skipped). It has no
    /// header, so `rtp` must give `start_token_id` and `end_token_id`
    /// ([`RtpOptions::tsv`]) or `rtp_llm_defaults`; `sep` `None` means
    /// `"_"`. Needs no JSON support. Otherwise as
    /// [`from_rtp_json`](Self::from_rtp_json).
    ///
    /// ```
    /// use treemask::{RtpOptions, Trie, TrieOptions};
    ///
    /// let tsv = "225\t64000\x0264003\n225_64000\t64001\n";
    /// let trie = Trie::from_rtp_tsv(
    ///     &TrieOptions::new(100_000, Vec::new()),
    ///     &RtpOptions::tsv(225, 2),
    ///     tsv,
    /// )?;
    /// assert_eq!(trie.stats()?.n_nodes, 4);
    /// # Ok::<(), treemask::Error>(())
    /// ```
    ///
    /// # Errors
    /// As `from_rtp_json`, naming the line and the key; `InvalidArgument`
    /// for a `sep` containing a NUL byte or a tab.
    pub fn from_rtp_tsv(
        options: &TrieOptions,
        rtp: &RtpOptions,
        data: impl AsRef<[u8]>,
    ) -> Result<Trie> {
        let data = data.as_ref();
        let raw_options = options.to_raw();
        rtp.with_raw(|raw_rtp| {
            // Safety: raw_options and raw_rtp borrow options and rtp, alive
            // for the call; the library reads data.len() bytes.
            build(|out| unsafe {
                sys::treemask_trie_from_rtp_tsv(
                    &raw_options,
                    raw_rtp,
                    data.as_ptr().cast(),
                    data.len(),
                    out,
                )
            })
        })
    }

    /// [`from_rtp_tsv`](Self::from_rtp_tsv) reading the file at `path`.
    ///
    /// # Errors
    /// As `from_rtp_tsv`; `Io` naming the path when it cannot be read or is
    /// not a regular file.
    pub fn from_rtp_tsv_file(
        options: &TrieOptions,
        rtp: &RtpOptions,
        path: impl AsRef<Path>,
    ) -> Result<Trie> {
        let path = c_path(path.as_ref())?;
        let raw_options = options.to_raw();
        rtp.with_raw(|raw_rtp| {
            // Safety: raw_options and raw_rtp borrow options and rtp, and
            // path is a NUL-terminated string, all alive for the call.
            build(|out| unsafe {
                sys::treemask_trie_from_rtp_tsv_file(&raw_options, raw_rtp, path.as_ptr(), out)
            })
        })
    }

    /// Builds a trie from token paths as JSON Lines: one path per line, a
    /// bare array of token ids or `{"tokens": [...], "label": L}`; blank lines
    /// are skipped. Path `i` (counting paths, not lines) carries label `i`
    /// unless it gives `"label"`. The rules of
    /// [`from_paths`](Self::from_paths) apply (`options` must name stop
    /// tokens).
    ///
    /// ```
    /// use treemask::{Matcher, Trie, TrieOptions};
    ///
    /// let jsonl = "[5, 6]\n{\"tokens\": [9], \"label\": 41}\n";
    /// let trie = Trie::from_jsonl(&TrieOptions::new(10, [0]), jsonl)?;
    /// let mut m = Matcher::new(&trie)?;
    /// assert!(m.accept_token(9)?);
    /// assert_eq!(m.label_ids(), vec![41]);
    /// # Ok::<(), treemask::Error>(())
    /// ```
    ///
    /// # Errors
    /// Those of `from_paths` and malformed lines, naming the line (and the
    /// byte offset for malformed JSON); `Unsupported` when the library was
    /// built without JSON support. Unknown object fields are warnings.
    pub fn from_jsonl(options: &TrieOptions, data: impl AsRef<[u8]>) -> Result<Trie> {
        let data = data.as_ref();
        let raw_options = options.to_raw();
        // Safety: raw_options borrows options, alive for the call; the
        // library reads data.len() bytes.
        build(|out| unsafe {
            sys::treemask_trie_from_jsonl(&raw_options, data.as_ptr().cast(), data.len(), out)
        })
    }

    /// [`from_jsonl`](Self::from_jsonl) reading the file at `path`.
    ///
    /// # Errors
    /// As `from_jsonl`; `Io` naming the path when it cannot be read.
    pub fn from_jsonl_file(options: &TrieOptions, path: impl AsRef<Path>) -> Result<Trie> {
        let path = c_path(path.as_ref())?;
        let raw_options = options.to_raw();
        // Safety: raw_options borrows options and path is a NUL-terminated
        // string, both alive for the call.
        build(|out| unsafe { sys::treemask_trie_from_jsonl_file(&raw_options, path.as_ptr(), out) })
    }

    /// Maps the compiled trie file (`.tmtrie`) at `path`. `trusted = false`
    /// verifies the payload checksum (one linear pass at GB/s); `true` skips
    /// only that (the linear structural check of the arrays still runs, so a
    /// corrupted file gives errors, never a crash or a wrong answer). The
    /// loaded trie behaves bit for bit like the
    /// one saved.
    ///
    /// The file must not be truncated or rewritten in place while a trie
    /// loaded from it is alive (the mapping would fault); replace it by
    /// rename, as [`save`](Self::save) does.
    ///
    /// # Errors
    /// `Io` (missing, unreadable, not a regular file), `CorruptFile` (bad
    /// magic, truncated, checksum mismatch, inconsistent header),
    /// `VersionMismatch` (another format version), `InvalidArgument` for a
    /// path containing a NUL byte.
    pub fn load(path: impl AsRef<Path>, trusted: bool) -> Result<Trie> {
        let path = c_path(path.as_ref())?;
        let flags = if trusted {
            sys::TREEMASK_LOAD_TRUSTED as u32
        } else {
            0
        };
        // Safety: path is a NUL-terminated string alive for the call.
        build(|out| unsafe { sys::treemask_trie_load(path.as_ptr(), flags, out) })
    }

    /// Writes the trie to `path` as a `.tmtrie` file, replacing any file
    /// there: it is written beside `path` under a temporary name and renamed
    /// over it, so a process that has the old file loaded keeps a valid
    /// mapping. The trie's own metadata (a loaded trie keeps its file's) is
    /// stored too.
    ///
    /// ```
    /// use treemask::{Trie, TrieOptions};
    ///
    /// let trie = Trie::from_paths(&TrieOptions::new(10, [0]), [&[1, 2][..], &[3]])?;
    /// let path = std::env::temp_dir().join(format!("doc-{}.tmtrie", std::process::id()));
    /// trie.save_with_metadata(&path, [("tokenizer", "sha256:abc")])?;
    /// let loaded = Trie::load(&path, false)?;
    /// assert_eq!(loaded.stats()?.n_nodes, trie.stats()?.n_nodes);
    /// assert_eq!(loaded.metadata_value("tokenizer").as_deref(), Some("sha256:abc"));
    /// std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), treemask::Error>(())
    /// ```
    ///
    /// # Errors
    /// `Io` naming the path; `InvalidArgument` for a path containing a NUL
    /// byte.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = c_path(path.as_ref())?;
        // Safety: self is live and path is a NUL-terminated string alive for
        // the call.
        check(unsafe { sys::treemask_trie_save(self.as_raw(), path.as_ptr(), ptr::null()) })
    }

    /// [`save`](Self::save) with extra metadata strings (a tokenizer
    /// fingerprint, label names, provenance), merged with the trie's own; a
    /// key given here wins.
    ///
    /// # Errors
    /// As `save`; empty or duplicate keys, and keys or values containing a
    /// NUL byte (`InvalidArgument`).
    pub fn save_with_metadata<K: AsRef<str>, V: AsRef<str>>(
        &self,
        path: impl AsRef<Path>,
        metadata: impl IntoIterator<Item = (K, V)>,
    ) -> Result<()> {
        let path = c_path(path.as_ref())?;
        let mut keys = Vec::new();
        let mut values = Vec::new();
        for (key, value) in metadata {
            keys.push(c_string("metadata key", key.as_ref())?);
            values.push(c_string("metadata value", value.as_ref())?);
        }
        let key_ptrs: Vec<*const c_char> = keys.iter().map(|k| k.as_ptr()).collect();
        let value_ptrs: Vec<*const c_char> = values.iter().map(|v| v.as_ptr()).collect();
        let mut raw_options = core::mem::MaybeUninit::<sys::treemask_save_options>::uninit();
        // Safety: init writes every field, so the struct is fully initialised
        // afterwards.
        let mut raw_options = unsafe {
            sys::treemask_save_options_init(raw_options.as_mut_ptr());
            raw_options.assume_init()
        };
        raw_options.metadata_keys = key_ptrs.as_ptr();
        raw_options.metadata_values = value_ptrs.as_ptr();
        raw_options.n_metadata = key_ptrs.len();
        // Safety: self is live; path and every key and value are
        // NUL-terminated strings, and both pointer arrays have n_metadata
        // entries, all alive for the call (the library copies them).
        check(unsafe { sys::treemask_trie_save(self.as_raw(), path.as_ptr(), &raw_options) })
    }

    /// The metadata strings the trie carries (from its `.tmtrie` file),
    /// sorted by key. Bytes that are not UTF-8 are replaced (U+FFFD).
    pub fn metadata(&self) -> Vec<(String, String)> {
        // Safety: self is live; the count only reads it.
        let n = unsafe { sys::treemask_trie_metadata_count(self.as_raw()) };
        let mut out = Vec::with_capacity(n);
        for index in 0..n {
            let mut key = ptr::null();
            let mut value = ptr::null();
            // Safety: self is live and index < count; on success both
            // pointers are NUL-terminated strings owned by the trie.
            let status = unsafe {
                sys::treemask_trie_metadata_at(self.as_raw(), index, &mut key, &mut value)
            };
            if status != sys::TREEMASK_OK {
                continue; // the trie is immutable: cannot happen for index < count
            }
            // Safety: both strings are valid while the trie is, and copied
            // here.
            out.push(unsafe { (owned_string(key), owned_string(value)) });
        }
        out
    }

    /// The metadata value stored under `key`, if any.
    pub fn metadata_value(&self, key: &str) -> Option<String> {
        // A key with a NUL byte cannot have been stored.
        let key = CString::new(key).ok()?;
        // Safety: self is live and key is a NUL-terminated string; the result
        // is NULL or a string owned by the trie, copied at once.
        unsafe {
            let value = sys::treemask_trie_metadata_get(self.as_raw(), key.as_ptr());
            (!value.is_null()).then(|| owned_string(value))
        }
    }
}

/// Runs a C constructor that writes a new trie to its out-parameter.
fn build(
    construct: impl FnOnce(*mut *mut sys::treemask_trie) -> sys::treemask_status,
) -> Result<Trie> {
    let mut out = ptr::null_mut();
    check(construct(&mut out))?;
    // Safety: on success the constructor wrote a new trie whose one
    // reference we own.
    Ok(unsafe { Trie::from_raw(out) })
}

/// # Safety
/// `text` must be a valid NUL-terminated string.
unsafe fn owned_string(text: *const c_char) -> String {
    // Safety: the caller vouches for text.
    unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
}

fn c_string(what: &str, text: &str) -> Result<CString> {
    CString::new(text).map_err(|e| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "{what} {text:?} contains a NUL byte at byte {}",
                e.nul_position()
            ),
        )
    })
}

/// A path as the C library takes it: its bytes (on Unix any bytes but NUL;
/// elsewhere it must be valid Unicode), NUL-terminated.
pub(crate) fn c_path(path: &Path) -> Result<CString> {
    #[cfg(unix)]
    let bytes = {
        use std::os::unix::ffi::OsStrExt;
        path.as_os_str().as_bytes()
    };
    #[cfg(not(unix))]
    let bytes = path
        .to_str()
        .ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("path {path:?} is not valid Unicode"),
            )
        })?
        .as_bytes();
    CString::new(bytes).map_err(|e| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "path {path:?} contains a NUL byte at byte {}",
                e.nul_position()
            ),
        )
    })
}
