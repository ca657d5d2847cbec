"""A TCP proxy on loopback that a test can stall: the links stay open, nothing is forwarded.

What a network that drops packets, or a server frozen with its sockets open, looks like to a
client: connects succeed (the proxy accepts), writes succeed (the proxy's kernel takes them), and
no answer ever comes.  ``stall()`` stops forwarding in both directions, ``resume()`` lets the held
bytes through, ``cut()`` closes every link, ``close()`` stops the proxy (also its links).
``move_to(port)`` is a virtual IP moved to a promoted server: the links are cut, new ones go there.
``delay`` holds every chunk that long before it is forwarded: a store across a slow network.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time

from tests.servers.private import free_port


class StallableProxy:
    """Forwards ``127.0.0.1:port`` to ``127.0.0.1:target`` until told otherwise."""

    def __init__(self, target: int, port: int | None = None, *, delay: float = 0.0) -> None:
        self.target = target
        self.delay = delay
        self.port = port or free_port()
        self._forwarding = threading.Event()
        self._forwarding.set()
        self._closed = threading.Event()
        self._links: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", self.port))
        self._thread = threading.Thread(target=self._accept, daemon=True, name=f"proxy-{self.port}")
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                ready, _, _ = select.select([self._server], [], [], 0.2)
                if not ready:
                    continue
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._links.append((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        # ValueError: the other direction's pump (or cut()) closed the socket under select()
        with contextlib.suppress(OSError, ValueError):
            while not self._closed.is_set():
                ready, _, _ = select.select([source], [], [], 0.2)
                if not ready:
                    continue
                # stalled: the bytes wait in the kernel's buffers; the sockets stay open
                while not self._forwarding.wait(0.2):
                    if self._closed.is_set():
                        return
                data = source.recv(65536)
                if not data:
                    break
                if self.delay:
                    time.sleep(self.delay)
                sink.sendall(data)
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def stall(self) -> None:
        """Stop forwarding (both ways), keeping every link open; new links are accepted and stall too."""
        self._forwarding.clear()

    def resume(self) -> None:
        self._forwarding.set()

    def cut(self) -> None:
        """Close every link now (as a server that died would)."""
        with self._lock:
            links, self._links = self._links, []
        for pair in links:
            for s in pair:
                with contextlib.suppress(OSError):
                    s.close()

    def move_to(self, target: int) -> None:
        """Forward new links to ``target`` and cut the old ones (a virtual IP moved after a failover)."""
        self.target = target
        self.cut()

    def close(self) -> None:
        self._closed.set()
        self._forwarding.set()
        with contextlib.suppress(OSError):
            self._server.close()
        self.cut()
        self._thread.join(timeout=5)

    def __enter__(self) -> StallableProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
