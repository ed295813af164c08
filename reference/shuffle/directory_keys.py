"""Where the shuffle's directory keeps what: the keys of its shard's log.

====================================  ===================================================================
shard-log key                         value
====================================  ===================================================================
``shuffle/<id>/attempt``              JSON ``{"next", "open": [{"attempt", "stage", "readers"}]}``: the runs not yet
                                      decided; a reader's join is a CAS on it, and so is the driver's decision
``shuffle/<id>/<attempt>/served``     JSON list: the readers the run serves, fixed by the driver's decision
``shuffle/<id>/<attempt>/writer/<w>`` JSON ``{"executor", "host", "port", "node"}``; empty = unregistered
``shuffle/<id>/<attempt>/reader/<r>`` JSON ``{"node", "stage"}``: a reader that joined the attempt;
                                      ``"done": true`` added once it reads no more (all its data, or its
                                      consumer stopped early)
``shuffle/<id>/<attempt>/failure``    the attempt's first failure (an insert: the first report wins)
``shuffle/<id>/<attempt>/retired``    present once the driver retired the attempt (nobody reads it)
====================================  ===================================================================
"""

from __future__ import annotations

import json
from typing import Any

from spec.cluster.types import Entry
from spec.shuffle.coordination import ShuffleKey


def attempt_key(shuffle_id: int) -> str:
    return f"shuffle/{shuffle_id}/attempt"


def _in_attempt(key: ShuffleKey, leaf: str) -> str:
    """Every key of one attempt lives under ``shuffle/<id>/<attempt>/``."""
    return f"shuffle/{key.shuffle_id}/{key.attempt}/{leaf}"


def writers_prefix(key: ShuffleKey) -> str:
    return _in_attempt(key, "writer/")


def readers_prefix(key: ShuffleKey) -> str:
    return _in_attempt(key, "reader/")


def failure_key(key: ShuffleKey) -> str:
    return _in_attempt(key, "failure")


def retired_key(key: ShuffleKey) -> str:
    return _in_attempt(key, "retired")


def served_key(key: ShuffleKey) -> str:
    return _in_attempt(key, "served")


def attempts_record(entry: Entry | None) -> dict[str, Any]:
    """The value of ``attempt_key``: the next attempt number and the open (undecided) attempts."""
    return json.loads(entry.value) if entry is not None and entry.value else {"next": 0, "open": []}
