/* treemask — constrain LLM generation to a fixed set of token sequences.
 *
 * Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
 *
 * This is the one stable C header (C99 and C++). It needs only <stdint.h>,
 * <stddef.h> and <stdbool.h>.
 *
 * Model
 * -----
 * A *trie* is an immutable set of allowed token-id sequences plus the stop
 * tokens that may end a sequence. It is built once (from token paths, an
 * RTP-LLM prefix dictionary or a compiled .tmtrie file), reference counted and
 * shared by any number of matchers and threads.
 *
 * A *matcher* follows one generated sequence (one beam). Every decode step the
 * engine asks it for the next-token bitmask, samples, and hands the sampled
 * token back with accept_token.
 *
 * Bitmask layout (xgrammar's, verbatim): int32 words, a row has
 * treemask_bitmask_words(vocab_size) = ceil(vocab_size / 32) words, token t is
 * bit (t % 32) of word (t / 32), 1 = allowed. Bits at or beyond vocab_size are
 * always written as 0.
 *
 * Conventions
 * -----------
 * - Functions that can fail return a treemask_status; results go to
 *   out-parameters. On failure, out-parameters are left untouched unless the
 *   function says otherwise, and treemask_last_error() describes the problem.
 * - Buffers are caller-owned, with explicit lengths in elements. Functions
 *   that list things take (out, cap) and return the full count, so a call with
 *   cap = 0 (out may then be NULL) is a size query.
 * - Options structs start with struct_size. Fill them with the matching
 *   *_options_init function, then change fields. The library reads
 *   min(struct_size, its own sizeof) bytes; fields are only ever appended, and
 *   fields a caller's older header does not know take their defaults.
 * - Every *_free accepts NULL. Nothing is ever handed to the caller to free
 *   with libc free().
 * - No C++ exception ever crosses this interface; an internal failure becomes
 *   TREEMASK_ERR_INTERNAL or TREEMASK_ERR_OUT_OF_MEMORY.
 * - Thread safety is stated per type: a trie may be used from any number of
 *   threads at once; a matcher by one thread at a time, except that functions
 *   taking a const matcher may run concurrently with each other.
 */
#ifndef TREEMASK_TREEMASK_H
#define TREEMASK_TREEMASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "version.h"

#if defined(_WIN32) && defined(TREEMASK_BUILDING_LIBRARY)
#define TREEMASK_API __declspec(dllexport)
#elif defined(_WIN32) && !defined(TREEMASK_STATIC)
#define TREEMASK_API __declspec(dllimport)
#elif defined(__GNUC__) || defined(__clang__)
#define TREEMASK_API __attribute__((visibility("default")))
#else
#define TREEMASK_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================== */
/* Section 1: version                                                        */
/* ======================================================================== */

/* TREEMASK_VERSION_NUMBER of the library actually loaded:
 * major * 10000 + minor * 100 + patch. Compare with the macro to detect a
 * header/library mismatch. Thread-safe. */
TREEMASK_API uint32_t treemask_version(void);

/* The same as a string, e.g. "0.1.0". Static storage; never NULL. */
TREEMASK_API const char *treemask_version_string(void);

/* ======================================================================== */
/* Section 2: types                                                          */
/* ======================================================================== */

/* An immutable set of allowed token sequences. Reference counted: created
 * with a refcount of 1, treemask_trie_retain adds one, treemask_trie_free
 * drops one and destroys the trie at zero. Every function taking a trie is
 * safe to call from any number of threads at once. */
typedef struct treemask_trie treemask_trie;

/* The decoding state of one sequence. A matcher retains its trie, so the
 * trie may be freed by the caller while matchers still use it. One thread at
 * a time; functions on a const matcher may run concurrently. */
typedef struct treemask_matcher treemask_matcher;

/* ======================================================================== */
/* Section 3: status and errors                                              */
/* ======================================================================== */

typedef int32_t treemask_status;

/* Pinned values: never renumbered, never reused. */
#define TREEMASK_OK 0
#define TREEMASK_ERR_INVALID_ARGUMENT 1 /* a NULL pointer, a bad option, ... */
#define TREEMASK_ERR_OUT_OF_RANGE 2     /* a token id or index outside its range */
#define TREEMASK_ERR_BUFFER_TOO_SMALL 3 /* a caller buffer shorter than needed */
#define TREEMASK_ERR_INVALID_STATE 4    /* the call is not allowed in this state */
#define TREEMASK_ERR_OUT_OF_MEMORY 5
#define TREEMASK_ERR_PARSE 6            /* malformed input text (JSON, TSV, ...) */
#define TREEMASK_ERR_IO 7               /* a file could not be read or written */
#define TREEMASK_ERR_CORRUPT_FILE 8     /* a .tmtrie file fails its checks */
#define TREEMASK_ERR_VERSION_MISMATCH 9 /* a .tmtrie file of another format version */
#define TREEMASK_ERR_UNSUPPORTED 10     /* not built into this library (JSON, CUDA) */
#define TREEMASK_ERR_INTERNAL 11        /* a bug in treemask; please report it */

/* A short static description of a status ("invalid argument"); an unknown
 * value gives "unknown status". Never NULL. Thread-safe. */
TREEMASK_API const char *treemask_status_string(treemask_status status);

/* The message of the last failing call made on this thread, or of the last
 * token rejection (accept_token with *accepted = false). It names the problem
 * (which argument, which path and position, which token). Never NULL ("" if
 * nothing failed yet). Valid until the next treemask call on this thread.
 * Successful calls do not clear it. */
TREEMASK_API const char *treemask_last_error(void);

/* ======================================================================== */
/* Section 4: trie                                                           */
/* ======================================================================== */

/* ceil(vocab_size / 32): the int32 words in one bitmask row; 0 when
 * vocab_size <= 0. */
TREEMASK_API size_t treemask_bitmask_words(int32_t vocab_size);

typedef struct treemask_trie_options {
  size_t struct_size;
  /* Every token id in the trie and every stop token must be < vocab_size.
   * Required (> 0); init sets 0. */
  int32_t vocab_size;
  /* Tokens that end a sequence at a terminal node (one model may have several
   * EOS ids). Copied; duplicates are merged. */
  const int32_t *stop_tokens;
  size_t n_stop_tokens;
  /* Memory budget for cached dense rows of high-fanout nodes (a root with
   * thousands of children): a fill at such a node copies the cached row
   * instead of setting each bit. Rows are built lazily, thread-safely, and
   * never exceed this budget. init sets 64 MiB; 0 disables the cache. */
  size_t dense_row_cache_bytes;
  /* RTP-LLM loaders only: when the JSON lacks "start_token_id" or
   * "end_token_id", use RTP-LLM's defaults 225 and 2 instead of failing
   * ("sep" defaults to "_" regardless). init sets false. */
  bool rtp_llm_defaults;
} treemask_trie_options;

/* Sets struct_size and every field to its default. */
TREEMASK_API void treemask_trie_options_init(treemask_trie_options *opts);

/* Builds a trie from token paths in CSR form: path i is
 * tokens[offsets[i] .. offsets[i + 1]).
 *
 * - opts: required; vocab_size > 0; at least one stop token, each in
 *   [0, vocab_size).
 * - offsets: n_paths + 1 entries, offsets[0] == 0, non-decreasing.
 * - tokens: offsets[n_paths] entries, each in [0, vocab_size); a stop token
 *   must not occur inside any path (the error names both).
 * - n_paths >= 1. The empty path makes the root terminal.
 * - label_ids: NULL (path i carries label i) or n_paths entries. Duplicate
 *   paths merge into one terminal node that carries every label given for
 *   them; one label id may sit on several paths.
 * - out: receives the new trie (refcount 1) on success.
 *
 * Cost: O(total tokens * log fanout) time, O(total tokens) temporary memory.
 * On failure *out is untouched and treemask_last_error() names the offending
 * argument, path index and position. Thread-safe. */
TREEMASK_API treemask_status treemask_trie_from_paths(const treemask_trie_options *opts,
                                                      const int32_t *tokens, const size_t *offsets,
                                                      size_t n_paths, const int64_t *label_ids,
                                                      treemask_trie **out);

/* Adds a reference and returns trie (NULL gives NULL). Thread-safe. */
TREEMASK_API treemask_trie *treemask_trie_retain(treemask_trie *trie);

/* Drops one reference; the last one destroys the trie. NULL is a no-op.
 * Thread-safe (each reference is released once). */
TREEMASK_API void treemask_trie_free(treemask_trie *trie);

/* The vocab_size the trie was built with; 0 for NULL. */
TREEMASK_API int32_t treemask_trie_vocab_size(const treemask_trie *trie);

/* Writes the stop tokens (ascending, distinct) to out[0 .. min(cap, n)) and
 * returns n. 0 for NULL. */
TREEMASK_API size_t treemask_trie_stop_tokens(const treemask_trie *trie, int32_t *out, size_t cap);

typedef struct treemask_trie_stats {
  size_t struct_size;             /* set by the caller: the library writes at most this */
  uint64_t n_nodes;               /* including the root */
  uint64_t n_edges;               /* n_nodes - 1 */
  uint64_t n_terminals;           /* nodes at which a sequence may end */
  uint64_t n_labels;              /* label ids stored over all terminal nodes */
  uint32_t max_depth;             /* longest path, in tokens */
  uint32_t max_fanout;            /* most children of one node */
  uint64_t bytes;                 /* memory of the flat arrays (no dense-row cache) */
  uint64_t dense_row_cache_bytes; /* memory the lazily built cache uses now */
  /* Problems the loader tolerated: unknown top-level fields, prefix_dict keys
   * the root cannot reach, unknown JSONL fields (`treemask check` lists
   * them). Always 0 for tries built from paths or loaded from .tmtrie. */
  uint64_t n_warnings;
} treemask_trie_stats;

/* Fills *out (up to out->struct_size bytes; set it to sizeof first).
 * Errors: NULL trie or out, struct_size smaller than sizeof(size_t). */
TREEMASK_API treemask_status treemask_trie_get_stats(const treemask_trie *trie,
                                                     treemask_trie_stats *out);

/* <treemask:trie-extensions> later sections add trie sources here. */

/* ---- RTP-LLM tree-decode dictionaries ----------------------------------
 *
 * Built exactly as RTP-LLM masks with them: a key is start_token_id followed
 * by the generated ids, joined by sep ("225_64000_64001"); the root is the key
 * "225" alone. The allowed next tokens at a key are its list; a key that is
 * missing or has an empty list allows only end_token_id (a terminal leaf);
 * end_token_id inside a list makes the node terminal (it may still have
 * children). Duplicate ids in a list merge. The trie has no labels.
 *
 * opts: vocab_size is required. If opts names no stop tokens, end_token_id
 * is the stop token; otherwise opts' stop tokens end sequences and no other
 * stop token may appear in a list.
 *
 * Errors (nothing is built, *out untouched; treemask_last_error() names the
 * key and the problem): a key that does not start with start_token_id and
 * sep, a part that is not a canonical decimal integer, ids outside int32 or
 * >= vocab_size, duplicate keys, an empty sep or one containing digits or
 * '-', an empty input (TREEMASK_ERR_PARSE), a missing or unreadable file
 * (TREEMASK_ERR_IO). Tolerated, counted in treemask_trie_stats.n_warnings:
 * unknown top-level fields (RTP-LLM's own files carry "weight_dict",
 * "sparse_mask") and keys the root cannot reach.
 *
 * Thread-safe. Peak memory of the JSON form is about 4x the input (measured:
 * 330 MB for an 87 MB file; mostly simdjson's index of it), never a map of key
 * strings. */

/* JSON: {"start_token_id": 225, "end_token_id": 2, "sep": "_",
 * "prefix_dict": {"225": [64000, ...], "225_64000": [...], ...}}.
 * start_token_id and end_token_id are required unless opts->rtp_llm_defaults;
 * "sep" defaults to "_". Malformed JSON is TREEMASK_ERR_PARSE with the byte
 * offset. Built without simdjson: TREEMASK_ERR_UNSUPPORTED. */
TREEMASK_API treemask_status treemask_trie_from_rtp_json(const treemask_trie_options *opts,
                                                         const char *json, size_t len,
                                                         treemask_trie **out);

/* The same, reading the file at path. */
TREEMASK_API treemask_status treemask_trie_from_rtp_json_file(const treemask_trie_options *opts,
                                                              const char *path,
                                                              treemask_trie **out);

/* RTP-LLM's text form: lines "key<TAB>id\x02id\x02..." (LF or CRLF; blank
 * lines skipped); an empty id list after the tab is an empty list. It has no
 * header, so start_token_id and end_token_id are arguments. sep: NULL means
 * "_". Needs no JSON support. Errors name the line and the key. */
TREEMASK_API treemask_status treemask_trie_from_rtp_tsv(const treemask_trie_options *opts,
                                                        int32_t start_token_id,
                                                        int32_t end_token_id, const char *sep,
                                                        const char *data, size_t len,
                                                        treemask_trie **out);

/* The same, reading the file at path. */
TREEMASK_API treemask_status treemask_trie_from_rtp_tsv_file(const treemask_trie_options *opts,
                                                             int32_t start_token_id,
                                                             int32_t end_token_id, const char *sep,
                                                             const char *path, treemask_trie **out);

/* ---- Token paths as JSON Lines ------------------------------------------
 *
 * One path per line: a bare array of token ids, or {"tokens": [...],
 * "label": L}. Blank lines are skipped. Path i (counting paths, not lines)
 * carries label i unless it gives "label". The rules of
 * treemask_trie_from_paths apply (opts must name stop tokens; duplicates
 * merge). Errors name the line (and the byte offset for malformed JSON);
 * unknown object fields are warnings. Built without simdjson:
 * TREEMASK_ERR_UNSUPPORTED. Thread-safe. */
TREEMASK_API treemask_status treemask_trie_from_jsonl(const treemask_trie_options *opts,
                                                      const char *data, size_t len,
                                                      treemask_trie **out);

/* The same, reading the file at path. */
TREEMASK_API treemask_status treemask_trie_from_jsonl_file(const treemask_trie_options *opts,
                                                           const char *path, treemask_trie **out);

/* ---- Compiled trie files (.tmtrie) ---------------------------------------
 *
 * A little-endian, versioned file: a checksummed header, the flat arrays of
 * the trie verbatim, optional metadata strings. Loading maps it (mmap) and
 * reads nothing proportional to the trie, so processes share it through the
 * page cache. The format is described in src/trie/file.h. */

/* The format version this library writes and reads. */
#define TREEMASK_TMTRIE_FORMAT_VERSION 1

/* treemask_trie_load flag: skip the payload checksum (the one step whose cost
 * grows with the file), making the load constant time. Every other check
 * still runs, and every offset in the file is range-checked where it is used,
 * so even a corrupted file yields errors (TREEMASK_ERR_CORRUPT_FILE from
 * matcher calls), never a crash or an out-of-bounds read. */
#define TREEMASK_LOAD_TRUSTED 1u

typedef struct treemask_save_options {
  size_t struct_size;
  /* n_metadata key/value strings to store with the trie (a tokenizer
   * fingerprint, label names, provenance). They are merged with the trie's
   * own metadata (a loaded trie keeps its file's); a key given here wins.
   * Keys must be non-empty and distinct; both are copied. init: none. */
  const char *const *metadata_keys;
  const char *const *metadata_values;
  size_t n_metadata;
} treemask_save_options;

/* Sets struct_size and every field to its default. */
TREEMASK_API void treemask_save_options_init(treemask_save_options *opts);

/* Writes trie to path, replacing any file there. The file is written beside
 * path under a temporary name and renamed over it, so a process that has
 * the old file loaded keeps a valid mapping. opts NULL: no extra metadata.
 * Errors: NULL trie or path, bad metadata (TREEMASK_ERR_INVALID_ARGUMENT),
 * TREEMASK_ERR_IO naming the path. Thread-safe. */
TREEMASK_API treemask_status treemask_trie_save_with_options(const treemask_trie *trie,
                                                             const char *path,
                                                             const treemask_save_options *opts);

/* treemask_trie_save_with_options(trie, path, NULL). */
TREEMASK_API treemask_status treemask_trie_save(const treemask_trie *trie, const char *path);

/* Maps the .tmtrie file at path. flags: 0 (verify the payload checksum: one
 * linear pass, GB/s) or TREEMASK_LOAD_TRUSTED (constant time). The loaded trie
 * behaves bit for bit like the one saved; its dense-row cache budget is the
 * default 64 MiB. The file must not be truncated or rewritten in place while
 * a trie loaded from it is alive (replace it by rename, as
 * treemask_trie_save does): the mapping would fault (SIGBUS).
 * Errors: TREEMASK_ERR_IO (missing, unreadable, not a regular file),
 * TREEMASK_ERR_CORRUPT_FILE (bad magic, truncated, checksum mismatch,
 * inconsistent header), TREEMASK_ERR_VERSION_MISMATCH (another format
 * version), TREEMASK_ERR_INVALID_ARGUMENT (unknown flags). Thread-safe. */
TREEMASK_API treemask_status treemask_trie_load(const char *path, uint32_t flags,
                                                treemask_trie **out);

/* ---- Metadata strings ----------------------------------------------------
 * Key/value strings a trie carries into and out of .tmtrie files, sorted by
 * key. The returned strings are NUL-terminated, owned by the trie and valid
 * while it is alive. NULL trie: none. Thread-safe. */

/* The number of metadata entries. */
TREEMASK_API size_t treemask_trie_metadata_count(const treemask_trie *trie);

/* Entry index (< count) to *key and *value (either may be NULL).
 * Errors: NULL trie, index out of range (TREEMASK_ERR_OUT_OF_RANGE). */
TREEMASK_API treemask_status treemask_trie_metadata_at(const treemask_trie *trie, size_t index,
                                                       const char **key, const char **value);

/* The value stored under key, or NULL if there is none. */
TREEMASK_API const char *treemask_trie_metadata_get(const treemask_trie *trie, const char *key);

/* ======================================================================== */
/* Section 5: matcher                                                        */
/* ======================================================================== */

/* What accept_token does with a token that is not allowed. In every policy
 * the call returns TREEMASK_OK with *accepted = false and sets
 * treemask_last_error(). */
#define TREEMASK_FAILURE_REJECT 0       /* state unchanged (xgrammar) */
#define TREEMASK_FAILURE_FAIL_CLOSED 1  /* from now on only stop tokens (RTP-LLM) */
#define TREEMASK_FAILURE_STICKY_ERROR 2 /* the matcher is failed until reset (llguidance) */

typedef struct treemask_matcher_options {
  size_t struct_size;
  /* TREEMASK_FAILURE_*; init sets TREEMASK_FAILURE_REJECT. */
  int32_t failure_policy;
  /* Terminate as soon as a node without children is reached, as part of the
   * accept that reached it (no stop token needed). init sets false. */
  bool terminate_without_stop_token;
  /* How many accepts rollback may undo; 0 = unlimited (the history is then
   * bounded by the longest path of the trie). init sets 0. */
  size_t max_rollback_tokens;
  /* After termination this token is accepted and changes nothing, like a
   * stop token (for engines that pad finished rows). -1 = none (init). */
  int32_t pad_token;
} treemask_matcher_options;

/* Sets struct_size and every field to its default. */
TREEMASK_API void treemask_matcher_options_init(treemask_matcher_options *opts);

/* Creates a matcher at the root of trie (which it retains). opts NULL means
 * defaults. Errors: NULL trie or out, an unknown failure_policy, pad_token
 * outside [-1, vocab_size). Thread-safe with respect to the trie. */
TREEMASK_API treemask_status treemask_matcher_create(treemask_trie *trie,
                                                     const treemask_matcher_options *opts,
                                                     treemask_matcher **out);

/* A copy of m with the same state, history and options. Cheap: the rollback
 * history is shared copy-on-write, never copied whole. Works in every state. */
TREEMASK_API treemask_status treemask_matcher_clone(const treemask_matcher *m,
                                                    treemask_matcher **out);

/* Destroys m and releases its trie. NULL is a no-op. */
TREEMASK_API void treemask_matcher_free(treemask_matcher *m);

/* Writes the next-token bitmask row: bit t is set iff t is a child token of
 * the current node, or t is a stop token and the node is terminal. Once
 * terminated, and after a rejection under FAIL_CLOSED or STICKY_ERROR, only
 * the stop tokens are set.
 *
 * Writes all n_words words whatever the buffer held (bits >= vocab_size are
 * 0); n_words must be >= treemask_bitmask_words(vocab_size). *need_apply
 * (optional) is false iff every token < vocab_size is allowed, so the
 * engine may skip masking.
 *
 * Cost: about a memset of the row (a high-fanout node copies a cached dense
 * row). For the O(fanout) incremental form use the batch API.
 *
 * Errors: NULL m or bitmask, n_words too small (nothing written). In the
 * STICKY_ERROR failed state the row is written (stop tokens only) and
 * TREEMASK_ERR_INVALID_STATE is returned. */
TREEMASK_API treemask_status treemask_matcher_fill_next_token_bitmask(treemask_matcher *m,
                                                                      int32_t *bitmask,
                                                                      size_t n_words,
                                                                      bool *need_apply);

/* Feeds the sampled token. accepted must be non-NULL.
 * - A child token advances (*accepted = true). With
 *   terminate_without_stop_token, reaching a node without children also
 *   terminates, in the same accept.
 * - A stop token at a terminal node terminates (*accepted = true).
 * - After termination, stop tokens and pad_token are accepted and change
 *   nothing; any other token is rejected without entering a failure state.
 * - Anything else, including ids < 0 or >= vocab_size, is rejected:
 *   TREEMASK_OK, *accepted = false, treemask_last_error() says why, and the
 *   failure policy applies (see TREEMASK_FAILURE_*). Under FAIL_CLOSED a
 *   later stop token is accepted and terminates.
 * In the STICKY_ERROR failed state: TREEMASK_ERR_INVALID_STATE. */
TREEMASK_API treemask_status treemask_matcher_accept_token(treemask_matcher *m, int32_t token,
                                                           bool *accepted);

/* Undoes the last n_tokens accepts that changed the state (a terminating
 * stop token counts and undoes termination; rejected tokens and accepts after
 * termination do not count). n_tokens = 0 does nothing. More than the history
 * holds, or more than max_rollback_tokens, is TREEMASK_ERR_OUT_OF_RANGE and
 * changes nothing. In the FAIL_CLOSED closed state and the STICKY_ERROR
 * failed state: TREEMASK_ERR_INVALID_STATE (use reset). */
TREEMASK_API treemask_status treemask_matcher_rollback(treemask_matcher *m, size_t n_tokens);

/* Back to the root with an empty history, whatever the state. NULL is a
 * no-op. */
TREEMASK_API void treemask_matcher_reset(treemask_matcher *m);

/* True once a stop token (or, with terminate_without_stop_token, a leaf)
 * ended the sequence. False for NULL and in the failed state. */
TREEMASK_API bool treemask_matcher_is_terminated(const treemask_matcher *m);

/* True iff accepting a stop token now would terminate: the current node is
 * terminal, or the matcher is closed after a FAIL_CLOSED rejection. False
 * once terminated, in the failed state, and for NULL. */
TREEMASK_API bool treemask_matcher_can_terminate(const treemask_matcher *m);

/* Writes the allowed next tokens in ascending order (stop tokens included
 * when allowed; a terminated or closed matcher lists the stop tokens) to
 * out[0 .. min(cap, n)) and returns n. 0 for NULL and in the failed state. */
TREEMASK_API size_t treemask_matcher_next_tokens(const treemask_matcher *m, int32_t *out,
                                                 size_t cap);

/* Jump-forward: the maximal chain t1..tk in which each node before ti is
 * non-terminal with exactly one child ti. Stop tokens are never included.
 * Writes out[0 .. min(cap, k)) and returns k; 0 when terminated, closed,
 * failed, or for NULL. */
TREEMASK_API size_t treemask_matcher_forced_tokens(const treemask_matcher *m, int32_t *out,
                                                   size_t cap);

/* The label ids of the current node (ascending, distinct) to
 * out[0 .. min(cap, n)); returns n. 0 at a non-terminal node, when closed or
 * failed, and for NULL. Still readable after termination (the labels of the
 * node the sequence ended at). */
TREEMASK_API size_t treemask_matcher_label_ids(const treemask_matcher *m, int64_t *out, size_t cap);

/* The trie this matcher follows (borrowed: not retained). NULL for NULL. */
TREEMASK_API treemask_trie *treemask_matcher_trie(const treemask_matcher *m);

/* How many accepts rollback can undo right now (bounded by
 * max_rollback_tokens). 0 for NULL, closed or failed. */
TREEMASK_API size_t treemask_matcher_rollback_depth(const treemask_matcher *m);

/* <treemask:matcher-extensions> later sections add matcher modes here. */

/* ======================================================================== */
/* Section 6: batch and state arrays                                         */
/* ======================================================================== */

/* <treemask:batch> */

/* ======================================================================== */
/* Section 7: bitmask kernels                                                */
/* ======================================================================== */

/* <treemask:kernels> */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TREEMASK_TREEMASK_H */
