"""What each engine can tell about a table and the work an insert run caused.

``counters`` are read before and after a run and subtracted; ``sizes`` are read after it.
Every figure an engine cannot give is simply absent from the result.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection


def counters(conn: Connection, table: str) -> dict[str, float]:
    name = conn.dialect.name
    if name == "postgresql":
        row = conn.execute(
            sa.text(
                "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn AS wal, "
                "(SELECT wal_fpi FROM pg_stat_wal) AS fpi, "
                "COALESCE((SELECT heap_blks_hit + COALESCE(idx_blks_hit, 0) FROM pg_statio_user_tables "
                "  WHERE relname = :t), 0) AS hit, "
                "COALESCE((SELECT heap_blks_read + COALESCE(idx_blks_read, 0) FROM pg_statio_user_tables "
                "  WHERE relname = :t), 0) AS read, "
                "COALESCE((SELECT idx_blks_read FROM pg_statio_user_tables WHERE relname = :t), 0) AS idx_read"
            ),
            {"t": table},
        ).one()
        return {
            "wal_bytes": float(row.wal),
            "wal_fpi": float(row.fpi or 0),
            "hit": float(row.hit),
            "read": float(row.read),
            "idx_read": float(row.idx_read or 0),
        }
    if name == "mysql":
        status: dict[str, Any] = dict(
            conn.execute(
                sa.text(
                    "SHOW GLOBAL STATUS WHERE Variable_name IN "
                    "('Innodb_buffer_pool_read_requests', 'Innodb_buffer_pool_reads', 'Innodb_lsn_current')"
                )
            ).all()
        )
        splits = conn.execute(
            sa.text("SELECT `COUNT` FROM information_schema.INNODB_METRICS WHERE NAME = 'index_page_splits'")
        ).scalar()
        found = {
            "page_splits": float(splits or 0),
            "hit": float(status.get("Innodb_buffer_pool_read_requests", 0))
            - float(status.get("Innodb_buffer_pool_reads", 0)),
            "read": float(status.get("Innodb_buffer_pool_reads", 0)),
        }
        if "Innodb_lsn_current" in status:  # the redo log's sequence number counts its bytes (MariaDB)
            found["wal_bytes"] = float(status["Innodb_lsn_current"])
        return found
    return {}


def prepare(conn: Connection) -> list[str]:
    """Switch on counters that are off by default; returns notes on what could not be."""
    notes = []
    if conn.dialect.name == "mysql":
        try:
            conn.execute(sa.text("SET GLOBAL innodb_monitor_enable = 'index_page_splits'"))
        except sa.exc.DBAPIError as exc:
            notes.append(f"InnoDB page-split counter unavailable: {exc.orig}")
    return notes


def sizes(conn: Connection, table: str) -> dict[str, Any]:
    name = conn.dialect.name
    if name == "postgresql":
        row = conn.execute(sa.text("SELECT pg_table_size(:t) AS tbl, pg_indexes_size(:t) AS idx"), {"t": table}).one()
        return {"table_bytes": int(row.tbl), "index_bytes": int(row.idx)}
    if name == "mysql":
        conn.execute(sa.text(f"ANALYZE TABLE {table}")).all()
        row = conn.execute(
            sa.text(
                "SELECT data_length, index_length FROM information_schema.TABLES "
                "WHERE table_schema = DATABASE() AND table_name = :t"
            ),
            {"t": table},
        ).one()
        # InnoDB clusters rows in the primary key: data_length is the PK index with the rows
        return {"table_bytes": int(row.data_length), "index_bytes": int(row.index_length)}
    if name == "sqlite":
        try:
            rows = conn.execute(
                sa.text(
                    "SELECT name, SUM(pgsize) FROM dbstat "
                    "WHERE name = :t OR name LIKE 'sqlite_autoindex_' || :t || '_%' GROUP BY name"
                ),
                {"t": table},
            ).all()
        except sa.exc.OperationalError:
            return {}
        table_bytes = sum(size for n, size in rows if n == table)
        return {"table_bytes": int(table_bytes), "index_bytes": int(sum(size for n, size in rows if n != table))}
    return {}
