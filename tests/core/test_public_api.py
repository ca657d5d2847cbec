"""The public surface: a small top level in one naming scheme, errors in seqid_orm.errors, and 0.1's
names and module paths kept one release as aliases that warn (DeprecationWarning)."""

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


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("LeaseLostError", seqid_orm.errors.LeaseLostError),
        ("ClockMovedBackwardsError", seqid_orm.errors.ClockMovedBackwardsError),
        ("coerce_uuid", importlib.import_module("seqid_orm.ids.validate").coerce_uuid),
        ("encode_bsv", importlib.import_module("seqid_orm.ids.text").encode_bsv),
        ("SnowflakeParts", importlib.import_module("seqid_orm.ids.snowflake").SnowflakeParts),
        ("layout_for_order", importlib.import_module("seqid_orm.ids.layout").layout_for_order),
    ],
)
def test_names_that_left_the_top_level_still_work_and_warn(old, new):
    with pytest.warns(DeprecationWarning, match=f"seqid_orm.{old} is deprecated; use seqid_orm"):
        assert getattr(seqid_orm, old) is new
    with pytest.raises(AttributeError):
        seqid_orm.no_such_name  # noqa: B018


@pytest.mark.parametrize(
    ("old", "new", "name"),
    [
        ("seqid_orm.tickets", "seqid_orm.allocation.tickets", "TicketSequence"),
        ("seqid_orm.leases", "seqid_orm.allocation.leases", "WorkerLease"),
        ("seqid_orm.validate", "seqid_orm.ids.validate", "coerce_uuid"),
        ("seqid_orm.server_default", "seqid_orm.vendors", "server_default"),
        ("seqid_orm.distributed", "seqid_orm.vendors.cockroachdb", "hash_sharded_primary_key"),
    ],
)
def test_the_readmes_old_module_paths_still_import_and_warn(old, new, name):
    """Run in a child: a module warns once, when it is first imported."""
    code = (
        "import warnings; warnings.simplefilter('error')\n"
        f"try:\n    from {old} import {name}\nexcept DeprecationWarning as w:\n    print(w)\n"
        f"warnings.simplefilter('ignore')\nfrom {old} import {name} as a\nfrom {new} import {name} as b\n"
        "assert a is b, (a, b)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"{old} moved to {new}" in done.stdout


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
