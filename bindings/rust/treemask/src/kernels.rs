//! CPU masking kernels (treemask.h, section 7): set the logits of disallowed
//! tokens to -inf from a bitmask (any xgrammar-layout mask) or from candidate
//! lists, for `f32` logits and raw 16-bit halves (`f16` / `bf16`).
//!
//! Every shape is checked against the slices before the library is called,
//! so a wrong shape is an [`Error`], never an out-of-bounds access.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
use core::ffi::c_void;
use core::marker::PhantomData;

use treemask_sys as sys;

use crate::bitmask::bitmask_words;
use crate::error::{check, Error, ErrorKind, Result};

/// Which 16-bit float format a `&mut [u16]` of logits holds (Rust has no
/// stable `f16`; pass the raw bits, e.g. a `half::f16` slice cast to `u16`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Half {
    /// IEEE binary16; -inf is `0xFC00`.
    F16,
    /// bfloat16 (the top half of an `f32`); -inf is `0xFF80`.
    Bf16,
}

impl Half {
    fn dtype(self) -> i32 {
        match self {
            Half::F16 => sys::treemask_dtype_TREEMASK_F16 as i32,
            Half::Bf16 => sys::treemask_dtype_TREEMASK_BF16 as i32,
        }
    }

    /// The bit pattern the kernels write for -inf.
    pub fn neg_infinity_bits(self) -> u16 {
        match self {
            Half::F16 => 0xFC00,
            Half::Bf16 => 0xFF80,
        }
    }
}

/// Where the rows of a logits buffer (and of its bitmask) lie. Start from
/// [`ApplyShape::new`]; fields may be added in later versions (hence
/// `#[non_exhaustive]`).
///
/// Row `r` of the logits starts at element `r * logits_row_stride` and has
/// `logits_width` logits; row `r` of the bitmask starts at word
/// `r * bitmask_row_words`. The bitmask may hold a different number of rows
/// than the logits (`bitmask.len() / bitmask_row_words`), as in xgrammar:
/// without indices it needs at least `rows`; with indices every index must
/// be a row of both.
///
/// `rows` is a `usize` (a length) while `vocab_size` is an `i32`, as token
/// ids are everywhere in treemask (`Trie::vocab_size()` returns `i32`), so
/// `ApplyShape::new(n, trie.vocab_size())` needs no conversion. Columns at or past `vocab_size` (a padded
/// vocabulary) are always masked; columns from `logits_width` up to the
/// stride are never touched.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ApplyShape {
    /// Rows of logits (and of bitmask / candidate lists).
    pub rows: usize,
    /// The model's vocabulary size (> 0).
    pub vocab_size: i32,
    /// Logits per row: `vocab_size` by default; wider for a padded
    /// vocabulary (the extra columns are masked), or narrower.
    pub logits_width: usize,
    /// Elements from the start of one logits row to the next
    /// (`>= logits_width`); `logits_width` by default.
    pub logits_row_stride: usize,
    /// Words per bitmask row; `bitmask_words(vocab_size)` by default. Must
    /// cover `min(vocab_size, logits_width)` columns.
    pub bitmask_row_words: usize,
}

impl ApplyShape {
    /// `rows` contiguous rows of `vocab_size` logits, and bitmask rows of
    /// [`bitmask_words`]`(vocab_size)` words.
    pub fn new(rows: usize, vocab_size: i32) -> ApplyShape {
        let width = usize::try_from(vocab_size).unwrap_or(0);
        ApplyShape {
            rows,
            vocab_size,
            logits_width: width,
            logits_row_stride: width,
            bitmask_row_words: bitmask_words(vocab_size),
        }
    }

    /// The same shape with rows of `logits_width` contiguous logits (the
    /// stride follows the width).
    pub fn with_logits_width(mut self, logits_width: usize) -> ApplyShape {
        self.logits_width = logits_width;
        self.logits_row_stride = logits_width;
        self
    }

    /// The same shape with `logits_row_stride` elements between row starts.
    pub fn with_logits_row_stride(mut self, logits_row_stride: usize) -> ApplyShape {
        self.logits_row_stride = logits_row_stride;
        self
    }

    /// The same shape with `bitmask_row_words` words per bitmask row.
    pub fn with_bitmask_row_words(mut self, bitmask_row_words: usize) -> ApplyShape {
        self.bitmask_row_words = bitmask_row_words;
        self
    }

    /// The checks both forms share: the vocabulary size, the stride, that
    /// `len` logits hold every row, and that every index names a row.
    fn check_logits(&self, len: usize, indices: Option<&[i32]>) -> Result<()> {
        let (rows, width, stride) = (self.rows, self.logits_width, self.logits_row_stride);
        if self.vocab_size <= 0 {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("vocab_size must be positive, got {}", self.vocab_size),
            ));
        }
        if stride < width {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("logits_row_stride {stride} is smaller than logits_width {width}"),
            ));
        }
        if rows > 0 {
            let needed = (rows - 1)
                .checked_mul(stride)
                .and_then(|n| n.checked_add(width));
            if needed.map_or(true, |n| n > len) {
                return Err(Error::new(
                    ErrorKind::BufferTooSmall,
                    format!(
                        "logits has {len} elements; {rows} rows of logits_width {width} at \
                         logits_row_stride {stride} need {}",
                        describe(needed)
                    ),
                ));
            }
        }
        for (i, &row) in indices.unwrap_or(&[]).iter().enumerate() {
            if usize::try_from(row).map_or(true, |r| r >= rows) {
                return Err(Error::new(
                    ErrorKind::OutOfRange,
                    format!("indices[{i}] = {row} is out of range [0, n_rows={rows})"),
                ));
            }
        }
        Ok(())
    }

    /// Checks that bitmask rows cover the masked columns and that the
    /// `len / bitmask_row_words` rows of the bitmask hold every touched row;
    /// returns that row count.
    fn check_bitmask(&self, len: usize, indices: Option<&[i32]>) -> Result<usize> {
        let (rows, words) = (self.rows, self.bitmask_row_words);
        let columns = self.logits_width.min(self.vocab_size.max(0) as usize);
        let covering = columns / 32 + usize::from(columns % 32 != 0);
        if words < covering {
            return Err(Error::new(
                ErrorKind::BufferTooSmall,
                format!(
                    "bitmask_row_words {words} < {covering}, the words covering \
                     min(vocab_size={}, logits_width={}) columns",
                    self.vocab_size, self.logits_width
                ),
            ));
        }
        let bitmask_rows = len.checked_div(words).unwrap_or(0);
        if let Some(indices) = indices {
            for (i, &row) in indices.iter().enumerate() {
                if usize::try_from(row).map_or(true, |r| r >= bitmask_rows) {
                    return Err(Error::new(
                        ErrorKind::OutOfRange,
                        format!(
                            "indices[{i}] = {row} is out of range [0, bitmask rows={bitmask_rows}) \
                             (the bitmask has {len} words of {words} per row)"
                        ),
                    ));
                }
            }
            return Ok(bitmask_rows);
        }
        let needed = rows.checked_mul(words);
        if needed.map_or(true, |n| n > len) {
            return Err(Error::new(
                ErrorKind::BufferTooSmall,
                format!(
                    "bitmask has {len} words; {rows} rows of bitmask_row_words {words} need {}",
                    describe(needed)
                ),
            ));
        }
        Ok(bitmask_rows.max(rows))
    }

    /// Checks that CSR candidate lists have `rows + 1` offsets (the library
    /// checks their values: non-decreasing, within the candidates).
    fn check_candidates(&self, row_offsets: &[i32]) -> Result<()> {
        if row_offsets.len() != self.rows + 1 {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "row_offsets has {} entries; {} rows need rows + 1 = {}",
                    row_offsets.len(),
                    self.rows,
                    self.rows + 1
                ),
            ));
        }
        Ok(())
    }
}

/// Sets `logits[r][c] = -inf` for every masked column `c` of every touched
/// row `r`: `c >= vocab_size`, or bit `c` of bitmask row `r` is 0. `indices`:
/// `None` touches every row; otherwise only the listed rows (each in
/// `0..rows`; they address both the logits row and the bitmask row, as in
/// xgrammar). Kept logits are never read or rewritten.
///
/// ```
/// use treemask::{apply_token_bitmask_cpu, ApplyShape};
///
/// let mut logits = [1.0f32, 2.0, 3.0, 4.0];
/// let mask = [0b0110];
/// apply_token_bitmask_cpu(&mut logits, &mask, ApplyShape::new(1, 4), None)?;
/// assert_eq!(logits, [f32::NEG_INFINITY, 2.0, 3.0, f32::NEG_INFINITY]);
/// # Ok::<(), treemask::Error>(())
/// ```
///
/// Cost: a fully masked word is 32 stores and no load, a fully allowed one is
/// skipped (AVX2 where the CPU has it, see [`cpu_kernel_isa`]).
///
/// # Errors
/// Nothing written: `logits` or `bitmask` shorter than `shape` says
/// (`BufferTooSmall`), `logits_row_stride < logits_width`, `vocab_size <= 0`
/// (`InvalidArgument`), `bitmask_row_words` too few for the columns
/// (`BufferTooSmall`), an index out of range (`OutOfRange`, named).
pub fn apply_token_bitmask_cpu(
    logits: &mut [f32],
    bitmask: &[i32],
    shape: ApplyShape,
    indices: Option<&[i32]>,
) -> Result<()> {
    apply_bitmask(Logits::f32(logits), bitmask, shape, indices)
}

/// [`apply_token_bitmask_cpu`] for 16-bit logits given as raw bits, in the
/// format `half` names; masked logits become that format's -inf
/// ([`Half::neg_infinity_bits`]).
///
/// # Errors
/// As [`apply_token_bitmask_cpu`].
pub fn apply_token_bitmask_cpu_half(
    logits: &mut [u16],
    half: Half,
    bitmask: &[i32],
    shape: ApplyShape,
    indices: Option<&[i32]>,
) -> Result<()> {
    apply_bitmask(Logits::half(logits, half), bitmask, shape, indices)
}

/// The sparse form: row `r` keeps only its candidates
/// `candidates[row_offsets[r]..row_offsets[r + 1]]` (any order, repeats
/// allowed, each in `0..vocab_size`; one at or past `logits_width` is
/// ignored) and every other column becomes -inf. It never reads a bitmask,
/// so for trie rows (few candidates, e.g. [`MatcherRef::next_tokens`]) it
/// moves the least memory. `bitmask_row_words` of `shape` is not used.
///
/// [`MatcherRef::next_tokens`]: crate::MatcherRef::next_tokens
///
/// ```
/// use treemask::{apply_token_candidates_cpu, ApplyShape};
///
/// let mut logits = [1.0f32; 6]; // two rows of three
/// apply_token_candidates_cpu(&mut logits, &[0, 1, 3], &[2, 0, 1], ApplyShape::new(2, 3), None)?;
/// let ninf = f32::NEG_INFINITY;
/// assert_eq!(logits, [ninf, ninf, 1.0, 1.0, 1.0, ninf]);
/// # Ok::<(), treemask::Error>(())
/// ```
///
/// # Errors
/// Nothing written: `row_offsets` not of `rows + 1` entries or decreasing
/// (`InvalidArgument`), offsets outside `0..=candidates.len()` (`OutOfRange`), a
/// candidate outside `0..vocab_size` (`OutOfRange`, naming row and
/// position), and the logits and index errors of [`apply_token_bitmask_cpu`].
pub fn apply_token_candidates_cpu(
    logits: &mut [f32],
    row_offsets: &[i32],
    candidates: &[i32],
    shape: ApplyShape,
    indices: Option<&[i32]>,
) -> Result<()> {
    apply_candidates(Logits::f32(logits), row_offsets, candidates, shape, indices)
}

/// [`apply_token_candidates_cpu`] for 16-bit logits given as raw bits, in the
/// format `half` names.
///
/// # Errors
/// As [`apply_token_candidates_cpu`].
pub fn apply_token_candidates_cpu_half(
    logits: &mut [u16],
    half: Half,
    row_offsets: &[i32],
    candidates: &[i32],
    shape: ApplyShape,
    indices: Option<&[i32]>,
) -> Result<()> {
    apply_candidates(
        Logits::half(logits, half),
        row_offsets,
        candidates,
        shape,
        indices,
    )
}

/// The instruction set of the kernel the apply functions use in this
/// process: `"avx2"` or `"scalar"`.
pub fn cpu_kernel_isa() -> &'static str {
    // Safety: treemask_cpu_kernel_isa returns a static NUL-terminated string,
    // never NULL.
    let text = unsafe { core::ffi::CStr::from_ptr(sys::treemask_cpu_kernel_isa()) };
    text.to_str().unwrap_or("(non-UTF-8 ISA name)")
}

/// A needed length, or that it overflows.
fn describe(needed: Option<usize>) -> String {
    needed.map_or_else(|| "more than usize holds".to_string(), |n| n.to_string())
}

/// A C indices argument: NULL with 0 = every row. A slice pointer is never
/// NULL, so `Some(&[])` stays "no rows".
fn index_list(indices: Option<&[i32]>) -> (*const i32, usize) {
    indices.map_or((core::ptr::null(), 0), |i| (i.as_ptr(), i.len()))
}

/// A caller's logits as the C kernels take them: an untyped pointer, its
/// length in elements and its dtype, borrowed from a slice for `'a`.
struct Logits<'a> {
    data: *mut c_void,
    len: usize,
    // A treemask_dtype value; the C functions take it as an int32_t.
    dtype: i32,
    _borrow: PhantomData<&'a mut [u16]>,
}

impl<'a> Logits<'a> {
    fn f32(logits: &'a mut [f32]) -> Logits<'a> {
        Logits {
            data: logits.as_mut_ptr().cast(),
            len: logits.len(),
            dtype: sys::treemask_dtype_TREEMASK_F32 as i32,
            _borrow: PhantomData,
        }
    }

    fn half(logits: &'a mut [u16], half: Half) -> Logits<'a> {
        Logits {
            data: logits.as_mut_ptr().cast(),
            len: logits.len(),
            dtype: half.dtype(),
            _borrow: PhantomData,
        }
    }
}

fn apply_bitmask(
    logits: Logits<'_>,
    bitmask: &[i32],
    shape: ApplyShape,
    indices: Option<&[i32]>,
) -> Result<()> {
    shape.check_logits(logits.len, indices)?;
    let bitmask_rows = shape.check_bitmask(bitmask.len(), indices)?;
    let (indices_ptr, n_indices) = index_list(indices);
    // Safety: logits is an exclusively borrowed slice of its dtype holding
    // every row of shape; bitmask holds rows of bitmask_row_words words, and
    // the library reads only the words covering the masked columns of each;
    // every index names a row; all checked above.
    check(unsafe {
        sys::treemask_cpu_apply_token_bitmask(
            logits.data,
            logits.dtype,
            shape.rows,
            shape.logits_row_stride,
            shape.logits_width,
            bitmask.as_ptr(),
            shape.bitmask_row_words,
            bitmask_rows,
            shape.vocab_size,
            indices_ptr,
            n_indices,
        )
    })
}

fn apply_candidates(
    logits: Logits<'_>,
    row_offsets: &[i32],
    candidates: &[i32],
    shape: ApplyShape,
    indices: Option<&[i32]>,
) -> Result<()> {
    shape.check_logits(logits.len, indices)?;
    shape.check_candidates(row_offsets)?;
    let (indices_ptr, n_indices) = index_list(indices);
    // Safety: logits is an exclusively borrowed slice of its dtype holding
    // every row of shape and every index names a row (checked above);
    // row_offsets has rows + 1 entries and the library reads candidates only
    // after checking every offset against n_candidates = candidates.len().
    check(unsafe {
        sys::treemask_cpu_apply_token_candidates(
            logits.data,
            logits.dtype,
            shape.rows,
            shape.logits_row_stride,
            shape.logits_width,
            row_offsets.as_ptr(),
            candidates.as_ptr(),
            candidates.len(),
            shape.vocab_size,
            indices_ptr,
            n_indices,
        )
    })
}
