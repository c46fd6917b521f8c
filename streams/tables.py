"""Writing a stage's Faust table into a named changelog partition.

A Faust table writes each change to the changelog partition of the *current event* (the record
the agent is iterating over). The stages no longer apply one record per iteration: the window
and the projector apply a batch that mixes partitions, and a memory type's stage finishes its
records in tasks of their own (docs/architecture.md, "Stages"). A key set from there would land
in whatever partition the batch's last event came from, and after a rebalance the worker that
owns the input partition would not recover it. So every table write names its partition: the
input partition whose state the key is (a session's window: its turns-topic partition; a
partition's progress: that partition). The two calls used are the table's store (`data`) and
its `send_changelog(partition, …)`, which is what `Table.__setitem__` does besides sensors and
key expiry, neither of which the stages use.
"""

from __future__ import annotations

from faust.types import TableT


def set_in_partition(
    table: TableT[bytes, bytes | None], partition: int, key: bytes, value: bytes
) -> None:
    """`table[key] = value`, its changelog record in `partition`."""
    table.data[key] = value
    table.send_changelog(partition, key, value)


def delete_in_partition(table: TableT[bytes, bytes | None], partition: int, key: bytes) -> None:
    """`del table[key]` (a tombstone in changelog `partition`); nothing if it is not there."""
    if key not in table.data:
        return
    del table.data[key]
    table.send_changelog(partition, key, None, value_serializer="raw")
