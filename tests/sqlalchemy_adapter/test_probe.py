"""The probe measures each live server's byte order; the registry must agree with it."""

from __future__ import annotations

import uuid

import pytest

from seqid_orm import Layout
from seqid_orm.registry import compare_order, layout_sample

STORAGES = ["native", "binary", "text", "hex"]


@pytest.mark.parametrize("storage", STORAGES)
def test_registry_agrees_with_the_live_server(engine, storage):
    """The probe's measured byte order equals the registry's for every layout's bits."""
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
            measured = probe_order(conn, type_, layout_sample(layout))
            assert measured == compare_order(vendor, version, storage, layout_sample(layout)), layout
        v4_bits = uuid.UUID(int=(4 << 76) | (0b10 << 62))
        assert probe_order(conn, type_, v4_bits) == compare_order(vendor, version, storage, v4_bits)
        assert probe_layout(conn, type_) is layout_for(engine.dialect, type_)
