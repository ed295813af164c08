"""Bugs planted by ``python -m conformance sensitivity --suite cluster``, one at a time.

Realistic mistakes in this project's cluster service (the spec modules its runtime drives and the
runtime itself, in a private copy), judged through the suite's own ``exec:`` target exactly as an
outside implementation would be: the service embedded in its harness
(``python -m conformance.cluster.reference_target``), which declares the ``clock``, ``restart``,
``durable`` and ``held`` capabilities on its own channel, so the failure-timing, durability and
what-it-holds cases run.
Entries with ``equivalent`` set cannot be told from the correct code by any case; the reason is the
argument (docs/conformance.md, "Sensitivity").
"""

from __future__ import annotations

from pathlib import Path

from conformance.mutation import Mutant, exec_target_in


def target_for(copy: Path) -> str:
    """The copy's cluster service, in the copy's harness."""
    return exec_target_in(copy, "-m conformance.cluster.reference_target")


def _b(name: str, file: str, search: str, replace: str, description: str, equivalent: str = "") -> Mutant:
    """``file`` under spec/cluster/, or a path from the tree's root."""
    return Mutant(name, file if "/" in file else f"spec/cluster/{file}", search, replace, description, equivalent)


BUGS: tuple[Mutant, ...] = (
    _b('cas-presence-only', 'model.py',
       'if actual != op.expected:',
       'if (actual is None) != (op.expected is None):',
       'CAS checks only that the key exists, not that the expected revision is current'),
    _b('cas-future-revision', 'model.py',
       'if actual != op.expected:',
       'if (actual is None) != (op.expected is None) or (actual or 0) > (op.expected or 0):',
       'CAS accepts an expected revision newer than the current one'),
    _b('model-set-state-always-commits', 'model.py',
       'if member is None or member.state is state:',
       'if member is None:',
       'a health verdict that changes nothing still commits a revision (and notifies every member)'),
    _b('model-shard-gossip-to-all', 'model.py',
       'recipients = self.shard_members(origin) if scope is Scope.SHARD else sorted(self.members)',
       'recipients = sorted(self.members)',
       'shard-scoped gossip is delivered to every member',
       "the RFC makes scope a minimum propagation guarantee: a provider may deliver SHARD gossip to every "
       "member (the etcd backend does), so no MUST can forbid it"),
    _b('model-shard-log-outlives-shard', 'model.py',
       '        if not members:\n            del self.shard_logs[shard]\n',
       '        if not members:\n',
       "a shard's log survives its last member"),
    _b('model-cas-first-op-only', 'model.py',
       '        for op in batch:\n            _compare(op, log.get(op.key))',
       '        for op in batch[:1]:\n            _compare(op, log.get(op.key))',
       "a shard-log batch checks only its first op's revision"),
    _b('model-catch-up-moved-boundary', 'model.py',
       'moved = member.shard_since > after',
       'moved = member.shard_since >= after',
       'a node that saw its move is replayed the whole shard log again'),
    _b('model-join-same-shard-commits', 'model.py',
       '        if self.members[node_id].shard == shard:\n            return []\n',
       '',
       'joining the shard a node is already in commits a revision'),
    _b('model-takeover-any-token', 'model.py',
       'if held is not None and takeover != held:',
       'if held is not None and takeover is None:',
       'any takeover token displaces a live session'),
    _b('model-release-displaced', 'model.py',
       'if self.sessions.get(node_id) == session:',
       'if node_id in self.sessions:',
       "a displaced session's release frees its successor's claim"),
    _b('detector-pfail-early', 'detector.py',
       'NodeState.OK if age <= self.policy.pfail_after',
       'NodeState.OK if age < self.policy.pfail_after',
       'a node exactly pfail_after old is already PFAIL'),
    _b('detector-fail-early', 'detector.py',
       'if age <= self.policy.fail_after else',
       'if age < self.policy.fail_after else',
       'a node exactly fail_after old is already FAIL'),
    _b('detector-renewal-first-only', 'detector.py',
       'self.last_renewal[node_id] = now',
       'self.last_renewal.setdefault(node_id, now)',
       'only the first renewal counts, so a renewal never clears PFAIL'),
    _b('wire-frame-bound-exclusive', 'wire.py',
       'if length > bound:',
       'if length >= bound:',
       'a frame of exactly the bound (MAX_HELLO_BYTES before HELLO, MAX_REQUEST_BYTES after) is refused'),
    _b('wire-short-frame-accepted', 'wire.py',
       'if length < Header.sizeof():',
       'if length < 1:',
       'a frame shorter than a message header is accepted'),
    _b('wire-insert-expects-zero', 'wire.py',
       'Revision(i.expected) if i.expected else None',
       'Revision(i.expected)',
       'an insert (expected 0 on the wire) is decoded as expecting revision 0'),
    _b('wire-trailing-accepted', 'wire.py',
       'c.FocusedSeq("payload", "payload" / layout, c.Terminated)',
       'c.FocusedSeq("payload", "payload" / layout)',
       "bytes after a message's payload are ignored"),
    # -- membership (written for this catalogue) ----------------------------------------------
    _b('model-join-shard-unknown-accepted', 'model.py',
       '        if shard not in self.shard_logs:\n            raise UnknownShard(f"shard {shard} does not exist")\n',
       '        self.shard_logs.setdefault(shard, {})\n',
       'joining a shard that does not exist creates it instead of refusing'),
    _b('model-non-member-writes-gossip', 'model.py',
       '    def update_gossip(self, node_id: NodeId, ops: Sequence[MetadataOp], scope: Scope) -> tuple[Revision, list[Owed]]:\n        self._require_member(node_id)\n',
       '    def update_gossip(self, node_id: NodeId, ops: Sequence[MetadataOp], scope: Scope) -> tuple[Revision, list[Owed]]:\n',
       'a node that is not a member may write gossip (it fails later, not with NotAMember)'),
    _b('address-bound-exclusive', 'types.py',
       'if size > MAX_ADDRESS_BYTES:',
       'if size >= MAX_ADDRESS_BYTES:',
       'an address of exactly MAX_ADDRESS_BYTES is refused'),
    _b('model-address-unchecked', 'model.py',
       '        check_address(address)\n',
       '',
       'JoinCluster takes an address of any length (a snapshot may outgrow a frame)'),
    # -- boundaries, catch-up, timing and durability (written with the cases that catch them) ---------
    _b('model-catch-up-repeats-last', 'model.py',
       'if moved or e.revision > after)',
       'if moved or e.revision >= after)',
       'a resumed session is notified again of the batch it saw last'),
    _b('fan-out-remove-not-told', 'model.py',
       'return node_id in self.records or node_id in changed',
       'return node_id in self.records',
       'a node removed from the cluster is never told (the fan-out tells only the members left)'),
    _b('detector-skips-pfail', 'detector.py',
       'else NodeState.PFAIL if age <= self.policy.fail_after',
       'else NodeState.FAIL if age <= self.policy.fail_after',
       'a node past pfail_after is FAIL at once'),
    _b('batch-ops-bound-exclusive', 'types.py',
       'if not 1 <= len(ops) <= MAX_BATCH_OPS:',
       'if not 1 <= len(ops) < MAX_BATCH_OPS:',
       'a batch of exactly MAX_BATCH_OPS ops is refused'),
    _b('batch-key-bound-exclusive', 'types.py',
       'if not 1 <= size <= MAX_KEY_BYTES',
       'if not 1 <= size < MAX_KEY_BYTES',
       'a key of exactly MAX_KEY_BYTES is refused'),
    _b('batch-value-bound-exclusive', 'types.py',
       'if len(op.value) > MAX_VALUE_BYTES:',
       'if len(op.value) >= MAX_VALUE_BYTES:',
       'a value of exactly MAX_VALUE_BYTES is refused'),
    _b('detector-judges-non-members', 'detector.py',
       'for n, last in self.last_renewal.items() if n in members}',
       'for n, last in self.last_renewal.items()}',
       'a node that left is still judged: its renewal is kept forever, so a long-running service holds '
       'one entry per node that ever joined and its per-tick work grows with churn'),
    _b('restart-revives-failed', 'reference/cluster/memory.py',
       '            if member.state is not NodeState.FAIL:  # a fresh period; a FAIL member stays FAIL until it renews\n'
       '                detector.renew(node_id, now)',
       '            detector.renew(node_id, now)',
       'after a restart every member gets a fresh period, so a FAIL node turns OK without renewing'),
    _b('memory-journals-no-ops', 'reference/cluster/memory.py',
       '        if self._model.revision == before:\n            return\n',
       '',
       'every operation is journaled, also what commits nothing: each member\'s unchanged verdict on every tick, '
       'JoinShard into the own shard (an idle cluster keeps writing)'),
    _b('journal-reopened-truncated', 'reference/cluster/journal.py',
       'self._file = open(path, "a", encoding="utf-8")',
       'self._file = open(path, "w", encoding="utf-8")',
       'a restart replays the journal, then truncates it: the next restart loses what came before'),
    # -- survivors of a blind round (issue 43), with the cases derived for their class -----------------------------
    _b('cas-absent-keeps-expected', 'cas.py',
       '        self._current = found\n',
       '        self._current = found if found is not None else self._current\n',
       'a CAS write that found no entry keeps the revision it expected instead of retrying as an insert'),
    _b('membership-empty-shard-accepted', 'types.py',
       '            if not members:\n                raise MalformedMembership(f"shard {shard} has no member")\n',
       '',
       'a membership snapshot with a shard of no members is well formed'),
)

SMOKE: tuple[str, ...] = ("cas-presence-only", "model-cas-first-op-only")
