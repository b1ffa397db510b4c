//! The library's log events (tries built, loaded and saved; loader warnings;
//! internal errors) delivered to a Rust closure: [`set_log_callback`].
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
use core::ffi::{c_char, c_void};
use std::ffi::CStr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, RwLock};

use treemask_sys as sys;

/// How serious a log event is (`TREEMASK_LOG_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// A trie built, loaded or saved, with its shape.
    Info,
    /// A problem a loader tolerated (unknown fields, unreachable keys).
    Warning,
    /// An internal error or an allocation failure.
    Error,
}

impl LogLevel {
    fn from_raw(level: i32) -> LogLevel {
        match level {
            sys::TREEMASK_LOG_INFO => LogLevel::Info,
            sys::TREEMASK_LOG_WARNING => LogLevel::Warning,
            _ => LogLevel::Error,
        }
    }
}

type Callback = dyn Fn(LogLevel, &str) + Send + Sync;

// The closure log events go to. The library's sink is always the trampoline,
// which looks the closure up here: a closure replaced while it runs (on this
// thread or another) lives on in the trampoline's clone of the Arc until the
// call is over, and no lock is held while it runs, so it may install another.
static INSTALLED: RwLock<Option<Arc<Callback>>> = RwLock::new(None);

fn current() -> Option<Arc<Callback>> {
    INSTALLED
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone()
}

extern "C" fn trampoline(level: i32, message: *const c_char, _user_data: *mut c_void) {
    let callback = match current() {
        Some(callback) => callback,
        None => return,
    };
    // Safety: message is a NUL-terminated line, valid during this call.
    let text = unsafe { CStr::from_ptr(message) }.to_string_lossy();
    // A panic must not unwind into C; the panic hook has already reported it.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        callback(LogLevel::from_raw(level), &text)
    }));
}

fn install(callback: Option<Arc<Callback>>) {
    let enable = callback.is_some();
    *INSTALLED
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner()) = callback;
    if enable {
        // Safety: trampoline matches treemask_log_fn and ignores user_data.
        // Installing it again is harmless. It is never uninstalled: with no
        // closure it returns at once, and log events are rare (one per trie
        // built, loaded or saved), so two racing installs cannot leave a
        // closure set with the sink removed.
        unsafe { sys::treemask_set_log_callback(Some(trampoline), core::ptr::null_mut()) }
    }
}

/// Installs `callback` as the process-wide log sink, replacing the previous
/// one (the library has one sink, shared with C and Python callers in the same
/// process: installing here replaces theirs). The library serialises calls:
/// `callback` runs on the thread whose treemask call logged, one call at a
/// time, and may call treemask functions, this one included. A panic in
/// `callback` is caught (the line is lost); it never unwinds into the
/// library.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// let lines = Arc::new(Mutex::new(Vec::new()));
/// let sink = Arc::clone(&lines);
/// treemask::set_log_callback(move |level, message| sink.lock().unwrap().push((level, message.to_owned())));
/// let options = treemask::TrieOptions::new(8, [0]);
/// let trie = treemask::Trie::from_paths(&options, [[1, 2]])?;
/// treemask::clear_log_callback();
/// let lines = lines.lock().unwrap();
/// assert_eq!(lines[0].0, treemask::LogLevel::Info);
/// assert!(lines[0].1.starts_with("built trie from 1 token paths"));
/// # Ok::<(), treemask::Error>(())
/// ```
pub fn set_log_callback<F>(callback: F)
where
    F: Fn(LogLevel, &str) + Send + Sync + 'static,
{
    install(Some(Arc::new(callback)));
}

/// Removes the closure: log events are dropped again, as by default.
pub fn clear_log_callback() {
    install(None);
}
