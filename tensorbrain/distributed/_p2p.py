"""Point-to-point messages: send/recv, their non-blocking forms and batched exchanges."""
from __future__ import annotations

from ._collectives import _arr
from ._groups import _pg, _root


def _peer(pg, peer, group_peer, what) -> int:
    r = _root(pg, peer, group_peer, what)
    if r == pg.rank():
        raise ValueError(f"{what}={peer if group_peer is None else group_peer} is this rank; "
                         f"a rank cannot send to or receive from itself")
    return r


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Send ``tensor`` to ``dst`` without waiting; returns a Work.

    Args:
        tensor: the data to send.
        dst: the destination global rank.
        group: the process group; None for the default group.
        tag: messages are matched in order per (peer, tag).
        group_dst: the destination as a rank within ``group`` (instead of ``dst``).

    Returns:
        Work | None: the Work, or None on a rank that is not a member of ``group``.

    Raises:
        ValueError: ``dst`` is this rank or not a member of the group.
    """
    pg = _pg(group, "isend")
    if pg is None:
        return None
    return pg.backend.send(_arr(tensor, "isend: tensor"), _peer(pg, dst, group_dst, "dst"),
                           int(tag), async_op=True)


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receive into ``tensor`` from ``src`` (None: any rank) without waiting; returns a Work.

    Args:
        tensor: receives the data (shape and dtype must match the send).
        src: the source global rank; None for any rank.
        group: the process group; None for the default group.
        tag: messages are matched in order per (peer, tag).
        group_src: the source as a rank within ``group`` (instead of ``src``).

    Returns:
        Work | None: the Work, or None on a rank that is not a member of ``group``.
    """
    pg = _pg(group, "irecv")
    if pg is None:
        return None
    peer = None if src is None and group_src is None else _peer(pg, src, group_src, "src")
    return pg.backend.recv(_arr(tensor, "irecv: tensor"), peer, int(tag), async_op=True)


def send(tensor, dst=None, group=None, tag=0, group_dst=None) -> None:
    """Send ``tensor`` to ``dst`` (returns when the data is handed to the transport).

    Args:
        tensor: the data to send.
        dst: the destination global rank.
        group: the process group; None for the default group.
        tag: messages are matched in order per (peer, tag).
        group_dst: the destination as a rank within ``group`` (instead of ``dst``).

    Raises:
        ValueError: ``dst`` is this rank or not a member of the group.
        DistBackendError: the peer failed or the group timeout passed.
    """
    pg = _pg(group, "send")
    if pg is None:
        return None
    pg.backend.send(_arr(tensor, "send: tensor"), _peer(pg, dst, group_dst, "dst"), int(tag),
                    async_op=False)


def recv(tensor, src=None, group=None, tag=0, group_src=None) -> int:
    """Receive into ``tensor`` from ``src`` (None: any rank); returns the sender's global rank.

    Args:
        tensor: receives the data (shape and dtype must match the send).
        src: the source global rank; None for any rank.
        group: the process group; None for the default group.
        tag: messages are matched in order per (peer, tag).
        group_src: the source as a rank within ``group`` (instead of ``src``).

    Returns:
        int: the sender's global rank (-1 on a rank that is not a member of ``group``).
    """
    pg = _pg(group, "recv")
    if pg is None:
        return -1
    peer = None if src is None and group_src is None else _peer(pg, src, group_src, "src")
    w = pg.backend.recv(_arr(tensor, "recv: tensor"), peer, int(tag), async_op=False)
    got = w.result()
    return pg.ranks[got] if got is not None else pg.ranks[peer]


class P2POp:
    """One send or receive for :func:`batch_isend_irecv` (``op`` is ``isend`` or ``irecv``).

    Args:
        op: ``tb.distributed.isend`` or ``tb.distributed.irecv`` (send/recv are accepted too).
        tensor: the data to send, or the tensor that receives.
        peer: the other side's global rank.
        group: the process group; None for the default group.
        tag: messages are matched in order per (peer, tag).
        group_peer: the peer as a rank within ``group`` (instead of ``peer``).

    Raises:
        ValueError: ``op`` is not one of those functions.
    """

    def __init__(self, op, tensor, peer=None, group=None, tag=0, group_peer=None):
        if op not in (isend, irecv, send, recv):
            raise ValueError("P2POp: op must be tb.distributed.isend or tb.distributed.irecv")
        self.op, self.tensor, self.peer, self.group, self.tag = op, tensor, peer, group, tag
        self.group_peer = group_peer

    def __repr__(self):
        return f"P2POp({self.op.__name__}, peer={self.peer}, tag={self.tag})"


def batch_isend_irecv(p2p_op_list) -> list:
    """Start every send and receive of the list together (so exchanges of any size cannot
    deadlock); returns one Work per op.

    Args:
        p2p_op_list: the :class:`P2POp` s, all on the same group.

    Returns:
        list[Work]: one Work per op (empty on a rank outside the group).

    Raises:
        ValueError: the list is empty or mixes groups.
    """
    if not p2p_op_list:
        raise ValueError("batch_isend_irecv: the list of P2POp is empty")
    groups = {id(p.group) for p in p2p_op_list}
    if len(groups) != 1:
        raise ValueError("batch_isend_irecv: all ops must use the same group")
    pg = _pg(p2p_op_list[0].group, "batch_isend_irecv")
    if pg is None:
        return []
    ops = []
    for p in p2p_op_list:
        is_send = p.op in (isend, send)
        peer = _peer(pg, p.peer, p.group_peer, "peer")
        ops.append(("send" if is_send else "recv", _arr(p.tensor, "P2POp tensor"), peer,
                    int(p.tag)))
    batch = getattr(pg.backend, "batch_p2p", None)
    if batch is not None:
        w = batch(ops, async_op=True)
        return [w] * len(ops)
    return [(pg.backend.send if k == "send" else pg.backend.recv)(a, peer, tag, async_op=True)
            for k, a, peer, tag in ops]
