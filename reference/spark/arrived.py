"""Batches of what has already arrived from an iterator, so per-item costs are paid once per batch
without any item waiting for a later one.

PySpark hands a partition's function one flat iterator, which cannot say whether its next item is
ready. A puller thread takes items as the source yields them into a bounded buffer; each batch is
everything pulled since the last batch (at least one item). While the source is waiting for input
the batch holds what came before, so a slow source gives batches of one and a fast one gives large
batches.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Generator, Iterable, TypeVar

T = TypeVar("T")


def arrived_batches(items: Iterable[T], limit: int = 4096) -> Generator[list[T], None, None]:
    """Every item of ``items`` in order, in batches of the items pulled so far (at most ``limit``
    are held); an exception of the source is raised here after the items before it. Closed early,
    it returns once the puller has stopped (after the item it is waiting for, if any)."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    pulled: deque[T] = deque()
    changed = threading.Condition()
    ended: list[BaseException | None] = []
    stop = threading.Event()

    def pull() -> None:
        outcome: BaseException | None = None
        try:
            for item in items:
                with changed:
                    while len(pulled) >= limit and not stop.is_set():
                        changed.wait()
                    if stop.is_set():
                        return
                    pulled.append(item)
                    if len(pulled) == 1:
                        changed.notify_all()
        except BaseException as error:  # handed to the consumer, which raises it
            outcome = error
        finally:
            with changed:
                ended.append(outcome)
                changed.notify_all()

    puller = threading.Thread(target=pull, name="arrived-batches", daemon=True)
    puller.start()
    try:
        while True:
            with changed:
                while not pulled and not ended:
                    changed.wait()
                if not pulled:
                    break
                batch = list(pulled)
                pulled.clear()
                changed.notify_all()
            yield batch
        error = ended[0]
        if error is not None:
            raise error
    finally:
        with changed:
            stop.set()
            changed.notify_all()
        puller.join()  # nobody reads ``items`` once this returns (a Python worker reads its next task there)
