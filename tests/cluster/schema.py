"""The Galera test's tables: one per kind of key, each row tagged by its writer so a lost row shows."""

from __future__ import annotations

import sqlalchemy as sa

from seqid_orm.sqlalchemy import SeqUUID, SnowflakeID, TicketID

KINDS = ("uuid", "snowflake", "ticket", "autoinc")


def table(kind: str, metadata: sa.MetaData, prefix: str) -> sa.Table:
    key = {
        "uuid": sa.Column("id", SeqUUID(), primary_key=True),
        "snowflake": sa.Column("id", SnowflakeID(), primary_key=True, autoincrement=False),
        "ticket": sa.Column("id", TicketID(), primary_key=True, autoincrement=False),
        "autoinc": sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
    }[kind]
    return sa.Table(
        f"{prefix}_{kind}",
        metadata,
        key,
        sa.Column("tag", sa.String(40), nullable=False, unique=True),
        sa.Column("filler", sa.String(100), nullable=False),
    )
