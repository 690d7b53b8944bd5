"""Produce and consume MB/s and CPU-s/GB over TLS (SSL, SASL_SSL with SCRAM-SHA-512) against PLAINTEXT.

The question (issue 19) is what encryption costs kipling: how much slower produce and consume run
over a TLS listener, and how many more CPU-seconds per GB the broker and the client spend, than over
PLAINTEXT on the same broker.

One kipling broker process (a single node) serves three listeners: PLAINTEXT, SSL and SASL_SSL
(SASL mechanism SCRAM-SHA-512, the user created with AlterUserScramCredentials over PLAINTEXT). The
TLS material is a throwaway CA and broker keystore from ``security.dev_certs.write_dev_pki``
(``ssl.keystore.type=PEM``, an EC P-256 key); clients trust the CA and verify the broker's name.

Per round, for each listener (the order rotates from round to round, so load from other work and
the growing log land on every listener alike): a fresh topic of 16 partitions, one producer process
writes ``--mb`` MB of 1 KiB values with acks=1, round-robin over the partitions, then one consumer
process ``assign()``-ed all 16 reads them back from the beginning. Client processes are started with
multiprocessing's spawn (each a real OS process with its own librdkafka) and the clock starts when
the client is connected and released; bench.throughput's librdkafka settings (linger 5 ms into 1 MB
batches, no compression, no idempotence; consumers ``fetch.queue.backoff.ms=1``,
``fetch.wait.max.ms=100``) plus the listener's security settings. Each phase stops at ``--mb`` MB or
``--max-seconds``. Before the rounds every listener gets a small warm-up produce and consume.

Measured per phase: MB/s, the broker's CPU-seconds per GB (its process tree from ``/proc``, as
bench.scaling reads it), its cores (CPU-seconds over wall seconds) and the client process's
CPU-seconds per GB (``os.times()`` in the client: librdkafka's threads, where the client's TLS work
happens), and the KB per Produce or Fetch request (the broker's request counters from its /metrics,
read outside the CPU window). The report gives the median over the rounds and each secured listener's ratio to
PLAINTEXT, and the broker CPU-seconds per GB TLS adds (the difference to PLAINTEXT).

What TLS changes on the fetch path: kipling's PLAINTEXT fetch already copies the records out of the
segment file (``FileSlice.read_bytes``, a pread) and writes them to the socket; it uses no
``sendfile``. Over TLS the same bytes also go through OpenSSL in the broker process (uvloop's TLS
protocol: encrypt into a memory BIO, then write the ciphertext), so the consume rows' extra broker
CPU-seconds per GB is what encrypting the fetched bytes costs (Kafka, by contrast, loses its zero-copy
``sendfile`` over TLS).

The TLS version and cipher are read two ways: a Python ``ssl`` probe against the SSL port, and the
ServerHello that the broker sends librdkafka itself, seen by a relay between a probe client and each
TLS port (the ServerHello is in clear even in TLS 1.3). The machine (CPUs, model, whether it has
AES instructions) is recorded, since the figures mean nothing without it.

Run from the repository root: ``python -m bench.tls`` (``--mb``, ``--rounds``, ``--max-seconds``);
writes ``bench/results/tls.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import multiprocessing
import os
import queue
import socket
import ssl
import statistics
import threading
import time
from dataclasses import dataclass
from multiprocessing.synchronize import Barrier, Event
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka import libversion as librdkafka_version
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported without __all__
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from prometheus_client.parser import text_string_to_metric_families

from bench import write_results
from bench.broker_proc import KiplingProcess, free_port
from bench.scaling import figures, machine
from bench.throughput import (
    MB,
    POLL_EVERY,
    VALUE_SIZE,
    client_cpu,
    consumer_config,
    create_topic,
    producer_config,
)
from security.dev_certs import DevPki, write_dev_pki

LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
PARTITIONS = 16
ACKS = "1"
WARMUP_MB = 20
SASL_MECHANISM = "SCRAM-SHA-512"
SCRAM_ITERATIONS = 8192
SCRAM_USER = "bench"
SCRAM_PASSWORD = "bench-secret"
READY_TIMEOUT_S = 120.0
"""How long a phase waits for its client process to start and connect (spawn imports librdkafka)."""

TLS_VERSIONS = {0x0301: "TLSv1", 0x0302: "TLSv1.1", 0x0303: "TLSv1.2", 0x0304: "TLSv1.3"}
CIPHER_SUITES = {
    0x1301: "TLS_AES_128_GCM_SHA256",
    0x1302: "TLS_AES_256_GCM_SHA384",
    0x1303: "TLS_CHACHA20_POLY1305_SHA256",
    0xC02B: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    0xC02C: "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    0xCCA9: "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    0xC02F: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    0xC030: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
}
"""IANA names of the suites a ServerHello is likely to carry here (others are shown in hex)."""


@dataclass(frozen=True, slots=True)
class Job:
    """What the client process of a phase does: its librdkafka settings, topic and message quota."""

    client: tuple[tuple[str, Any], ...]
    """bootstrap.servers and the listener's security settings."""
    topic: str
    quota: int
    max_s: float


def produce_worker(job: Job, ready: Barrier, start: Event, results: Any) -> None:
    """The producer process: connect, wait for the start, produce its quota round-robin, flush."""
    try:
        value = os.urandom(VALUE_SIZE)
        errors: list[str] = []
        settings = dict(job.client)
        producer = Producer(
            {
                **producer_config(settings.pop("bootstrap.servers"), ACKS),
                **settings,
                "error_cb": lambda e: errors.append(str(e)),
            }
        )
        producer.list_topics(job.topic, timeout=10)  # connected (and authenticated) before the clock
        ready.wait(READY_TIMEOUT_S)
        start.wait(READY_TIMEOUT_S)
        cpu0, t0 = client_cpu(), time.perf_counter()
        sent = 0
        while sent < job.quota:
            try:
                producer.produce(job.topic, value, partition=sent % PARTITIONS)
            except BufferError:
                producer.poll(0.001)
                continue
            sent += 1
            if sent % POLL_EVERY == 0:
                producer.poll(0)
                if time.perf_counter() - t0 > job.max_s:
                    break
        left = producer.flush(60)
        elapsed, cpu = time.perf_counter() - t0, client_cpu() - cpu0
        results.put(
            {
                "index": 0,
                "messages": sent,
                "unacknowledged": left,
                "seconds": elapsed,
                "client_cpu_s": cpu,
                "errors": errors[:3],
            }
        )
    except BaseException as exc:  # the parent must hear of it, not wait for the barrier
        ready.abort()
        results.put({"index": 0, "failed": repr(exc)})


def consume_worker(job: Job, ready: Barrier, start: Event, results: Any) -> None:
    """The consumer process: connect, wait for the start, read all partitions from the beginning."""
    try:
        settings = dict(job.client)
        consumer = Consumer({**consumer_config(settings.pop("bootstrap.servers")), **settings})
        consumer.list_topics(job.topic, timeout=10)
        ready.wait(READY_TIMEOUT_S)
        start.wait(READY_TIMEOUT_S)
        cpu0, t0 = client_cpu(), time.perf_counter()
        consumer.assign([TopicPartition(job.topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got, errors = 0, list[str]()
        while got < job.quota and time.perf_counter() - t0 < job.max_s:
            messages = consumer.consume(num_messages=min(10_000, job.quota - got), timeout=0.5)
            bad = [m for m in messages if m.error() is not None]
            errors.extend(str(m.error()) for m in bad[:3])
            got += len(messages) - len(bad)
        elapsed, cpu = time.perf_counter() - t0, client_cpu() - cpu0
        results.put(
            {
                "index": 0,
                "messages": got,
                "quota": job.quota,
                "seconds": elapsed,
                "client_cpu_s": cpu,
                "errors": errors[:3],
            }
        )
        consumer.close()
    except BaseException as exc:
        ready.abort()
        results.put({"index": 0, "failed": repr(exc)})


def run_phase(broker: KiplingProcess, kind: str, job: Job) -> dict[str, Any]:
    """Run one client process; the clock and the broker's meters span its work, not its start-up."""
    ctx = multiprocessing.get_context("spawn")  # no librdkafka state or threads inherited from this one
    ready, start, results = ctx.Barrier(2), ctx.Event(), ctx.Queue()
    target = produce_worker if kind == "produce" else consume_worker
    worker = ctx.Process(target=target, args=(job, ready, start, results), daemon=True)
    worker.start()
    try:
        try:
            ready.wait(READY_TIMEOUT_S)
        except threading.BrokenBarrierError:
            with contextlib.suppress(queue.Empty):
                raise RuntimeError(f"{kind} client did not start: {results.get(timeout=5)}") from None
            raise RuntimeError(f"{kind} client did not start") from None
        requests0 = request_counts(broker)  # scraped outside the CPU window: it costs the broker too
        before, t0 = broker.tree_cpu(), time.perf_counter()
        start.set()
        try:
            report = results.get(timeout=job.max_s + 120)
        except queue.Empty:
            raise RuntimeError(f"{kind} client sent no report") from None
        elapsed, after = time.perf_counter() - t0, broker.tree_cpu()
        requests = {api: n - requests0.get(api, 0) for api, n in request_counts(broker).items()}
    finally:
        worker.join(30)
        if worker.is_alive():
            worker.kill()
            worker.join()
    if "failed" in report:
        raise RuntimeError(f"{kind} client failed: {report['failed']}")
    if report.get("unacknowledged"):
        raise RuntimeError(
            f"{report['unacknowledged']} messages unacknowledged after flush: {report['errors']}"
        )
    result = figures([report], elapsed, before, after)
    result["requests"] = {api: n for api, n in requests.items() if n}
    api = "Produce" if kind == "produce" else "Fetch"
    result["kb_per_request"] = result["mb"] * MB / 1000 / requests[api] if requests.get(api) else None
    if kind == "consume":
        result["complete"] = report["messages"] >= report["quota"]
    return result


REQUESTS = "kafka_network_requestmetrics_requests_total"


def request_counts(broker: KiplingProcess) -> dict[str, int]:
    """Requests the broker's client listeners have handled so far, by API, from its /metrics (the
    internal controller listener's metadata fetches left out)."""
    counts: dict[str, int] = {}
    for family in text_string_to_metric_families(broker.metrics_text()):
        for sample in family.samples:
            if sample.name == REQUESTS and sample.labels.get("listener") != "CONTROLLER":
                api = sample.labels["request"]
                counts[api] = counts.get(api, 0) + int(sample.value)
    return counts


def client_settings(listener: str, address: str, pki: DevPki) -> dict[str, Any]:
    """librdkafka settings for each way in (bootstrap and security only)."""
    settings: dict[str, Any] = {"bootstrap.servers": address}
    if listener in ("SSL", "SASL_SSL"):
        settings |= {"security.protocol": listener, "ssl.ca.location": str(pki.ca)}
    if listener == "SASL_SSL":
        settings |= {
            "sasl.mechanism": SASL_MECHANISM,
            "sasl.username": SCRAM_USER,
            "sasl.password": SCRAM_PASSWORD,
        }
    return settings


def broker_overrides(ports: dict[str, int], pki: DevPki) -> dict[str, str]:
    """Server properties for the three listeners, as tests/integration/test_security_clients.py sets them."""
    return {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "listener.security.protocol.map": (
            "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT"
        ),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.keystores["broker"]),
        "sasl.enabled.mechanisms": SASL_MECHANISM,
    }


def create_scram_user(bootstrap: str) -> None:
    """The SASL_SSL user, by AlterUserScramCredentials over the PLAINTEXT listener."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    upsert = UserScramCredentialUpsertion(
        SCRAM_USER,
        ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS),
        SCRAM_PASSWORD.encode(),
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=30)


def python_ssl_probe(port: int, pki: DevPki) -> dict[str, Any]:
    """What Python's ssl module (OpenSSL defaults) negotiates with the SSL port."""
    context = ssl.create_default_context(cafile=str(pki.ca))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        cipher = tls.cipher()
        return {
            "openssl": ssl.OPENSSL_VERSION,
            "version": tls.version(),
            "cipher": cipher[0] if cipher else None,
            "secret_bits": cipher[2] if cipher else None,
        }


def parse_server_hello(data: bytes) -> dict[str, Any] | None:
    """Version and cipher suite of a ServerHello at the start of ``data`` (None: not all of it yet).

    The record header (5 bytes) and handshake header (4) precede legacy_version (2), random (32),
    session id (1 + n), cipher_suite (2), compression (1) and the extensions, where TLS 1.3 names
    itself in supported_versions (0x002b); TLS 1.2 has it in legacy_version.
    """
    if len(data) < 5:
        return None
    if data[0] != 0x16:
        return {"error": f"first record is of type {data[0]}, not a handshake"}
    end = 5 + int.from_bytes(data[3:5], "big")
    if len(data) < end:
        return None
    body = data[9:end]
    if data[5] != 2:
        return {"error": f"first handshake message is of type {data[5]}, not a ServerHello"}
    version = int.from_bytes(body[0:2], "big")
    i = 34 + 1 + body[34]
    suite = int.from_bytes(body[i : i + 2], "big")
    i += 3
    if i + 2 <= len(body):
        stop, i = i + 2 + int.from_bytes(body[i : i + 2], "big"), i + 2
        while i + 4 <= stop:
            kind, size = int.from_bytes(body[i : i + 2], "big"), int.from_bytes(body[i + 2 : i + 4], "big")
            if kind == 0x002B and size == 2:
                version = int.from_bytes(body[i + 4 : i + 6], "big")
            i += 4 + size
    return {
        "version": TLS_VERSIONS.get(version, f"0x{version:04x}"),
        "cipher": CIPHER_SUITES.get(suite, f"0x{suite:04x}"),
    }


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def librdkafka_handshake(port: int, settings: dict[str, Any]) -> dict[str, Any]:
    """The ServerHello the broker sends librdkafka on a TLS port, seen by a relay in between.

    A probe producer with the listener's settings bootstraps through a loopback relay that forwards
    both ways and parses the first bytes coming from the broker. Its ``security`` debug log gives the
    OpenSSL librdkafka is linked with.
    """
    seen: dict[str, Any] = {}
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(15)
    relay_port = server.getsockname()[1]
    sockets: list[socket.socket] = [server]

    def pump(source: socket.socket, sink: socket.socket, inspect: bool) -> None:
        head = b""
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if inspect and not seen:
                    head += data
                    if (hello := parse_server_hello(head)) is not None:
                        seen.update(hello)
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)

    def relay() -> None:
        with contextlib.suppress(OSError):
            client, _ = server.accept()
            upstream = socket.create_connection(("127.0.0.1", port), timeout=15)
            client.settimeout(None)
            upstream.settimeout(None)
            sockets.extend([client, upstream])
            threading.Thread(target=pump, args=(client, upstream, False), daemon=True).start()
            pump(upstream, client, True)

    thread = threading.Thread(target=relay, daemon=True)
    thread.start()
    logger = logging.getLogger("bench.tls.librdkafka")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)  # librdkafka's lines come at DEBUG; the root logger would drop them
    collect = _Collect()
    logger.addHandler(collect)
    try:
        probe = Producer(
            {
                **settings,
                "bootstrap.servers": f"127.0.0.1:{relay_port}",
                "debug": "security",
                "logger": logger,
            }
        )
        probe.list_topics(timeout=15)
        probe.poll(0.2)  # delivers the queued log lines
        del probe
    finally:
        logger.removeHandler(collect)
        for s in sockets:
            with contextlib.suppress(OSError):
                s.close()
    linked = [
        line.split("OpenSSL version ", 1)[1].split(" (")[0]
        for line in collect.lines
        if "OpenSSL version " in line
    ]
    return {"librdkafka": librdkafka_version()[0], "openssl": linked[0] if linked else None, **seen}


def aes_instructions() -> list[str]:
    """The CPU flags that make AES-GCM cheap (aes, vaes, pclmulqdq, avx2), as /proc/cpuinfo lists them."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                return [
                    f for f in ("aes", "vaes", "pclmulqdq", "vpclmulqdq", "avx2", "avx512f") if f in flags
                ]
    except OSError:
        pass
    return []


def summarize(rounds: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per phase and listener: medians over the rounds, ratios to PLAINTEXT, extra broker CPU-s/GB."""
    keys = ("mb_per_s", "broker_cpu_s_per_gb", "broker_cores", "client_cpu_s_per_gb", "kb_per_request")
    summary: dict[str, dict[str, dict[str, Any]]] = {}
    for phase in ("produce", "consume"):
        summary[phase] = {}
        for listener in LISTENERS:
            runs = [r[listener][phase] for r in rounds]
            summary[phase][listener] = {
                "median": {k: statistics.median(run[k] or 0.0 for run in runs) for k in keys},
                "rounds": {k: [run[k] for run in runs] for k in keys},
            }
        base = summary[phase]["PLAINTEXT"]["median"]
        for listener in LISTENERS[1:]:
            median = summary[phase][listener]["median"]
            summary[phase][listener]["ratio_to_plaintext"] = {
                k: median[k] / base[k] if base[k] else None for k in keys
            }
            summary[phase][listener]["extra_broker_cpu_s_per_gb"] = (
                median["broker_cpu_s_per_gb"] - base["broker_cpu_s_per_gb"]
            )
    return summary


def print_table(summary: dict[str, dict[str, dict[str, Any]]]) -> None:
    header = (
        f"{'phase':<8} {'listener':<10} {'MB/s':>7} {'xPT':>6} {'broker CPU-s/GB':>16} {'xPT':>6} "
        f"{'+CPU-s/GB':>9} {'cores':>6} {'client CPU-s/GB':>16} {'xPT':>6} {'KB/req':>7}   MB/s per round"
    )
    print(header)
    print("-" * len(header))
    for phase, listeners in summary.items():
        for listener, res in listeners.items():
            m, r = res["median"], res.get("ratio_to_plaintext")
            extra = res.get("extra_broker_cpu_s_per_gb")
            per_round = ", ".join(f"{v:.0f}" for v in res["rounds"]["mb_per_s"])
            print(
                f"{phase:<8} {listener:<10} {m['mb_per_s']:>7.1f} {_ratio(r, 'mb_per_s'):>6} "
                f"{m['broker_cpu_s_per_gb']:>16.2f} {_ratio(r, 'broker_cpu_s_per_gb'):>6} "
                f"{'' if extra is None else f'{extra:+.2f}':>9} {m['broker_cores']:>6.2f} "
                f"{m['client_cpu_s_per_gb']:>16.2f} {_ratio(r, 'client_cpu_s_per_gb'):>6} "
                f"{m['kb_per_request']:>7,.0f}   {per_round}"
            )


def _ratio(ratios: dict[str, float | None] | None, key: str) -> str:
    value = None if ratios is None else ratios[key]
    return "-" if value is None else f"{value:.2f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--mb", type=float, default=300, help="megabytes per phase (produce, then consume it)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds over the three listeners")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="seconds per phase at most")
    args = parser.parse_args()
    host = machine() | {"aes_instructions": aes_instructions()}
    print(
        f"{host['cpu_count']} CPUs ({host['cpus_usable']} usable), {host['cpu_model']}, "
        f"AES instructions: {', '.join(host['aes_instructions']) or 'none'}"
    )
    broker = KiplingProcess()
    pki = write_dev_pki(broker.work_dir / "pki", ("broker",))
    ports = {"PLAINTEXT": broker.port, "SSL": free_port(), "SASL_SSL": free_port()}
    broker.overrides = broker_overrides(ports, pki)
    clients = {name: client_settings(name, f"127.0.0.1:{port}", pki) for name, port in ports.items()}
    rounds: list[dict[str, Any]] = []
    try:
        broker.start(timeout_s=120)
        create_scram_user(broker.bootstrap)
        tls: dict[str, Any] = {
            "broker_openssl": ssl.OPENSSL_VERSION,  # the broker runs on this interpreter (sys.executable)
            "python_ssl_probe": python_ssl_probe(ports["SSL"], pki),
            "librdkafka": {name: librdkafka_handshake(ports[name], clients[name]) for name in LISTENERS[1:]},
        }
        probe, seen = tls["python_ssl_probe"], tls["librdkafka"]["SSL"]
        print(
            f"TLS: Python ssl ({probe['openssl']}) negotiated {probe['version']} {probe['cipher']}; "
            f"librdkafka {seen['librdkafka']} ({seen['openssl']}) got a ServerHello for "
            f"{seen.get('version')} {seen.get('cipher')}"
        )
        for listener in LISTENERS:
            print(f"  warming up {listener}...", flush=True)
            topic = f"warmup-{listener.lower().replace('_', '-')}"
            create_topic(broker.bootstrap, topic, PARTITIONS)
            client = tuple(clients[listener].items())
            quota = int(WARMUP_MB * MB) // VALUE_SIZE
            written = run_phase(broker, "produce", Job(client, topic, quota, 30))
            run_phase(broker, "consume", Job(client, topic, written["messages"], 30))
        for n in range(args.rounds):
            order = LISTENERS[n % len(LISTENERS) :] + LISTENERS[: n % len(LISTENERS)]
            current: dict[str, Any] = {"order": list(order)}
            for listener in order:
                topic = f"tls-{listener.lower().replace('_', '-')}-{n}"
                create_topic(broker.bootstrap, topic, PARTITIONS)
                client = tuple(clients[listener].items())
                quota = int(args.mb * MB) // VALUE_SIZE
                print(f"  round {n + 1}: {listener} produce...", flush=True)
                produced = run_phase(broker, "produce", Job(client, topic, quota, args.max_seconds))
                print(f"  round {n + 1}: {listener} consume...", flush=True)
                consumed = run_phase(
                    broker, "consume", Job(client, topic, produced["messages"], args.max_seconds)
                )
                if not consumed["complete"]:
                    print(
                        f"  note: {listener} consumer read {consumed['messages']:,} "
                        f"of {produced['messages']:,}"
                    )
                current[listener] = {"topic": topic, "produce": produced, "consume": consumed}
            rounds.append(current)
    finally:
        broker.cleanup()
    summary = summarize(rounds)
    print(
        f"\n1 KiB values, acks={ACKS}, {PARTITIONS} partitions, one producer then one consumer process; "
        f"{args.mb:g} MB per phase, median of {args.rounds} round(s); one kipling broker process, disk "
        f"(default flush policy); SASL_SSL: {SASL_MECHANISM}; "
        f"TLS {seen.get('version')} {seen.get('cipher')}; "
        f"{host['cpu_count']} CPUs, {host['cpu_model']}"
    )
    print(
        "xPT: ratio to PLAINTEXT; +CPU-s/GB: broker CPU-seconds per GB added over PLAINTEXT; "
        "cores: broker CPU-seconds / wall seconds; KB/req: bytes per Produce or Fetch request"
    )
    print_table(summary)
    out = write_results(
        "tls",
        {
            "machine": host,
            "tls": tls,
            "listeners": list(LISTENERS),
            "sasl_mechanism": SASL_MECHANISM,
            "scram_iterations": SCRAM_ITERATIONS,
            "keystore": "security.dev_certs.write_dev_pki: EC P-256, PEM",
            "partitions": PARTITIONS,
            "value_bytes": VALUE_SIZE,
            "acks": ACKS,
            "mb_per_phase": args.mb,
            "max_seconds_per_phase": args.max_seconds,
            "kipling_storage": "disk, default flush policy (no fsync per append)",
            "client": "confluent-kafka (librdkafka), one OS process per phase (multiprocessing spawn)",
            "producer_config": {
                k: v for k, v in producer_config("", ACKS).items() if k != "bootstrap.servers"
            },
            "consumer_config": {k: v for k, v in consumer_config("").items() if k != "bootstrap.servers"},
            "summary": summary,
            "rounds": rounds,
        },
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    try:
        main()
    except KafkaException as exc:
        raise SystemExit(f"client error: {exc}") from exc
