"""The probe measures each live server's byte order; the registry must agree with it."""

from __future__ import annotations

import uuid

import pytest

from seqid_orm import Layout
from seqid_orm.vendors import compare_order, layout_sample

STORAGES = ["native", "binary", "text", "hex"]


@pytest.mark.parametrize("storage", STORAGES)
def test_registry_agrees_with_the_live_server(engine, storage):
    """The probe's measured byte order equals the registry's for every layout's bits."""
    import sqlalchemy

    from seqid_orm.sqlalchemy import SeqUUID, layout_for, probe_layout, probe_order
    from seqid_orm.sqlalchemy.types import dialect_server_version, dialect_vendor

    type_ = SeqUUID(storage=storage)
    vendor = dialect_vendor(engine.dialect)
    if storage == "native" and vendor == "sqlite":
        with pytest.raises(ValueError, match="needs a UUID column type"):
            type_.storage_for(engine.dialect)
        return
    version = dialect_server_version(engine.dialect)
    with engine.connect() as conn:
        for layout in Layout:
            expected = compare_order(vendor, version, storage, layout_sample(layout))
            if expected is None:
                # the registry says the server refuses such values (version 8 on MariaDB) as text;
                # seqid does not rely on them (raw bytes through PyMySQL are taken, and sort bytewise)
                text = str(layout_sample(layout))
                with engine.connect() as other:  # apart from the probe's savepoints
                    other.exec_driver_sql("CREATE TEMPORARY TABLE seqid_v8 (id UUID)")
                    with pytest.raises(sqlalchemy.exc.DBAPIError, match="Incorrect uuid value"):
                        other.exec_driver_sql(f"INSERT INTO seqid_v8 VALUES ('{text}')")
                continue
            measured = probe_order(conn, type_, layout_sample(layout))
            assert measured == expected, layout
        v4_bits = uuid.UUID(int=(4 << 76) | (0b10 << 62))
        assert probe_order(conn, type_, v4_bits) == compare_order(vendor, version, storage, v4_bits)
        assert probe_layout(conn, type_) is layout_for(engine.dialect, type_)
