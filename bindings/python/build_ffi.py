#!/usr/bin/env python3
"""Generates the C source of treemask's cffi module (API mode, out-of-line).

The cdef is derived from the real public headers, not written by hand: the C
compiler then checks every declaration against the header it includes, so a
header change that the bindings do not follow fails the build instead of
corrupting memory at run time.

usage: build_ffi.py INCLUDE_DIR OUTPUT.c

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import os
import re
import sys

import cffi

HEADERS = ("treemask/version.h", "treemask/treemask.h", "treemask/treemask_cuda.h")
MODULE = "treemask._treemask_cffi"

_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_LINE_COMMENT = re.compile(r"//[^\n]*")
# cffi evaluates only `#define NAME <integer literal>`; every other macro is
# preprocessor plumbing (include guards, TREEMASK_API, stringification).
_INT_DEFINE = re.compile(r"#\s*define\s+(TREEMASK_\w+)\s+(-?(?:0x[0-9A-Fa-f]+|\d+)[uUlL]*)\s*$")


def cdef_from_header(text):
    """The declarations of one header in the subset of C that cffi parses."""
    text = _BLOCK_COMMENT.sub(" ", text)
    text = _LINE_COMMENT.sub("", text)
    text = re.sub(r"\\\n", " ", text)  # join continued macro lines
    out = []
    skip_depth = 0  # inside `#ifdef __cplusplus` (extern "C" braces)
    depth = 0
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            directive = stripped[1:].split()
            word = directive[0] if directive else ""
            if word in ("if", "ifdef", "ifndef"):
                depth += 1
                if skip_depth == 0 and word == "ifdef" and directive[1:] == ["__cplusplus"]:
                    skip_depth = depth
            elif word == "endif":
                if skip_depth == depth:
                    skip_depth = 0
                depth -= 1
            elif skip_depth == 0 and word == "define":
                m = _INT_DEFINE.match(stripped)
                if m:
                    out.append("#define %s %s" % (m.group(1), m.group(2)))
            continue
        if skip_depth:
            continue
        out.append(line.replace("TREEMASK_NODISCARD ", "").replace("TREEMASK_API ", ""))
    return "\n".join(out)


# Calls of the package's own, compiled into the module (not the library):
# the per-step CUDA calls with their pointers as integers. A torch tensor's
# data_ptr() is an int, and ffi.cast(void *, int) costs about 0.3 us per
# pointer on a 2-core VM, more than the rest of the apply's Python (issue
# 30 item 3: the whole call against one torch op). The pointers are CUDA
# tensors the caller checked (TREEMASK_CUDA_CALLER_CHECKED_POINTERS).
SHIMS_CDEF = """
treemask_status treemask_py_cuda_apply_token_bitmask(uintptr_t logits, int32_t dtype, size_t n_rows,
    size_t logits_row_stride, size_t logits_width, uintptr_t bitmask, size_t bitmask_row_words,
    size_t n_bitmask_rows, int32_t vocab_size, uintptr_t stream);
treemask_status treemask_py_cuda_trie_follow_rows_mask_logits(const treemask_cuda_trie *dev_trie,
    const treemask_cuda_token_rows *prev, const treemask_cuda_token_rows *rows, int32_t failure_policy,
    uintptr_t scores, size_t scores_row_stride, uintptr_t logits, int32_t dtype, size_t logits_row_stride,
    size_t logits_width, int32_t finished_token, uintptr_t stream);
"""
SHIMS_SOURCE = """
static treemask_status treemask_py_cuda_apply_token_bitmask(uintptr_t logits, int32_t dtype,
    size_t n_rows, size_t logits_row_stride, size_t logits_width, uintptr_t bitmask,
    size_t bitmask_row_words, size_t n_bitmask_rows, int32_t vocab_size, uintptr_t stream) {
  return treemask_cuda_apply_token_bitmask_flags((void *)logits, dtype, n_rows, logits_row_stride,
      logits_width, (const int32_t *)bitmask, bitmask_row_words, n_bitmask_rows, vocab_size, NULL, 0,
      TREEMASK_CUDA_CALLER_CHECKED_POINTERS, (void *)stream);
}

static treemask_status treemask_py_cuda_trie_follow_rows_mask_logits(
    const treemask_cuda_trie *dev_trie, const treemask_cuda_token_rows *prev,
    const treemask_cuda_token_rows *rows, int32_t failure_policy, uintptr_t scores,
    size_t scores_row_stride, uintptr_t logits, int32_t dtype, size_t logits_row_stride,
    size_t logits_width, int32_t finished_token, uintptr_t stream) {
  return treemask_cuda_trie_follow_rows_mask_logits(dev_trie, prev, rows, failure_policy,
      (const void *)scores, scores_row_stride, (void *)logits, dtype, logits_row_stride, logits_width,
      finished_token, TREEMASK_CUDA_CALLER_CHECKED_POINTERS, (void *)stream);
}
"""


def build_ffi(include_dir):
    ffi = cffi.FFI()
    for header in HEADERS:
        with open(os.path.join(include_dir, header), encoding="utf-8") as f:
            ffi.cdef(cdef_from_header(f.read()))
    ffi.cdef(SHIMS_CDEF)
    # The log callback handed to treemask_set_log_callback (treemask.log):
    # a C function cffi generates, calling into Python without a libffi closure.
    ffi.cdef('extern "Python" void _treemask_python_log(int32_t, const char *, void *);')
    # The bindings wrap the experimental tier too (treemask.h, "Stability
    # tiers": the last section of each header); the cdef above already holds
    # every declaration, and the package lists what it exposes of that tier
    # in treemask.EXPERIMENTAL.
    ffi.set_source(MODULE, "#define TREEMASK_EXPERIMENTAL 1\n" +
                   "".join('#include "%s"\n' % h for h in HEADERS) + SHIMS_SOURCE)
    return ffi


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    include_dir, output = argv[1], argv[2]
    ffi = build_ffi(include_dir)
    # emit_c_code rewrites the file only when its content changes, so an
    # unchanged header does not recompile the module.
    ffi.emit_c_code(output)


if __name__ == "__main__":
    main(sys.argv)
