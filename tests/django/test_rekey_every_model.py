"""A Django project that wants every model on seqid keys changes them in one run: ``Tag``, ``Parent`` (a
many-to-many field to ``Tag``: Django's table between two re-keyed tables, its unique pair holding a column of
each) and ``Child`` (a foreign key to ``Parent``, itself re-keyed) all get ``SeqUUIDField`` keys, and
``makemigrations`` writes one expand migration and one contract migration for the three.  Run by ``manage.py
migrate`` in processes of their own on both servers: the model state right at each, every child on its parent
and every pair on its two rows (row by row, by the kept integers), a pair the table holds refused through the
ORM after each step, and all of it unapplied back to the integer keys."""

from __future__ import annotations

import uuid

import pytest

from tests.django.test_rekey import Project

pytestmark = pytest.mark.slow

PARENTS = 2_000

RELEASE_N = """
from django.db import models

class Tag(models.Model):
    name = models.CharField(max_length=20)

class Parent(models.Model):
    name = models.CharField(max_length=20)
    tags = models.ManyToManyField(Tag)
    boss = models.ForeignKey("self", null=True, on_delete=models.SET_NULL)
    friends = models.ManyToManyField("self", symmetrical=False, related_name="fans")

class Child(models.Model):
    parent = models.ForeignKey(Parent, null=True, on_delete=models.SET_NULL)
"""

# release N+1: every model's key a SeqUUIDField, nothing else changed
RELEASE_N1 = RELEASE_N.replace(
    "from django.db import models\n", "from django.db import models\nfrom seqid_orm.django import SeqUUIDField\n"
).replace("(models.Model):\n", "(models.Model):\n    id = SeqUUIDField(primary_key=True)\n")

#: Release N+1's code through the ORM: a pair the many-to-many table holds is refused, a new one taken
PAIRS = (
    "from django.db import IntegrityError, transaction; from shop.models import Parent, Tag; "
    "T = Parent.tags.through; f = T.objects.order_by('parent_id', 'tag_id').first(); n = T.objects.count()\n"
    "try:\n with transaction.atomic():\n  T.objects.create(parent_id=f.parent_id, tag_id=f.tag_id)\n"
    "except IntegrityError: print('refused', end=' ')\n"
    "f.parent.tags.add(Tag.objects.exclude(parent=f.parent).first()); print(T.objects.count() - n)"
)


def _pairs(project: Project, parent: str, tag: str) -> set[tuple[int, int]]:
    """Each pair of the many-to-many table as the two rows' integer keys (``parent``, ``tag``: their columns)."""
    rows = project.sql(
        f"SELECT p.{parent}, t.{tag} FROM shop_parent_tags x JOIN shop_parent p ON p.id = x.parent_id "
        "JOIN shop_tag t ON t.id = x.tag_id"
    )
    return {(int(a), int(b)) for a, b in rows}


def _selves(project: Project, parent: str) -> tuple[set, set]:
    """Each parent with its boss, and each friends' pair, by ``parent`` (the column of the integer keys)."""
    bosses = project.sql(
        f"SELECT c.{parent}, b.{parent} FROM shop_parent c LEFT JOIN shop_parent b ON b.id = c.boss_id"
    )
    friends = project.sql(
        f"SELECT f.{parent}, t.{parent} FROM shop_parent_friends x JOIN shop_parent f ON f.id = x.from_parent_id "
        "JOIN shop_parent t ON t.id = x.to_parent_id"
    )
    return set(bosses), set(friends)


def _kinds(key: str, kept: str) -> dict[tuple[str, str], str]:
    """Each key and foreign key column's type after the contract: ``key`` every model's, ``kept`` the key of
    Django's own many-to-many table between them, which keeps its integer."""
    columns = [("shop_tag", "id"), ("shop_parent", "id"), ("shop_child", "id"), ("shop_child", "parent_id")]
    columns += [("shop_parent_tags", "parent_id"), ("shop_parent_tags", "tag_id")]
    return {**dict.fromkeys(columns, key), ("shop_parent_tags", "id"): kept}


def _children(project: Project, child: str, parent: str) -> dict[int, int | None]:
    rows = project.sql(f"SELECT c.{child}, p.{parent} FROM shop_child c LEFT JOIN shop_parent p ON p.id = c.parent_id")
    return {int(c): (None if p is None else int(p)) for c, p in rows}


@pytest.mark.server_database
def test_every_model_of_an_app_gets_seqid_keys_in_one_run_of_makemigrations(tmp_path):
    project = Project(tmp_path)
    try:
        (project.migrations / "0001_initial.py").unlink()
        (project.tmp / "shop" / "models.py").write_text(RELEASE_N)
        project.done("makemigrations", "shop")
        project.done("migrate", "shop")
        pg = project.vendor == "postgresql"
        rows = f"generate_series(1, {PARENTS}) g" if pg else f"seq_1_to_{PARENTS}"
        n = "g" if pg else "seq"
        project.sql(f"INSERT INTO shop_tag (name) SELECT 't' FROM {rows.replace(str(PARENTS), '20')}")
        project.sql(f"INSERT INTO shop_parent (name) SELECT 'p' FROM {rows}")
        project.sql(
            f"INSERT INTO shop_child (parent_id) SELECT CASE WHEN {n} %% 7 = 0 THEN NULL ELSE {n} END FROM {rows}"
        )
        project.sql(
            f"INSERT INTO shop_parent_tags (parent_id, tag_id) SELECT {n}, {n} %% 20 + 1 FROM {rows} UNION ALL "
            f"SELECT {n}, ({n} + 7) %% 20 + 1 FROM {rows}"
        )
        project.sql("UPDATE shop_parent SET boss_id = id - 1 WHERE id > 1")
        project.sql(
            f"INSERT INTO shop_parent_friends (from_parent_id, to_parent_id) SELECT {n}, {n} + 1 FROM {rows} "
            f"WHERE {n} < {PARENTS}"
        )
        pairs, children, selves = _pairs(project, "id", "id"), _children(project, "id", "id"), _selves(project, "id")

        (project.tmp / "shop" / "models.py").write_text(RELEASE_N1)
        out, _err = project.done("makemigrations", "shop")
        expand = sorted(project.migrations.glob("0002_expand_*_key.py"))
        contract = sorted(project.migrations.glob("0003_contract_*_key.py"))
        assert len(expand) == len(contract) == 1, out
        written = expand[0].read_text(), contract[0].read_text()
        for model in ("tag", "parent", "child"):  # one run: every model's expand in the one, contract in the other
            assert all(f"model_name='{model}'" in text or f'model_name="{model}"' in text for text in written)
        assert written[0].count("RekeyExpand(") == 3 and written[1].count("RekeyContract(") == 3

        # release N: its models with the expand migration; release N+1: the contract with its own
        held = project.tmp / contract[0].name
        contract[0].rename(held)
        (project.tmp / "shop" / "models.py").write_text(RELEASE_N)
        project.done("makemigrations", "shop", "--check", "--dry-run")
        project.done("migrate", "shop")
        assert _pairs(project, "id", "id") == pairs
        (project.tmp / "shop" / "models.py").write_text(RELEASE_N1)
        held.rename(contract[0])
        project.done("makemigrations", "shop", "--check", "--dry-run")
        project.done("migrate", "shop")

        assert _pairs(project, "id_int", "id_int") == pairs  # every pair on its two rows, by the kept integers
        assert _children(project, "id_int", "id_int") == children
        assert _selves(project, "id_int") == selves  # the boss and the friends of each, by the kept integers
        kinds = project.sql(
            "SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = "
            + ("'public'" if pg else "DATABASE()")
            + " AND table_name IN ('shop_tag', 'shop_parent', 'shop_child', 'shop_parent_tags') "
            "AND column_name IN ('id', 'parent_id', 'tag_id')"
        )
        assert {(str(t), str(c)): str(k).lower() for t, c, k in kinds} == _kinds("uuid", "bigint")
        out, _err = project.done("shell", "-c", PAIRS)
        assert out.splitlines()[-1] == "refused 1", out
        project.sql(  # the pair the ORM added, its old keys filled (the way back needs them)
            "UPDATE shop_parent_tags SET parent_id_int = (SELECT id_int FROM shop_parent WHERE shop_parent.id = "
            "shop_parent_tags.parent_id), tag_id_int = (SELECT id_int FROM shop_tag WHERE shop_tag.id = "
            "shop_parent_tags.tag_id) WHERE parent_id_int IS NULL OR tag_id_int IS NULL"
        )
        added = _pairs(project, "id_int", "id_int") - pairs

        project.done("migrate", "shop", "0001")  # unapplied: the integer keys again, every row on its rows
        assert _pairs(project, "id", "id") == pairs | added and len(added) == 1
        assert _children(project, "id", "id") == children and _selves(project, "id") == selves
        (project.tmp / "shop" / "models.py").write_text(RELEASE_N)
        out, _err = project.done("shell", "-c", PAIRS)
        assert out.splitlines()[-1] == "refused 1", out
    finally:
        project.drop()


def _sqlite_keys(project: Project, table: str, column: str = "id") -> dict[str, int]:
    """Each stored key of ``table.column`` (32 hex digits) and the integer it carries."""
    from seqid_orm.ids.layout import Layout
    from seqid_orm.ids.rekeyed import integer_of

    found = {}
    for (key,) in project.sql(f"SELECT {column} FROM {table} WHERE {column} IS NOT NULL"):
        n = integer_of(uuid.UUID(str(key)), Layout.TIME_FIRST)  # SQLite compares bytes: time first
        assert n is not None, key
        found[str(key)] = n
    return found


@pytest.mark.sqlite_settings
def test_on_sqlite_the_contract_makes_the_tables_again_in_one_transaction(tmp_path):
    """The same app and migrations on SQLite, where nothing changes online: the expand migration changes
    nothing, the contract makes the tables again (Django's rebuild) and gives every row its key of its integer,
    in the integer's order; the way back is refused while a row the new release inserted has no integer, nothing
    changed, then done once it is gone."""
    project = Project(tmp_path, sqlite=True)
    (project.migrations / "0001_initial.py").unlink()
    (project.tmp / "shop" / "models.py").write_text(RELEASE_N)
    project.done("makemigrations", "shop")
    project.done("migrate", "shop")
    rows = f"(WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {PARENTS}) SELECT n FROM g)"
    project.sql(f"INSERT INTO shop_tag (name) SELECT 't' FROM {rows} WHERE n <= 20")
    project.sql(f"INSERT INTO shop_parent (name) SELECT 'p' || n FROM {rows}")
    project.sql(f"INSERT INTO shop_child (parent_id) SELECT CASE WHEN n % 7 = 0 THEN NULL ELSE n END FROM {rows}")
    project.sql(
        f"INSERT INTO shop_parent_tags (parent_id, tag_id) SELECT n, n % 20 + 1 FROM {rows} UNION ALL "
        f"SELECT n, (n + 7) % 20 + 1 FROM {rows}"
    )
    project.sql("UPDATE shop_parent SET boss_id = id - 1 WHERE id > 1")
    project.sql(
        f"INSERT INTO shop_parent_friends (from_parent_id, to_parent_id) SELECT n, n + 1 FROM {rows} "
        f"WHERE n < {PARENTS}"
    )
    pairs, children, selves = _pairs(project, "id", "id"), _children(project, "id", "id"), _selves(project, "id")
    names = dict(project.sql("SELECT id, name FROM shop_parent"))

    (project.tmp / "shop" / "models.py").write_text(RELEASE_N1)
    project.done("makemigrations", "shop")
    [expand] = project.migrations.glob("0002_expand_*_key.py")
    assert len(list(project.migrations.glob("0003_contract_*_key.py"))) == 1
    project.done("migrate", "shop", expand.stem)
    assert _pairs(project, "id", "id") == pairs  # the expand step changed nothing
    project.done("migrate", "shop")

    kinds = {
        (t, str(c)): str(k).lower()
        for t in ("shop_tag", "shop_parent", "shop_child", "shop_parent_tags")
        for _, c, k, *_ in project.sql(f"PRAGMA table_info({t})")
        if c in ("id", "parent_id", "tag_id")
    }
    assert kinds == _kinds("char(32)", "integer")
    parent, tag, child = (_sqlite_keys(project, t) for t in ("shop_parent", "shop_tag", "shop_child"))
    rows_now = project.sql(
        "SELECT x.parent_id, x.tag_id FROM shop_parent_tags x JOIN shop_parent p ON p.id = x.parent_id "
        "JOIN shop_tag t ON t.id = x.tag_id"
    )
    assert {(parent[str(p)], tag[str(t)]) for p, t in rows_now} == pairs  # every pair on its two rows
    now = project.sql("SELECT c.id, c.parent_id FROM shop_child c LEFT JOIN shop_parent p ON p.id = c.parent_id")
    assert {child[str(c)]: (None if p is None else parent[str(p)]) for c, p in now} == children
    bosses, friends = _selves(project, "id")
    integer = {None: None, **parent}
    assert ({(integer[a], integer[b]) for a, b in bosses}, {(integer[a], integer[b]) for a, b in friends}) == selves
    ordered = [n for (n,) in project.sql("SELECT name FROM shop_parent ORDER BY id")]
    assert ordered == [names[i] for i in sorted(names)]  # ORDER BY the key reads them in the integers' order
    assert project.sql("PRAGMA foreign_key_check") == []
    out, _err = project.done("shell", "-c", PAIRS)
    assert out.splitlines()[-1] == "refused 1", out

    out, _err = project.done("shell", "-c", "from shop.models import Tag; print(Tag.objects.create(name='new').pk.hex)")
    made = out.splitlines()[-1]
    before = project.sql("SELECT sql FROM sqlite_master ORDER BY name"), _sqlite_keys(project, "shop_parent")
    said = project.refused("migrate", "shop", "0001")
    assert "MigrationRefusedError" in said and "carry no integer" in said and str(uuid.UUID(made)) in said, said[-2000:]
    assert (project.sql("SELECT sql FROM sqlite_master ORDER BY name"), _sqlite_keys(project, "shop_parent")) == before
    project.sql(f"DELETE FROM shop_tag WHERE id = '{made}'")
    project.done("migrate", "shop", "0001")
    assert _children(project, "id", "id") == children and _selves(project, "id") == selves
    assert _pairs(project, "id", "id") >= pairs and len(_pairs(project, "id", "id")) == len(pairs) + 1
    assert project.sql("SELECT type FROM pragma_table_info('shop_parent') WHERE name = 'id'") == [("INTEGER",)]


TEXT_RELEASE_N = """
from django.db import models

class Parent(models.Model):
    id = models.CharField(max_length=36, primary_key=True)

class Child(models.Model):
    parent = models.ForeignKey(Parent, on_delete=models.CASCADE)
"""

TEXT_RELEASE_N1 = TEXT_RELEASE_N.replace(
    "from django.db import models\n", "from django.db import models\nfrom seqid_orm.django import SeqUUIDField\n"
).replace("models.CharField(max_length=36, primary_key=True)", "SeqUUIDField(primary_key=True)")


@pytest.mark.sqlite_settings
def test_on_sqlite_a_key_of_uuids_kept_as_text_becomes_the_fields_hex_and_back(tmp_path):
    """A ``CharField`` key of UUIDs as text on SQLite: the contract's rebuild stores each as the field does (32
    hex digits), every child on its parent, a table no model has among them; a text that is no UUID is refused
    before any change; the way back gives each its canonical text."""
    project = Project(tmp_path, sqlite=True)
    (project.migrations / "0001_initial.py").unlink()
    (project.tmp / "shop" / "models.py").write_text(TEXT_RELEASE_N)
    project.done("makemigrations", "shop")
    project.done("migrate", "shop")
    keys = [str(uuid.uuid4()) for _ in range(50)]
    project.sql("INSERT INTO shop_parent (id) VALUES " + ", ".join(f"('{k}')" for k in keys))
    project.sql("INSERT INTO shop_child (parent_id) VALUES " + ", ".join(f"('{k}')" for k in keys[::2]))
    children = dict(project.sql("SELECT id, parent_id FROM shop_child"))
    # a table no model has (another application's): made again of its own text, its foreign key with it
    project.sql(
        "CREATE TABLE legacy_note (id INTEGER PRIMARY KEY, parent_id varchar(36) "
        "REFERENCES shop_parent (id) ON DELETE CASCADE)"
    )
    project.sql("INSERT INTO legacy_note (parent_id) VALUES " + ", ".join(f"('{k}')" for k in keys[1::3]))
    notes = dict(project.sql("SELECT id, parent_id FROM legacy_note"))
    project.sql("INSERT INTO shop_parent (id) VALUES ('not-a-uuid')")
    (project.tmp / "shop" / "models.py").write_text(TEXT_RELEASE_N1)
    project.done("makemigrations", "shop")
    schema = project.sql("SELECT sql FROM sqlite_master ORDER BY name")
    said = project.refused("migrate", "shop")
    assert "MigrationRefusedError" in said and "not-a-uuid" in said, said[-2000:]
    assert project.sql("SELECT sql FROM sqlite_master ORDER BY name") == schema  # nothing changed
    project.sql("DELETE FROM shop_parent WHERE id = 'not-a-uuid'")
    project.done("migrate", "shop")
    stored = dict(project.sql("SELECT id, parent_id FROM shop_child"))
    assert stored == {c: uuid.UUID(p).hex for c, p in children.items()}
    assert {k for (k,) in project.sql("SELECT id FROM shop_parent")} == {uuid.UUID(k).hex for k in keys}
    assert dict(project.sql("SELECT id, parent_id FROM legacy_note")) == {n: uuid.UUID(p).hex for n, p in notes.items()}
    assert project.sql("SELECT type FROM pragma_table_info('legacy_note') WHERE name = 'parent_id'") == [("char(32)",)]
    assert project.sql("PRAGMA foreign_key_check") == []
    [(text,)] = project.sql("SELECT sql FROM sqlite_master WHERE name = 'legacy_note'")
    assert "REFERENCES shop_parent (id) ON DELETE CASCADE" in text, text
    project.done("migrate", "shop", "0001")
    assert dict(project.sql("SELECT id, parent_id FROM shop_child")) == children
    assert dict(project.sql("SELECT id, parent_id FROM legacy_note")) == notes
    assert project.sql("PRAGMA foreign_key_check") == []


@pytest.mark.sqlite_settings
def test_a_fresh_database_migrates_past_a_contract_whose_model_a_later_migration_deleted(tmp_path):
    """``migrate`` on a new database runs every migration, the rekey's among them, though the model they change
    is gone from the code (a later migration deleted it): seqid's check of what the run converts skips it."""
    project = Project(tmp_path, sqlite=True)
    (project.migrations / "0001_initial.py").unlink()
    models = project.tmp / "shop" / "models.py"
    models.write_text(
        TEXT_RELEASE_N.replace(
            "models.CharField(max_length=36, primary_key=True)", "models.AutoField(primary_key=True)"
        )
    )
    project.done("makemigrations", "shop")
    models.write_text(TEXT_RELEASE_N1)
    project.done("makemigrations", "shop")
    models.write_text("")
    project.done("makemigrations", "shop")
    assert len(list(project.migrations.glob("0*.py"))) == 4  # the models, expand, contract, their deletion
    project.done("migrate", "shop")
    assert project.sql("SELECT name FROM sqlite_master WHERE name LIKE 'shop_%'") == []


@pytest.mark.sqlite_settings
def test_on_sqlite_a_parent_of_multi_table_inheritance_is_made_again_with_its_childrens_children(tmp_path):
    """``Restaurant(Place)`` and a review of a restaurant: Django's rebuild of ``Place`` makes the restaurants'
    table again (its key is its link to a place) but not the reviews', whose foreign key references the
    restaurants' key; the rebuild now follows that key too.  Every review on its restaurant on its place after
    the contract and after the way back; the model state right."""
    from tests.django.test_rekey import MTI_READ, mti_project

    project = Project(tmp_path, sqlite=True)
    before = mti_project(project)
    project.done("migrate", "shop")
    assert project.sql(MTI_READ) == before
    assert project.sql("SELECT count(*) FROM shop_review WHERE length(restaurant_id) = 32") == [(40,)]
    project.done("makemigrations", "shop", "--check", "--dry-run")
    project.done("migrate", "shop", "0001")
    assert project.sql(MTI_READ) == before
    assert project.sql("SELECT typeof(restaurant_id), count(*) FROM shop_review GROUP BY 1") == [("integer", 40)]
