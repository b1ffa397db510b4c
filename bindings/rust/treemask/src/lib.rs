//! Safe Rust bindings to treemask: constrain LLM generation to a fixed set of
//! token sequences (taxonomy labels, entity names, semantic IDs, an RTP-LLM
//! `prefix_dict`) with xgrammar-layout next-token bitmasks.
//!
//! Build a [`Trie`] once and share it (it is `Send + Sync`; `clone` adds a
//! reference). Give each sequence a [`Matcher`]; every decode step, fill the
//! bitmask row, mask the logits, sample, and accept the sampled token:
//!
//! ```
//! use treemask::{ApplyShape, Matcher, Trie, TrieOptions};
//!
//! const VOCAB: i32 = 151_936;
//! const EOS: i32 = 151_645;
//! let labels: [&[i32]; 3] = [&[785, 2906, 12], &[785, 2906, 7071], &[9707, 1001]];
//! let trie = Trie::from_paths(&TrieOptions::new(VOCAB, [EOS]), labels)?;
//! let mut matcher = Matcher::new(&trie)?;
//! let mut row = treemask::allocate_token_bitmask(1, VOCAB);
//! let mut logits = vec![0.0f32; VOCAB as usize];
//! while !matcher.is_terminated() {
//!     for (t, logit) in logits.iter_mut().enumerate() {
//!         *logit = ((t * 7919) % 1009) as f32; // a stand-in for the model
//!     }
//!     if matcher.fill_next_token_bitmask(&mut row)? {
//!         treemask::apply_token_bitmask_cpu(&mut logits, &row, ApplyShape::new(1, VOCAB), None)?;
//!     }
//!     let best = (0..VOCAB).max_by(|&a, &b| logits[a as usize].total_cmp(&logits[b as usize]));
//!     assert!(matcher.accept_token(best.unwrap())?);
//! }
//! assert_eq!(matcher.label_ids().len(), 1);
//! # Ok::<(), treemask::Error>(())
//! ```
//!
//! Every fallible call returns [`Result`]; an [`Error`] carries the
//! [`ErrorKind`] and the library's message naming the problem. A rejected
//! token is not an error: [`MatcherRef::accept_token`] returns `Ok(false)`.
//!
//! What else the crate wraps, by area of the C header:
//! - tries from RTP-LLM prefix dictionaries ([`Trie::from_rtp_json`],
//!   [`Trie::from_rtp_tsv`]), JSON Lines ([`Trie::from_jsonl`]) and compiled
//!   `.tmtrie` files ([`Trie::load`], [`Trie::save`], [`Trie::metadata`]);
//! - decoding modes: the mode fields of [`MatcherOptions`] (multi-label,
//!   hierarchical labels, think budget, length budget, stop-token override),
//!   [`ExclusionSet`] and [`MatcherRef::set_label_filter`], speculative
//!   decoding ([`MatcherRef::accept_tokens`],
//!   [`MatcherRef::fill_draft_bitmasks`]);
//! - many sequences at once: [`Batch`] (slots filled on worker threads, an
//!   owned bound bitmask with O(fanout) incremental fills, beam reordering)
//!   and state arrays ([`Trie::fill_states`], [`Trie::advance_states`]);
//! - observability: per-matcher counters ([`MatcherRef::counters`]) and the
//!   library's log events ([`set_log_callback`]);
//! - string sets at the byte level: a [`Vocab`] (each token's bytes) and
//!   [`Trie::from_strings`], which allows any tokenization of the strings
//!   (as engines match `choice`), where token paths allow one;
//! - masking logits on the CPU: [`apply_token_bitmask_cpu`] (`f32`),
//!   [`apply_token_bitmask_cpu_half`] (`f16` / `bf16` bits) and the sparse
//!   [`apply_token_candidates_cpu`].
//!
//! Stability follows the C header's two tiers. The experimental tier
//! (decoding modes and their [`MatcherOptions`] fields, exclusion sets,
//! length budgets, speculative and jump-forward accepts, counters, bound
//! bitmask fills, state arrays) may change in any minor release: each such
//! item says *Experimental* in its documentation, and the types among them
//! are also re-exported from [`experimental`], so `use
//! treemask::experimental::*` names what a program depends on.
//!
//! The crate links libtreemask through `treemask-sys` (re-exported as
//! [`sys`]); see that crate for how the library is found.
//
// Modules follow the sections of treemask.h: the trie and its other sources
// (trie, files), the matcher and its modes (matcher, modes), batch and state
// arrays (batch, states), the CPU kernels (kernels). Each adds `impl Trie` /
// `impl MatcherRef` blocks for its area rather than reshaping those types.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub use treemask_sys as sys;

mod batch;
mod bitmask;
mod error;
mod files;
mod kernels;
mod list;
mod log;
mod matcher;
mod modes;
mod states;
mod strings;
mod trie;

pub use batch::{Batch, BatchOptions, FillMode};
pub use bitmask::{allocate_token_bitmask, bitmask_words, is_token_allowed};
pub use error::{last_error_message, Error, ErrorKind, Result};
pub use files::RtpOptions;
pub use kernels::{
    apply_token_bitmask_cpu, apply_token_bitmask_cpu_half, apply_token_candidates_cpu,
    apply_token_candidates_cpu_half, cpu_kernel_isa, ApplyShape, Half,
};
pub use log::{clear_log_callback, set_log_callback, LogLevel};
pub use matcher::{FailurePolicy, Matcher, MatcherCounters, MatcherOptions, MatcherRef};
pub use modes::ExclusionSet;
pub use states::{STATE_FAILED, STATE_ROOT, STATE_TERMINATED};
pub use strings::{Vocab, TOKEN_SPECIAL};
pub use trie::{Trie, TrieOptions, TrieStats};

/// The types of the experimental tier (also at the crate root). The
/// experimental methods live on [`Trie`], [`MatcherRef`] and [`Batch`] and
/// say *Experimental* in their documentation: the decoding-mode fields of
/// [`MatcherOptions`], [`MatcherRef::set_label_filter`],
/// [`MatcherRef::set_remaining_tokens`],
/// [`MatcherRef::fill_next_token_bitmask_with_budget`],
/// [`MatcherRef::accept_tokens`], [`MatcherRef::fill_draft_bitmasks`],
/// [`MatcherRef::accept_forced_tokens`], [`MatcherRef::counters`],
/// [`Trie::fill_states`], [`Trie::advance_states`], [`MatcherRef::state`],
/// the bound bitmask of a [`Batch`] ([`Batch::bind_bitmask`],
/// [`Batch::fill_bound`]) and string sets ([`Vocab`], [`Trie::from_strings`],
/// [`Trie::from_labeled_strings`], [`Trie::is_string_set`], [`Trie::vocab`],
/// [`Trie::load_with_vocab`], [`MatcherRef::forced_bytes`]).
pub mod experimental {
    pub use crate::batch::FillMode;
    pub use crate::matcher::MatcherCounters;
    pub use crate::modes::ExclusionSet;
    pub use crate::states::{STATE_FAILED, STATE_ROOT, STATE_TERMINATED};
    pub use crate::strings::{Vocab, TOKEN_SPECIAL};
}

/// The version of the libtreemask actually loaded, as
/// `major * 10000 + minor * 100 + patch` (compare with
/// [`sys::TREEMASK_VERSION_NUMBER`], the header these bindings were made from).
pub fn version() -> u32 {
    // Safety: no arguments, no preconditions.
    unsafe { sys::treemask_version() }
}

/// [`version`] as a string, e.g. `"0.4.0"`.
pub fn version_string() -> &'static str {
    // Safety: treemask_version_string returns a static NUL-terminated string.
    let text = unsafe { core::ffi::CStr::from_ptr(sys::treemask_version_string()) };
    text.to_str().unwrap_or("(non-UTF-8 version string)")
}
