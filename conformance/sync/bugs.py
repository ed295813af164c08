"""Bugs planted by ``python -m conformance sensitivity --suite sync``, one at a time.

Realistic mistakes in this project's sync server (the spec modules its runtime drives, in a private
copy), judged through the suite's own ``exec:`` target exactly as an outside implementation would be.
Entries with ``equivalent`` set cannot be told from the correct code by any case; the reason is the
argument (docs/conformance.md lists them).
"""

from __future__ import annotations

from pathlib import Path

from conformance.mutation import Mutant, exec_target_in


def target_for(copy: Path) -> str:
    """The copy's server as the suite's reference target (flushing after every put, with flush-control)."""
    return exec_target_in(copy, "-m conformance.sync.reference_target --store {store}")


def _b(name: str, file: str, search: str, replace: str, description: str, equivalent: str = "") -> Mutant:
    return Mutant(name, f"spec/sync/{file}", search, replace, description, equivalent)


_UNDER_LOCK = ("the server holds its write lock from a flush's plan to its completion, so no put (and no "
               "squash or drop) reaches a table between the two: a plan is never stale when it is completed")


BUGS: tuple[Mutant, ...] = (
    _b('sync-replay-boundary', 'writer.py',
       'if durable is not None and sequence <= durable:',
       'if durable is not None and sequence < durable:',
       'a transaction closing at exactly the durable number is refused instead of acknowledged as a replay'),
    _b('sync-equal-is-new', 'writer.py',
       'if memory is None or sequence > memory:',
       'if memory is None or sequence >= memory:',
       'a transaction closing at the memory number is taken as new'),
    _b('sync-table-mark-backwards', 'writer.py',
       'marks[tx.origin] = max(marks.get(tx.origin, tx.sequence), tx.sequence)',
       'marks[tx.origin] = tx.sequence',
       "a table's replay mark moves backwards when a flush holds an older transaction"),
    _b('sync-plan-shares-durable', 'writer.py',
       'durable = dict(self._durable)',
       'durable = self._durable',
       "a flush plan writes into the writer's durable numbers before it is committed"),
    _b('sync-plan-shares-marks', 'writer.py',
       'marks = dict(table_marks or {})',
       'marks = table_marks if isinstance(table_marks, dict) else dict(table_marks or {})',
       "a flush plan updates the caller's table marks in place",
       "the server hands plan_flush the marks it has just parsed from the table's last commit, a dict "
       'nobody else holds: writing into it changes nothing anyone reads'),
    _b('sync-stale-plan-accepted', 'writer.py',
       'if q is None or q.generation != plan.generation:',
       'if q is None:',
       'a flush plan completed after the table received more data is accepted',
       _UNDER_LOCK),
    _b('sync-append-keeps-generation', 'writer.py',
       '                q.items.append(item)\n                q.generation += 1\n',
       '                q.items.append(item)\n',
       'a put to a table with pending data does not make earlier plans stale',
       'the generation is read only by the stale-plan check; ' + _UNDER_LOCK),
    _b('sync-skip-partly-flushed', 'writer.py',
       'if all(tx.sequence is not None and tx.sequence <= marks.get(tx.origin, -1) for tx in txs):',
       'if any(tx.sequence is not None and tx.sequence <= marks.get(tx.origin, -1) for tx in txs):',
       'a squashed item is skipped when only one of its transactions is already in the table'),
    _b('sync-lag-boundary', 'writer.py',
       'if now - q.insertion_time >= s.max_replication_lag_s:',
       'if now - q.insertion_time > s.max_replication_lag_s:',
       'data exactly max_replication_lag_s old is not flushed'),
    _b('sync-size-boundary', 'writer.py',
       'if tables and self.in_memory_bytes >= s.max_in_memory_bytes:',
       'if tables and self.in_memory_bytes > s.max_in_memory_bytes:',
       'memory exactly at max_in_memory_bytes does not trigger a flush'),
    _b('sync-count-boundary', 'writer.py',
       'if len(q.items) >= s.max_syncs_per_url:',
       'if len(q.items) > s.max_syncs_per_url:',
       'a table with exactly max_syncs_per_url puts is not flushed'),
    _b('sync-interleave-on-close-only', 'writer.py',
       'if open_tx is not None and origin != open_tx.origin:',
       'if open_tx is not None and origin != open_tx.origin and sequence is not None:',
       "another origin's put into an open transaction is accepted unless it closes"),
    _b('sync-durable-out-of-order', 'writer.py',
       'if tx.origin in waiting or tx.sequence is None or unflushed(tx):',
       'if tx.sequence is None or unflushed(tx):',
       'a transaction is durable although an earlier one of its origin is not'),
    _b('sync-retire-before-flush', 'writer.py',
       'for tx, sequence in self._durable_now(lambda tx: tx.locations):',
       'for tx, sequence in self._durable_now(lambda tx: set()):',
       'a closed transaction becomes durable before its tables are flushed'),
    _b('squash-insert-delete-kept', 'squash.py',
       '                if new is None and old_keys[chain[0]] is None:\n                    temporary.add(chain_id)\n',
       '',
       'a chain that starts as an insert and ends as a delete leaves a row behind (no row of the table is '
       'written from it, but it stays in the pending bytes the size threshold is compared with after squashing)'),
    _b('squash-old-key-from-last-row', 'squash.py',
       '            idx = first_rows\n',
       '            idx = last_rows\n',
       "a chain's old key is taken from its last row instead of its first"),
    _b('squash-values-from-last-row', 'squash.py',
       'elif col.role in (ColumnRole.CHANGED, ColumnRole.VALUE) and col.name in changed_rows:',
       'elif col.role is ColumnRole.CHANGED and col.name in changed_rows:',
       "a value column comes from the chain's last row even where it did not change there"),
    _b('squash-fast-path-backwards', 'squash.py',
       'pc.less(pairs["__row"], pairs["__row_old"])',
       'pc.greater(pairs["__row"], pairs["__row_old"])',
       'the Arrow fast path misses chains (it looks for a row continuing a later one)'),
    _b('squash-chain-forks', 'squash.py',
       'chain_id = open_chains.pop(old, None) if old is not None else None',
       'chain_id = open_chains.get(old) if old is not None else None',
       'two rows may continue the same chain'),
    _b('squash-merge-as-stream', 'squash.py',
       'return _squash(table, schema, [b.num_rows for b in batches])',
       'return _squash(table, schema, [1] * table.num_rows)',
       'squashed batches are merged as one stream, linking rows of the same batch'),
    _b('apply-duplicates-overwrite', 'squash.py',
       'removed = consumed | written.keys()',
       'removed = consumed',
       're-applying an insert duplicates the row instead of overwriting it'),
    _b('schema-pk-names-unchecked', 'schema.py',
       'if old_pks != new_pks:',
       'if len(old_pks) != len(new_pks):',
       'old and new key columns with different names or types are accepted'),
    _b('schema-one-pk-side-enough', 'schema.py',
       'if not old_pks or not new_pks:',
       'if not old_pks and not new_pks:',
       'a change with only new (or only old) key columns is accepted'),
    _b('schema-struct-children-uncounted', 'schema.py',
       '            n += _flattened_count([f.type.field(i) for i in range(f.type.num_fields)])\n',
       '            pass\n',
       'struct children are not counted against the column descriptors'),
    _b('schema-changed-not-boolean', 'schema.py',
       'if fld.type != pa.bool_():',
       'if fld.type != pa.bool_() and not pa.types.is_integer(fld.type):',
       'an integer CHANGED column is accepted'),
    _b('schema-partly-null-single-only', 'schema.py',
       'if len(cols) < 2:',
       'if len(cols) < 3:',
       'a partly null two-column key is not refused'),
    _b('schema-changed-names-any-column', 'schema.py',
       'if not any(o.name == desc.name and o.role == ColumnRole.VALUE for o in descriptors):',
       'if not any(o.name == desc.name and o.role != ColumnRole.CHANGED for o in descriptors):',
       'a CHANGED column naming a key column is accepted'),
    _b('schema-key-subset-fits', 'schema.py',
       'sorted(put.keys) != sorted(existing.keys)',
       'not set(put.keys) <= set(existing.keys)',
       "a put keyed on a subset of the table's key columns fits"),
    _b('probe-ignores-sequence', 'writer.py',
       'return rows == 0 and sequence is None',
       'return rows == 0',
       'a put with no rows is a probe even when it carries a sequence number (it closes nothing)'),
    _b('empty-closing-put-refused', 'writer.py',
       'if open_tx is None and rows == 0 and sequence is not None:',
       'if rows == 0 and sequence is not None:',
       'a zero-row put closing an open transaction is refused as an empty transaction'),
    _b('first-never-cleared', 'responses.py',
       'first, self._first = self._first, False',
       'first = self._first',
       'every response carries first=true, not only the first after a start'),
    _b('apply-ignores-changed', 'squash.py',
       "elif name in value_cols and (name not in flags or flags[name][row]):",
       "elif name in value_cols:",
       'a CHANGED=false value overwrites the stored one'),
    _b('confinement-blocklist', 'confinement.py',
       'if segment.startswith("_"):',
       'if segment == "_delta_log":',
       "only _delta_log is refused: other '_' segments (_change_data) reach Delta's reserved names"),
    _b('confinement-segment-off-by-one', 'confinement.py',
       'if len(segment) > MAX_SEGMENT_BYTES:',
       'if len(segment) >= MAX_SEGMENT_BYTES:',
       'a segment of exactly 255 bytes is refused'),
)

SMOKE: tuple[str, ...] = ("schema-changed-not-boolean", "schema-one-pk-side-enough")
