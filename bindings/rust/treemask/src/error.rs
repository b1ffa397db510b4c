//! Errors: a status code from the C library plus the message it left in
//! `treemask_last_error()`.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
use core::ffi::CStr;
use core::fmt;

use treemask_sys as sys;

/// What went wrong, one variant per `TREEMASK_ERR_*` code of the C header.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A bad argument: a malformed path list, an option out of its range, ...
    InvalidArgument,
    /// A token id or index outside its range (also: rolling back too far).
    OutOfRange,
    /// A caller buffer shorter than needed (e.g. a bitmask row).
    BufferTooSmall,
    /// The call is not allowed in this state (e.g. a matcher in the
    /// `StickyError` failed state).
    InvalidState,
    /// An allocation failed.
    OutOfMemory,
    /// Malformed input text (JSON, TSV, ...).
    Parse,
    /// A file could not be read or written.
    Io,
    /// A compiled trie file fails its checks.
    CorruptFile,
    /// A compiled trie file of another format version.
    VersionMismatch,
    /// Not built into this library (JSON loader, CUDA).
    Unsupported,
    /// A bug in treemask; please report it.
    Internal,
    /// A status this version of the crate does not know (a newer library).
    Unknown(i32),
}

impl ErrorKind {
    /// The kind for a non-OK `treemask_status`.
    pub fn from_status(status: sys::treemask_status) -> ErrorKind {
        match status {
            sys::TREEMASK_ERR_INVALID_ARGUMENT => ErrorKind::InvalidArgument,
            sys::TREEMASK_ERR_OUT_OF_RANGE => ErrorKind::OutOfRange,
            sys::TREEMASK_ERR_BUFFER_TOO_SMALL => ErrorKind::BufferTooSmall,
            sys::TREEMASK_ERR_INVALID_STATE => ErrorKind::InvalidState,
            sys::TREEMASK_ERR_OUT_OF_MEMORY => ErrorKind::OutOfMemory,
            sys::TREEMASK_ERR_PARSE => ErrorKind::Parse,
            sys::TREEMASK_ERR_IO => ErrorKind::Io,
            sys::TREEMASK_ERR_CORRUPT_FILE => ErrorKind::CorruptFile,
            sys::TREEMASK_ERR_VERSION_MISMATCH => ErrorKind::VersionMismatch,
            sys::TREEMASK_ERR_UNSUPPORTED => ErrorKind::Unsupported,
            sys::TREEMASK_ERR_INTERNAL => ErrorKind::Internal,
            other => ErrorKind::Unknown(other),
        }
    }

    /// The pinned `TREEMASK_ERR_*` value.
    pub fn status(self) -> sys::treemask_status {
        match self {
            ErrorKind::InvalidArgument => sys::TREEMASK_ERR_INVALID_ARGUMENT,
            ErrorKind::OutOfRange => sys::TREEMASK_ERR_OUT_OF_RANGE,
            ErrorKind::BufferTooSmall => sys::TREEMASK_ERR_BUFFER_TOO_SMALL,
            ErrorKind::InvalidState => sys::TREEMASK_ERR_INVALID_STATE,
            ErrorKind::OutOfMemory => sys::TREEMASK_ERR_OUT_OF_MEMORY,
            ErrorKind::Parse => sys::TREEMASK_ERR_PARSE,
            ErrorKind::Io => sys::TREEMASK_ERR_IO,
            ErrorKind::CorruptFile => sys::TREEMASK_ERR_CORRUPT_FILE,
            ErrorKind::VersionMismatch => sys::TREEMASK_ERR_VERSION_MISMATCH,
            ErrorKind::Unsupported => sys::TREEMASK_ERR_UNSUPPORTED,
            ErrorKind::Internal => sys::TREEMASK_ERR_INTERNAL,
            ErrorKind::Unknown(status) => status,
        }
    }
}

impl fmt::Display for ErrorKind {
    /// The C library's short description ("out of range").
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Safety: treemask_status_string accepts any value and returns a
        // static, NUL-terminated string, never NULL.
        let text = unsafe { CStr::from_ptr(sys::treemask_status_string(self.status())) };
        f.write_str(&text.to_string_lossy())
    }
}

/// A failed call: its kind and the message that names the problem (which
/// argument, path, position or token), e.g. `treemask_trie_from_paths: path 3
/// position 1: token 70000 >= vocab_size 1000`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// What went wrong.
    pub kind: ErrorKind,
    /// Why, in words.
    pub message: String,
}

impl Error {
    /// An error made on the Rust side, before any C call.
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }

    /// The error for `status`, with the message the failing call left on
    /// this thread. Must be called right after that call.
    pub(crate) fn from_last_call(status: sys::treemask_status) -> Error {
        Error::new(ErrorKind::from_status(status), last_error_message())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for Error {}

/// `Result` with this crate's [`Error`].
pub type Result<T> = core::result::Result<T, Error>;

/// The message of the last failing call made on this thread
/// (`treemask_last_error()`); empty if none yet. Only failures set it: a
/// rejected token ([`MatcherRef::accept_token`](crate::MatcherRef::accept_token)
/// returning `Ok(false)`) is not an error and leaves it as it was.
pub fn last_error_message() -> String {
    // Safety: treemask_last_error returns a NUL-terminated thread-local string,
    // never NULL, valid until the next treemask call on this thread; it is
    // copied out before any other call.
    let text = unsafe { CStr::from_ptr(sys::treemask_last_error()) };
    text.to_string_lossy().into_owned()
}

/// Ok for `TREEMASK_OK`, otherwise the error the call left on this thread.
pub(crate) fn check(status: sys::treemask_status) -> Result<()> {
    if status == sys::TREEMASK_OK {
        Ok(())
    } else {
        Err(Error::from_last_call(status))
    }
}
