"""The per-vendor rules: comparison orders and layout choices per vendor, version and storage.

The live probe checks the same table against each real server (tests/sqlalchemy_adapter/test_probe.py)."""

from __future__ import annotations

import uuid

import pytest

from seqid_orm import Layout
from seqid_orm.errors import UnknownLayoutError
from seqid_orm.ids.layout import ORDER_BYTES, ORDER_BYTES_LE, ORDER_MARIADB_SWAPPED, ORDER_SQLSERVER, layout_for_order
from seqid_orm.vendors import (
    Storage,
    choose_layout,
    choose_prefix_layout,
    compare_order,
    default_storage,
    normalize_vendor,
    target,
)
from seqid_orm.vendors.mariadb import swaps_selectively as mariadb_swaps_selectively


def test_layout_for_order():
    assert layout_for_order(ORDER_BYTES) is Layout.TIME_FIRST
    assert layout_for_order(ORDER_SQLSERVER) is Layout.TIME_LAST
    assert layout_for_order(ORDER_MARIADB_SWAPPED) is Layout.TIME_LAST
    assert layout_for_order(ORDER_BYTES_LE) is Layout.TIME_FIRST_LE
    assert layout_for_order(tuple(reversed(range(16)))) is None
    with pytest.raises(ValueError, match="permutation"):
        layout_for_order((0, 0, 1))


@pytest.mark.parametrize(
    ("vendor", "version", "storage", "expected"),
    [
        ("postgresql", (15, 4), "native", Layout.TIME_FIRST),
        ("cockroachdb", (23, 1), "native", Layout.SHARDED),  # a distributed engine: no single hot range
        ("yugabytedb", (11, 2), "native", Layout.SHARDED),
        ("tidb", (8, 0, 11), "binary", Layout.SHARDED),
        ("mssql", (16, 0), "native", Layout.TIME_LAST),
        ("mssql", (16, 0), "binary", Layout.TIME_FIRST),
        ("mariadb", (10, 11, 19), "native", Layout.TIME_FIRST),
        ("mariadb", (10, 11, 4), "native", Layout.TIME_LAST),
        ("mariadb", (10, 10, 6), "native", Layout.TIME_FIRST),
        ("mariadb", (10, 7, 8), "native", Layout.TIME_LAST),
        ("mariadb", (11, 0, 2), "native", Layout.TIME_LAST),
        ("mariadb", (11, 4, 2), "native", Layout.TIME_FIRST),
        ("mysql", (8, 0, 36), "binary", Layout.TIME_FIRST),
        ("oracle", (19,), "binary", Layout.TIME_FIRST),
        ("sqlite", (3, 45), "text", Layout.TIME_FIRST),
        ("sqlite", (3, 45), "hex", Layout.TIME_FIRST),
    ],
)
def test_choose_layout_table(vendor, version, storage, expected):
    assert choose_layout(vendor, version, storage) is expected


def test_distributed_engines_are_read_from_version_strings_and_an_explicit_layout_wins():
    from seqid_orm.vendors import distributed_flavor

    assert distributed_flavor("8.0.11-TiDB-v7.5.0") == "tidb"
    assert distributed_flavor("PostgreSQL 11.2-YB-2.20.1.0-b0 on x86_64-pc-linux-gnu") == "yugabytedb"
    assert distributed_flavor("PostgreSQL 15.19 (Debian 15.19-0+deb12u1)") is None
    assert distributed_flavor("10.11.19-MariaDB-0+deb12u1") is None
    assert default_storage("tidb", None) is Storage.BINARY and default_storage("yugabytedb", None) is Storage.NATIVE
    assert choose_layout("cockroachdb", (23, 1), "native", preferred=Layout.TIME_FIRST) is Layout.TIME_FIRST
    assert target("cockroachdb", None, None).layout is Layout.SHARDED  # offline DDL: still no hot spot
    # a single-node engine never falls back to sharded (it would scatter inserts for nothing)
    assert choose_layout("postgresql", (15, 4), "native") is Layout.TIME_FIRST


def test_a_preferred_layout_is_kept_where_it_also_works():
    # MariaDB swaps the Microsoft-variant TIME_LAST values on every version, so both work
    assert choose_layout("mariadb", (10, 11, 19), "native", preferred=Layout.TIME_LAST) is Layout.TIME_LAST
    # ...but a preference that would scatter inserts is not honoured
    assert choose_layout("postgresql", (15,), "native", preferred=Layout.TIME_LAST) is Layout.TIME_FIRST


def test_unknown_combinations_raise():
    with pytest.raises(UnknownLayoutError, match="mysql"):
        choose_layout("mysql", (8, 0), "native")
    with pytest.raises(UnknownLayoutError):
        choose_layout("informix", None, "native")
    assert choose_layout("informix", None, "text") is Layout.TIME_FIRST


def test_prefix_placement_follows_the_v4_bits():
    assert choose_prefix_layout("postgresql", (15,), "native") is Layout.TIME_FIRST
    assert choose_prefix_layout("mssql", (16,), "native") is Layout.TIME_LAST
    # MariaDB >= 10.11.5 still swaps version 4 values
    assert choose_prefix_layout("mariadb", (10, 11, 19), "native") is Layout.TIME_LAST


def test_mariadb_versions_and_refused_bits():
    assert not mariadb_swaps_selectively((10, 11, 4))
    assert mariadb_swaps_selectively((10, 11, 5))
    assert mariadb_swaps_selectively((11, 2, 0))
    assert not mariadb_swaps_selectively((10, 9, 7))
    rfc_v8 = uuid.UUID(int=(8 << 76) | (0b10 << 62))
    assert compare_order("mariadb", (10, 11, 19), "native", rfc_v8) is None


def test_vendor_names_and_default_storage():
    assert normalize_vendor("mysql", is_mariadb=True) == "mariadb"
    assert normalize_vendor("microsoft") == "mssql"
    assert default_storage("postgresql", (15,)) is Storage.NATIVE
    assert default_storage("mariadb", (10, 6, 1)) is Storage.BINARY
    assert default_storage("mariadb", (10, 11, 1)) is Storage.NATIVE
    assert default_storage("sqlite", None) is Storage.BINARY
    assert default_storage("firebird", None) is Storage.TEXT


def test_every_vendor_module_answers_every_question_of_the_rules():
    """Each vendor module states every name of VendorRules (mypy reads a module against the protocol only
    where it is used as one; an answer a module lacks would be an AttributeError at the first question)."""
    import inspect

    from seqid_orm.vendors import VENDORS, rules_for
    from seqid_orm.vendors._base import VendorRules

    names = {n for n in dir(VendorRules) if not n.startswith("_")} | set(VendorRules.__annotations__)
    assert {"ONLINE", "DOCTOR", "quote_identifier", "column_catalog", "TYPE_CHANGE_HOLDS"} <= names
    for vendor in (*VENDORS, "generic"):
        module = rules_for(vendor)
        missing = sorted(n for n in names if not hasattr(module, n))
        assert missing == [], f"{inspect.getmodule(module).__name__} lacks {missing}"
