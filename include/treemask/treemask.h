/* treemask — constrain LLM generation to a fixed set of token sequences.
 *
 * Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
 *
 * This is the one C header (C99 and C++) of the library; treemask_cuda.h adds
 * the CUDA entry points. It needs only <stdint.h>, <stddef.h> and <stdbool.h>.
 *
 * Stability tiers (zstd's model: ZSTD_STATIC_LINKING_ONLY)
 * ---------------------------------------------------------
 * - Stable: everything outside the last section: version, status and
 *   errors, logging, the trie and its sources (paths, RTP-LLM dictionaries,
 *   JSON Lines, .tmtrie files, metadata), the matcher (create, fill, accept,
 *   rollback, queries), the batch (slots, fill, accept, reorder) and the
 *   bitmask kernels. Their signatures and semantics change only with the
 *   major version (the minor one while it is 0), and no stable struct names
 *   an experimental field.
 * - Experimental: the last section (Section 8), declared only when the
 *   consumer defines TREEMASK_EXPERIMENTAL before including this header:
 *   decoding modes (labels, exclusions, think mode, length budget) and their
 *   options, speculative drafts and jump-forward accepts, counters, the
 *   incremental batch fill of a bound buffer, state arrays, the beam step
 *   and top-k (treemask_cuda.h keeps its own experimental section last, the
 *   same way). They may change in any minor release until they have had a
 *   release of use.
 * - Exports: before 1.0 the library exports the experimental symbols too,
 *   always (the Python and Rust bindings use them). The soname
 *   changes with every minor version while the major one is 0, so a program
 *   linked against an experimental function that then changed fails to load
 *   instead of misbehaving. Whether 1.0 keeps exporting them is decided
 *   then.
 * - Experimental options extend stable ones without naming a field in them:
 *   an experimental options struct starts with the stable one (e.g.
 *   treemask_mode_options.matcher), its init sets that struct_size to the
 *   whole, and the caller passes a pointer to the stable member. The layout
 *   is the same as if the fields were appended, so the convention below
 *   (struct_size, fields only appended) covers both.
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
 * always written as 0. Every function that takes rows names a row's length in
 * words `bitmask_row_words`.
 *
 * Conventions
 * -----------
 * - Functions that can fail return a treemask_status (TREEMASK_NODISCARD:
 *   compilers warn when it is ignored); results go to out-parameters. On
 *   failure, out-parameters are left untouched unless the function says
 *   otherwise, and treemask_last_error() describes the problem.
 * - Buffers are caller-owned, with explicit lengths in elements. Functions
 *   that list things take (out, cap) and return the full count, so a call with
 *   cap = 0 (out may then be NULL) is a size query.
 * - Options structs start with struct_size. Fill them with the matching
 *   *_options_init function, then change fields. The library reads
 *   min(struct_size, its own sizeof) bytes; fields are only ever appended, and
 *   fields a caller's older header does not know take their defaults.
 * - Variants of a call are options, not names: one function takes an
 *   options struct (NULL = every default) rather than a family of
 *   *_with_X functions, so a new option is a new field, not a new symbol
 *   (treemask_trie_save, treemask_matcher_fill_next_token_bitmask).
 * - Every *_free accepts NULL. Nothing is ever handed to the caller to free
 *   with libc free().
 * - No C++ exception ever crosses this interface; an internal failure becomes
 *   TREEMASK_ERR_INTERNAL or TREEMASK_ERR_OUT_OF_MEMORY.
 * - Thread safety is stated per type: a trie may be used from any number of
 *   threads at once; a matcher by one thread at a time, except that functions
 *   taking a const matcher may run concurrently with each other.
 *   Sharing one matcher (or batch) between threads that call non-const
 *   functions at the same time is undefined behaviour and is not detected:
 *   it corrupts the heap (seen within seconds in a stress test). Give each
 *   thread its own matcher (treemask_matcher_clone is cheap) or serialise
 *   the calls. The Python package detects such use and raises instead.
 */
#ifndef TREEMASK_TREEMASK_H
#define TREEMASK_TREEMASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "version.h"

/* The status of a call marked TREEMASK_NODISCARD must be used: C++17 and
 * C23 [[nodiscard]], GCC and clang's warn_unused_result otherwise (under C99
 * -pedantic too, which accepts it silently). */
#if defined(__cplusplus) && __cplusplus >= 201703L
#define TREEMASK_NODISCARD [[nodiscard]]
#elif !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 202311L
#define TREEMASK_NODISCARD [[nodiscard]]
#elif defined(__GNUC__) || defined(__clang__)
#define TREEMASK_NODISCARD __attribute__((warn_unused_result))
#else
#define TREEMASK_NODISCARD
#endif

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

/* The same as a string, e.g. "0.3.0". Static storage; never NULL. */
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

/* The message of the last call on this thread that failed: one that
 * returned a status other than TREEMASK_OK, or a query without a status
 * that hit an internal error or ran out of memory (it then returns its
 * documented fallback). It is set only by failures and never cleared: a
 * successful call leaves it as it was. A rejected token is not a failure:
 * accept_token reports it by *accepted = false and the matcher's counters,
 * and does not touch this message. The message names the problem (which
 * argument, which path and position, which token); input it quotes has its
 * control bytes escaped (\x02, \n), so it is one printable line. Never NULL
 * ("" if nothing failed yet). Valid until the next failing treemask call on
 * this thread. */
TREEMASK_API const char *treemask_last_error(void);

/* ---- Logging --------------------------------------------------------------
 *
 * treemask is silent unless the engine installs a log callback. It then
 * reports:
 * - TREEMASK_LOG_INFO: every trie built, loaded or saved: "loaded <path>:
 *   N paths, M nodes, X bytes", "built trie from N token paths: ...",
 *   "saved <path>: ..." (an in-memory source names its kind and size
 *   instead of a path; N counts the distinct sequences, X the bytes of the
 *   trie's arrays);
 * - TREEMASK_LOG_WARNING: each problem a loader tolerated (unknown fields,
 *   prefix_dict keys the root cannot reach), the same ones counted in
 *   treemask_trie_stats.n_warnings, at most 200 per load plus one line that
 *   counts the rest;
 * - TREEMASK_LOG_ERROR: internal errors and out-of-memory failures, as
 *   they are returned (TREEMASK_ERR_INTERNAL, TREEMASK_ERR_OUT_OF_MEMORY).
 * Ordinary failures (bad arguments, malformed input) are not logged: the
 * caller gets them as statuses. */

/* Pinned log levels. */
#define TREEMASK_LOG_INFO 1
#define TREEMASK_LOG_WARNING 2
#define TREEMASK_LOG_ERROR 3

/* A log callback: level is a TREEMASK_LOG_* value, message a NUL-terminated
 * line without a trailing newline, valid only during the call (copy it to
 * keep it), user_data as given to treemask_set_log_callback. */
typedef void (*treemask_log_fn)(int32_t level, const char *message, void *user_data);

/* Installs fn (with user_data) as the process-wide log callback, replacing
 * the previous one; NULL restores the default, silence. Calls are
 * serialised: fn runs on the thread whose treemask call logs, one call at a
 * time in the whole process, so it needs no locking of its own but must not
 * wait for another thread that is inside a treemask call. Once this function
 * returns, the previous callback is never called again, so its user_data may
 * be freed. fn may call treemask functions, this one included. An exception
 * thrown by a C++ fn is swallowed. Messages quote input with its control
 * bytes escaped (\x02, \n), so each is one printable line. With no callback
 * a log event costs one atomic load. Thread-safe. */
TREEMASK_API void treemask_set_log_callback(treemask_log_fn fn, void *user_data);

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
  /* Nonzero: terminal nodes carry no label ids (treemask_trie_from_paths then
   * requires label_ids == NULL; JSON Lines labels are ignored). A catalogue
   * whose token paths are the items themselves (semantic IDs for beam
   * search) saves the label array: 4 bytes per item when every label is in
   * [0, 2^32), else 8. init sets 0 (path i carries label i). */
  int32_t no_labels;
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
 * - label_ids: NULL (path i carries label i; no label with
 *   opts->no_labels) or n_paths entries. Duplicate paths merge into one
 *   terminal node that carries every label given for them; one label id
 *   may sit on several paths.
 * - out: receives the new trie (refcount 1) on success.
 *
 * Layout: unary chains down to a leaf (the part of a catalogue below its
 * branching depth) are stored as tails at 2 bytes per token, not as CSR
 * nodes at 8 (node ids stay dense; see treemask_trie_get_stats().bytes).
 *
 * Cost: O(total tokens * log fanout) time, O(total tokens) temporary memory.
 * On failure *out is untouched and treemask_last_error() names the offending
 * argument, path index and position. Thread-safe. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_trie_from_paths(
    const treemask_trie_options *opts, const int32_t *tokens, const size_t *offsets, size_t n_paths,
    const int64_t *label_ids, treemask_trie **out);

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
  /* The largest label id any terminal carries, -1 for a trie without labels
   * (so a table of label names can be checked at load: every id must index
   * it). Computed on first use (one pass over the labels), then cached.
   * New in 0.4.0. */
  int64_t max_label_id;
} treemask_trie_stats;

/* Fills *out (up to out->struct_size bytes; set it to sizeof first).
 * Errors: NULL trie or out, struct_size smaller than sizeof(size_t). */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_trie_get_stats(const treemask_trie *trie,
                                                                        treemask_trie_stats *out);

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
 * stop token may appear in a list. rtp: the RTP-specific settings below
 * (NULL: every default).
 *
 * Errors (nothing is built, *out untouched; treemask_last_error() names the
 * key and the problem): a key that does not start with start_token_id and
 * sep, a part that is not a canonical decimal integer, ids outside int32 or
 * >= vocab_size, duplicate keys, an empty sep or one containing digits or
 * '-', an empty input (TREEMASK_ERR_PARSE), a missing, unreadable or
 * non-regular file (TREEMASK_ERR_IO). Tolerated, counted in
 * treemask_trie_stats.n_warnings: unknown top-level fields (RTP-LLM's own
 * files carry "weight_dict", "sparse_mask") and keys the root cannot reach.
 *
 * Compatibility mode (rtp->rtp_llm_compat): loads exactly what RTP-LLM's own
 * loader accepts. Negative list ids and list ids outside int32 are skipped,
 * keys that do not start with start_token_id and sep are ignored, and the
 * separator "-" is allowed; each is a counted warning naming the key instead
 * of an error. Everything else is checked as in the strict default.
 *
 * Thread-safe. Peak memory of the JSON form is about 4x the input (measured:
 * 330 MB for an 87 MB file; mostly simdjson's index of it), never a map of key
 * strings. */

/* RTP-LLM's own defaults for a dictionary that does not name them. */
#define TREEMASK_RTP_DEFAULT_START_TOKEN 225
#define TREEMASK_RTP_DEFAULT_END_TOKEN 2

typedef struct treemask_rtp_options {
  size_t struct_size;
  /* The key prefix and the fallback token. -1 (init): the JSON file's
   * "start_token_id" / "end_token_id" (required there unless
   * rtp_llm_defaults); the TSV form has no header and needs them here (or
   * rtp_llm_defaults). A value >= 0 fills a field the JSON lacks, and a JSON
   * value that differs from it is an error. */
  int32_t start_token_id;
  int32_t end_token_id;
  /* The key separator. NULL (init): the JSON file's "sep", else "_". A
   * non-NULL value must match the JSON's "sep" when it has one. */
  const char *sep;
  /* Use RTP-LLM's defaults TREEMASK_RTP_DEFAULT_START_TOKEN (225) and
   * TREEMASK_RTP_DEFAULT_END_TOKEN (2) for a start or end token that neither
   * the file nor this struct gives. init sets false. */
  bool rtp_llm_defaults;
  /* Load what RTP-LLM loads (see above) with counted warnings instead of
   * errors. init sets false (strict). */
  bool rtp_llm_compat;
} treemask_rtp_options;

/* Sets struct_size and every field to its default. */
TREEMASK_API void treemask_rtp_options_init(treemask_rtp_options *rtp);

/* JSON: {"start_token_id": 225, "end_token_id": 2, "sep": "_",
 * "prefix_dict": {"225": [64000, ...], "225_64000": [...], ...}}.
 * start_token_id and end_token_id come from the file or rtp (see
 * treemask_rtp_options); "sep" defaults to "_". A UTF-8 byte-order mark is
 * skipped; UTF-16 input and anything after the object are TREEMASK_ERR_PARSE
 * saying so. Malformed JSON is TREEMASK_ERR_PARSE with the byte offset.
 * Built without simdjson: TREEMASK_ERR_UNSUPPORTED. */
TREEMASK_NODISCARD TREEMASK_API treemask_status
treemask_trie_from_rtp_json(const treemask_trie_options *opts, const treemask_rtp_options *rtp,
                            const char *json, size_t len, treemask_trie **out);

/* The same, reading the file at path. */
TREEMASK_NODISCARD TREEMASK_API treemask_status
treemask_trie_from_rtp_json_file(const treemask_trie_options *opts, const treemask_rtp_options *rtp,
                                 const char *path, treemask_trie **out);

/* RTP-LLM's text form: lines "key<TAB>id\x02id\x02..." (LF or CRLF; blank
 * lines skipped); an empty id list after the tab is an empty list; an empty
 * element (a trailing or doubled \x02) is an error. It has no header, so
 * rtp->start_token_id and rtp->end_token_id are required (or
 * rtp->rtp_llm_defaults); rtp->sep NULL means "_", and a sep containing a
 * tab is refused. Needs no JSON support. Errors name the line and the key. */
TREEMASK_NODISCARD TREEMASK_API treemask_status
treemask_trie_from_rtp_tsv(const treemask_trie_options *opts, const treemask_rtp_options *rtp,
                           const char *data, size_t len, treemask_trie **out);

/* The same, reading the file at path. */
TREEMASK_NODISCARD TREEMASK_API treemask_status
treemask_trie_from_rtp_tsv_file(const treemask_trie_options *opts, const treemask_rtp_options *rtp,
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
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_trie_from_jsonl(
    const treemask_trie_options *opts, const char *data, size_t len, treemask_trie **out);

/* The same, reading the file at path. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_trie_from_jsonl_file(
    const treemask_trie_options *opts, const char *path, treemask_trie **out);

/* ---- Compiled trie files (.tmtrie) ---------------------------------------
 *
 * A little-endian, versioned file: a checksummed header, the flat arrays of
 * the trie verbatim, optional metadata strings. Loading maps it (mmap) and
 * reads nothing proportional to the trie, so processes share it through the
 * page cache. The format is described in src/trie/file.h. */

/* The format version this library writes and reads; a file of another
 * version is TREEMASK_ERR_VERSION_MISMATCH (recompile it). */
#define TREEMASK_TMTRIE_FORMAT_VERSION 4

/* treemask_trie_load flag: skip the payload checksum (one of the two linear
 * passes of a load). Every other check still runs, the structural
 * validation of the arrays included, so a corrupted file is still refused
 * at load (TREEMASK_ERR_CORRUPT_FILE) unless the corruption leaves a
 * well-formed trie (a changed label or token that is still in range). */
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
 * the old file loaded keeps a valid mapping. opts: NULL for the defaults (no
 * extra metadata). Errors: NULL trie or path, bad metadata
 * (TREEMASK_ERR_INVALID_ARGUMENT), TREEMASK_ERR_IO naming the path.
 * Thread-safe. */
TREEMASK_NODISCARD TREEMASK_API treemask_status
treemask_trie_save(const treemask_trie *trie, const char *path, const treemask_save_options *opts);

/* Maps the .tmtrie file at path and checks the structure of its arrays (one
 * linear pass at memory bandwidth: offsets, child order, token ranges, labels),
 * so that no corrupted file that loads can misbehave. flags: 0 (also verify
 * the payload checksum: one more linear pass) or TREEMASK_LOAD_TRUSTED (skip
 * only the checksum). The loaded trie
 * behaves bit for bit like the one saved; its dense-row cache budget is the
 * default 64 MiB. The file must not be truncated or rewritten in place while
 * a trie loaded from it is alive (replace it by rename, as
 * treemask_trie_save does): the mapping would fault (SIGBUS).
 * Errors: TREEMASK_ERR_IO (missing, unreadable, not a regular file),
 * TREEMASK_ERR_CORRUPT_FILE (bad magic, truncated, checksum mismatch,
 * inconsistent header), TREEMASK_ERR_VERSION_MISMATCH (another format
 * version), TREEMASK_ERR_INVALID_ARGUMENT (unknown flags). Thread-safe. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_trie_load(const char *path, uint32_t flags,
                                                                   treemask_trie **out);

/* ---- Metadata strings ----------------------------------------------------
 * Key/value strings a trie carries into and out of .tmtrie files, sorted by
 * key. The returned strings are NUL-terminated, owned by the trie and valid
 * while it is alive. NULL trie: none. Thread-safe. */

/* The number of metadata entries. */
TREEMASK_API size_t treemask_trie_metadata_count(const treemask_trie *trie);

/* Entry index (< count) to *key and *value (either may be NULL).
 * Errors: NULL trie, index out of range (TREEMASK_ERR_OUT_OF_RANGE). */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_trie_metadata_at(const treemask_trie *trie,
                                                                          size_t index,
                                                                          const char **key,
                                                                          const char **value);

/* The value stored under key, or NULL if there is none. */
TREEMASK_API const char *treemask_trie_metadata_get(const treemask_trie *trie, const char *key);

/* ======================================================================== */
/* Section 5: matcher                                                        */
/* ======================================================================== */

/* What accept_token does with a token that is not allowed. In every policy
 * the call returns TREEMASK_OK with *accepted = false (a rejection is not an
 * error: treemask_last_error() is not set). */
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
 * defaults; it may also point at the `matcher` member of an experimental
 * treemask_mode_options (Section 8). Errors: NULL trie or out, an unknown
 * failure_policy, pad_token outside [-1, vocab_size), and every inconsistent
 * decoding-mode option (the message names the option and token): a
 * separator token out of range or a stop token, a first separator token
 * that is also a child of a terminal node, a think_begin_token that is a
 * child of the root, max_labels without a separator. Thread-safe with
 * respect to the trie. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_matcher_create(
    treemask_trie *trie, const treemask_matcher_options *opts, treemask_matcher **out);

/* A copy of m with the same state, history and options. Cheap: the rollback
 * history is shared copy-on-write, never copied whole. Works in every state. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_matcher_clone(const treemask_matcher *m,
                                                                       treemask_matcher **out);

/* Destroys m and releases its trie. NULL is a no-op. */
TREEMASK_API void treemask_matcher_free(treemask_matcher *m);

/* Options of one fill. Design: the variants of fill are options, not
 * functions with a suffix (the former *_with_budget), so every fill goes
 * through the one treemask_matcher_fill_next_token_bitmask. No stable field
 * yet; the experimental treemask_budget_fill_options (Section 8) extends it
 * with a length budget. */
typedef struct treemask_fill_options {
  size_t struct_size;
} treemask_fill_options;

/* Sets struct_size and every field to its default. */
TREEMASK_API void treemask_fill_options_init(treemask_fill_options *opts);

/* Writes the next-token bitmask row: bit t is set iff t is a child token of
 * the current node, or t is a stop token and the node is terminal. Once
 * terminated, and after a rejection under FAIL_CLOSED or STICKY_ERROR, only
 * the stop tokens are set. The decoding modes change the set as their
 * options say.
 *
 * Writes all bitmask_row_words words whatever the buffer held (bits >=
 * vocab_size are 0); bitmask_row_words must be >=
 * treemask_bitmask_words(vocab_size). opts: NULL for the defaults.
 * *need_apply (optional) is false iff every token < vocab_size is allowed,
 * so the engine may skip masking.
 *
 * Cost: about a memset of the row (a high-fanout node copies a cached dense
 * row). For the O(fanout) incremental form use the batch API.
 *
 * Errors: NULL m or bitmask, bitmask_row_words too small, a bad option
 * (an experimental remaining_tokens < -1); nothing is written then. In the STICKY_ERROR
 * failed state the row is written (stop tokens only) and
 * TREEMASK_ERR_INVALID_STATE is returned. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_matcher_fill_next_token_bitmask(
    treemask_matcher *m, int32_t *bitmask, size_t bitmask_row_words,
    const treemask_fill_options *opts, bool *need_apply);

/* Feeds the sampled token. accepted must be non-NULL.
 * - A child token advances (*accepted = true). With
 *   terminate_without_stop_token, reaching a node without children also
 *   terminates, in the same accept.
 * - A stop token at a terminal node terminates (*accepted = true).
 * - After termination, stop tokens and pad_token are accepted and change
 *   nothing; any other token is rejected without entering a failure state.
 * - Anything else, including ids < 0 or >= vocab_size, is rejected:
 *   TREEMASK_OK, *accepted = false (n_rejected_tokens counts it; no error
 *   message), and the failure policy applies (see TREEMASK_FAILURE_*). Under
 *   FAIL_CLOSED a later stop token is accepted and terminates.
 * In the STICKY_ERROR failed state: TREEMASK_ERR_INVALID_STATE. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_matcher_accept_token(treemask_matcher *m,
                                                                              int32_t token,
                                                                              bool *accepted);

/* Undoes the last n_tokens accepts that changed the state (a terminating
 * stop token counts and undoes termination; rejected tokens and accepts after
 * termination do not count). n_tokens = 0 does nothing. More than the history
 * holds, or more than max_rollback_tokens, is TREEMASK_ERR_OUT_OF_RANGE and
 * changes nothing. In the FAIL_CLOSED closed state and the STICKY_ERROR
 * failed state: TREEMASK_ERR_INVALID_STATE (use reset). */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_matcher_rollback(treemask_matcher *m,
                                                                          size_t n_tokens);

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

/* The stop tokens of m (override_stop_tokens, or the trie's), ascending and
 * distinct, to out[0 .. min(cap, n)); returns n. 0 for NULL. */
TREEMASK_API size_t treemask_matcher_stop_tokens(const treemask_matcher *m, int32_t *out,
                                                 size_t cap);

/* The max_rollback_tokens m was created with (0 = unlimited); 0 for NULL. */
TREEMASK_API size_t treemask_matcher_max_rollback_tokens(const treemask_matcher *m);

/* A one-line description of m for logs: phase, node and path, allowed
 * count, think / separator progress, produced labels, budget, rollback
 * depth. Writes min(cap - 1, n) bytes and a NUL to buf when cap > 0 and
 * returns n, the full length without the NUL (size query: cap = 0). The
 * format is for humans and may change. 0 for NULL. */
TREEMASK_API size_t treemask_matcher_debug_string(const treemask_matcher *m, char *buf, size_t cap);

/* ======================================================================== */
/* Section 6: batch                                                          */
/* ======================================================================== */

/* Two ways to drive many sequences at once:
 *
 * - A *batch* holds matchers in slots and fills and advances them together on
 *   its own threads. Every matcher feature (rollback, failure policies, the
 *   modes of section 5) works in a batch. Slot i always writes row i of a
 *   bitmask buffer of n_slots rows.
 * - *State arrays* (experimental, Section 8): with a plain trie (no modes,
 *   no rollback) the whole state of a sequence is one uint32, so an engine
 *   can keep the states itself, fill rows from them and advance them; beam
 *   reordering is then a gather. The CUDA entry points implement exactly the
 *   same rules on device arrays. */

/* A fixed number of slots, each empty or holding a matcher, plus the worker
 * threads and the optional bound bitmask buffer of the batch. One thread at a
 * time (the batch's own workers are used only inside its calls). */
typedef struct treemask_batch treemask_batch;

typedef struct treemask_batch_options {
  size_t struct_size;
  /* Slots, fixed for the life of the batch: 1 .. 2^31 - 1. Required; init
   * sets 0. */
  size_t n_slots;
  /* Worker threads the batch starts at creation and keeps until it is freed.
   * They work together with the calling thread, so a call uses up to
   * n_threads + 1 threads; small calls stay on the caller's thread. 0 (init):
   * the caller's thread only. At most 256. No other treemask function starts
   * a thread. */
  size_t n_threads;
} treemask_batch_options;

/* Sets struct_size and every field to its default. */
TREEMASK_API void treemask_batch_options_init(treemask_batch_options *opts);

/* Creates a batch with every slot empty and starts its threads. Memory:
 * about 48 bytes a slot before any matcher (its tables are written at
 * creation), each slot's matcher apart.
 * Errors: NULL opts or out, n_slots outside [1, 2^31 - 1], n_threads > 256;
 * TREEMASK_ERR_OUT_OF_MEMORY when n_slots x 48 bytes is more than the memory
 * available now (the least of /proc/meminfo's MemAvailable, the headroom
 * under the process's memory cgroups and under RLIMIT_AS: a cheap check
 * before anything is allocated, so that a huge n_slots is refused instead of
 * ending the process), or an allocation fails; TREEMASK_ERR_INTERNAL when a
 * thread cannot be started. Thread-safe. */
TREEMASK_NODISCARD TREEMASK_API treemask_status
treemask_batch_create(const treemask_batch_options *opts, treemask_batch **out);

/* Stops the threads and destroys the batch with the matchers in its slots
 * (releasing their tries). The bound buffer stays the caller's. NULL is a
 * no-op. */
TREEMASK_API void treemask_batch_free(treemask_batch *batch);

/* The batch's n_slots; 0 for NULL. */
TREEMASK_API size_t treemask_batch_n_slots(const treemask_batch *batch);

/* Puts a clone of m (same state, history and options; cheap, the history is
 * shared copy-on-write) in slot, replacing what was there; the caller keeps
 * m. m NULL empties the slot. Matchers of different tries and vocab sizes
 * may share a batch.
 * Errors: NULL batch, slot >= n_slots, m in the STICKY_ERROR failed state
 * (TREEMASK_ERR_INVALID_STATE); the slot is then unchanged. */
TREEMASK_NODISCARD TREEMASK_API treemask_status
treemask_batch_set_matcher(treemask_batch *batch, size_t slot, const treemask_matcher *m);

/* The matcher in slot, borrowed: NULL when the slot is empty, slot >= n_slots
 * or batch is NULL. Every matcher function may be called on it (rollback,
 * reset, queries, even accept_token) between batch calls, never during one.
 * Valid until the slot changes (set_matcher, reorder) or the batch is freed;
 * never free it. */
TREEMASK_API treemask_matcher *treemask_batch_get_matcher(treemask_batch *batch, size_t slot);

/* Writes the next-token bitmask of the listed slots into bitmask, row = slot
 * index (row s starts at bitmask + s * bitmask_row_words), exactly as
 * treemask_matcher_fill_next_token_bitmask does for each: every word of each
 * listed row. Other rows are not touched.
 *
 * - bitmask: n_slots rows of bitmask_row_words words; bitmask_row_words must be
 *   >= treemask_bitmask_words(vocab_size) of every listed slot's trie.
 * - slots: the slots to fill (each non-empty, none twice), or NULL with
 *   n_slots = 0 for every non-empty slot.
 * - need_apply: optional, n_slots entries (indexed by slot); written for the
 *   filled slots (false iff the row allows every token).
 *
 * Errors: NULL batch or bitmask, a bad slot list or bitmask_row_words (found
 * before anything is written; the message names the entry). A slot in the
 * STICKY_ERROR failed state gets its row (stop tokens only) and the call
 * returns TREEMASK_ERR_INVALID_STATE naming the first such slot of the list
 * (the lowest for slots = NULL), after every listed row is written. Writing into the bound buffer
 * with its own bitmask_row_words counts as a full fill of it; overlapping it with another layout is
 * an error. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_batch_fill_next_token_bitmask(
    treemask_batch *batch, int32_t *bitmask, size_t bitmask_row_words, const int32_t *slots,
    size_t n_slots, bool *need_apply);

/* Feeds tokens[s] to the matcher in slot s, for every slot, exactly like
 * treemask_matcher_accept_token; tokens[s] < 0 means no token for slot s
 * this step (required for empty slots).
 * - tokens: n_tokens = n_slots entries.
 * - accepted: optional, n_slots entries; false only for a slot that rejected
 *   its token (true for slots given no token). A rejection is not an error:
 *   treemask_last_error() is not set for it.
 * Errors: NULL batch or tokens, n_tokens != n_slots, a token for an empty
 * slot (nothing is accepted then). A slot in the STICKY_ERROR failed state
 * gives TREEMASK_ERR_INVALID_STATE naming the lowest such slot, after every
 * other slot took its token. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_batch_accept_tokens(treemask_batch *batch,
                                                                             const int32_t *tokens,
                                                                             size_t n_tokens,
                                                                             bool *accepted);

/* Beam reordering: slot i takes the matcher state of slot src[i] (src[i] =
 * -1 empties slot i), all at once. A source taken once moves; one taken
 * several times is cloned (its history shared copy-on-write), never deep
 * copied. What the batch remembers about bound rows stays valid.
 * Borrowed matchers of the batch are invalid afterwards.
 * Errors: NULL batch or src, n != n_slots, src[i] outside [-1, n_slots), a
 * STICKY_ERROR failed matcher taken twice; the batch is then unchanged. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_batch_reorder(treemask_batch *batch,
                                                                       const int32_t *src,
                                                                       size_t n);

/* ======================================================================== */
/* Section 7: bitmask kernels                                                */
/* ======================================================================== */

/* Masking logits on the CPU with a bitmask (any xgrammar-layout mask: ours,
 * xgrammar's, llguidance's) or with candidate lists: treemask_cpu_*, the
 * twins of treemask_cuda_* (treemask_cuda.h), named the same way. Masked logits become
 * -inf, written as the dtype's bit pattern (f32 0xFF800000, f16 0xFC00, bf16
 * 0xFF80); kept logits are never read or rewritten as numbers. The kernel is
 * chosen once per process: AVX2 where the CPU has it, else a scalar loop. No
 * threads: the caller's thread does the work. Thread-safe for disjoint
 * logits. */

/* The storage type of logits, for these functions, treemask_logits and the
 * CUDA twins (treemask_cuda.h) alike. Every function takes it as an int32_t,
 * so that any value a caller passes is defined behaviour and an unknown one
 * an error that names it. */
typedef enum treemask_dtype {
  TREEMASK_F32 = 0,
  TREEMASK_F16 = 1,
  TREEMASK_BF16 = 2
} treemask_dtype;

/* Sets logits[r][c] = -inf for every masked column of every touched row r:
 * column c (< logits_width) is masked iff c >= vocab_size or bit c of bitmask
 * row r is 0. Columns from logits_width up to the stride are never touched.
 *
 * - logits: n_rows rows of logits_width elements of dtype, row r at element
 *   r * logits_row_stride (logits_row_stride >= logits_width).
 * - bitmask: n_bitmask_rows rows of bitmask_row_words int32 words, row r at
 *   word r * bitmask_row_words; bitmask_row_words must cover
 *   min(vocab_size, logits_width) columns. Bits past that are ignored.
 * - vocab_size > 0: columns at or past it (a padded vocab) are masked.
 * - indices: NULL (with n_indices = 0) touches rows 0 .. n_rows - 1, and
 *   n_bitmask_rows must be >= n_rows; otherwise only rows
 *   indices[0 .. n_indices), each of which must be a row of both arrays
 *   (< n_rows and < n_bitmask_rows): indices[i] addresses the logits row and
 *   the bitmask row of that number (xgrammar's semantics; the two arrays may
 *   have different row counts, as in xgrammar).
 *
 * Cost: a fully-masked word is 32 -inf stores with no load, a fully-allowed
 * one is skipped, a mixed one is blended; memory-bandwidth bound.
 * Errors: an unknown dtype, vocab_size <= 0, logits_row_stride <
 * logits_width, bitmask_row_words too small, an index out of range (named),
 * NULL logits or bitmask when something would be touched. Everything is
 * checked before anything is written. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_cpu_apply_token_bitmask(
    void *logits, int32_t dtype, size_t n_rows, size_t logits_row_stride, size_t logits_width,
    const int32_t *bitmask, size_t bitmask_row_words, size_t n_bitmask_rows, int32_t vocab_size,
    const int32_t *indices, size_t n_indices);

/* Out of place: the rows treemask_cpu_apply_token_bitmask would write, but
 * into out, leaving logits untouched (transformers requires logits
 * processors not to modify their input). Every row r < n_rows of out gets
 * logits row r, masked when the call touches row r (indices as above;
 * rows not selected are copied unchanged). One pass over memory: each row
 * is copied and masked while it is in cache. out rows are out_row_stride
 * elements apart (>= logits_width); columns from logits_width up to the
 * stride are not written. logits and out must not overlap (an error).
 * Errors: as treemask_cpu_apply_token_bitmask, plus NULL out and
 * overlapping arrays. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_cpu_apply_token_bitmask_out(
    const void *logits, void *out, int32_t dtype, size_t n_rows, size_t logits_row_stride,
    size_t out_row_stride, size_t logits_width, const int32_t *bitmask, size_t bitmask_row_words,
    size_t n_bitmask_rows, int32_t vocab_size, const int32_t *indices, size_t n_indices);

/* The sparse form: row r keeps only its candidates
 * candidate_tokens[row_offsets[r] .. row_offsets[r + 1]) and every other
 * column (< logits_width) becomes -inf. Each row is filled with -inf and its
 * candidates restored, so it never reads a bitmask: for trie rows (few
 * candidates) it moves the least memory. Same logits, dtype, vocab_size and
 * indices rules as above; row_offsets has n_rows + 1 non-decreasing int32
 * entries in [0, n_candidates] (CSR, e.g. treemask_matcher_next_tokens of
 * each row; the CUDA twin takes the same arrays). Candidates may repeat and
 * come in any order; each must be in [0, vocab_size) (an error names the row
 * and position); one >= logits_width is ignored.
 * Errors: as above, plus NULL row_offsets, offsets out of order or past
 * n_candidates, NULL candidate_tokens when n_candidates > 0. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_cpu_apply_token_candidates(
    void *logits, int32_t dtype, size_t n_rows, size_t logits_row_stride, size_t logits_width,
    const int32_t *row_offsets, const int32_t *candidate_tokens, size_t n_candidates,
    int32_t vocab_size, const int32_t *indices, size_t n_indices);

/* The instruction set of the kernel the apply functions use in this process:
 * "avx2" or "scalar". Static storage; never NULL. Thread-safe. */
TREEMASK_API const char *treemask_cpu_kernel_isa(void);

#ifdef TREEMASK_EXPERIMENTAL
/* ======================================================================== */
/* Section 8: experimental                                                   */
/* ======================================================================== */

/* Declared only with TREEMASK_EXPERIMENTAL defined; may change in any minor
 * release (see "Stability tiers" at the top). Each part refers to the
 * stable section it extends. */

/* ---- Experimental: decoding mode options (extend section 5) -------------
 *
 * The options of the decoding modes below, as an extension of
 * treemask_matcher_options: initialise with treemask_mode_options_init and
 * pass &opts.matcher to treemask_matcher_create. The section "Decoding
 * modes" of include/treemask/README.md describes each. */
typedef struct treemask_mode_options {
  /* The stable options, first. init sets matcher.struct_size to
   * sizeof(treemask_mode_options), which tells the library that the fields
   * below follow. */
  treemask_matcher_options matcher;

  /* Multi-label mode: after a complete label this token sequence (e.g. the
   * tokens of " |") leads back to the root for another label. NULL / 0 =
   * one label per sequence (init). Copied. */
  const int32_t *label_separator;
  size_t n_label_separator;
  /* At most this many labels per sequence; 0 = unlimited (init). Needs
   * label_separator. */
  size_t max_labels;
  /* Hierarchical labels: true = a sequence may end only at a leaf (a
   * terminal node without children, e.g. "A > B > C" but not "A > B");
   * false (init) = at any terminal node, so at any level. */
  bool leaves_only;
  /* Think mode: the sequence that closes thinking (e.g. "</think>" plus
   * newline tokens). NULL / 0 = no think mode (init). Copied. */
  const int32_t *think_end_tokens;
  size_t n_think_end_tokens;
  /* A token that opens thinking (e.g. "<think>"); -1 = none (init). */
  int32_t think_begin_token;
  /* True: the sequence starts inside thinking (the prompt ended with
   * "<think>"). False (init): thinking starts only if the first token is
   * think_begin_token. */
  bool start_in_thinking;
  /* Thinking tokens allowed before the end sequence is forced; -1 =
   * unlimited (init), 0 = force the end at once. */
  int64_t max_thinking_tokens;
  /* Length budget: the engine's max_new_tokens. -1 = none (init). */
  int64_t max_new_tokens;
  /* Replaces the trie's stop tokens for this matcher (xgrammar's
   * override_stop_tokens). NULL / 0 = the trie's (init). Copied. */
  const int32_t *override_stop_tokens;
  size_t n_override_stop_tokens;
  /* Think mode: once the model has emitted a prefix of think_end_tokens
   * naturally (a partial match), force the rest of it, as RTP-LLM's
   * ThinkModeLogitsProcessor does. false (init): only a spent budget
   * forces; a partial match that breaks is ordinary thinking text. Off by
   * default because end sequences often start with a token that ordinary
   * thinking text contains (a newline, a "</" piece): forcing after it
   * would cut thinking short at the first such token. Set it to reproduce
   * RTP-LLM exactly. */
  bool think_force_end_after_prefix;
} treemask_mode_options;

/* Sets every field to its default (matcher as treemask_matcher_options_init
 * does, but with matcher.struct_size = sizeof(treemask_mode_options)). */
TREEMASK_API void treemask_mode_options_init(treemask_mode_options *opts);

/* The length budget of one fill, as an extension of treemask_fill_options:
 * initialise with treemask_budget_fill_options_init and pass &opts.fill to
 * treemask_matcher_fill_next_token_bitmask. */
typedef struct treemask_budget_fill_options {
  /* The stable options, first; init sets fill.struct_size to
   * sizeof(treemask_budget_fill_options). */
  treemask_fill_options fill;
  /* Tokens the engine will still generate, the masked one included, for
   * this fill only (>= 0), overriding the matcher's budget; accept keeps
   * using the matcher's own. -1 (init): the matcher's budget
   * (treemask_matcher_set_remaining_tokens). */
  int64_t remaining_tokens;
} treemask_budget_fill_options;

/* Sets every field to its default. */
TREEMASK_API void treemask_budget_fill_options_init(treemask_budget_fill_options *opts);

/* ---- Experimental: counters ----------------------------------------------
 *
 * Each matcher counts what it did, so an engine can export metrics (sum
 * them over its matchers, or take differences between two reads). Counters
 * only grow: reset and rollback do not clear them. A matcher starts at zero,
 * and so does every clone (treemask_matcher_clone, a batch's copy made by
 * treemask_batch_set_matcher or a reorder that takes a slot twice), so no
 * event is counted twice. */
typedef struct treemask_matcher_counters {
  size_t struct_size; /* set by the caller: the library writes at most this */
  /* Bitmask rows written for this matcher: its own fills and batch fills of
   * its slot (incremental ones included). */
  uint64_t n_fills;
  /* Accepted tokens that advanced the state: steps, the accepts rollback can
   * undo (draft and jump-forward tokens included; a stop or pad token
   * accepted after termination changes nothing and is not counted). */
  uint64_t n_accepted_tokens;
  /* Tokens accept_token or a batch accept refused (*accepted = false), in
   * every failure policy. A draft token treemask_matcher_accept_tokens stops
   * at is not a failure and is not counted. */
  uint64_t n_rejected_tokens;
  /* Rejections that closed (FAIL_CLOSED) or failed (STICKY_ERROR) the
   * matcher: sequences cut short. Always 0 under TREEMASK_FAILURE_REJECT. */
  uint64_t n_fail_closed;
  /* Accepts undone by treemask_matcher_rollback. */
  uint64_t n_rolled_back_tokens;
  /* treemask_matcher_reset calls. */
  uint64_t n_resets;
} treemask_matcher_counters;

/* Fills *out (up to out->struct_size bytes; set it to sizeof first) with m's
 * counters. O(1). Errors: NULL m or out, struct_size smaller than
 * sizeof(size_t). Like every function on a const matcher it may run
 * concurrently with other such functions, but not with calls that change m
 * (fill, accept, rollback, reset). */
TREEMASK_NODISCARD TREEMASK_API treemask_status
treemask_matcher_get_counters(const treemask_matcher *m, treemask_matcher_counters *out);

/* ---- Experimental: decoding modes ----------------------------------------
 *
 * The fields of treemask_mode_options turn them on; they compose on
 * one matcher, and fill, accept, next_tokens (always exactly the bits fill
 * sets), forced_tokens, rollback, clone and reset follow them. The section
 * "Decoding modes" of include/treemask/README.md describes each with
 * examples. In short:
 * - Multi-label (label_separator): after a terminal node the first
 *   separator token produces its label and leads back to the root; each
 *   label is produced at most once, and a prefix or separator is offered
 *   only while some label can still follow (no dead ends).
 * - Hierarchical labels (leaves_only): a sequence may end only at a leaf.
 * - Think mode (think_end_tokens): every token but think_begin_token is
 *   allowed until the end sequence, which the thinking budget forces (with
 *   think_force_end_after_prefix also as soon as a prefix of it appears,
 *   as RTP-LLM does). max_thinking_tokens = 0 forces the end at once; -1
 *   is no budget (RTP-LLM's <= 0, which creates no think processor).
 * - Length budget (max_new_tokens, treemask_matcher_set_remaining_tokens,
 *   treemask_fill_options.remaining_tokens): a child is offered only if an
 *   end fits in the budget, so max_new_tokens never cuts a label in half
 *   while some label fits. A budget smaller than every remaining path
 *   offers the shortest branches, and the engine's length limit then cuts
 *   the label: an engine should refuse such a request up front (the vLLM
 *   adapter refuses a max_tokens below the shortest path plus its stop
 *   token).
 * - Exclusions (treemask_exclusion_set, treemask_matcher_set_label_filter):
 *   labels that must not be produced, without a trie rebuild.
 * - Speculative decoding: treemask_matcher_accept_tokens and
 *   treemask_matcher_fill_draft_bitmasks.
 * With modes, forced_tokens is the chain of states allowing exactly one
 * token and no stop token (at a leaf in multi-label mode it returns the
 * separator: let the model choose when can_terminate is true), and
 * terminate_without_stop_token ends a sequence once only stop tokens are
 * allowed. */

/* An immutable set of banned label ids for one trie. Reference counted like
 * a trie: created with a refcount of 1, retain adds one, free drops one.
 * Every function taking one is thread-safe. */
typedef struct treemask_exclusion_set treemask_exclusion_set;

/* Creates an exclusion set for trie (which it retains) from n label ids
 * (label_ids may be NULL when n is 0). Ids that no path carries are
 * ignored, so one catalogue-wide list serves every trie. For a trie without
 * labels the ids are terminal node ids. Cost: O(n log terminals), plus a
 * one-time label index of the trie; the per-node counts are built on first
 * use by a matcher. Errors: NULL trie or out, NULL label_ids with n > 0. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_exclusion_set_create(
    treemask_trie *trie, const int64_t *label_ids, size_t n, treemask_exclusion_set **out);

/* Adds a reference and returns set (NULL gives NULL). Thread-safe. */
TREEMASK_API treemask_exclusion_set *treemask_exclusion_set_retain(treemask_exclusion_set *set);

/* Drops one reference; the last one destroys the set. NULL is a no-op. A
 * matcher that uses the set keeps what it needs alive. */
TREEMASK_API void treemask_exclusion_set_free(treemask_exclusion_set *set);

/* How many terminal nodes (label paths) the set bans; 0 for NULL. */
TREEMASK_API size_t treemask_exclusion_set_n_terminals(const treemask_exclusion_set *set);

/* Sets which labels m may produce, replacing any earlier filter:
 * - shared: an exclusion set of the same trie, or NULL;
 * - banned[0 .. n_banned): more ids this matcher must not produce (may be
 *   NULL when n_banned is 0);
 * - allowed: NULL = no subset; otherwise only paths all of whose ids are in
 *   allowed[0 .. n_allowed) are available.
 * A path is available only if none of its label ids is excluded, banned or
 * already produced, and (with a subset) all of them are allowed; the
 * no-dead-end rule covers all of this. All NULL / 0 removes the filter.
 * Allowed only before the first accepted token (after create or reset),
 * else TREEMASK_ERR_INVALID_STATE; reset and clone keep the filter. Errors:
 * a set of another trie, a filter that leaves no label available
 * (TREEMASK_ERR_INVALID_ARGUMENT); on error the old filter stays. Cost:
 * O((n_banned + n_allowed) * depth) plus, with a subset, the fanout of the
 * subset's ancestors. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_matcher_set_label_filter(
    treemask_matcher *m, const treemask_exclusion_set *shared, const int64_t *banned,
    size_t n_banned, const int64_t *allowed, size_t n_allowed);

/* Sets the length budget: the engine will generate at most `remaining` more
 * tokens (>= 0), or -1 for none. Each later accept that changes the state
 * uses one; rollback gives them back; reset restores max_new_tokens. A
 * child is offered only if some available end lies within remaining - 1
 * more tokens, the separator only if another label fits after it, thinking
 * only while the end sequence and the shortest label still fit; if nothing
 * fits (the engine lowered the budget), the shortest branches are offered.
 * Errors: NULL m, remaining < -1. */
TREEMASK_NODISCARD TREEMASK_API treemask_status
treemask_matcher_set_remaining_tokens(treemask_matcher *m, int64_t remaining);

/* The budget left now (>= 0), or -1 when there is none (and for NULL). */
TREEMASK_API int64_t treemask_matcher_remaining_tokens(const treemask_matcher *m);

/* The labels produced so far, in order, to out[0 .. min(cap, n)); returns
 * n. Multi-label: the ids of each produced label (a path with several ids
 * gives them all, ascending; a trie without labels gives terminal node
 * ids). Otherwise: the ids of the node the sequence terminated at, once
 * terminated. 0 for NULL. */
TREEMASK_API size_t treemask_matcher_produced_labels(const treemask_matcher *m, int64_t *out,
                                                     size_t cap);

/* True while m is inside thinking (think mode). next_tokens then returns
 * the full count (vocab_size, or vocab_size - 1 with a think_begin_token),
 * forced_tokens the rest of the end sequence once the budget forces it.
 * False for NULL. */
TREEMASK_API bool treemask_matcher_is_thinking(const treemask_matcher *m);

/* ---- Experimental: speculative decoding and jump-forward ---------------- */

/* Accepts tokens[0 .. n) in order until one is not allowed, or the sequence
 * terminates; *n_accepted (required) counts the accepted tokens, and the
 * state has advanced by exactly those (rollback(*n_accepted) undoes the
 * call). A rejected draft token is not a failure: the failure policy does
 * not apply and treemask_last_error() is not set. Errors: NULL m or
 * n_accepted, NULL tokens with n > 0, the STICKY_ERROR failed state. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_matcher_accept_tokens(
    treemask_matcher *m, const int32_t *tokens, size_t n, size_t *n_accepted);

/* Fills the masks of a draft without changing m. Row 0 is the mask of the
 * current state; row i + 1 the mask after draft node i, whose state is its
 * parent's plus tokens[i]. parents: NULL for a chain (node i follows node
 * i - 1), or n entries with parents[i] in [-1, i) (-1 = the current state):
 * a draft tree in the order a DFS or BFS lists it. A node whose token is not
 * allowed after its parent, and every node below it, gets an all-zero row.
 * bitmask holds n + 1 rows of bitmask_row_words words (bitmask_row_words >=
 * treemask_bitmask_words(vocab_size)); bitmask_len is its length in words, a
 * size check. *n_valid (optional) receives the number of rows that are real
 * masks. Results equal accepting and filling step by step. Cost: one fill
 * and one accept per node. Errors: NULL m or bitmask, a short buffer or
 * row, a bad parent (named); nothing is then written. In the STICKY_ERROR
 * failed state: TREEMASK_ERR_INVALID_STATE. Same thread safety as other
 * functions on a const matcher. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_matcher_fill_draft_bitmasks(
    const treemask_matcher *m, const int32_t *tokens, const int32_t *parents, size_t n,
    int32_t *bitmask, size_t bitmask_len, size_t bitmask_row_words, size_t *n_valid);

/* Accepts the whole forced_tokens chain in one call (jump-forward) and
 * writes it to out[0 .. min(cap, n)) (out may be NULL when cap is 0);
 * *n_accepted (required) receives n. Errors: NULL m or n_accepted, the
 * STICKY_ERROR failed state. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_matcher_accept_forced_tokens(
    treemask_matcher *m, int32_t *out, size_t cap, size_t *n_accepted);

/* ---- Experimental: incremental fill of a bound buffer (extends section 6) */

/* Binds a caller-owned buffer of n_slots rows of bitmask_row_words words for
 * treemask_batch_fill_bound (NULL unbinds; bitmask_row_words is then ignored).
 * The batch forgets every row of the previous binding, so binding the same
 * buffer again also works as invalidating every row. The buffer must
 * outlive its binding.
 * Errors: NULL batch, bitmask_row_words 0 (with a buffer). */
TREEMASK_NODISCARD TREEMASK_API treemask_status
treemask_batch_bind_bitmask(treemask_batch *batch, int32_t *bitmask, size_t bitmask_row_words);

/* treemask_batch_fill_bound modes. */
#define TREEMASK_FILL_FULL 0        /* write every word of each row */
#define TREEMASK_FILL_INCREMENTAL 1 /* O(fanout) per row where possible */

/* Fills the listed slots' rows of the bound buffer; slots, need_apply and
 * the errors are those of treemask_batch_fill_next_token_bitmask. The rows
 * written are always exactly what a full fill writes.
 *
 * The batch remembers, per row, which tokens it set. With
 * TREEMASK_FILL_INCREMENTAL a row it knows is updated by clearing the words of
 * those tokens and setting the new ones: O(fanout), independent of the vocab
 * size. A row it does not know, or whose allowed set is large (more than
 * max(32, bitmask_row_words / 32) tokens: a high-fanout node, an unconstrained
 * mode), is written in full. TREEMASK_FILL_FULL writes every row in full and
 * then knows it.
 *
 * The caller's promise: between two fills of a bound row, nothing but the
 * batch writes it. If anything else did (a sampler that reused the buffer,
 * a matcher's own fill, a memset), call treemask_batch_invalidate for those
 * rows (or bind again) first; otherwise an incremental fill leaves stale
 * bits. What the batch remembers belongs to the row, not to the matcher:
 * set_matcher, reorder, accept and matcher calls on borrowed matchers
 * keep it valid.
 *
 * Errors: as above, plus TREEMASK_ERR_INVALID_STATE when no buffer is bound
 * and an unknown mode. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_batch_fill_bound(
    treemask_batch *batch, const int32_t *slots, size_t n_slots, int32_t mode, bool *need_apply);

/* Forgets what the listed rows (NULL with n_rows = 0: every row) of the bound
 * buffer hold, so their next fill writes them in full. Call it after anything
 * but the batch wrote them. Without a bound buffer it only checks the rows.
 * Errors: NULL batch, a row outside [0, n_slots) (nothing forgotten). */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_batch_invalidate(treemask_batch *batch,
                                                                          const int32_t *rows,
                                                                          size_t n_rows);

/* ---- Experimental: state arrays (section 6's second form) ----
 *
 * A state is a node id of the trie (root = TREEMASK_STATE_ROOT = 0) or one
 * of the two reserved values below. The rules, which the CUDA kernels
 * implement identically:
 *
 *   fill, state s:
 *     s a node          children of s, plus the stop tokens if s is terminal
 *     TERMINATED/FAILED the stop tokens only
 *   advance, state s, token t (failure policy P):
 *     t < 0             no token this step: s unchanged, accepted
 *     s a node:  t a child of s            -> that child
 *                t a stop token, s terminal -> TERMINATED
 *                anything else (also t >= vocab_size): rejected;
 *                  P = REJECT: s unchanged; FAIL_CLOSED, STICKY_ERROR: FAILED
 *     TERMINATED: t a stop token -> accepted, TERMINATED; else rejected,
 *                 TERMINATED (no policy applies after termination)
 *     FAILED:    t a stop token and P != STICKY_ERROR -> TERMINATED;
 *                else rejected, FAILED
 *
 * This is the matcher of section 5 with terminate_without_stop_token = false
 * and no pad token. Any other value is an error naming its index. */
#define TREEMASK_STATE_ROOT 0u
#define TREEMASK_STATE_TERMINATED 0xFFFFFFFEu
#define TREEMASK_STATE_FAILED 0xFFFFFFFFu

/* Writes row i (at bitmask + i * bitmask_row_words, every word; bits and words
 * past vocab_size are 0) from states[i], for i < n_states.
 * Errors: NULL trie, NULL states or bitmask with n_states > 0, bitmask_row_words
 * < treemask_bitmask_words(vocab_size), a state that is neither < n_nodes
 * nor reserved (TREEMASK_ERR_OUT_OF_RANGE naming its index). Every state is
 * checked before any row is written. Single-threaded; thread-safe (the trie
 * is shared read-only). */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_trie_fill_states(const treemask_trie *trie,
                                                                          const uint32_t *states,
                                                                          size_t n_states,
                                                                          int32_t *bitmask,
                                                                          size_t bitmask_row_words);

/* Advances states[i] by tokens[i] for i < n_states, in place, by the rules
 * above; failure_policy is a TREEMASK_FAILURE_* value. accepted (optional,
 * n_states entries) is false only where a token was rejected.
 * Errors: NULL trie, NULL states or tokens with n_states > 0, an unknown
 * failure_policy, a state out of range (nothing changed; the message names
 * its index). Thread-safe for distinct state arrays. */
TREEMASK_NODISCARD TREEMASK_API treemask_status
treemask_trie_advance_states(const treemask_trie *trie, uint32_t *states, const int32_t *tokens,
                             size_t n_states, int32_t failure_policy, bool *accepted);

/* The state-array form of m's current state: its node while active,
 * TREEMASK_STATE_TERMINATED once terminated, TREEMASK_STATE_FAILED when
 * closed (FAIL_CLOSED) or failed (STICKY_ERROR). O(1). Only a matcher
 * without modes continues identically as a state (history, pad token and
 * terminate_without_stop_token stay with the matcher).
 * Errors: NULL m or state; TREEMASK_ERR_INVALID_STATE for a state the form
 * cannot express. */
TREEMASK_NODISCARD TREEMASK_API treemask_status
treemask_matcher_get_state(const treemask_matcher *m, uint32_t *state);

/* ---- Experimental: constrained beam step and top-k ----------------------- */

/* The exact beam step of generative retrieval / recommendation without
 * full-vocabulary masks: per slot one read of its logits row (the
 * log-softmax normalizer, vectorized; the row is never written) and a gather
 * of its allowed tokens; per request an exact top-B over beams x candidates;
 * the slots' states reordered and advanced in the same call. Cost per slot
 * O(fanout) plus that read; independent of the catalogue size.
 *
 * A step holds n_requests x beam_width slots, request-major (slot r*B + b).
 * For request r, the candidates are:
 * - (b, t) for every token t allowed at slot r*B+b's state (its children,
 *   plus the stop tokens if it is terminal; a TREEMASK_STATE_FAILED slot
 *   allows the stop tokens), scored scores[r*B+b] + (x[t] - lse), where x is
 *   the slot's logits row and lse = log(sum of exp(x[c]) over the row's first
 *   n_columns columns): the unmasked log-softmax, as transformers' beam search
 *   normalizes before masking. With log_probs, lse = 0 (rows already hold
 *   log-probabilities). Computed in float exactly as written.
 * - for a slot in TREEMASK_STATE_TERMINATED: only (b, the trie's first stop
 *   token), with its score unchanged (finished hypotheses carry over and
 *   compete by cumulative score).
 * Candidates scored -inf or NaN are never selected, so a slot with score
 * -inf offers nothing. The B best win: higher score, then lower b, then lower
 * t. Outputs for slot r*B+i (i < B, best first): parents[] = b, tokens[] = t,
 * scores[] = the new score, and the slot's state becomes the parent's state
 * advanced by t. If fewer than B candidates exist, the remaining outputs are
 * (-1, -1, -inf) and those slots become dead (TERMINATED with score -inf,
 * never selected again). The caller only reorders its KV cache by parents.
 *
 * First step: all beams of a request start identical, so pass scores
 * {0, -inf, ..., -inf} per request (transformers' convention); otherwise the
 * same hypothesis would fill every beam.
 *
 * String sets: distinct strings. Over a string set (the section below) many token
 * sequences spell one string ("red", "re" + "d", "r" + "e" + "d"), and a
 * search over {"red", "blue"} with B = 3 would fill every beam with "red".
 * So a string set's step ranks the candidates as above and then merges the
 * ones whose hypotheses spell the same bytes, keeping the best (the first in
 * that order): the B winners are the B best distinct hypotheses (fewer, the
 * rest dead, when fewer exist). A live hypothesis is the string spelled so
 * far, which its state (a byte-trie node) identifies; a finished hypothesis
 * (a stop token chosen) is the complete string, distinct from a live one
 * with the same bytes (that one may still continue), and merges with any
 * other finished one of the same string, whether it finishes in this step
 * or finished earlier and carries over. Its state is
 * TREEMASK_STATE_TERMINATED, which does not say which string it was, so the
 * state-array form keeps a second array beside the states, ends: the node at
 * which each finished string ended (treemask_beam_step_strings);
 * treemask_beam_step_states refuses a string set. In the batch form each
 * slot's matcher knows where it ended. Merging is the Viterbi rule for a
 * string: the best tokenization of each hypothesis is kept, and the search
 * spends its B beams on B different items. Token-path tries are never
 * merged (each candidate is its own token sequence), and their steps are
 * unchanged. */

/* Where a step's logits are: row i (slot i) starts at element
 * i * row_stride of data. Initialise with treemask_logits_init. */
typedef struct treemask_logits {
  size_t struct_size;
  const void *data;
  /* A treemask_dtype value (int32_t so that any value a caller stores is
   * well defined; an unknown one is TREEMASK_ERR_INVALID_ARGUMENT). */
  int32_t dtype;
  /* Columns in the normalizer; >= the trie's vocab_size (a padded model
   * vocabulary). 0: the trie's vocab_size. */
  size_t n_columns;
  /* Elements from one row to the next; >= n_columns. 0: n_columns. */
  size_t row_stride;
  /* The rows hold log-probabilities already (no normalizer pass). */
  bool log_probs;
} treemask_logits;

TREEMASK_API void treemask_logits_init(treemask_logits *logits);

/* What a beam step needs besides the caller's arrays (per-thread candidate
 * heaps, a worker pool), so that steps never allocate (after the first step
 * of the largest size, which sizes an array of per-slot normalizers). One
 * thread at a time; may be reused across tries and searches. */
typedef struct treemask_beam treemask_beam;

typedef struct treemask_beam_options {
  size_t struct_size;
  /* B >= 1. */
  size_t beam_width;
  /* Threads working on one step, the caller's included; requests are split
   * between them. 0 or 1: the calling thread alone. */
  size_t n_threads;
} treemask_beam_options;

TREEMASK_API void treemask_beam_options_init(treemask_beam_options *opts);

/* Errors: NULL opts or out, beam_width 0, a thread that cannot start. */
TREEMASK_NODISCARD TREEMASK_API treemask_status
treemask_beam_create(const treemask_beam_options *opts, treemask_beam **out);

/* NULL is a no-op. */
TREEMASK_API void treemask_beam_free(treemask_beam *beam);

/* One beam step over state arrays (the states above): states and scores
 * (in: cumulative scores, out: new scores) have n_requests * beam_width
 * entries and are updated in place; parents and tokens receive the outputs.
 * Errors (nothing is written): NULL arguments, n_columns or row_stride too
 * small, an unknown dtype, a state out of range (its index named), a logits
 * row that a live slot would read holding NaN or +inf
 * (TREEMASK_ERR_INVALID_ARGUMENT naming the row), a string-set trie
 * (TREEMASK_ERR_UNSUPPORTED: it needs treemask_beam_step_strings). */
TREEMASK_NODISCARD TREEMASK_API treemask_status
treemask_beam_step_states(treemask_beam *beam, const treemask_trie *trie, size_t n_requests,
                          const treemask_logits *logits, uint32_t *states, float *scores,
                          int32_t *parents, int32_t *tokens);

/* treemask_beam_step_states with the ends of finished strings, so that a
 * string set's search returns distinct strings (above); it takes a
 * token-path trie too (then ends is only written, every entry
 * TREEMASK_STATE_FAILED, and the step is treemask_beam_step_states').
 * ends has n_requests * beam_width entries, updated in place like states:
 * for a slot in TREEMASK_STATE_TERMINATED, the byte-trie node at which its
 * string ended, or TREEMASK_STATE_FAILED when unknown (such a hypothesis is
 * never merged); entries of other slots are ignored. The step writes every
 * entry: the end node of a finished slot, TREEMASK_STATE_FAILED for live
 * and dead ones. Start a search with every entry TREEMASK_STATE_FAILED (no
 * slot has finished) and pass the array back at each step.
 * Errors: as treemask_beam_step_states, plus NULL ends
 * (TREEMASK_ERR_INVALID_ARGUMENT) and, for a string set, an entry of a
 * finished slot that is neither TREEMASK_STATE_FAILED nor a node where a
 * string ends (TREEMASK_ERR_OUT_OF_RANGE naming its index). Cost: as
 * treemask_beam_step_states, plus one byte walk per candidate ranked among
 * the B best; a step whose best candidates merge gathers again with twice
 * the room until B distinct are found (its candidate heap keeps that
 * size). */
TREEMASK_NODISCARD TREEMASK_API treemask_status
treemask_beam_step_strings(treemask_beam *beam, const treemask_trie *trie, size_t n_requests,
                           const treemask_logits *logits, uint32_t *states, uint32_t *ends,
                           float *scores, int32_t *parents, int32_t *tokens);

/* The same step over the first n_requests * beam_width slots of a batch
 * (section 6), each holding a matcher: a slot's candidates are its
 * matcher's allowed tokens, so decoding modes (labels, exclusions, length
 * budget, think) apply as they do to fill; "terminated" is
 * treemask_matcher_is_terminated and its first stop token is the matcher's.
 * Slot r*B+i becomes a copy of slot r*B+parent that has accepted the token
 * (matchers are cloned sharing their history copy-on-write, so this form
 * allocates; the state-array form does not). A dead slot keeps its old
 * matcher; its score -inf keeps it out of every later step. Slots past
 * n_requests * beam_width are untouched. n_columns 0 means the largest
 * vocab_size among the slots' tries. A request whose slots hold a string set
 * returns distinct strings (above; a terminated matcher knows where its
 * string ended, so no ends array is needed).
 * Errors: as treemask_beam_step_states, plus an empty slot or more slots
 * than the batch holds (nothing changed). */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_beam_step_batch(
    treemask_beam *beam, treemask_batch *batch, size_t n_requests, const treemask_logits *logits,
    float *scores, int32_t *parents, int32_t *tokens);

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

/* The host twin of the top-k contract above, for sampling engines that need
 * only candidates (top-k / top-p over the allowed set). Other errors: as
 * treemask_beam_step_states. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_trie_topk_states(
    const treemask_trie *trie, const uint32_t *states, size_t n_rows, const treemask_logits *logits,
    size_t k, int32_t *out_tokens, float *out_scores, size_t *out_counts);

/* The instruction set of the normalizer the beam step and top-k use in this
 * process: "avx512", "avx2" or "scalar". Static storage. Thread-safe. */
TREEMASK_API const char *treemask_beam_kernel_isa(void);

/* ---- Experimental: string sets at the byte level (extend section 4) ------
 *
 * The second kind of constraint, the one engines use for `choice` (xgrammar,
 * llguidance, outlines): a set of strings over a vocabulary that gives each
 * token id its bytes. Token t is allowed at a state iff its bytes spell a
 * path from the state in the byte trie of prefix + each string: any
 * tokenization ("pos" + "itive" as well as "positive"); a token may end
 * inside a string, or run from one string's end into a longer string that
 * continues it. A stop token is allowed iff the state ends a string, and it
 * is only ever a stop token (whatever its bytes). Tokens flagged
 * TREEMASK_TOKEN_SPECIAL (control and added tokens), tokens with no bytes,
 * and ids from n_tokens up to vocab_size (a model's padded logits rows) are
 * never allowed as text. Token-path tries keep the canonical-tokenization
 * semantics; an engine picks per request.
 *
 * A string-set trie is a treemask_trie: a state is a node of its byte trie
 * (still a uint32; root = TREEMASK_STATE_ROOT, the reserved states and the
 * failure policies as for token paths), and it works with matchers, batches
 * (full and incremental fills: a large allowed set is written in full), the
 * state arrays, the beam step and top-k (a slot's candidates are its allowed
 * set), the CPU apply, treemask_trie_save / _load and the stats (nodes are
 * byte-trie nodes, max_depth is in bytes, bytes leaves out the shared
 * vocabulary). What is defined in tokens over token paths refuses it with
 * TREEMASK_ERR_UNSUPPORTED: the decoding modes but override_stop_tokens
 * (multi-label, leaves_only, think mode, the length budget of
 * max_new_tokens, treemask_matcher_set_remaining_tokens and a fill's
 * remaining_tokens), exclusion sets and label filters, and
 * treemask_cuda_trie_upload (fill on the host, apply on the device).
 * terminate_without_stop_token ends a sequence at the end of a string that no
 * other string continues.
 *
 * Masks come from a walk of the vocabulary trie against the byte
 * trie that skips every token starting with a rejected byte; rows of states
 * whose walk is long (the root, the states after a shared prefix) are cached
 * under the trie's dense_row_cache_bytes budget. Jump-forward
 * (treemask_matcher_forced_tokens): the bytes every continuation shares
 * (treemask_matcher_forced_bytes) tokenized by longest match, cut before the
 * first position where an allowed token could run past them; the result is
 * unambiguous and every token allowed in turn, but a BPE tokenizer's own
 * tokenization of those bytes can differ: an engine that must feed the
 * model its tokenizer's tokens tokenizes the forced bytes itself. */

/* Token flags of treemask_vocab_create (other bits are reserved: an error). */
#define TREEMASK_TOKEN_SPECIAL 1u

/* A vocabulary: each token id's bytes and flags, with the vocabulary trie masks
 * walk, built once per tokenizer and shared (immutable, reference counted
 * like a trie; every trie built over it keeps it alive). */
typedef struct treemask_vocab treemask_vocab;

/* Builds a vocabulary: token i's bytes are bytes[offsets[i] ..
 * offsets[i + 1]) (what it adds to the decoded text), its flags flags[i]
 * (NULL: none). offsets has n_tokens + 1 entries, starting at 0, never
 * decreasing; n_tokens >= 1; vocab_size >= n_tokens is the logits width
 * (ids past n_tokens are padding); a token that is not special is at most
 * 65535 bytes; the bytes total under 4 GiB. Cost: O(bytes log) (the token
 * trie: ~0.1 s and 2.7 MB for a 150k vocabulary). Errors name the token.
 * Thread-safe. */
TREEMASK_NODISCARD TREEMASK_API treemask_status
treemask_vocab_create(const uint8_t *bytes, const uint64_t *offsets, size_t n_tokens,
                      const uint8_t *flags, int32_t vocab_size, treemask_vocab **out);

/* Adds a reference and returns vocab (NULL gives NULL). Thread-safe. */
TREEMASK_API treemask_vocab *treemask_vocab_retain(treemask_vocab *vocab);

/* Drops one reference; the last one destroys it. NULL is a no-op. */
TREEMASK_API void treemask_vocab_free(treemask_vocab *vocab);

/* The logits width; 0 for NULL. */
TREEMASK_API int32_t treemask_vocab_size(const treemask_vocab *vocab);

/* The tokenizer's tokens (ids below it may be text); 0 for NULL. */
TREEMASK_API int32_t treemask_vocab_n_tokens(const treemask_vocab *vocab);

/* XXH64 of vocab_size, n_tokens and every token's flags and bytes: equal
 * fingerprints mean the same masks. A string-set .tmtrie records its
 * vocabulary's. 0 for NULL. */
TREEMASK_API uint64_t treemask_vocab_fingerprint(const treemask_vocab *vocab);

/* Token's bytes to out[0 .. min(cap, n)); returns n (0 for ids outside
 * [0, n_tokens) and NULL). */
TREEMASK_API size_t treemask_vocab_token_bytes(const treemask_vocab *vocab, int32_t token,
                                               uint8_t *out, size_t cap);

/* The vocabulary's tokens as treemask_vocab_create takes them, to ship or
 * store one (Python pickles a Vocab with it): every token's bytes to
 * bytes[0 .. n) when bytes_cap >= n, offsets[0 .. n_tokens] (n_tokens + 1
 * entries, from 0 to n) and flags[0 .. n_tokens); each of the three may be
 * NULL (not written). Returns n, the bytes of all tokens (0 for NULL vocab):
 * call once with bytes NULL for the size. Thread-safe. */
TREEMASK_API uint64_t treemask_vocab_copy_tokens(const treemask_vocab *vocab, uint8_t *bytes,
                                                 uint64_t bytes_cap, uint64_t *offsets,
                                                 uint8_t *flags);

/* Bytes the vocabulary holds (tokens, offsets, flags, vocabulary trie); 0 for
 * NULL. */
TREEMASK_API uint64_t treemask_vocab_memory_bytes(const treemask_vocab *vocab);

typedef struct treemask_strings_options {
  size_t struct_size;
  /* Bytes put before every string (a SentencePiece or GPT-style leading
   * space: " "); any bytes, prefix_len of them (prefix may be NULL when
   * prefix_len is 0). init: none. */
  const char *prefix;
  size_t prefix_len;
  /* n_strings label ids (string i carries label_ids[i]), or NULL (init):
   * string i carries label i (none with the trie options' no_labels).
   * Strings with the same bytes merge into one terminal with all their
   * labels, reported by treemask_matcher_label_ids. */
  const int64_t *label_ids;
} treemask_strings_options;

/* Sets struct_size and every field to its default. */
TREEMASK_API void treemask_strings_options_init(treemask_strings_options *sopts);

/* Builds the string-set trie of prefix + each string over vocab (which it
 * retains): string i is bytes[offsets[i] .. offsets[i + 1]) (any bytes, not
 * checked as UTF-8). opts: vocab_size 0 or the vocabulary's, at least one
 * stop token (< vocab_size), the dense-row cache budget, no_labels. sopts:
 * NULL for the defaults. n_strings >= 1; the empty string makes the state
 * after the prefix an end. No tokenizer runs: 150k names build in ~30 ms.
 * Errors: NULL vocab, offsets or out; bad offsets (named); a vocab_size
 * that differs from the vocabulary's; bad stop tokens; label_ids with
 * no_labels. Thread-safe. */
TREEMASK_NODISCARD TREEMASK_API treemask_status
treemask_trie_from_strings(const treemask_trie_options *opts, const treemask_vocab *vocab,
                           const char *bytes, const size_t *offsets, size_t n_strings,
                           const treemask_strings_options *sopts, treemask_trie **out);

/* Whether trie is a string-set trie; false for NULL. */
TREEMASK_API bool treemask_trie_is_string_set(const treemask_trie *trie);

/* The vocabulary of a string-set trie, borrowed (valid while the trie is;
 * retain it to keep it); NULL for a token-path trie or NULL. */
TREEMASK_API treemask_vocab *treemask_trie_vocab(const treemask_trie *trie);

/* Whether trie fits the model whose vocabulary is vocab (the model's
 * tokenizer, read as treemask_vocab_create wants it: see the Python
 * Vocab.from_tokenizer and the llama.cpp sampler's treemask_llama_vocab):
 * - the trie is no wider than the model (vocab_size <= vocab's), for both
 *   kinds: a wider trie has ids the model does not have;
 * - a string set's masks are the same over both vocabularies: their
 *   fingerprints are equal, or else every id is text with the same bytes in
 *   both, or text in neither (special tokens' names and padding may differ:
 *   they are never text), or (for at most 64 ids) an id whose text in
 *   either vocabulary is never allowed by the set, its bytes spelling no
 *   path in the set's strings (a loader that makes a text token such as
 *   "</s>" a control token changes nothing for strings without it). A
 *   string set compiled for another tokenizer (other bytes at the same
 *   width, or a smaller vocabulary) would mask by other tokens' bytes: a
 *   model would write text outside the set;
 * - the set's stop tokens, which it allows by id whatever their bytes, mean
 *   the same in both: text with the same bytes, or text in neither (a stop
 *   token that is a control token in the set's vocabulary and the text "0"
 *   in the model's would let the model write "0" where the set ends).
 * Errors: NULL arguments; TREEMASK_ERR_INVALID_ARGUMENT naming both
 * fingerprints and vocab sizes and the token that differs (a differing
 * stop token is named as one). Cost: O(1) when the fingerprints are equal,
 * else one pass over both vocabularies' bytes, and, when ids differ, one
 * pass over the set's nodes for all of them at once (an automaton over
 * the differing tokens' bytes; one of more than 2^24 cells, e.g. tokens of
 * tens of kilobytes, is refused with an error that says so). Thread-safe. */
TREEMASK_NODISCARD TREEMASK_API treemask_status
treemask_trie_check_vocab(const treemask_trie *trie, const treemask_vocab *vocab);

/* treemask_trie_load, sharing vocab: a string-set file's vocabulary is
 * vocab (its fingerprint must be the one the file records, else
 * TREEMASK_ERR_INVALID_ARGUMENT naming both), so the vocabulary trie is not
 * built again. A .tmtrie file holds its vocabulary too, which
 * treemask_trie_load rebuilds (checked against its fingerprint at load). A
 * token-path file has no vocabulary to compare: it is refused only when its
 * vocab_size is larger than vocab's (TREEMASK_ERR_INVALID_ARGUMENT: ids
 * past the model's width), else vocab is not used; NULL vocab is
 * treemask_trie_load. An engine that holds its model's vocabulary loads
 * every file through this function, so that a string set compiled for
 * another tokenizer (same width, other bytes, or a smaller width) is
 * refused at load instead of masking by other tokens' bytes. */
TREEMASK_NODISCARD TREEMASK_API treemask_status treemask_trie_load_with_vocab(
    const char *path, uint32_t flags, const treemask_vocab *vocab, treemask_trie **out);

/* The bytes every continuation of m's string set begins with (the forced
 * bytes of jump-forward; none once a string may end here) to out[0 ..
 * min(cap, n)); returns n. 0 for a token-path trie, a state that is no
 * node, or NULL. */
TREEMASK_API size_t treemask_matcher_forced_bytes(const treemask_matcher *m, uint8_t *out,
                                                  size_t cap);

#endif /* TREEMASK_EXPERIMENTAL */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TREEMASK_TREEMASK_H */
