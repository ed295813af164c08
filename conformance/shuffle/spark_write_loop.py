"""Spark 4.3.0's ``StreamingShuffleWriter.write`` transcribed, driving the ``spark-jvm`` adapter's writer.

The adapter runs Spark's handlers and ``ShardState.send`` (sequence numbers, the pre-bind queue). What
decides *when* a DATA is sent, and when the producer waits, is ``StreamingShuffleWriter.write`` and
``newBuffer``, which need a live task, so they are transcribed here from the 4.3.0 bytecode:

- per record (``$anonfun$write$4``): take the reader's buffer, or ``newBuffer()``; append the record; send
  the buffer once it holds ``BUFFER_SIZE * 9 / 10`` bytes or more, else put it back;
- ``newBuffer``: ``tryAcquire(BUFFER_SIZE)`` on a semaphore of ``MAX_BUFFER_BYTES = max(R * BUFFER_SIZE * 2,
  writerMaxMemory - R * (SEND_BUFFER_SIZE + RECV_BUFFER_SIZE))`` permits; when that fails, every reader's
  buffer is sent (``shards.foreach(_.send())``), then it retries every 10 ms until the permits are there;
- a buffer's permits return when the socket write of its DATA completed (``ShardState.$anonfun$send$3``),
  here on the adapter's ``written`` event for that DATA;
- at the end of input every reader's buffer is sent, then its TERMINATION_CONTROL (``ShardState.close``).

Left out: the age rule (a buffer older than ``networkBufferMaxWaitTimeMs`` is sent) and its background
thread; the cases that judge DATA boundaries set that wait far beyond their run. The loop runs on its
own thread, so a blocked writer waits as Spark's task thread does while the case goes on.
"""

from __future__ import annotations

import threading
from typing import Final, Mapping, Sequence

from conformance.shuffle.jvm_bridge import BridgeError
from conformance.shuffle.spark_jvm import SparkWriter
from spec.shuffle.records import encode_record
from spec.shuffle.settings import ShuffleSettings

SEND_BUFFER_SIZE: Final = 32 * 1024
RECV_BUFFER_SIZE: Final = 512
"""The socket buffers StreamingShuffleWriter sets on every reader's channel (counted against writerMaxMemory)."""
ACQUIRE_RETRY_S: Final = 0.01
"""newBuffer's ``tryAcquire(BUFFER_SIZE, 10, MILLISECONDS)`` loop."""


class SparkWriteLoop:
    """One writer task's input, written through ``peer`` as Spark's write loop would, on its own thread."""

    def __init__(self, peer: SparkWriter, records: Mapping[int, Sequence[bytes]], num_readers: int,
                 settings: ShuffleSettings) -> None:
        self.peer = peer
        self.buffer_size = settings.network_buffer_size
        self.budget = max(num_readers * self.buffer_size * 2,
                          settings.writer_max_memory - num_readers * (SEND_BUFFER_SIZE + RECV_BUFFER_SIZE))
        self.acquired = 0
        self.buffers: list[bytearray | None] = [None] * num_readers
        self.input = [(r, record) for r in range(num_readers) for record in records.get(r, ())]
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"spark-write-loop-{peer.peer_id}", daemon=True)

    def start(self) -> SparkWriteLoop:
        self.thread.start()
        return self

    def stop(self) -> None:
        """The case is over: a loop still waiting for permits gives up."""
        self.stopped.set()
        self.thread.join(timeout=5.0)

    def _run(self) -> None:
        try:
            for reader_id, record in self.input:
                buffer = self.buffers[reader_id] or self._new_buffer()
                self.buffers[reader_id] = None
                if buffer is None:
                    return
                buffer += encode_record(record)
                if len(buffer) >= self.buffer_size * 9 // 10:
                    self.peer.send_data(reader_id, bytes(buffer))
                else:
                    self.buffers[reader_id] = buffer
            for reader_id in range(len(self.buffers)):
                self._send(reader_id)
                self.peer.terminate(reader_id)
        except BridgeError:
            return  # the peer was shut down under the loop: the case is over

    def _send(self, reader_id: int) -> None:
        buffer, self.buffers[reader_id] = self.buffers[reader_id], None
        if buffer:
            self.peer.send_data(reader_id, bytes(buffer))

    def _new_buffer(self) -> bytearray | None:
        """A buffer holding BUFFER_SIZE permits; None when the case ended while waiting for them."""
        if not self._try_acquire():
            for reader_id in range(len(self.buffers)):
                self._send(reader_id)
            while not self._try_acquire():
                if self.stopped.wait(ACQUIRE_RETRY_S):
                    return None
        return bytearray()

    def _try_acquire(self) -> bool:
        returned = sum(1 for e in self.peer.events.snapshot()
                       if e.get("event") == "written" and str(e.get("type", "")).startswith("DATA"))
        if self.budget - self.acquired + returned * self.buffer_size < self.buffer_size:
            return False
        self.acquired += self.buffer_size
        return True
