"""Streaming shuffle runtime: raw loopback vs the runtime, latency, and PySpark partitionBy vs streaming_shuffle.

Figures (the last stdout line is one JSON object with --json). Every figure not named for a flush uses the
runtime's default options, so Spark's flush (default_flush: "idle" or "spark", TaskOptions.flush_when_idle):
  loopback_mb_s         raw TCP over loopback, one sender thread to one receiver, 32 KiB writes
  runtime_flush_rounds  [{idle, spark}, ...] the runtime, one writer to one reader, 32 KiB DATA payloads, checksums
                        on, MB/s with the idle flush and with Spark's flush (flush_when_idle=False: a buffer is sent
                        when it fills or at networkBufferMaxWaitTimeMs) alternated: FLUSH_ROUNDS rounds, each in a
                        rotated order; idle_vs_spark_flush_runtime_rounds each round's idle / Spark's
  runtime_idle_flush_mb_s, runtime_spark_flush_mb_s
                        the medians over those rounds; runtime_mb_s the default flush's
  encrypted_rounds      [{plaintext, ctr, gcm}, ...] runtime_mb_s's run in plaintext and over connections
                        authenticated with Spark's AuthEngine and encrypted with AES-CTR / AES-GCM
                        (spark.authenticate), alternated: ENCRYPTED_ROUNDS rounds of the three, each round
                        in a rotated order, so that drift over the process hits all three alike
  encrypted_vs_plaintext_rounds {ctr, gcm}
                        each round's cipher MB/s / the same round's plaintext MB/s
  encrypted_mb_s {ctr, gcm}, encrypted_vs_plaintext {ctr, gcm}
                        the medians over the rounds of each cipher's MB/s and of its per-round ratio (the
                        ratio is never taken against runtime_mb_s, a run from earlier in the process)
  writer_owns_input_mb_s {plaintext, ctr, gcm}
                        runtime_mb_s and encrypted_mb_s with a writer owning its input
                        (TaskOptions.writer_owns_input: no producer thread; issue 41), plaintext right after
                        the flush rounds, the ciphers after the cipher rounds; writer_owns_input_vs_serving_thread =
                        each / runtime_mb_s or encrypted_mb_s (the default would change if it stayed above 1
                        encrypted and at 1 or more in plaintext in three quiet runs)
  jvm_mb_s              the same through Spark 4.3.0's own handlers on Spark's transport (a JVM, warmed
                        up); runtime_vs_jvm = runtime_mb_s / jvm_mb_s
  records, pyspark_partitionby_s, streaming_shuffle_s, correct
                        the same (key, value) records shuffled by partitionBy and by streaming_shuffle
                        on local[4], both fully consumed; correct = identical partitions (as multisets)
  streaming_flush_rounds [{idle, spark}, ...]
                        after the other two, streaming_shuffle with the idle flush and with Spark's flush
                        (flushWhenIdle=true / false) alternated: FLUSH_ROUNDS rounds, each in a rotated order, seconds
  idle_vs_spark_flush_streaming_rounds
                        each round's Spark's-flush seconds / its idle-flush seconds (the idle flush's throughput
                        over Spark's flush's, side by side)
  streaming_shuffle_idle_flush_s, streaming_shuffle_spark_flush_s
                        the medians of the rounds' idle-flush and Spark's-flush seconds
  idle_vs_spark_flush {runtime, streaming}
                        the idle flush's throughput over Spark's flush's, side by side: the medians of
                        idle_vs_spark_flush_runtime_rounds and idle_vs_spark_flush_streaming_rounds. Below 0.95, the
                        idle flush costs more than 5% (issue 41's rule: it is the default only when it costs less)
  pyspark_partitionby_cpu_s, streaming_shuffle_cpu_s {jvm, python}
                        CPU seconds of Spark's JVM and of its Python workers during each of the two
  spark_flush_latency_ms {p50, p99}
                        write-to-read latency of records written at a steady moderate rate (500/s), with Spark's
                        flush (p50 about half of max wait, p99 about max wait)
  idle_flush_latency_ms {p50, p99}
                        the same with the idle flush (a buffer is sent once the producer has handed over everything
                        it had)
  latency_ms {p50, p99} the default flush's of the two
  machine_us            per-call cost of the sans-IO machines alone: the writer per small (24-byte)
                        record, and per 32 KiB DATA message on each side (checksums on)
  max_wait_ms           the configured networkBufferMaxWaitTimeMs
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import statistics
import struct
import sys
import threading
import time
import zlib
from dataclasses import replace
from typing import Any, Callable, Final, Iterable, Iterator

from benchmarks.procstat import cpu_seconds, jvm_pid
from benchmarks.rounds import alternated
from reference.shuffle.cluster_directory import DriverDirectory, DirectoryAddress
from reference.shuffle.local import run_local_shuffle
from reference.shuffle.reader_task import ReaderTask
from reference.shuffle.task import TaskOptions
from reference.shuffle.writer_task import WriterTask
from spec.auth import AuthConfig, CipherName
from spec.shuffle.codec import encode_frame
from spec.shuffle.coordination import Role, ShuffleKey
from spec.shuffle.framing import FrameDecoder, max_frame_from_writer
from spec.shuffle.messages import CreditMessage
from spec.shuffle.reader import ReaderMachine
from spec.shuffle.records import RECORD_LENGTH
from spec.shuffle.settings import ShuffleSettings
from spec.shuffle.steps import Deliver, Send
from spec.shuffle.writer import WriterMachine

MB = 1 << 20
CHUNK = 32 * 1024
SPARK_FLUSH = TaskOptions(flush_when_idle=False)
"""Spark's flush rule (a buffer waits to fill or for networkBufferMaxWaitTimeMs)."""
IDLE_FLUSH = TaskOptions(flush_when_idle=True)
"""The idle flush (a buffer is sent as soon as the producer has handed over everything it had), an option."""
FLUSHES: Final = {"idle": IDLE_FLUSH, "spark": SPARK_FLUSH}
DEFAULT_FLUSH: Final = "idle" if TaskOptions().flush_when_idle else "spark"
OWNS_INPUT = TaskOptions(writer_owns_input=True)
"""The writer's task thread drives its machine, a standby serves while the input blocks (issue 41)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a few seconds per figure)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line at the end")
    parser.add_argument("--records", type=int, default=None, help="records for the PySpark comparison")


def loopback_mb_s(total: int) -> float:
    """One thread sends ``total`` bytes in 32 KiB writes, another receives them."""
    server = socket.create_server(("127.0.0.1", 0))
    received = [0]

    def receive() -> None:
        conn, _ = server.accept()
        buffer = bytearray(256 * 1024)
        with conn:
            while True:
                n = conn.recv_into(buffer)
                if not n:
                    break
                received[0] += n

    thread = threading.Thread(target=receive)
    thread.start()
    payload = os.urandom(CHUNK)
    with socket.create_connection(server.getsockname()) as sender:
        sender.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start = time.perf_counter()
        for _ in range(total // CHUNK):
            sender.sendall(payload)
        sender.shutdown(socket.SHUT_WR)
        thread.join()
        elapsed = time.perf_counter() - start
    server.close()
    assert received[0] == total // CHUNK * CHUNK
    return received[0] / MB / elapsed


JVM_THROUGHPUT_OPTIONS = ("-XX:TieredStopAtLevel=4", "-Xmx1g")
"""The full JIT (the bridge's default stops at C1 for fast start-up) and room for Netty's buffers."""


def jvm_mb_s(total: int) -> float:
    """Spark 4.3.0's own handlers on Spark's transport, one writer to one reader, 32 KiB DATA, checksums on
    (``conformance/shuffle/jvm/SparkShuffleThroughput.java``), after as many messages again to warm the JVM up."""
    from conformance.shuffle.jvm_bridge import JsonLinesProcess

    count = total // CHUNK
    with JsonLinesProcess("SparkShuffleThroughput", jvm_options=JVM_THROUGHPUT_OPTIONS) as jvm:
        answer = jvm.request({"op": "run", "messages": count, "warmup": count, "payload": CHUNK}, timeout=600)
    if "mb_s" not in answer:
        raise RuntimeError(f"Spark's shuffle run failed: {answer.get('message', answer)}")
    return float(answer["mb_s"])


def _writer_process(shard: DirectoryAddress, count: int, settings: ShuffleSettings, options: TaskOptions) -> None:
    """The writer task of ``runtime_mb_s``, in its own process as a Spark task would be."""
    record = os.urandom(CHUNK - RECORD_LENGTH.size)
    client = shard.open(Role.WRITER, 0)
    try:
        WriterTask(ShuffleKey(0, 0), 0, 1, settings, client, options).run((0, record) for _ in range(count))
    finally:
        client.close()


def runtime_mb_s(total: int, options: TaskOptions = TaskOptions()) -> float:
    """One writer task (another process) to one reader task; each record fills one 32 KiB DATA payload.

    Timed from the first record read to the last, so process start-up is not counted.
    """
    count = total // CHUNK
    settings = ShuffleSettings(checksum_enabled=True, network_buffer_size=CHUNK)
    directory = DriverDirectory()
    shard = directory.add_shuffle(0, lambda key: None)
    writer = multiprocessing.get_context("spawn").Process(target=_writer_process,
                                                          args=(shard, count, settings, options))
    writer.start()
    client = shard.open(Role.READER, 0)
    try:
        records = ReaderTask(ShuffleKey(0, 0), 0, [0], settings, client, options).records()
        first = next(records)
        start = time.perf_counter()
        received = len(first) + sum(len(r) for r in records)
        elapsed = time.perf_counter() - start
    finally:
        client.close()
        writer.join(60)
        directory.stop()
    assert received == count * (CHUNK - RECORD_LENGTH.size), received
    return (count - 1) * CHUNK / MB / elapsed


ENCRYPTED_ROUNDS = 3
"""Rounds of plaintext, CTR and GCM runs alternated for ``encrypted_vs_plaintext``."""

FLUSH_ROUNDS = 4
"""Rounds of streaming_shuffle with the idle flush and with Spark's flush, alternated for ``idle_vs_spark_flush``."""


def encrypted_rounds(total: int, ciphers: dict[str, AuthConfig], rounds: int = ENCRYPTED_ROUNDS) -> dict[str, Any]:
    """Plaintext and each cipher's ``runtime_mb_s`` alternated for ``rounds`` rounds, each ratio taken within
    its round; the figures are the medians over the rounds."""
    options = {"plaintext": TaskOptions(), **{name: TaskOptions(auth=auth) for name, auth in ciphers.items()}}

    def run(variant: TaskOptions) -> Callable[[], float]:
        return lambda: round(runtime_mb_s(total, variant), 1)

    def show(row: dict[str, float]) -> None:
        print("encrypted round " + ", ".join(f"{name} {mb_s:.1f}" for name, mb_s in row.items()) + " MB/s "
              "(" + ", ".join(f"{name} {row[name] / row['plaintext']:.2f}" for name in ciphers)
              + " of plaintext)", flush=True)

    table = alternated({name: run(variant) for name, variant in options.items()}, rounds, show)
    ratios = {name: [round(row[name] / row["plaintext"], 2) for row in table] for name in ciphers}
    return {"encrypted_rounds": table, "encrypted_vs_plaintext_rounds": ratios,
            "encrypted_mb_s": {name: round(statistics.median(row[name] for row in table), 1) for name in ciphers},
            "encrypted_vs_plaintext": {name: round(statistics.median(values), 2) for name, values in ratios.items()}}


def runtime_flush_rounds(total: int) -> dict[str, Any]:
    """``runtime_mb_s`` with the idle flush and with Spark's flush alternated for ``FLUSH_ROUNDS`` rounds; each
    figure the median over the rounds, the ratio the median of the per-round ratios."""
    table = alternated({"idle": lambda: round(runtime_mb_s(total, IDLE_FLUSH), 1),
                        "spark": lambda: round(runtime_mb_s(total, SPARK_FLUSH), 1)}, FLUSH_ROUNDS,
                       lambda row: print(f"flush round     runtime idle {row['idle']:.1f} MB/s, Spark's "
                                         f"{row['spark']:.1f} MB/s", flush=True))
    ratios = [round(row["idle"] / row["spark"], 2) for row in table]
    medians = {flush: round(statistics.median(row[flush] for row in table), 1) for flush in FLUSHES}
    return {"runtime_flush_rounds": table, "idle_vs_spark_flush_runtime_rounds": ratios,
            "runtime_mb_s": medians[DEFAULT_FLUSH], "runtime_idle_flush_mb_s": medians["idle"],
            "runtime_spark_flush_mb_s": medians["spark"],
            "idle_vs_spark_flush_runtime": round(statistics.median(ratios), 2)}


def _timed_us(run: Callable[[], int], repeats: int = 3) -> float:
    """Best of ``repeats`` runs of ``run`` (which returns how many units it did), in µs per unit."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        units = run()
        best = min(best, (time.perf_counter() - start) / units * 1e6)
    return best


def _bound_writer(settings: ShuffleSettings) -> WriterMachine:
    writer = WriterMachine(0, 0, 1, settings, 0.0)
    writer.received("reader", CreditMessage(writer_id=0, reader_id=0), 0.0)
    return writer


def _drive_writer(writer: WriterMachine, record: bytes, count: int, sent: Callable[[Send], None]) -> int:
    """Write ``count`` records, reporting every DATA as written at once (as a free socket would)."""
    for _ in range(count):
        for send in writer.write(0, record, 0.0).sends:
            sent(send)
            writer.send_completed(0, send.message.seq, 0.0)
    return count


def machine_us(small_records: int, messages: int) -> dict[str, float]:
    """What the machines cost per input, without sockets: the share of the runtime they bound."""
    big = ShuffleSettings(checksum_enabled=True, network_buffer_size=CHUNK)
    record = os.urandom(CHUNK - RECORD_LENGTH.size)
    frames: list[bytes] = []
    _drive_writer(_bound_writer(big), record, messages, lambda send: frames.append(encode_frame(send.message)))
    wire = b"".join(frames)

    def read() -> int:
        reader = ReaderMachine(0, 0, [0], big, 0.0)
        reader.connected(0, 0.0)
        decoder = FrameDecoder(max_frame_from_writer(big), lent=True)  # as the runtime's connections decode
        view = memoryview(wire)
        delivered = 0
        for start in range(0, len(wire), 256 * 1024):
            for message in decoder.feed_views(view[start:start + 256 * 1024]):
                for event in reader.received(0, message, 0.0).events:
                    if isinstance(event, Deliver):
                        delivered += 1
                        reader.release(0, event.seq, 0.0)
        return delivered

    small = ShuffleSettings(checksum_enabled=True)
    return {
        "writer_per_small_record": round(_timed_us(
            lambda: _drive_writer(_bound_writer(small), bytes(24), small_records, lambda send: None)), 2),
        "writer_per_32k_message": round(_timed_us(
            lambda: _drive_writer(_bound_writer(big), record, messages, lambda send: None)), 2),
        "reader_per_32k_message": round(_timed_us(read), 2),
    }


def latency_ms(rate: float, duration_s: float, settings: ShuffleSettings,
               options: TaskOptions = TaskOptions()) -> list[float]:
    """Records stamped with their write time, written at ``rate`` per second; latency seen by the reader."""
    stamp = struct.Struct(">d")
    count = int(rate * duration_s)

    def produce() -> Iterator[tuple[int, bytes]]:
        start = time.monotonic()
        for i in range(count):
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            yield 0, stamp.pack(time.monotonic()) + bytes(24)

    latencies: list[float] = []

    def consume(reader_id: int, records: Iterable[bytes]) -> list[bytes]:
        for record in records:
            latencies.append((time.monotonic() - stamp.unpack_from(record)[0]) * 1000.0)
        return []

    run_local_shuffle([produce()], 1, settings, options, consume=consume, timeout_s=600)
    return latencies


def _fingerprint(rows: Iterable[Any]) -> list[tuple[int, int]]:
    """Count and an order-independent checksum of a partition (consumes it fully)."""
    count = 0
    total = 0
    for row in rows:
        count += 1
        total += zlib.crc32(repr(row).encode())
    return [(count, total)]


def spark_comparison(records: int) -> dict[str, Any]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from reference.spark import StreamingShuffle
    from reference.spark.plan import FLUSH_WHEN_IDLE_KEY

    spark = (SparkSession.builder.master("local[4]").appName("shuffle-benchmark")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    jvm = jvm_pid(spark.sparkContext)
    try:
        with StreamingShuffle(spark) as shuffle:
            sc = spark.sparkContext
            rdd = sc.parallelize(range(records), 2).map(lambda i: (i % 1009, i)).cache()
            rdd.count()
            # Warm both paths once (Python workers, imports), then time one run of each.
            shuffle.shuffle(rdd, 2).mapPartitions(_fingerprint).collect()
            rdd.partitionBy(2).mapPartitions(_fingerprint).collect()
            cpu, start = cpu_seconds(jvm), time.perf_counter()
            theirs = rdd.partitionBy(2).mapPartitions(_fingerprint).collect()
            partition_by_s, partition_by_cpu = time.perf_counter() - start, cpu_seconds(jvm) - cpu
            cpu, start = cpu_seconds(jvm), time.perf_counter()
            mine = shuffle.shuffle(rdd, 2).mapPartitions(_fingerprint).collect()
            streaming_s, streaming_cpu = time.perf_counter() - start, cpu_seconds(jvm) - cpu
            results: list[list[tuple[int, int]]] = []

            def flushed(when_idle: str) -> Callable[[], float]:
                def run() -> float:
                    start = time.perf_counter()
                    results.append(shuffle.shuffle(rdd, 2, conf={FLUSH_WHEN_IDLE_KEY: when_idle}).mapPartitions(
                        _fingerprint).collect())
                    return round(time.perf_counter() - start, 3)
                return run

            flush_rounds = alternated(
                {"idle": flushed("true"), "spark": flushed("false")}, FLUSH_ROUNDS,
                lambda row: print(f"flush round     idle {row['idle']:.3f} s, Spark's {row['spark']:.3f} s",
                                  flush=True))
        ratios = [round(row["spark"] / row["idle"], 2) for row in flush_rounds]
        return {"records": records, "pyspark_partitionby_s": round(partition_by_s, 3),
                "streaming_shuffle_s": round(streaming_s, 3),
                "correct": all(result == theirs for result in [mine, *results]),
                "streaming_flush_rounds": flush_rounds, "idle_vs_spark_flush_streaming_rounds": ratios,
                "streaming_shuffle_idle_flush_s": round(statistics.median(row["idle"] for row in flush_rounds), 3),
                "streaming_shuffle_spark_flush_s": round(statistics.median(row["spark"] for row in flush_rounds), 3),
                "idle_vs_spark_flush_streaming": round(statistics.median(ratios), 2),
                "pyspark_partitionby_cpu_s": partition_by_cpu._asdict(),
                "streaming_shuffle_cpu_s": streaming_cpu._asdict()}
    finally:
        spark.stop()


def main(args: argparse.Namespace) -> int:
    quick = bool(args.quick)
    total = (64 if quick else 512) * MB
    settings = ShuffleSettings()
    figures: dict[str, Any] = {"default_flush": DEFAULT_FLUSH}
    figures["loopback_mb_s"] = round(loopback_mb_s(total), 1)
    print(f"loopback        {figures['loopback_mb_s']:10.1f} MB/s", flush=True)
    figures["machine_us"] = machine_us(50_000 if quick else 200_000, 1_000 if quick else 5_000)
    print("machine µs      " + ", ".join(f"{k} {v}" for k, v in figures["machine_us"].items()), flush=True)
    owned: dict[str, float] = {}
    figures.update(runtime_flush_rounds(total))
    owned["plaintext"] = round(runtime_mb_s(total, OWNS_INPUT), 1)
    figures["runtime_vs_loopback"] = round(figures["runtime_mb_s"] / figures["loopback_mb_s"], 2)
    print(f"runtime         {figures['runtime_mb_s']:10.1f} MB/s  ({figures['runtime_vs_loopback']:.2f} of loopback)",
          flush=True)
    for flush in FLUSHES:
        mb_s = figures[f"runtime_{flush}_flush_mb_s"]
        print(f"runtime, {flush} flush {mb_s:10.1f} MB/s  ({mb_s / figures['loopback_mb_s']:.2f} of loopback)", flush=True)
    ciphers = {cipher.name.lower(): AuthConfig(os.urandom(32).hex().encode(), "benchmark", cipher)
               for cipher in CipherName}
    figures.update(encrypted_rounds(total, ciphers))
    for name, auth in ciphers.items():
        owned[name] = round(runtime_mb_s(total, replace(OWNS_INPUT, auth=auth)), 1)
    figures["writer_owns_input_mb_s"] = owned
    serving_thread = {"plaintext": figures["runtime_mb_s"], **figures["encrypted_mb_s"]}
    figures["writer_owns_input_vs_serving_thread"] = {
        name: round(mb_s / serving_thread[name], 2) for name, mb_s in owned.items()}
    print("writer owning its input " + ", ".join(
        f"{name} {mb_s:.1f} MB/s ({figures['writer_owns_input_vs_serving_thread'][name]:.2f} of the serving thread's)"
        for name, mb_s in owned.items()), flush=True)
    figures["jvm_mb_s"] = round(jvm_mb_s(total), 1)
    figures["runtime_vs_jvm"] = round(figures["runtime_mb_s"] / figures["jvm_mb_s"], 2)
    print(f"spark jvm       {figures['jvm_mb_s']:10.1f} MB/s  (runtime {figures['runtime_vs_jvm']:.2f}x of it)",
          flush=True)
    figures["max_wait_ms"] = settings.network_buffer_max_wait_time_ms
    for flush, options in FLUSHES.items():
        cuts = statistics.quantiles(latency_ms(500.0, 2.0 if quick else 6.0, settings, options), n=100)
        figures[f"{flush}_flush_latency_ms"] = {"p50": round(cuts[49], 2), "p99": round(cuts[98], 2)}
        print(f"latency, {flush} flush p50 {cuts[49]:.2f} ms, p99 {cuts[98]:.2f} ms (max wait {figures['max_wait_ms']} ms)",
              flush=True)
    figures["latency_ms"] = figures[f"{DEFAULT_FLUSH}_flush_latency_ms"]
    figures.update(spark_comparison(args.records or (100_000 if quick else 1_000_000)))
    print(f"partitionBy     {figures['pyspark_partitionby_s']:10.3f} s for {figures['records']} records "
          f"(CPU s: {figures['pyspark_partitionby_cpu_s']})", flush=True)
    print(f"streaming       {figures['streaming_shuffle_s']:10.3f} s (CPU s: {figures['streaming_shuffle_cpu_s']}; "
          f"correct: {figures['correct']})", flush=True)
    for flush in FLUSHES:
        print(f"streaming, {flush} flush {figures[f'streaming_shuffle_{flush}_flush_s']:10.3f} s (median of the flush "
              "rounds)", flush=True)
    figures["idle_vs_spark_flush"] = {
        "runtime": figures.pop("idle_vs_spark_flush_runtime"),
        "streaming": figures.pop("idle_vs_spark_flush_streaming")}
    figures["goals"] = {
        "runtime_at_least_half_loopback": figures["runtime_mb_s"] >= figures["loopback_mb_s"] / 2,
        "runtime_at_least_three_times_jvm": figures["runtime_vs_jvm"] >= 3,
        "encrypted_at_least_0_7_of_plaintext": min(figures["encrypted_vs_plaintext"].values()) >= 0.7,
        "streaming_at_most_0_7_of_partitionby":
            figures["streaming_shuffle_s"] <= 0.7 * figures["pyspark_partitionby_s"],
        "p99_within_max_wait_plus_10ms": figures["latency_ms"]["p99"] <= figures["max_wait_ms"] + 10,
        "idle_flush_p50_within_5ms_p99_within_15ms":
            figures["idle_flush_latency_ms"]["p50"] <= 5 and figures["idle_flush_latency_ms"]["p99"] <= 15,
        "idle_flush_costs_under_5_percent": min(figures["idle_vs_spark_flush"].values()) >= 0.95,
        "writer_at_most_1_5_us_per_small_record": figures["machine_us"]["writer_per_small_record"] <= 1.5,
    }
    if args.json:
        print(json.dumps(figures))
    return 0 if figures["correct"] else 1
