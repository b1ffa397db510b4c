"""The library's log events and per-matcher counters through Python.

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import logging
import sys
import threading

import pytest

import treemask


@pytest.fixture
def captured():
    lines = []
    treemask.set_log_callback(lambda level, message: lines.append((level, message)))
    yield lines
    treemask.set_log_callback(None)


def test_build_save_and_load_are_logged_with_the_trie_shape(captured, tmp_path):
    trie = treemask.Trie.from_paths([[1, 2], [1, 3], [4]], 10, [0])
    path = tmp_path / "t.tmtrie"
    trie.save(path)
    loaded = treemask.Trie.load(path)
    stats = loaded.stats()
    shape = "3 paths, %d nodes, %d bytes" % (stats.n_nodes, stats.bytes)
    assert captured == [
        (treemask.LOG_INFO, "built trie from 3 token paths: " + shape),
        (treemask.LOG_INFO, "saved %s: %s" % (path, shape)),
        (treemask.LOG_INFO, "loaded %s: %s" % (path, shape)),
    ]


def test_loader_warnings_arrive_as_warnings_and_are_counted(captured):
    text = ('{"start_token_id": 225, "end_token_id": 2, "weight_dict": {},'
            ' "prefix_dict": {"225": [7], "225_7": [2], "225_8": [9]}}')
    trie = treemask.Trie.from_rtp_json(text.encode(), 1000)
    warnings = [m for level, m in captured if level == treemask.LOG_WARNING]
    assert len(warnings) == 2 == trie.stats().n_warnings
    assert "weight_dict" in warnings[0]
    assert 'key "225_8" is unreachable' in warnings[1]
    assert captured[-1][0] == treemask.LOG_INFO and captured[-1][1].startswith("loaded RTP-LLM JSON")


def test_silence_after_the_callback_is_removed():
    lines = []
    treemask.set_log_callback(lambda level, message: lines.append(message))
    treemask.Trie.from_paths([[1]], 4, [0])
    treemask.set_log_callback(None)
    treemask.Trie.from_paths([[2]], 4, [0])
    assert len(lines) == 1 and lines[0].startswith("built trie from 1 token paths")


def test_log_to_logging_uses_the_matching_levels(caplog):
    logger = logging.getLogger("treemask.test")
    try:
        assert treemask.log_to_logging(logger) is logger
        with caplog.at_level(logging.INFO, logger="treemask.test"):
            treemask.Trie.from_rtp_json(
                b'{"start_token_id": 5, "end_token_id": 2, "prefix_dict": {"5": [7], "5_9": [2]}}', 100)
    finally:
        treemask.set_log_callback(None)
    levels = [r.levelno for r in caplog.records if r.name == "treemask.test"]
    assert levels == [logging.WARNING, logging.INFO], caplog.records


def test_a_raising_callback_never_reaches_the_library(monkeypatch):
    def broken(level, message):
        raise RuntimeError("callback bug")

    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda args: reported.append(args.exc_value))
    treemask.set_log_callback(broken)
    try:
        trie = treemask.Trie.from_paths([[1, 2]], 8, [0])  # logs once; the build must still succeed
    finally:
        treemask.set_log_callback(None)
    assert trie.stats().n_terminals == 1
    assert [str(e) for e in reported] == ["callback bug"]


def test_events_from_other_threads_reach_python(captured):
    threads = [threading.Thread(target=treemask.Trie.from_paths, args=([[i + 1]], 64, [0])) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(captured) == 8
    assert all(level == treemask.LOG_INFO and m.startswith("built trie") for level, m in captured)


def test_a_callback_may_replace_itself_while_other_threads_install_callbacks():
    lines = []

    def collect(level, message):
        lines.append(message)

    def first(level, message):
        treemask.set_log_callback(collect)  # from inside a callback: must not deadlock
        lines.append("first: " + message)

    treemask.set_log_callback(first)
    try:
        treemask.Trie.from_paths([[1]], 8, [0])
        treemask.Trie.from_paths([[2]], 8, [0])
        # Another thread installing callbacks while this one's callback
        # runs and installs: the library's lock and ours must not cross.
        stop = threading.Event()

        def churn():
            while not stop.is_set():
                treemask.set_log_callback(collect)

        t = threading.Thread(target=churn)
        t.start()
        try:
            for i in range(2000):
                treemask.set_log_callback(first)
                treemask.Trie.from_paths([[3 + i % 4]], 8, [0])
        finally:
            stop.set()
            t.join(timeout=60)
        assert not t.is_alive()
    finally:
        treemask.set_log_callback(None)
    assert lines[0].startswith("first: built trie") and lines[1].startswith("built trie")
    assert len(lines) == 2002


def test_set_log_callback_rejects_a_non_callable():
    with pytest.raises(TypeError):
        treemask.set_log_callback(42)


def test_matcher_counters_follow_every_event():
    trie = treemask.Trie.from_paths([[1, 2], [1, 3]], 8, [0])
    m = treemask.Matcher(trie, failure_policy="fail_closed")
    assert m.counters == treemask.MatcherCounters(0, 0, 0, 0, 0, 0)
    bitmask = treemask.allocate_token_bitmask(1, 8)
    m.fill_next_token_bitmask(bitmask)
    assert m.accept_token(1)
    m.rollback(1)
    assert m.accept_token(1)
    assert not m.accept_token(5)  # fail_closed: rejected and closed
    m.reset()
    c = m.counters
    assert (c.n_fills, c.n_accepted_tokens, c.n_rejected_tokens, c.n_fail_closed, c.n_rolled_back_tokens,
            c.n_resets) == (1, 2, 1, 1, 1, 1)
    assert m.clone().counters.n_accepted_tokens == 0  # a clone counts only its own events


def test_batch_slot_counters_count_batch_fills():
    trie = treemask.Trie.from_paths([[1, 2], [3]], 8, [0])
    batch = treemask.BatchMatcher([treemask.Matcher(trie), treemask.Matcher(trie)])
    bitmask = treemask.allocate_token_bitmask(2, 8)
    batch.fill_next_token_bitmask(bitmask)
    batch.fill_next_token_bitmask(bitmask)
    assert [batch[i].counters.n_fills for i in range(2)] == [2, 2]
