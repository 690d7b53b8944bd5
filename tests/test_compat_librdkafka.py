"""The librdkafka compatibility harness (bench/compat_librdkafka.py) reads librdkafka's test table and
its runner's output as they are written in v2.15.0, and its allowlist and findings agree.

The suite itself takes an hour and a C toolchain; it is run by ``make compat-librdkafka``, not here.
"""

from __future__ import annotations

import pytest

from bench.compat_librdkafka import (
    ALLOWLIST,
    FINDINGS,
    SuiteTest,
    findings_names,
    parse_runner_output,
    parse_test_table,
    read_allowlist,
    select,
)

pytestmark = [pytest.mark.timeout(30)]

# An excerpt of tests/test.c at v2.15.0, comments and preprocessor lines as written there.
TEST_C = """
struct test tests[] = {
    /* Special MAIN test to hold over-all timings, etc. */
    {.name = "<MAIN>", .flags = TEST_F_LOCAL},
    _TEST(0000_unittests,
          TEST_F_LOCAL,
          /* The msgq insert order tests are heavy on
           * user CPU (memory scan), RSS, and
           * system CPU (lots of allocations -> madvise(2)). */
          _THRES(.ucpu = 100.0, .scpu = 20.0, .rss = 900.0)),
    _TEST(0001_multiobj, 0),
    _TEST(0028_long_topicnames,
          TEST_F_KNOWN_ISSUE,
          TEST_BRKVER(0, 9, 0, 0),
          .extra = "https://github.com/confluentinc/librdkafka/issues/529"),
    _TEST(0045_subscribe_update, 0, TEST_BRKVER(0, 9, 0, 0)),
    _TEST(0045_subscribe_update_topic_remove,
          0,
          TEST_BRKVER(0, 9, 0, 0),
          .scenario = "noautocreate"),
#if WITH_SOCKEM
    _TEST(0049_consume_conn_close, TEST_F_SOCKEM, TEST_BRKVER(0, 9, 0, 0)),
#endif
    _TEST(0055_producer_latency, TEST_F_KNOWN_ISSUE_WIN32),
    _TEST(0103_transactions,
          0,
          TEST_BRKVER(0, 11, 0, 0),
          .scenario = "default,ak23"),
    _TEST(0107_topic_recreate,
          0,
          TEST_BRKVER_TOPIC_ADMINAPI,
          .scenario = "noautocreate"),
    _TEST(0170_share_consumer_subscription, 0, TEST_BRKVER(4, 2, 0, 0)),
    _TEST(0190_share_consumer_telemetry,
          TEST_F_MANUAL,
          TEST_BRKVER(4, 2, 0, 0)),
    _TEST(8000_idle, TEST_F_MANUAL),

    {NULL}};
"""

# What test-runner prints (colours and all) for ``TESTS=0045 ./test-runner -p1``.
RUNNER_OUTPUT = (
    '\x1b[31m### Test "0045_subscribe_update (list)" failed at 0045-subscribe_update.c:80:'
    "await_assignment() at Thu Jan  1 00:00:00 2026: ###\n"
    "Expected 2 partitions, got 1\n"
    "TEST 20260101000000 (bare, scenario default) SUMMARY\n"
    "#==================================================================#\n"
    "|\x1b[32m <MAIN>                                   |     PASSED |  61.002s \x1b[0m|\n"
    "|\x1b[31m 0045_subscribe_update                    |     FAILED |  30.500s \x1b[0m|"
    "\x1b[31m Expected 2 partitions, got 1\x1b[0m\n"
    "|\x1b[36m 0045_subscribe_update_topic_remove       |    SKIPPED |   0.000s \x1b[0m|"
    "\x1b[36m \x1b[0m\n"
    "|\x1b[32m 0045_resubscribe_with_regex              |     PASSED |  12.250s \x1b[0m|\n"
    "#==================================================================#\n"
)


def test_the_test_table_is_read_with_flags_versions_and_scenarios() -> None:
    tests = {t.name: t for t in parse_test_table(TEST_C)}
    assert list(tests)[:3] == ["0000_unittests", "0001_multiobj", "0028_long_topicnames"]
    long_names = tests["0028_long_topicnames"]
    assert long_names.known_issue and long_names.min_version == "0.9.0.0"
    assert not tests["0055_producer_latency"].known_issue  # _WIN32 only
    assert tests["0045_subscribe_update_topic_remove"].scenario == "noautocreate"
    assert tests["0107_topic_recreate"].min_version == "0.10.2.0"
    assert tests["0103_transactions"].runs_in("default")
    assert not tests["0107_topic_recreate"].runs_in("default")
    assert "0049_consume_conn_close" in tests  # sockem tests: librdkafka builds sockem on Linux
    broker = [t.name for t in select(list(tests.values()), None, None)]
    assert broker == [
        "0001_multiobj",
        "0028_long_topicnames",
        "0045_subscribe_update",
        "0045_subscribe_update_topic_remove",
        "0049_consume_conn_close",
        "0055_producer_latency",
        "0103_transactions",
        "0107_topic_recreate",
        "0170_share_consumer_subscription",
    ]


def test_tests_are_selected_by_number_or_name() -> None:
    tests = parse_test_table(TEST_C)
    assert [t.name for t in select(tests, "0045", None)] == [
        "0045_subscribe_update",
        "0045_subscribe_update_topic_remove",
    ]
    assert [t.name for t in select(tests, "0045_subscribe_update,0001", "0001")] == ["0045_subscribe_update"]


def test_the_runner_summary_and_failure_lines_are_read() -> None:
    summary, failures = parse_runner_output(RUNNER_OUTPUT)
    assert summary["0045_subscribe_update"] == ("FAILED", 30.5, "Expected 2 partitions, got 1")
    assert summary["0045_subscribe_update_topic_remove"] == ("SKIPPED", 0.0, "")
    assert summary["0045_resubscribe_with_regex"] == ("PASSED", 12.25, "")
    assert "<MAIN>" not in summary
    assert failures == {
        "0045_subscribe_update": [
            "list: 0045-subscribe_update.c:80: Expected 2 partitions, got 1",
        ]
    }


# A runner that died before its summary reached stdout (abort() after a failure, or its own timeout,
# which SIGKILLs the process): each test's state is read from what it said on stderr.
RUNNER_STDERR_ONLY = (
    "\x1b[36m[0052_msg_timestamps         /  0.000s] Setting test timeout to 30s * 1.0\n"
    "\x1b[36m[0052_msg_timestamps         /  0.000s] TEST FAILURE\n"
    '\x1b[31m### Test "0052_msg_timestamps" failed at test.c:5257:test_kafka_topics() at Sat: ###\n'
    "test_kafka_topics: KAFKA_PATH and BROKERS must be set\n"
    "\x1b[33m[0053_stats                  /  0.000s] WARN: SKIPPING TEST: RapidJSON >=1.1.0 not available\n"
    "[0054_offset_time             /  2.500s] \x1b[32m================= Test 0054_offset_time PASSED "
    "=================\x1b[0m\n"
    "[0113_cooperative_rebalance  /551.807s] Setting test timeout to 120s * 1.0\n"
)


def test_states_are_read_from_stderr_when_the_summary_is_lost() -> None:
    summary, failures = parse_runner_output(RUNNER_STDERR_ONLY)
    assert summary == {
        "0052_msg_timestamps": ("FAILED", 0.0, "test_kafka_topics: KAFKA_PATH and BROKERS must be set"),
        "0053_stats": ("SKIPPED", 0.0, "RapidJSON >=1.1.0 not available"),
        "0054_offset_time": ("PASSED", 2.5, ""),
        "0113_cooperative_rebalance": ("RUNNING", 551.807, ""),
    }
    assert failures == {
        "0052_msg_timestamps": ["test.c:5257: test_kafka_topics: KAFKA_PATH and BROKERS must be set"]
    }


def test_allowlist_and_findings_name_different_tests() -> None:
    allowlisted = read_allowlist(ALLOWLIST)
    explained = findings_names(FINDINGS)
    assert allowlisted, "compat/librdkafka/allowlist.txt is empty"
    assert len(set(allowlisted)) == len(allowlisted)
    assert not set(allowlisted) & explained, "a test is both allowlisted and explained as not passing"
    assert all(SuiteTest(name, "0").needs_broker for name in set(allowlisted) | explained)
