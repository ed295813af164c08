"""A remote node run inside a network namespace by test_cluster_netns.py.

``python netns_watcher.py URL NODE SHARD``: joins SHARD, prints ``ready``, then one JSON line per
shard-log notification (``[[key, revision], ...]``) as it arrives; when stdin closes, prints
``{"downs": N, "reconnects": N}`` and exits.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Sequence

from reference.cluster.remote import Backoff, RemoteCluster
from spec.cluster.types import Entry, Membership, NodeId, ShardId


class Printer:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.downs = 0

    def _print(self, line: str) -> None:
        with self.lock:
            print(line, flush=True)

    def notify_shard_log_update(self, shard: ShardId, entries: Sequence[Entry]) -> None:
        self._print(json.dumps([[e.key, e.revision] for e in entries]))

    def cluster_down(self) -> None:
        with self.lock:
            self.downs += 1

    def update_membership(self, snapshot: Membership) -> None:
        pass

    def notify_gossip_update(self, entries: Sequence[Entry]) -> None:
        pass

    def cluster_heartbeat(self, ttl: float) -> None:
        pass


def main(url: str, node_id: str, shard: str) -> None:
    core = Printer()
    remote = RemoteCluster(url, timeout=1.0, backoff=Backoff(first=0.05, limit=0.5))
    node = remote.open_node(NodeId(node_id), core)
    node.join_cluster("watcher:1")
    node.join_shard(ShardId(shard))
    core._print("ready")
    sys.stdin.read()
    core._print(json.dumps({"downs": core.downs, "reconnects": node.reconnects}))
    remote.close()


if __name__ == "__main__":
    main(*sys.argv[1:4])
