"""librdkafka's own regression suite (tests 0000-0999 that need a broker) against a kipling node.

librdkafka ships a C test suite (``tests/`` in its repository, one ``test-runner`` binary) that its
maintainers run against real Kafka clusters; kipling runs it as a compatibility harness. This script:

1. takes the librdkafka sources from ``--source DIR`` or ``$LIBRDKAFKA_SRC`` (an extracted tree), else
   clones ``--repo`` (``$LIBRDKAFKA_REPO``, default GitHub) at the pinned tag ``--tag`` (v2.15.0) into
   a cache dir (``$KIPLING_CACHE_DIR`` or ``~/.cache/kipling``);
2. builds librdkafka and the test runner once (``./configure --disable-gssapi --disable-curl``,
   ``make libs``, ``make -C tests test-runner``) and reuses the build on later runs (``--rebuild``
   forces it). Prerequisites: a C/C++ toolchain, make, git, pkg-config, and the -dev packages of
   OpenSSL, zlib and zstd (Debian: ``build-essential pkg-config libssl-dev zlib1g-dev libzstd-dev``);
3. reads the test table of ``tests/test.c`` and keeps the tests that need a broker: numbers 0000-0999
   without ``TEST_F_LOCAL`` (mock-cluster tests) or ``TEST_F_MANUAL``;
4. starts a single kipling node per scenario the tests need (``default``: topics auto-created with 4
   partitions, as librdkafka's ``scenarios/default.json``; ``noautocreate``: auto-creation off), each
   with Kafka's default group settings (``group.initial.rebalance.delay.ms`` 3000 and the rest) and an
   authorizer that allows what no ACL names (``allow.everyone.if.no.acl.found``): 0081 creates and
   deletes ACLs over PLAINTEXT, and the tests that deny ``User:*`` with kafka-acls.sh expect the
   deny to hold, so the anonymous principal must not be a super user. The tests that create topics
   of replication factor 3 (librdkafka's scenarios are three-broker clusters) run against a node
   of three broker processes (``kipling.node.processes=3``, ``THREE_BROKERS``), the others against a
   node of one (``--processes N`` puts every test on a node of N);
5. runs each test number on its own (``TESTS=NNNN ./test-runner -p1 -L``, the full mode, not ``-Q``) with
   a fresh topic prefix, ``TEST_KAFKA_VERSION`` (``--kafka-version``, 4.0.0: tests for later brokers,
   such as share groups at 4.2, skip themselves), its config in a ``test.conf`` of the run's own, and
   a per-test timeout (``--timeout``) on top of the runner's own per-test timeouts;
6. writes a results table (markdown and JSON, ``bench/results/compat_librdkafka.{md,json}``, with each
   test's log under ``bench/results/compat_librdkafka/``) with the state, duration and failure reason
   of every test, and compares it with ``compat/librdkafka/allowlist.txt``: the exit status is 1 when
   an allowlisted test did not pass. Tests not on the allowlist are explained in
   ``compat/librdkafka/findings.md``; a broker test missing from both is reported.

Run from the repository root: ``python -m bench.compat_librdkafka`` or ``make compat-librdkafka``;
``--tests 0001,0045`` runs some (numbers or names), ``--bootstrap HOST:PORT`` uses a running broker or
dev cluster instead of starting one (its ``default`` scenario only). The whole suite takes about an
hour on two cores. It is not part of ``make test``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench import RESULTS_DIR, write_results
from bench.broker_proc import ROOT, KiplingProcess
from bench.wire import Connection
from protocol.api_keys import ApiKey

TAG = "v2.15.0"
REPO_URL = "https://github.com/confluentinc/librdkafka"
CONFIGURE_ARGS = ("--disable-gssapi", "--disable-curl")
"""GSSAPI needs Kerberos (libsasl2) and curl is for OIDC: no broker test kipling runs needs either."""
KAFKA_VERSION = "4.0.0"
COMPAT_DIR = ROOT / "compat" / "librdkafka"
ALLOWLIST = COMPAT_DIR / "allowlist.txt"
FINDINGS = COMPAT_DIR / "findings.md"
RESULT_NAME = "compat_librdkafka"

ANSI = re.compile(r"\x1b\[[0-9;]*m")
SUMMARY_LINE = re.compile(r"^\|\s*(\d{4}_\w+)\s*\|\s*(\w+)\s*\|\s*([\d.]+)s\s*\|\s?(.*)$")
FAILURE_LINE = re.compile(r'^### Test "(\d{4}_\w+)(?: \((.*)\))?" failed at ([^:]+:\d+):([^(]*)\(\)')
SAY_LINE = re.compile(r"^\[(\d{4}_\w+)\s*/\s*([\d.]+)s\] (.*)$")
RESULT_SAY = re.compile(r"=+ Test (\d{4}_\w+) (PASSED|FAILED|SKIPPED) =+")
SKIP_SAY = re.compile(r"WARN: SKIPPING TEST: (.*)$")

LINE_BUFFERED = ["stdbuf", "-oL"] if shutil.which("stdbuf") else []
"""The runner ends with abort() when a test failed, and its summary (stdout) would die in the buffer."""

SCENARIO_SETTINGS: dict[str, dict[str, str]] = {
    # librdkafka's tests/scenarios/*.json (replication factor 3 there; a single node has one replica)
    "default": {"auto.create.topics.enable": "true", "num.partitions": "4"},
    "noautocreate": {"auto.create.topics.enable": "false", "num.partitions": "4"},
}
THREE_BROKERS = frozenset(
    {
        "0098_consumer_txn",
        "0101_fetch_from_follower",
        "0103_transactions",
        "0107_topic_recreate",
        "0111_delay_create_topics",
    }
)
"""Tests that create topics of replication factor 3 (librdkafka's scenarios are clusters of three):
they run against a kipling node of three broker processes (``kipling.node.processes=3``), still one
node, where each process is a broker with its own id and an RF 3 topic has a replica on each."""

CI_MULTIPLIER_TESTS = {"0081_admin": 3.0}
"""Tests run at the timeout multiplier of librdkafka's own CI (``CI`` set adds 2 to it) whatever
``--timeout-multiplier`` says: their budget at 1 does not cover Kafka's default group settings.
0081_admin joins 16 classic groups, each after ``group.initial.rebalance.delay.ms`` (3 s, Kafka's
default), on top of its fixed sleeps, and runs out of its 180 s near the end on a 2-core machine."""

COMMON_SETTINGS = {
    "default.replication.factor": "1",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}


@dataclass(frozen=True, slots=True)
class SuiteTest:
    """One entry of ``struct test tests[]`` in librdkafka's tests/test.c."""

    name: str
    flags: str
    scenario: str = "default"
    min_version: str | None = None

    @property
    def number(self) -> str:
        return self.name[:4]

    @property
    def needs_broker(self) -> bool:
        """Numbers 0000-0999 that are neither local (mock cluster, no broker) nor manual."""
        return (
            int(self.number) < 1000 and "TEST_F_LOCAL" not in self.flags and "TEST_F_MANUAL" not in self.flags
        )

    @property
    def known_issue(self) -> bool:
        """Flagged TEST_F_KNOWN_ISSUE by librdkafka itself (the _WIN32/_OSX variants are 0 on Linux)."""
        return re.search(r"\bTEST_F_KNOWN_ISSUE\b", self.flags) is not None

    def runs_in(self, scenario: str) -> bool:
        """test.c runs a test when its scenario string contains the run's (``"default,ak23"``)."""
        return scenario in self.scenario


@dataclass(slots=True)
class Outcome:
    """One test's result: passed, failed, skipped or timeout (killed by the harness)."""

    name: str
    state: str
    duration_s: float
    reason: str = ""
    scenario: str = "default"
    brokers: int = 1
    """Broker processes of the kipling node it ran against (``kipling.node.processes``)."""
    failures: list[str] = field(default_factory=list)
    """Every ``### Test ... failed at`` line of the log (sub-test, source line, message)."""


def _call_args(text: str, start: int) -> tuple[list[str], int]:
    """The top-level comma-separated arguments of the call whose ``(`` is at ``start``."""
    depth, i = 0, start
    args: list[str] = []
    current: list[str] = []
    while i < len(text):
        ch = text[i]
        if ch == "(":
            depth += 1
            if depth == 1:
                i += 1
                continue
        elif ch == ")":
            depth -= 1
            if depth == 0:
                args.append("".join(current).strip())
                return args, i + 1
        elif ch == '"':
            end = text.index('"', i + 1)
            current.append(text[i : end + 1])
            i = end + 1
            continue
        elif ch == "," and depth == 1:
            args.append("".join(current).strip())
            current = []
            i += 1
            continue
        current.append(ch)
        i += 1
    raise ValueError("unbalanced parentheses in the test table")


def parse_test_table(test_c: str) -> list[SuiteTest]:
    """The tests of ``struct test tests[]`` in test.c's source, in order (sockem tests included:
    librdkafka builds with sockem on Linux)."""
    body = test_c.split("struct test tests[] = {", 1)[1].split("{NULL}", 1)[0]
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    body = re.sub(r"^\s*#.*$", "", body, flags=re.M)
    tests: list[SuiteTest] = []
    for match in re.finditer(r"\b_TEST\s*\(", body):
        args, _ = _call_args(body, match.end() - 1)
        name, flags, rest = args[0], args[1], args[2:]
        scenario, min_version = "default", None
        for arg in rest:
            if m := re.match(r'\.scenario\s*=\s*"([^"]*)"', arg):
                scenario = m.group(1)
            elif m := re.match(r"TEST_BRKVER\(\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+)\s*\)", arg):
                min_version = ".".join(m.groups())
            elif arg == "TEST_BRKVER_TOPIC_ADMINAPI":
                min_version = "0.10.2.0"
        tests.append(SuiteTest(name, flags, scenario, min_version))
    return tests


def parse_runner_output(text: str) -> tuple[dict[str, tuple[str, float, str]], dict[str, list[str]]]:
    """The runner's summary table (name -> state, seconds, reason) and its failure lines per test.

    The summary is printed at the end (the last line for a name wins). When the runner's own timeout
    fires it kills the whole process, and a summary still in stdout's buffer is lost; then each test's
    state comes from what it said on stderr: its ``Test ... PASSED/FAILED/SKIPPED`` line, its skip
    reason, or its failure lines (RUNNING when it said none of these)."""
    summary: dict[str, tuple[str, float, str]] = {}
    failures: dict[str, list[str]] = {}
    said: dict[str, tuple[str, float, str]] = {}
    lines = ANSI.sub("", text).splitlines()
    for i, line in enumerate(lines):
        if m := SUMMARY_LINE.match(line):
            summary[m.group(1)] = (m.group(2), float(m.group(3)), m.group(4).strip())
        elif m := FAILURE_LINE.match(line):
            message = lines[i + 1].strip() if i + 1 < len(lines) else ""
            where = f"{m.group(2)}: " if m.group(2) else ""
            failures.setdefault(m.group(1), []).append(f"{where}{m.group(3)}: {message}")
            state, seconds, reason = said.get(m.group(1), ("RUNNING", 0.0, ""))
            said[m.group(1)] = ("FAILED", seconds, reason or f"{where}{message}")
        elif m := SAY_LINE.match(line):
            name, seconds, rest = m.group(1), float(m.group(2)), m.group(3)
            state, _, reason = said.get(name, ("RUNNING", 0.0, ""))
            if r := RESULT_SAY.search(rest):
                state = r.group(2)
            elif k := SKIP_SAY.search(rest):
                state, reason = "SKIPPED", k.group(1).strip()
            said[name] = (state, seconds, reason)
    for name, told in said.items():
        summary.setdefault(name, told)
    return summary, failures


def read_allowlist(path: Path = ALLOWLIST) -> list[str]:
    """Test names expected to pass, one a line (``#`` starts a comment)."""
    if not path.exists():
        return []
    names = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [n for n in names if n]


def findings_names(path: Path = FINDINGS) -> set[str]:
    """Test names that findings.md explains: the first cell of a table row (``| 0011_produce_batch |``)."""
    if not path.exists():
        return set()
    return set(re.findall(r"^\|\s*(\d{4}_\w+)\s*\|", path.read_text(), flags=re.M))


# ---------------------------------------------------------------------------------------------------
# Sources and build


def cache_dir() -> Path:
    return Path(os.environ.get("KIPLING_CACHE_DIR") or Path.home() / ".cache" / "kipling")


def obtain_sources(source: str | None, repo: str, tag: str) -> Path:
    """The librdkafka tree to build: given, or cloned once at ``tag`` into the cache dir."""
    if source:
        tree = Path(source).resolve()
        if not (tree / "tests" / "test.c").exists():
            raise SystemExit(f"{tree} is not a librdkafka source tree (no tests/test.c)")
        return tree
    tree = cache_dir() / f"librdkafka-{tag}"
    if not (tree / "tests" / "test.c").exists():
        tree.parent.mkdir(parents=True, exist_ok=True)
        print(f"cloning {repo} at {tag} into {tree}", flush=True)
        subprocess.run(
            ["git", "clone", "--quiet", "--depth", "1", "--branch", tag, repo, str(tree)], check=True
        )
    return tree


def build(tree: Path, jobs: int, rebuild: bool, log: Path) -> Path:
    """librdkafka and its test runner, built once in the tree (minutes on two cores)."""
    runner = tree / "tests" / "test-runner"
    if runner.exists() and not rebuild:
        return runner
    log.parent.mkdir(parents=True, exist_ok=True)
    steps = [
        ["make", f"-j{jobs}", "libs"],
        ["make", f"-j{jobs}", "-C", "tests", "test-runner"],
    ]
    if rebuild or not (tree / "Makefile.config").exists():
        steps.insert(0, ["./configure", *CONFIGURE_ARGS])
    with log.open("w") as out:
        for step in steps:
            print(f"building: {' '.join(step)} (log: {log})", flush=True)
            done = subprocess.run(step, cwd=tree, stdout=out, stderr=subprocess.STDOUT)
            if done.returncode != 0:
                raise SystemExit(f"build step {' '.join(step)} failed ({done.returncode}); see {log}")
    return runner


# ---------------------------------------------------------------------------------------------------
# Running


def _child_setup() -> None:
    """In the runner's process: its own process group (killed whole on timeout), no core files."""
    os.setsid()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_number(
    runner: Path,
    number: str,
    tests: Sequence[SuiteTest],
    scenario: str,
    bootstrap: str,
    args: argparse.Namespace,
    log_dir: Path,
) -> list[Outcome]:
    """Run every test of one number (``TESTS=NNNN``, one at a time) and read back their outcomes."""
    work = Path(tempfile.mkdtemp(prefix=f"rdk-{number}-", dir=log_dir))
    prefix = f"rdk{uuid.uuid4().hex[:8]}"
    conf = work / "test.conf"
    extra = "".join(f"{kv}\n" for kv in args.client_set)
    multiplier = max([args.timeout_multiplier, *(CI_MULTIPLIER_TESTS.get(t.name, 0.0) for t in tests)])
    conf.write_text(
        f"bootstrap.servers={bootstrap}\n"
        f"test.topic.prefix={prefix}\n"
        f"test.timeout.multiplier={multiplier:g}\n{extra}"
    )
    tree = runner.parent.parent
    env = dict(
        os.environ,
        TESTS=number,
        TEST_SCENARIO=scenario,
        TEST_KAFKA_VERSION=args.kafka_version,
        RDKAFKA_TEST_CONF=str(conf),
        RDKAFKA_GITVER=args.tag,
        LD_LIBRARY_PATH=os.pathsep.join(
            p for p in (str(tree / "src"), str(tree / "src-cpp"), os.environ.get("LD_LIBRARY_PATH")) if p
        ),
    )
    env.pop("CI", None)  # CI raises the runner's timeouts and its parallelism
    if args.group_protocol:
        env["TEST_CONSUMER_GROUP_PROTOCOL"] = args.group_protocol
    log = log_dir / f"{number}-{scenario}.log"
    started = time.monotonic()
    timed_out = False
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*LINE_BUFFERED, str(runner), "-p1", "-L"],  # -L: not the local (mock cluster) tests
            cwd=tree / "tests",  # tests read files relative to it (../src/statistics_schema.json)
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_child_setup,
        )
        try:
            proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    elapsed = time.monotonic() - started
    shutil.rmtree(work, ignore_errors=True)
    for stats in (tree / "tests").glob(f"stats_{number}_*.json"):  # the runner writes one per test
        stats.unlink(missing_ok=True)
    summary, failures = parse_runner_output(log.read_text(errors="replace"))
    outcomes: list[Outcome] = []
    for test in tests:
        state, seconds, reason = summary.get(test.name, ("", 0.0, ""))
        if timed_out and state in ("", "RUNNING", "DNS"):
            outcome = Outcome(test.name, "timeout", elapsed, f"killed after {args.timeout:g} s", scenario)
        elif state == "PASSED":
            outcome = Outcome(test.name, "passed", seconds, "", scenario)
        elif state == "SKIPPED":
            outcome = Outcome(test.name, "skipped", seconds, reason, scenario)
        elif state == "FAILED":
            outcome = Outcome(test.name, "failed", seconds, reason, scenario)
        elif state == "RUNNING":
            why = f"still running when the runner exited ({proc.returncode}){': ' if reason else ''}{reason}"
            outcome = Outcome(test.name, "failed", seconds, why, scenario)
        else:  # no summary: the runner crashed before printing one
            why = f"runner exited with {proc.returncode} before its summary"
            outcome = Outcome(test.name, "failed", elapsed, why, scenario)
        outcome.failures = failures.get(test.name, [])
        if outcome.state == "failed" and not outcome.reason and outcome.failures:
            outcome.reason = outcome.failures[0]
        outcomes.append(outcome)
    return outcomes


@contextlib.contextmanager
def kipling_node(
    scenario: str, settings: Iterable[str], processes: int, keep: bool, log_dir: Path
) -> Iterator[KiplingProcess]:
    """A single kipling node for one scenario, in a directory of its own; ``processes`` above 1 makes
    it a node of that many broker processes (``kipling.node.processes``), each a broker of its own."""
    overrides = {**COMMON_SETTINGS, **SCENARIO_SETTINGS[scenario]}
    for kv in settings:
        key, _, value = kv.partition("=")
        overrides[key] = value
    node = KiplingProcess(overrides=overrides, processes=processes)
    node.start(timeout_s=120)
    wait_for_brokers(node, processes)
    print(f"kipling node for scenario {scenario} on {node.bootstrap} ({node.work_dir})", flush=True)
    try:
        yield node
    finally:
        node.stop()
        out = log_dir / f"kipling-{scenario}-{processes}.out"
        with contextlib.suppress(OSError):
            shutil.copyfile(node.log_path, out)
        if keep:
            print(f"kept {node.work_dir}")
        else:
            node.cleanup()


def wait_for_brokers(node: KiplingProcess, count: int, timeout_s: float = 120.0) -> None:
    """Until Metadata lists ``count`` brokers: a node's broker processes register one by one, and a
    test creating a topic of replication factor 3 before the third one has fails."""
    deadline = time.monotonic() + timeout_s
    seen = 0
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, TimeoutError), Connection("127.0.0.1", node.port) as conn:
            seen = len(conn.request(ApiKey.METADATA, 1, {"topics": []}).response.body.brokers)
            if seen >= count:
                return
        time.sleep(0.2)
    raise TimeoutError(f"the node lists {seen} of its {count} brokers after {timeout_s:g} s")


def node_processes(test: SuiteTest, forced: int | None) -> int:
    """The broker processes of the node a test runs against: ``--processes``, else 3 or 1."""
    return forced or (3 if test.name in THREE_BROKERS else 1)


def select(tests: Sequence[SuiteTest], wanted: str | None, skip: str | None) -> list[SuiteTest]:
    """Broker tests, narrowed by ``--tests`` and ``--skip`` (numbers or names, comma-separated)."""
    chosen = [t for t in tests if t.needs_broker]

    def matches(test: SuiteTest, spec: str) -> bool:
        return any(s and (s == test.number or s == test.name) for s in spec.split(","))

    if wanted:
        chosen = [t for t in chosen if matches(t, wanted)]
    if skip:
        chosen = [t for t in chosen if not matches(t, skip)]
    return chosen


def run_scenario(
    runner: Path,
    tests: Sequence[SuiteTest],
    scenario: str,
    bootstrap: str,
    args: argparse.Namespace,
    log_dir: Path,
) -> list[Outcome]:
    numbers = sorted({t.number for t in tests})
    outcomes: list[Outcome] = []
    for i, number in enumerate(numbers, 1):
        group = [t for t in tests if t.number == number]
        print(f"[{scenario} {i}/{len(numbers)}] {', '.join(t.name for t in group)}", end=" ", flush=True)
        found = run_number(runner, number, group, scenario, bootstrap, args, log_dir)
        print(", ".join(f"{o.state} {o.duration_s:.1f}s" for o in found), flush=True)
        outcomes += found
    return outcomes


# ---------------------------------------------------------------------------------------------------
# Report


def counts(outcomes: Iterable[Outcome]) -> dict[str, int]:
    result = {"passed": 0, "failed": 0, "skipped": 0, "timeout": 0}
    for o in outcomes:
        result[o.state] += 1
    return result


def markdown_table(outcomes: Sequence[Outcome], allowlist: set[str], explained: set[str]) -> str:
    lines = [
        "| test | scenario | brokers | state | seconds | allowlisted | reason |",
        "|---|---|---:|---|---:|---|---|",
    ]
    for o in outcomes:
        listed = "yes" if o.name in allowlist else ("findings" if o.name in explained else "**neither**")
        reason = o.reason.replace("|", "\\|")[:300]
        cells = [o.name, o.scenario, str(o.brokers), o.state, f"{o.duration_s:.1f}", listed, reason]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def result_name(args: argparse.Namespace) -> str:
    """``compat_librdkafka``, ``compat_librdkafka_consumer`` for a KIP-848 run: both can be kept."""
    return RESULT_NAME if args.group_protocol in (None, "classic") else f"{RESULT_NAME}_{args.group_protocol}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", default=os.environ.get("LIBRDKAFKA_SRC"), help="librdkafka tree")
    parser.add_argument("--repo", default=os.environ.get("LIBRDKAFKA_REPO", REPO_URL), help="to clone")
    parser.add_argument("--tag", default=TAG, help=f"tag to clone (default {TAG})")
    parser.add_argument("--rebuild", action="store_true", help="configure and build again")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="make -j")
    parser.add_argument("--build-only", action="store_true", help="build, list the tests, stop")
    parser.add_argument("--tests", help="test numbers or names to run, comma-separated (default all)")
    parser.add_argument("--skip", help="test numbers or names not to run, comma-separated")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per test number")
    parser.add_argument("--timeout-multiplier", type=float, default=1.0, help="test.timeout.multiplier")
    parser.add_argument("--kafka-version", default=KAFKA_VERSION, help="TEST_KAFKA_VERSION")
    parser.add_argument("--group-protocol", choices=("classic", "consumer"), help="consumers' protocol")
    parser.add_argument("--set", dest="broker_set", action="append", default=[], help="KEY=VALUE broker")
    parser.add_argument("--client-set", action="append", default=[], help="KEY=VALUE for test.conf")
    parser.add_argument("--bootstrap", help="an already running broker or dev cluster (default scenario)")
    parser.add_argument(
        "--processes",
        type=int,
        help="broker processes of every node (default: 1, and 3 for the tests that create RF 3 topics)",
    )
    parser.add_argument("--keep-dir", action="store_true", help="keep the kipling nodes' directories")
    args = parser.parse_args()

    log_dir = RESULTS_DIR / result_name(args)
    log_dir.mkdir(parents=True, exist_ok=True)
    tree = obtain_sources(args.source, args.repo, args.tag)
    runner = build(tree, args.jobs, args.rebuild, log_dir / "build.log")
    table = parse_test_table((tree / "tests" / "test.c").read_text())
    chosen = select(table, args.tests, args.skip)
    print(f"{runner}: {len(chosen)} broker tests of {len(table)} selected", flush=True)
    if args.build_only:
        return
    scenarios = ["default"] if args.bootstrap else sorted(SCENARIO_SETTINGS)
    outcomes: list[Outcome] = []
    started = time.monotonic()
    for scenario in scenarios:
        tests = [t for t in chosen if t.runs_in(scenario)]
        if args.bootstrap:
            outcomes += run_scenario(runner, tests, scenario, args.bootstrap, args, log_dir)
            continue
        for processes in sorted({node_processes(t, args.processes) for t in tests}):
            group = [t for t in tests if node_processes(t, args.processes) == processes]
            with kipling_node(scenario, args.broker_set, processes, args.keep_dir, log_dir) as node:
                found = run_scenario(runner, group, scenario, node.bootstrap, args, log_dir)
            for outcome in found:
                outcome.brokers = processes
            outcomes += found
    wall_s = time.monotonic() - started
    report(outcomes, chosen, table, args, wall_s, tree)


def report(
    outcomes: list[Outcome],
    chosen: Sequence[SuiteTest],
    table: Sequence[SuiteTest],
    args: argparse.Namespace,
    wall_s: float,
    tree: Path,
) -> None:
    """Print and write the table, and exit 1 when an allowlisted test did not pass."""
    order = {t.name: i for i, t in enumerate(table)}
    outcomes.sort(key=lambda o: order.get(o.name, 0))
    allowlist = set(read_allowlist())
    explained = findings_names()
    ran = {o.name for o in outcomes}
    regressions = [o for o in outcomes if o.name in allowlist and o.state != "passed"]
    newly_passing = [o.name for o in outcomes if o.state == "passed" and o.name not in allowlist]
    unexplained = sorted(t.name for t in chosen if t.name not in allowlist and t.name not in explained)
    not_run = sorted(t.name for t in chosen if t.name not in ran)
    figures = counts(outcomes)
    setup = {
        "librdkafka": args.tag if not args.source else str(tree),
        "kafka_version": args.kafka_version,
        "group_protocol": args.group_protocol or "classic",
        "broker": args.bootstrap
        or (
            f"a single kipling node per scenario of {args.processes} broker process(es)"
            if args.processes
            else "a single kipling node per scenario: one broker process, three for "
            + ", ".join(sorted(THREE_BROKERS))
        ),
        "broker_settings": {**COMMON_SETTINGS, "scenarios": SCENARIO_SETTINGS, "--set": args.broker_set},
        "timeout_s": args.timeout,
        "timeout_multiplier": args.timeout_multiplier,
        "mode": "full (no -Q), one test number per runner, -p1 -L",
    }
    text = (
        f"# librdkafka regression suite against kipling\n\n"
        f"librdkafka {setup['librdkafka']}, TEST_KAFKA_VERSION={args.kafka_version}, group protocol "
        f"{setup['group_protocol']}, {setup['broker']}; {len(outcomes)} tests in {wall_s / 60:.1f} min: "
        + ", ".join(f"{v} {k}" for k, v in figures.items())
        + ".\n\n"
        + markdown_table(outcomes, allowlist, explained)
    )
    name = result_name(args)
    md = RESULTS_DIR / f"{name}.md"
    md.write_text(text)
    out = write_results(
        name,
        {
            "setup": setup,
            "figures": figures,
            "wall_s": round(wall_s, 1),
            "allowlisted_not_passing": [o.name for o in regressions],
            "passing_not_allowlisted": newly_passing,
            "neither_allowlisted_nor_in_findings": unexplained,
            "tests": [asdict(o) for o in outcomes],
        },
    )
    print()
    for o in outcomes:
        if o.state != "passed":
            print(f"  {o.name:<45} {o.state:<8} {o.duration_s:7.1f}s  {o.reason[:110]}")
    print(
        f"\n{len(outcomes)} tests in {wall_s / 60:.1f} min: "
        + ", ".join(f"{v} {k}" for k, v in figures.items())
    )
    if newly_passing:
        print(f"passing but not on the allowlist: {', '.join(newly_passing)}")
    if unexplained:
        print(f"neither on the allowlist nor in findings.md: {', '.join(unexplained)}")
    if not_run:
        print(f"selected but without an outcome: {', '.join(not_run)}")
    print(f"wrote {md} and {out}; logs in {RESULTS_DIR / name}")
    if regressions:
        print(f"allowlisted tests that did not pass: {', '.join(o.name for o in regressions)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
