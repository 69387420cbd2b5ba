"""Multicast groups on the Tofino packet replication engine: one ``$pre.node`` per replica id
(the id and its ports: one worker's port in a job's group, every port in the flood group), and
a ``$pre.mgid`` entry listing a group's nodes. Node ids follow from the group and the replica
id, so reading them back gives the same groups again."""

from __future__ import annotations

from control_plane.entries import MulticastGroup
from control_plane.tofino.bfrt import BfrtEntry
from control_plane.tofino.names import (
    DEV_PORT,
    MGID,
    MULTICAST_LAG_ID,
    MULTICAST_NODE_ID,
    MULTICAST_NODE_L1_XID,
    MULTICAST_NODE_L1_XID_VALID,
    MULTICAST_RID,
    PRE_MGID,
    PRE_NODE,
)

RIDS_PER_GROUP = 64  # replica ids are worker ids, below 32


def node_id(group: int, rid: int) -> int:
    return group * RIDS_PER_GROUP + rid


def group_entries(group: MulticastGroup) -> tuple[list[BfrtEntry], BfrtEntry]:
    """The nodes of a group and its mgid entry (write the nodes first, delete them last)."""
    ports: dict[int, list[int]] = {}
    for port, rid in group.replicas:
        ports.setdefault(rid, []).append(port)
    nodes = [BfrtEntry.make(PRE_NODE, {MULTICAST_NODE_ID: node_id(group.group_id, rid)},
                            {MULTICAST_RID: rid, MULTICAST_LAG_ID: (), DEV_PORT: tuple(sorted(p))})
             for rid, p in sorted(ports.items())]
    ids = tuple(node_id(group.group_id, rid) for rid in sorted(ports))
    mgid = BfrtEntry.make(PRE_MGID, mgid_key(group.group_id),
                          {MULTICAST_NODE_ID: ids, MULTICAST_NODE_L1_XID_VALID: (False,) * len(ids),
                           MULTICAST_NODE_L1_XID: (0,) * len(ids)})
    return nodes, mgid


def mgid_key(group_id: int) -> dict:
    return {MGID: group_id}


def nodes_of(mgids: list[BfrtEntry]) -> list[BfrtEntry]:
    """The nodes that mgid entries list (their keys: enough to delete them)."""
    return [BfrtEntry.make(PRE_NODE, {MULTICAST_NODE_ID: n})
            for entry in mgids for n in dict(entry.data)[MULTICAST_NODE_ID]]


def groups_from(mgids: list[BfrtEntry], nodes: list[BfrtEntry]) -> dict[int, MulticastGroup]:
    by_id = {dict(n.key)[MULTICAST_NODE_ID]: dict(n.data) for n in nodes}
    groups = {}
    for entry in mgids:
        gid = dict(entry.key)[MGID]
        replicas = [(port, by_id[n][MULTICAST_RID])
                    for n in dict(entry.data)[MULTICAST_NODE_ID] if n in by_id
                    for port in by_id[n][DEV_PORT]]
        groups[gid] = MulticastGroup.make(gid, replicas)
    return groups
