"""The driver's launch of writers: once for each new attempt its shuffle's shard log shows, each on
a thread of its own (the provider's callback thread, which notifies the entry, must never wait on a launch)."""

from __future__ import annotations

import threading
from typing import Callable

from reference.shuffle.directory_keys import attempts_record
from spec.cluster.types import Entry
from spec.shuffle.coordination import ShuffleKey

Launcher = Callable[[ShuffleKey], None]
"""Starts the writers of a new attempt (runs on its own thread in the driver)."""


class AttemptLaunches:
    """Calls ``launcher`` once per attempt, in attempt order, as the attempt record announces them."""

    def __init__(self, launcher: Launcher) -> None:
        self._launcher = launcher
        self._launched = -1

    def on_entry(self, entry: Entry) -> None:
        """A shard-log entry was notified: launch the attempts it announces that were not launched yet."""
        if not entry.key.endswith("/attempt") or not entry.value:
            return
        shuffle_id = int(entry.key.split("/")[1])
        for attempt in range(self._launched + 1, int(attempts_record(entry)["next"])):
            self._launched = attempt
            threading.Thread(target=self._launcher, args=(ShuffleKey(shuffle_id, attempt),),
                             name=f"shuffle-launch-{shuffle_id}-{attempt}", daemon=True).start()
