"""The public surface: a small top level in one naming scheme, errors in seqid_orm.errors, and 0.1's
0.1's aliases gone (0.2 was never published: nobody imports them)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import seqid_orm
import seqid_orm.errors

TOP_LEVEL = {
    # ids
    "uuid7",
    "comb",
    "comb_batch",
    "comb_at",
    "CombGenerator",
    "Layout",
    "Snowflake",
    "bsv",
    "base32",
    "typeid",
    "uuid_sequence_nextval",
    "uuid_time_nextval",
    # reading back
    "describe",
    "timestamp_of",
    "IdInfo",
    # allocation
    "TicketSequence",
    "WorkerLease",
    # public ids
    "mask",
    "unmask",
    "unmask_any",
    # the errors a caller catches
    "SeqIDError",
    "InvalidIDError",
    "AllocationError",
    "UnmaskError",
}


def test_the_top_level_is_small_and_each_name_is_there():
    assert set(seqid_orm.__all__) == TOP_LEVEL
    for name in seqid_orm.__all__:
        assert getattr(seqid_orm, name) is not None


def test_every_error_lives_in_seqid_orm_errors_and_is_a_seqid_error():
    errors = [v for v in vars(seqid_orm.errors).values() if isinstance(v, type) and issubclass(v, Exception)]
    assert len(errors) >= 20
    assert all(issubclass(e, seqid_orm.SeqIDError) for e in errors)
    for name in ("SeqIDError", "InvalidIDError", "AllocationError", "UnmaskError"):
        assert getattr(seqid_orm, name) is getattr(seqid_orm.errors, name)


def test_importing_the_package_loads_no_adapter_and_no_extra():
    code = (
        "import sys, seqid_orm, seqid_orm.errors, seqid_orm.vendors, seqid_orm.allocation.tickets\n"
        "loaded = {m.split('.')[0] for m in sys.modules}\n"
        "print(sorted(loaded & {'sqlalchemy', 'django', 'redis', 'pydantic', 'psycopg', 'pymysql'}))\n"
        "print(sorted(m for m in sys.modules if m.startswith(('seqid_orm.sqlalchemy', 'seqid_orm.django', "
        "'seqid_orm.pydantic', 'seqid_orm.cli'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split("\n")[:2] == ["[]", "[]"]


@pytest.mark.parametrize("old", ["tickets", "leases", "validate", "server_default", "distributed", "_deprecated"])
def test_the_old_alias_modules_are_gone(old):
    """Only the real homes exist: an old path fails the way any missing module does."""
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"seqid_orm.{old}")


def test_the_old_top_level_names_are_gone():
    for old in ("LeaseLostError", "coerce_uuid", "SnowflakeParts", "layout_for_order"):
        with pytest.raises(AttributeError):
            getattr(seqid_orm, old)
    assert not hasattr(seqid_orm.Snowflake, "leased")


@pytest.mark.parametrize("name", ["online", "live", "adoption", "conversions", "doctor"])
def test_the_schema_features_old_module_paths_still_work_and_say_they_moved(name):
    """The features on live tables moved from seqid_orm.vendors to seqid_orm.schema: the old path is an
    alias for one release, which warns on import and gives the same objects."""
    import importlib
    import sys

    sys.modules.pop(f"seqid_orm.vendors.{name}", None)
    with pytest.warns(DeprecationWarning, match=rf"seqid_orm.vendors.{name} moved to seqid_orm.schema.{name}"):
        old = importlib.import_module(f"seqid_orm.vendors.{name}")
    new = importlib.import_module(f"seqid_orm.schema.{name}")
    assert old.__all__ == new.__all__ and all(getattr(old, n) is getattr(new, n) for n in new.__all__)
