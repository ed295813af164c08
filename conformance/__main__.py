"""``python -m conformance``: vectors, live cases and tools for implementers."""

from __future__ import annotations

import sys

from streamwire.cli import dispatch
from streamwire.extras import exit_without

COMMANDS = {
    "run": ("conformance.runner", "run a live conformance suite against a target"),
    "vectors": ("conformance.vectors_cli", "check golden vectors against a target"),
    "codec": ("conformance.shuffle.codec_cli", "encode or decode streaming-shuffle messages (hex <-> JSON)"),
    "monitor": ("conformance.shuffle.monitor", "watch streaming-shuffle traffic (live or a pcap) and judge it by the spec"),
    "sensitivity": ("conformance.sensitivity", "plant catalogued bugs in a copy of the reference and count those a suite catches"),
    "sync-trace": ("conformance.sync.trace", "replay a sync-writer trace and print the sequence numbers"),
}

if __name__ == "__main__":
    exit_without("conformance", "python -m conformance")
    sys.exit(dispatch("python -m conformance", __doc__, COMMANDS, sys.argv[1:]))
