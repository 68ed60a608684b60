"""A pyzmq socket on an asyncio event loop, lean enough for the gate's per-request budget: every message is
handed to a callback as soon as it is readable, and sends never block.

ZeroMQ's own file descriptor (ZMQ_FD) is edge-triggered and only says "look at the socket's events": the
socket is drained until it has no message left whenever that descriptor is readable, and again after each send
on it (a send can take the notification of a message that arrived meanwhile). zmq.asyncio does the same with a
future per message, several times the cost per request (bench/README.md, "gate").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

import zmq

log = logging.getLogger(__name__)

# Messages taken per turn of the event loop before the others get theirs.
BATCH = 64
# pyzmq's flags are enum members; plain ints keep the per-frame cost of combining them out of the hot path
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)
_NOBLOCK = int(zmq.NOBLOCK)
_SNDMORE = int(zmq.SNDMORE)
_RCVMORE = int(zmq.RCVMORE)


class Pump:
    def __init__(self, sock: zmq.Socket[Any], on_message: Callable[[list[zmq.Frame]], None]) -> None:
        self.sock = sock
        self._on_message = on_message
        self._loop = asyncio.get_running_loop()
        self._fd = int(sock.getsockopt(zmq.FD))
        self._scheduled = False
        self._closed = False
        self._loop.add_reader(self._fd, self._drain)
        self._kick()  # messages that came before the reader

    def _readable(self) -> bool:
        return not self._closed and bool(self.sock.getsockopt(_EVENTS) & _POLLIN)  # type: ignore[operator]

    def _kick(self) -> None:
        if not self._scheduled and self._readable():
            self._scheduled = True
            self._loop.call_soon(self._drain)

    def _drain(self) -> None:
        self._scheduled = False
        sock = self.sock
        for _ in range(BATCH):
            if not self._readable():
                return
            frames = [sock.recv(_NOBLOCK, copy=False)]
            while sock.getsockopt(_RCVMORE):
                frames.append(sock.recv(_NOBLOCK, copy=False))
            self._on_message(frames)
        self._kick()  # more may be waiting: after the other callbacks of this turn

    def send(self, frames: Sequence[Any]) -> bool:
        """Send without blocking; False when the peer is gone (a ROUTER with ROUTER_MANDATORY) or cannot take
        it now (logged: the gate's own sockets have no high-water mark)."""
        try:
            last = len(frames) - 1
            for i, frame in enumerate(frames):
                self.sock.send(frame, _NOBLOCK | _SNDMORE if i < last else _NOBLOCK, copy=False)
            return True
        except zmq.ZMQError as exc:
            if exc.errno == zmq.EHOSTUNREACH:
                log.debug("a message to a peer that is gone was dropped")
            else:
                log.warning("a message was dropped: %s", exc)
            return False
        finally:
            self._kick()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._loop.remove_reader(self._fd)
        self.sock.close(0)
