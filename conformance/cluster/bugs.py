"""Bugs planted by ``python -m conformance sensitivity --suite cluster``, one at a time.

Realistic mistakes in this project's cluster service (the spec modules its runtime drives, in a private
copy), judged through the suite's own ``exec:`` target exactly as an outside implementation would be.
"""

from __future__ import annotations

from pathlib import Path

from conformance.mutation import Mutant, exec_target_in


def target_for(copy: Path) -> str:
    """The copy's cluster service."""
    return exec_target_in(copy, "-m reference.cluster.service")


def _b(name: str, file: str, search: str, replace: str, description: str) -> Mutant:
    return Mutant(name, f"spec/cluster/{file}", search, replace, description)


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
       'a health verdict that changes nothing still commits a revision'),
    _b('model-shard-gossip-to-all', 'model.py',
       'recipients = self.shard_members(origin) if scope is Scope.SHARD else sorted(self.members)',
       'recipients = sorted(self.members)',
       'shard-scoped gossip is delivered to every member'),
    _b('model-shard-log-outlives-shard', 'model.py',
       '        if self.shard_members(shard) == [node_id]:\n            del self.shard_logs[shard]\n',
       '',
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
    _b('model-gossip-scope-ignored', 'model.py',
       'if g.scope is Scope.GLOBAL or g.origin == shard)',
       'if g.scope is Scope.GLOBAL)',
       "a joining node is not shown its own shard's gossip"),
    _b('detector-pfail-early', 'detector.py',
       'NodeState.OK if age <= self.pfail_after',
       'NodeState.OK if age < self.pfail_after',
       'a node exactly pfail_after old is already PFAIL'),
    _b('detector-fail-early', 'detector.py',
       'if age <= self.fail_after else',
       'if age < self.fail_after else',
       'a node exactly fail_after old is already FAIL'),
    _b('detector-renewal-first-only', 'detector.py',
       'self.last_renewal[node_id] = now',
       'self.last_renewal.setdefault(node_id, now)',
       'only the first renewal counts, so a renewal never clears PFAIL'),
    _b('detector-reports-unchanged', 'detector.py',
       'if states.get(node_id, NodeState.OK) is not state:',
       'if True:',
       'every tick reports every verdict, changed or not'),
    _b('detector-zero-pfail', 'detector.py',
       'if not 0 < self.pfail_after <= self.fail_after:',
       'if not 0 <= self.pfail_after <= self.fail_after:',
       'a pfail_after of 0 is accepted'),
    _b('detector-forget-keeps-judging', 'detector.py',
       '        self.last_renewal.pop(node_id, None)\n',
       '        pass\n',
       'a forgotten node is still judged and reported'),
    _b('wire-frame-bound-exclusive', 'wire.py',
       'if length > MAX_FRAME_BYTES:',
       'if length >= MAX_FRAME_BYTES:',
       'a frame of exactly MAX_FRAME_BYTES is refused'),
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
    _b('wire-encode-unbounded', 'wire.py',
       '    if len(body) > MAX_FRAME_BYTES:\n',
       '    if len(body) > 2 * MAX_FRAME_BYTES:\n',
       'the service sends frames its peers refuse'),
    # -- membership (written for this catalogue) ----------------------------------------------
    _b('model-join-existing-shard-id', 'model.py',
       '        if new_shard in self.shard_logs:\n            raise UnknownShard(f"fresh shard id {new_shard} is already in use")\n        if node_id in self.members:',
       '        if node_id in self.members:',
       'joining the cluster with a shard id already in use is accepted and empties that shard'),
    _b('model-join-shard-unknown-accepted', 'model.py',
       '        if shard not in self.shard_logs:\n            raise UnknownShard(f"shard {shard} does not exist")\n',
       '        self.shard_logs.setdefault(shard, {})\n',
       'joining a shard that does not exist creates it instead of refusing'),
    _b('model-non-member-writes-gossip', 'model.py',
       '    def update_gossip(self, node_id: NodeId, ops: Sequence[MetadataOp], scope: Scope) -> tuple[Revision, list[Delivery]]:\n        self._require_member(node_id)\n',
       '    def update_gossip(self, node_id: NodeId, ops: Sequence[MetadataOp], scope: Scope) -> tuple[Revision, list[Delivery]]:\n',
       'a node that is not a member may write gossip (it fails later, not with NotAMember)'),
)

SMOKE: tuple[str, ...] = ("cas-presence-only", "model-cas-first-op-only")
