"""A PostgreSQL primary with a streaming standby, the standby's replication link through a proxy
the test can stall (tests of failover: what a promoted standby that lagged still knows).

    with PrimaryAndStandby(bindir, synchronous=False) as pair:
        pair.url            # libpq multi-host URL: whichever of the two is read-write
        pair.link.stall()   # the standby stops receiving WAL; the primary goes on (asynchronous)
        pair.fail_over()    # the primary crashes (immediate stop), the standby is promoted

Both servers are private (own data directories and ports outside the ephemeral range) and are
stopped and deleted on exit, also when the test fails.
"""

from __future__ import annotations

import os
import subprocess
import time

import sqlalchemy as sa

from tests.servers.lifecycle import StartedAndStopped
from tests.servers.private import PrivatePostgres, _as_postgres
from tests.servers.proxy import StallableProxy


class PrivateStandby(PrivatePostgres):
    """A standby made by ``pg_basebackup -R`` from the server on ``source_port`` (a proxy, say)."""

    def __init__(self, bindir: str, source_port: int, **settings: str) -> None:
        super().__init__(bindir, **settings)
        self.source_port = source_port

    def _initialise(self) -> None:
        base = [f"{self.bindir}/pg_basebackup", "-h", "127.0.0.1", "-p", str(self.source_port), "-U", "postgres"]
        subprocess.run(
            _as_postgres([*base, "-D", self.data, "-R", "-X", "stream", "-c", "fast"]),
            check=True,
            capture_output=True,
        )
        # the application name a synchronous primary waits for
        with open(os.path.join(self.data, "postgresql.auto.conf"), "a") as f:
            f.write("cluster_name = 'seqid_standby'\n")

    def promote(self) -> None:
        subprocess.run(
            _as_postgres([f"{self.bindir}/pg_ctl", "-D", self.data, "-w", "promote"]), check=True, capture_output=True
        )


class PrimaryAndStandby(StartedAndStopped):
    """A primary, a proxy in front of it for the standby's replication, and the standby."""

    def __init__(self, bindir: str, synchronous: bool = False) -> None:
        settings = {"wal_level": "replica", "max_wal_senders": "5", "wal_sender_timeout": "0"}
        if synchronous:
            settings |= {"synchronous_standby_names": "'*'", "synchronous_commit": "on"}
        self.primary = PrivatePostgres(bindir, **settings)
        self.link: StallableProxy | None = None
        self.standby: PrivateStandby | None = None
        self.bindir = bindir

    @property
    def url(self) -> str:
        """Both servers; libpq picks the one that accepts writes (how clients follow a failover)."""
        assert self.standby is not None
        hosts = f"host=127.0.0.1:{self.primary.port}&host=127.0.0.1:{self.standby.port}"
        return f"postgresql+psycopg://postgres@/postgres?{hosts}&target_session_attrs=read-write"

    def start(self) -> PrimaryAndStandby:
        self.primary.start()
        self.link = StallableProxy(self.primary.port)
        self.standby = PrivateStandby(self.bindir, self.link.port, wal_receiver_timeout="0")
        self.standby.start()
        self.wait_streaming()
        return self

    def wait_streaming(self, timeout: float = 30.0) -> None:
        engine = sa.create_engine(self.primary.url)
        try:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                with engine.connect() as conn:
                    if conn.execute(sa.text("SELECT count(*) FROM pg_stat_replication")).scalar_one() >= 1:
                        return
                time.sleep(0.1)
            raise AssertionError("the standby did not start streaming")
        finally:
            engine.dispose()

    def fail_over(self) -> None:
        """The primary crashes; the standby (with whatever WAL reached it) is promoted."""
        assert self.standby is not None
        self.primary.stop("immediate")
        self.standby.promote()

    def stop(self) -> None:
        if self.link is not None:
            self.link.close()
        if self.standby is not None:
            self.standby.remove()
        self.primary.remove()
