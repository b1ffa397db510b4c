/* treemask CUDA entry points: bitmask apply kernels on device logits and a
 * device-resident trie whose advance + fill step runs on the GPU with no host
 * round trip.
 *
 * Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
 *
 * No CUDA type appears here, so any C99 or C++ program can include this
 * header: a stream is a `void *` holding a cudaStream_t (NULL = the legacy
 * default stream), device buffers are plain pointers.
 *
 * Every libtreemask has these functions. A library built without CUDA
 * returns TREEMASK_ERR_UNSUPPORTED from each of them, and so does a CUDA
 * build on a machine without a CUDA driver or device (the CUDA runtime is
 * linked statically; libtreemask never needs libcudart or libcuda to load).
 * treemask_cuda_available() tells which case applies.
 *
 * Tiers (see treemask.h): the apply kernels are stable; the device trie, its
 * fused step and the device beam step are experimental, in the one last
 * section, declared only with TREEMASK_EXPERIMENTAL defined before the
 * include.
 *
 * Conventions
 * -----------
 * - Device arrays must be device memory of the current device (cudaMalloc,
 *   managed or pinned host memory also work). A plain host pointer is
 *   TREEMASK_ERR_INVALID_ARGUMENT, and so is memory of another device: call
 *   cudaSetDevice (torch.cuda.device) first. Logits must be aligned to
 *   their element size (4 bytes for f32, 2 for f16 / bf16; any allocation
 *   or tensor is): a misaligned pointer is TREEMASK_ERR_INVALID_ARGUMENT.
 * - Calls only enqueue work on `stream` and return: they never synchronise,
 *   allocate or copy to the host, so they may be captured in a CUDA graph
 *   (treemask_cuda_trie_upload and treemask_cuda_trie_free excepted). An
 *   error in the kernels themselves shows up in the caller's next CUDA
 *   synchronisation, as it does for any kernel.
 * - Host-side arguments (sizes, dtype, NULL pointers, pointer kinds) are
 *   checked before anything is enqueued; on failure nothing is enqueued and
 *   treemask_last_error() names the argument. Contents of device arrays
 *   cannot be checked without a synchronisation, so each function states what
 *   it does with out-of-range device values; none of them ever reads or
 *   writes out of bounds because of them.
 * - dtype is a treemask_dtype value of treemask.h section 7: TREEMASK_F32 = 0,
 *   TREEMASK_F16 = 1, TREEMASK_BF16 = 2. Masked logits become -inf.
 * - Thread safety: every function may be called from any number of threads
 *   at once; a treemask_cuda_trie is immutable after upload. Work enqueued on
 *   different streams that writes the same buffers is the caller's race.
 */
#ifndef TREEMASK_TREEMASK_CUDA_H
#define TREEMASK_TREEMASK_CUDA_H

#include "treemask.h"

#ifdef __cplusplus
extern "C" {
#endif

/* True iff this library was built with CUDA, a CUDA driver and at least one
 * device are present, and the current device can run treemask's kernels
 * (compute capability 8.0 or newer for the default build). False otherwise.
 * Never fails, never prints, never aborts. Thread-safe. */
TREEMASK_API bool treemask_cuda_available(void);

/* ---- Apply kernels ------------------------------------------------------ */

/* Sets logits to -inf where the bitmask disallows the token, on the device:
 * the CUDA twin of treemask_cpu_apply_token_bitmask, same arguments and
 * semantics, plus a stream.
 *
 * - logits: device array of n_rows rows; row r starts at element
 *   r * logits_row_stride and has logits_width columns. Columns >= vocab_size
 *   are always masked; columns in [logits_width, logits_row_stride) are never
 *   touched.
 * - bitmask: device array of n_bitmask_rows rows of bitmask_row_words int32
 *   words (xgrammar layout); bitmask_row_words >= treemask_bitmask_words(
 *   vocab_size). Bits at or above vocab_size are ignored. Without indices
 *   n_bitmask_rows must be >= n_rows.
 * - vocab_size > 0; past logits_width every column is decided by the
 *   bitmask, which must cover min(vocab_size, logits_width) columns.
 * - indices: NULL masks every row. Otherwise a device array of n_indices row
 *   numbers: only those rows are masked, and indices[i] selects both the
 *   logits row and the bitmask row (xgrammar semantics; the arrays may have
 *   different row counts). An index outside [0, min(n_rows,
 *   n_bitmask_rows)) is skipped: the device array cannot be read from the
 *   host without synchronising, which is the one difference from the CPU
 *   twin (that reports it and writes nothing).
 *
 * Memory traffic: a 32-token word with no allowed token is stored without
 * loading the logits, an all-allowed word is skipped, and 16-byte vector
 * accesses are used when logits and logits_row_stride allow them.
 *
 * Errors (nothing enqueued): NULL logits or bitmask, unknown dtype,
 * logits_row_stride < logits_width, vocab_size <= 0,
 * bitmask_row_words too small, sizes whose byte count overflows, host
 * pointers, no usable device (TREEMASK_ERR_UNSUPPORTED). n_rows = 0 or
 * n_indices = 0 with non-NULL indices enqueues nothing and succeeds. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_cuda_apply_token_bitmask(
    void *logits, int32_t dtype, size_t n_rows, size_t logits_row_stride, size_t logits_width,
    const int32_t *bitmask, size_t bitmask_row_words, size_t n_bitmask_rows, int32_t vocab_size,
    const int32_t *indices, size_t n_indices, void *stream);

/* Sparse apply: keeps only the candidate logits of each row and sets every
 * other column to -inf, from candidate lists in CSR form instead of a
 * bitmask. For trie rows (a few candidates out of 150k tokens) it reads far
 * less than a bitmask and writes each masked column once, without loading it.
 *
 * - logits, dtype, n_rows, logits_row_stride, logits_width, vocab_size,
 *   indices, n_indices: as for treemask_cuda_apply_token_bitmask.
 * - row_offsets: device array of n_rows + 1 entries; the candidates of row r
 *   are candidates[row_offsets[r] .. row_offsets[r + 1]).
 * - candidates: device array of n_candidates token ids, in any order;
 *   duplicates are harmless.
 * Device values: a candidate outside [0, vocab_size) is ignored; offsets are
 * clamped to [0, n_candidates] and a row whose begin exceeds its end has no
 * candidates (every column masked).
 *
 * Errors as for treemask_cuda_apply_token_bitmask, plus NULL row_offsets,
 * NULL candidates with n_candidates > 0 and n_candidates past INT32_MAX.
 * The argument checks of both apply functions are the CPU twins' own
 * (same status, same message); the CPU twins also check the values of
 * indices, offsets and candidates, which here live on the device. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_cuda_apply_token_candidates(
    void *logits, int32_t dtype, size_t n_rows, size_t logits_row_stride, size_t logits_width,
    const int32_t *row_offsets, const int32_t *candidates, size_t n_candidates, int32_t vocab_size,
    const int32_t *indices, size_t n_indices, void *stream);

#ifdef TREEMASK_EXPERIMENTAL
/* ======================================================================== */
/* Experimental                                                              */
/* ======================================================================== */

/* ---- Experimental: pointers the caller has checked ---------------------- */

/* The flags of the calls that take them (since 0.4.0). Each stable call
 * asks the CUDA runtime what every pointer argument is
 * (cudaPointerGetAttributes: host memory and another device's memory are
 * refused with a message naming the argument). A binding whose arrays carry
 * their device (a torch CUDA tensor on the current device) already knows,
 * and per call that query is host time on the decode step's critical path
 * (one per pointer: 2 for an apply, 7 for a beam step). With
 * TREEMASK_CUDA_CALLER_CHECKED_POINTERS the caller vouches that every
 * pointer argument (the arrays its structs point to included) is memory the
 * current device can address (its own device memory, managed memory or
 * mapped pinned memory at the same address) and stays allocated until the
 * work completes; the library then makes no pointer query, as a CUDA
 * kernel library such as cuBLAS makes none. A pointer that breaks the
 * promise is undefined behaviour (typically an illegal-address error from
 * a later CUDA call). Every other check is unchanged: NULLs, sizes,
 * overlaps, the trie's device. Other bits are reserved:
 * TREEMASK_ERR_INVALID_ARGUMENT naming them. */
#define TREEMASK_CUDA_CALLER_CHECKED_POINTERS 0x1u

/* treemask_cuda_apply_token_bitmask with flags (above). */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_cuda_apply_token_bitmask_flags(
    void *logits, int32_t dtype, size_t n_rows, size_t logits_row_stride, size_t logits_width,
    const int32_t *bitmask, size_t bitmask_row_words, size_t n_bitmask_rows, int32_t vocab_size,
    const int32_t *indices, size_t n_indices, uint32_t flags, void *stream);

/* ---- Experimental: device trie and the fused step ----------------------- */

/* A copy of a trie's arrays in device memory (node offsets, edge tokens,
 * terminal bits, stop tokens; about 8 bytes per edge), bound to the device
 * that was current at upload. Immutable; any number of threads and streams
 * may use it at once. It does not keep the host trie alive. */
typedef struct treemask_cuda_trie treemask_cuda_trie;

/* Copies trie to the current device and returns the handle in *out.
 * Allocates device memory once, copies on stream and waits for that stream
 * before returning, so the upload cannot be captured in a graph (do it
 * before capturing). The trie's arrays are checked on the way (a corrupt
 * trie is TREEMASK_ERR_CORRUPT_FILE naming the node), so the kernels never
 * need to.
 *
 * Errors: NULL trie or out, no usable device (TREEMASK_ERR_UNSUPPORTED),
 * device memory exhausted (TREEMASK_ERR_OUT_OF_MEMORY), a CUDA error (its
 * name in the message). *out is untouched on failure. Thread-safe. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_cuda_trie_upload(const treemask_trie *trie,
                                                                          void *stream,
                                                                          treemask_cuda_trie **out);

/* Frees the device memory (cudaFree, which waits for the device) and the
 * handle. The caller must not free it while enqueued work or an instantiated
 * CUDA graph still uses it. NULL is a no-op. */
TREEMASK_API void treemask_cuda_trie_free(treemask_cuda_trie *dev_trie);

/* The state-array form of treemask.h on the device. A state is a trie node
 * id (the root is 0), TREEMASK_STATE_TERMINATED = 0xFFFFFFFE or
 * TREEMASK_STATE_FAILED = 0xFFFFFFFF; an engine keeps one per row in a
 * device uint32 array and reorders beams with a gather.
 *
 * One step, for every row r in [0, n_rows):
 * 1. Advance (skipped entirely when tokens is NULL: fill only). With
 *    t = tokens[r] and s = states[r]:
 *    - t < 0: no token this step; s is unchanged (accepted).
 *    - s is a node: a child token moves to the child; a stop token at a
 *      terminal node gives TERMINATED; any other t (ids >= vocab_size too)
 *      is rejected and failure_policy decides: TREEMASK_FAILURE_REJECT leaves
 *      s unchanged, FAIL_CLOSED and STICKY_ERROR set FAILED.
 *    - s is TERMINATED: stays TERMINATED (a stop token counts as accepted,
 *      anything else as rejected).
 *    - s is FAILED: a stop token gives TERMINATED unless failure_policy is
 *      STICKY_ERROR (failed until the caller writes a new state); otherwise
 *      s stays FAILED and the token is rejected.
 *    - s is neither a node id nor reserved (a caller bug that cannot be
 *      reported from the device): treated as FAILED, so its next token
 *      turns it into FAILED or TERMINATED.
 *    The new state is written to states[r]; accepted (optional device array
 *    of n_rows bytes) receives 1 if the token was accepted (or t < 0), 0 if
 *    it was rejected.
 * 2. Fill: the next-token set of the new state: a node allows its children
 *    plus the stop tokens if it is terminal; TERMINATED, FAILED and invalid
 *    states allow only the stop tokens.
 * For states a matcher can reach, these are the rules of a matcher with the
 * same failure policy (and terminate_without_stop_token off).
 *
 * All arrays are device arrays: states (n_rows), tokens (n_rows or NULL),
 * accepted (n_rows or NULL). dev_trie must have been uploaded to the current
 * device. */

/* The step writing bitmask rows: row r of bitmask (bitmask_row_words words,
 * >= treemask_bitmask_words(vocab_size)) receives the allowed set of the new
 * state; every word is written, bits >= vocab_size and extra words are 0.
 *
 * Errors (nothing enqueued): NULL dev_trie, states or bitmask, an unknown
 * failure_policy, bitmask_row_words too small, host pointers, a trie of
 * another device. n_rows = 0 succeeds and enqueues nothing. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_cuda_trie_advance_fill_bitmask(
    const treemask_cuda_trie *dev_trie, uint32_t *states, const int32_t *tokens, size_t n_rows,
    int32_t failure_policy, uint8_t *accepted, int32_t *bitmask, size_t bitmask_row_words,
    void *stream);

/* The step writing logits instead: every column of row r of logits that is
 * not in the allowed set of the new state becomes -inf (columns >=
 * vocab_size always); allowed columns and columns in [logits_width,
 * logits_row_stride) are untouched. Equivalent to advance_fill_bitmask
 * followed by treemask_cuda_apply_token_bitmask, without the bitmask.
 *
 * Errors (nothing enqueued): as for advance_fill_bitmask, plus NULL logits,
 * an unknown dtype, logits_row_stride < logits_width, logits_width smaller
 * than the trie's vocab_size. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_cuda_trie_advance_mask_logits(
    const treemask_cuda_trie *dev_trie, uint32_t *states, const int32_t *tokens, size_t n_rows,
    int32_t failure_policy, uint8_t *accepted, void *logits, int32_t dtype,
    size_t logits_row_stride, size_t logits_width, void *stream);

/* Step 1 alone (the device twin of treemask_trie_advance_states): states
 * advance by tokens (not NULL) with the rules above; nothing is filled.
 * Errors (nothing enqueued): NULL dev_trie, states or tokens, an unknown
 * failure_policy, host pointers, a trie of another device. n_rows = 0
 * succeeds and enqueues nothing. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_cuda_trie_advance_states(
    const treemask_cuda_trie *dev_trie, uint32_t *states, const int32_t *tokens, size_t n_rows,
    int32_t failure_policy, uint8_t *accepted, void *stream);

/* ---- Experimental: states of growing token rows -------------------------- */

/* Rows of token ids that a decode loop grows by one id per step (e.g.
 * transformers' input_ids past the prompt), with the state of each row.
 * Initialise with treemask_cuda_token_rows_init. */
typedef struct treemask_cuda_token_rows {
  size_t struct_size;
  /* Device int64 ids: row r is tokens[r * row_stride .. + n_tokens). May be
   * NULL when n_tokens is 0. */
  const int64_t *tokens;
  size_t n_rows;
  size_t n_tokens;
  /* Elements from one row to the next; >= n_tokens. 0: n_tokens. */
  size_t row_stride;
  /* Device arrays of n_rows entries: each row's state, and a 64-bit hash of
   * its ids (of unspecified value; the next call matches rows by it). */
  uint32_t *states;
  uint64_t *keys;
  /* Optional (NULL: none; since 0.4.0): a device int64 array the call also
   * copies the ids into, row r at copy_to[r * copy_stride .. + n_tokens)
   * (copy_stride 0: n_tokens), so that the next call can name the copy as
   * prev->tokens when the loop may free or reuse its own ids (transformers
   * makes a new input_ids each step). It must overlap neither tokens nor
   * prev->tokens: keep two copies and alternate. */
  int64_t *copy_to;
  size_t copy_stride;
} treemask_cuda_token_rows;

TREEMASK_API void treemask_cuda_token_rows_init(treemask_cuda_token_rows *rows);

/* Writes rows->states and rows->keys: the state of each row after its
 * n_tokens ids from the root, under the advance rules above with
 * failure_policy (an id outside [0, INT32_MAX) is an id no trie allows: it
 * is rejected), with no host round trip, whatever the loop did to its rows
 * between calls (beam search reorders and duplicates them without saying
 * how).
 *
 * prev: NULL, or the previous call's rows: its states and keys as that call
 * wrote them, its ids unchanged since (keep your own copy if the loop may
 * overwrite them). When prev->n_tokens is rows->n_tokens - 1, a row whose
 * first n_tokens - 1 ids equal a row of prev (found by key among prev's
 * rows, then compared id by id, so the result is exact whatever the hash
 * does) takes that row's state and advances it by its last id: one trie
 * step per row and call. Every other row (no prev, a prev of another
 * length, a row with no equal in prev) walks from the root over all its
 * ids. One warp per row; prev's rows are scanned by key.
 *
 * Errors (nothing enqueued): NULL dev_trie or rows, NULL arrays where rows
 * (or prev) has rows and ids, row_stride < n_tokens, sizes whose extent
 * overflows, an unknown failure_policy, host pointers, a trie of another
 * device. n_rows = 0 succeeds and enqueues nothing. Graph-capturable. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_cuda_trie_follow_rows(
    const treemask_cuda_trie *dev_trie, const treemask_cuda_token_rows *prev,
    const treemask_cuda_token_rows *rows, int32_t failure_policy, void *stream);

/* A logits processor's whole step in one kernel launch (since 0.4.0):
 * treemask_cuda_trie_follow_rows (rows->copy_to included), and logits
 * receives scores masked by each row's new state: row r of logits is row r
 * of scores with every column outside the state's allowed set (and every
 * column >= the trie's vocab_size) -inf, as treemask_cuda_trie_advance_mask_
 * logits with no tokens would leave a copy of the scores. Masked columns of
 * scores are never read. scores NULL or equal to logits masks logits in
 * place; otherwise scores (rows of scores_row_stride elements, 0: logits_
 * width, same dtype) must not overlap logits. Columns in [logits_width,
 * logits_row_stride) are untouched. One block per column tile of a row;
 * each follows its row (a few loads and one trie step), the first tile
 * stores the state, key and copy.
 *
 * finished_token: -1, or a token in [0, vocab_size) that a row whose new
 * state is TREEMASK_STATE_TERMINATED keeps besides the stop tokens (the pad
 * id an engine writes after a finished row's stop token; its score is
 * copied like any allowed column). Rows in any other state are unaffected.
 *
 * Errors (nothing enqueued): those of follow_rows and advance_mask_logits
 * (logits has rows->n_rows rows), scores_row_stride < logits_width,
 * overlapping scores and logits, copy_to overlapping tokens or
 * prev->tokens, finished_token outside [-1, vocab_size), unknown flags.
 * rows->n_rows = 0 succeeds and enqueues nothing. Graph-capturable. flags:
 * 0, or TREEMASK_CUDA_CALLER_CHECKED_POINTERS (above). */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_cuda_trie_follow_rows_mask_logits(
    const treemask_cuda_trie *dev_trie, const treemask_cuda_token_rows *prev,
    const treemask_cuda_token_rows *rows, int32_t failure_policy, const void *scores,
    size_t scores_row_stride, void *logits, int32_t dtype, size_t logits_row_stride,
    size_t logits_width, int32_t finished_token, uint32_t flags, void *stream);

/* ---- Experimental: beam step and top-k on the device -------------------- */

/* The CUDA twins of treemask.h section 8 over a device trie and device
 * state arrays: same candidates, scores, tie rule, outputs and state
 * advance as treemask_beam_step_states and treemask_trie_topk_states (read
 * the rules there), fused into one kernel launch on `stream`: per slot the
 * log-softmax normalizer of its row (one read) and the exact top-B of its
 * own candidates; then, by whichever block finishes a request's last slot,
 * the exact top-B across its beams, the outputs and the state advance. No
 * host synchronisation, no allocation (the caller passes a workspace), so
 * a step may be captured in a CUDA graph and replayed. Cost per slot: one
 * read of its row plus O(fanout).
 *
 * Differences from the CPU form, all forced by not synchronising:
 * - lse is computed on the device in float (exp2 of a fused multiply-add,
 *   logf, a different summation order): it agrees with the CPU's normalizer to about 1e-6
 *   relative, not bit for bit, so scores may differ in the last bits and
 *   two candidates within that distance may rank differently. The
 *   summation order also depends on the kernel the step picks (one warp or
 *   one block per slot, by the number of slots against the device's
 *   multiprocessors), so the last bits may differ between devices and batch
 *   sizes too; within one step every candidate of a slot is scored with the
 *   same normalizer. With log_probs (lse = 0) the results equal the CPU's
 *   bit for bit.
 * - A logits row that a live slot reads holding NaN or +inf cannot fail the
 *   call. The device behaviour instead: that slot offers no candidate in
 *   this step (as if its score were -inf; the other slots of its request
 *   compete as usual, and if fewer than B candidates remain the rest are
 *   dead as the rules say), and, when n_bad_rows is not NULL, *n_bad_rows
 *   (a device uint32) is incremented once per such slot. The caller zeroes
 *   the counter when it likes and reads it when it synchronises anyway
 *   (e.g. at the end of a search) to detect the fault. The top-k form does
 *   the same (its contract below).
 * - With log_probs no normalizer runs and rows are not checked (as on the
 *   CPU): a NaN logit's candidate is simply never selected.
 * - A score of -0 is returned as +0 (the two rank as one score).
 * - A state that is neither a node id nor reserved (which the CPU rejects)
 *   is treated as TREEMASK_STATE_FAILED: it offers the stop tokens.
 * - beam_width (and k) at most TREEMASK_CUDA_MAX_BEAM_WIDTH, and
 *   (beam_width - 1) and (the trie's vocab_size - 1) must fit in 32 bits
 *   together (e.g. beam 1,024 with a vocabulary up to 4,194,304).
 *
 * Arguments: logits is a treemask_logits (treemask.h) whose data is device
 * memory; n_columns 0 means the trie's vocab_size, row_stride 0 means
 * n_columns. states, scores, parents, tokens: device arrays of n_requests *
 * beam_width entries (states and scores updated in place). workspace:
 * device memory of at least treemask_cuda_beam_workspace_size bytes,
 * 8-byte aligned, not used by concurrent steps, zero-filled before its first
 * step and again when the step's shape (n_requests, beam_width) changes
 * (cudaMemsetAsync(workspace, 0, bytes, stream)): it holds a counter per
 * request that each step uses to find the block finishing the request, and
 * each step leaves those counters zero. Steps of one shape may then follow
 * each other and be replayed from a graph without clearing it. The rest of
 * the workspace is scratch. */
#define TREEMASK_CUDA_MAX_BEAM_WIDTH 1024

/* *out_bytes = the workspace of a step of n_requests x beam_width slots
 * (beam_width x 12 bytes per slot, 4 per request, 8-byte aligned).
 * Errors: NULL out_bytes, beam_width outside [1,
 * TREEMASK_CUDA_MAX_BEAM_WIDTH], a size that overflows, a library built
 * without CUDA (TREEMASK_ERR_UNSUPPORTED). Needs no device. */
TREEMASK_NODISCARD TREEMASK_API treemask_status
treemask_cuda_beam_workspace_size(size_t n_requests, size_t beam_width, size_t *out_bytes);

/* One beam step on the device (see above). n_bad_rows: NULL or a device
 * uint32 counter. Errors (nothing enqueued): NULL dev_trie or logits, NULL
 * arrays when n_requests > 0, an unknown dtype, n_columns or row_stride too
 * small, beam_width out of range or too wide with the vocabulary,
 * workspace_bytes too small (TREEMASK_ERR_BUFFER_TOO_SMALL), a misaligned
 * workspace, host pointers, a trie of another device, no usable device
 * (TREEMASK_ERR_UNSUPPORTED). n_requests = 0 succeeds and enqueues
 * nothing. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_cuda_beam_step(
    const treemask_cuda_trie *dev_trie, size_t n_requests, size_t beam_width,
    const treemask_logits *logits, uint32_t *states, float *scores, int32_t *parents,
    int32_t *tokens, void *workspace, size_t workspace_bytes, uint32_t *n_bad_rows, void *stream);

/* treemask_cuda_beam_step with flags: 0, or
 * TREEMASK_CUDA_CALLER_CHECKED_POINTERS (which skips the seven pointer
 * queries of a step); unknown bits are TREEMASK_ERR_INVALID_ARGUMENT. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_cuda_beam_step_flags(
    const treemask_cuda_trie *dev_trie, size_t n_requests, size_t beam_width,
    const treemask_logits *logits, uint32_t *states, float *scores, int32_t *parents,
    int32_t *tokens, void *workspace, size_t workspace_bytes, uint32_t *n_bad_rows, uint32_t flags,
    void *stream);

/* The top-k contract, one text in treemask.h and treemask_cuda.h for the
 * host twin (treemask_trie_topk_states) and the device twin
 * (treemask_cuda_trie_topk_states):
 * - Row i < n_rows: the k best tokens allowed at states[i] by x[t] - lse
 *   (lse over the row's first n_columns columns; x[t] itself with
 *   log_probs), best first, ties to the lower token. A node allows its
 *   children plus the stop tokens when it is terminal;
 *   TREEMASK_STATE_TERMINATED and TREEMASK_STATE_FAILED allow the stop
 *   tokens (the fill rules of the state arrays).
 * - out_counts[i] (size_t on both) = how many were found: min(k, allowed
 *   tokens whose score is neither -inf nor NaN). out_tokens /
 *   out_scores[i * k + j] hold them for j < out_counts[i]; every entry j in
 *   [out_counts[i], k) is written as token -1, score -inf.
 * - k = 0 is valid: only out_counts is written (zeros); out_tokens,
 *   out_scores and the logits data may be NULL.
 * - A state that is neither a node id nor reserved: the host fails with
 *   TREEMASK_ERR_OUT_OF_RANGE naming its index before writing anything;
 *   the device, which cannot report it without synchronising, treats it as
 *   TREEMASK_STATE_FAILED.
 * - A row holding NaN or +inf (k > 0, not log_probs): the host fails with
 *   TREEMASK_ERR_INVALID_ARGUMENT naming the row (earlier rows are
 *   written); the device gives the row out_counts 0 (its entries -1 /
 *   -inf) and increments *n_bad_rows when that counter is given.
 * - Scores: the host computes lse in its own summation order, the device in
 *   float with exp2 of a fused multiply-add: they agree to about 1e-6
 *   relative, bit for bit with log_probs. k: any value whose n_rows * k
 *   entries are addressable on the host, at most
 *   TREEMASK_CUDA_MAX_BEAM_WIDTH on the device. */

/* The device twin of the top-k contract above. All arrays are device
 * arrays; no workspace is needed. Other errors: as treemask_cuda_beam_step,
 * with k <= TREEMASK_CUDA_MAX_BEAM_WIDTH. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_cuda_trie_topk_states(
    const treemask_cuda_trie *dev_trie, const uint32_t *states, size_t n_rows,
    const treemask_logits *logits, size_t k, int32_t *out_tokens, float *out_scores,
    size_t *out_counts, uint32_t *n_bad_rows, void *stream);

#endif /* TREEMASK_EXPERIMENTAL */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TREEMASK_TREEMASK_CUDA_H */
