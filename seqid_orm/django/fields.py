"""Django model fields for seqid ids: the same core decisions and generators as SQLAlchemy.

``SeqUUIDField`` draws its value when the instance is created, so ``obj.pk`` is known before
``save()``, in the layout of the database the instance will be written to
(``router.db_for_write``).  If the first save goes to another database (``save(using=...)``,
``objects.using(...).create()``) whose layout differs, an id seqid drew is re-issued for that
database in ``pre_save``; an id you set yourself is never touched.
"""

from __future__ import annotations

import contextvars
import threading
import uuid
import weakref
from typing import Any

import django
from django.conf import settings
from django.core import checks, validators
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.core.signals import setting_changed
from django.db import DEFAULT_DB_ALIAS, connections, models, router
from django.db.models.signals import pre_save
from django.utils.module_loading import import_string

from ..allocation.leases import WorkerLease
from ..allocation.stores.django import DjangoLeaseStore
from ..errors import (
    ArgumentTypeError,
    InvalidIDError,
    SeqIDError,
    ServerDefaultUnavailableError,
    StorageMismatchError,
    UnknownLayoutError,
)
from ..ids.comb import comb
from ..ids.layout import Layout, as_layout
from ..ids.prefixed import check_time_prefix, time_prefix_bounds
from ..ids.snowflake import Snowflake
from ..ids.text import base32, bsv, check_text_id, text_bounds, text_id_kind
from ..ids.validate import BIGINT_MAX, coerce_int_id
from ..vendors import Storage, Target, normalize_vendor, rules_for, target
from .connection import column_target, field_target, kept, storage_of
from .expressions import DatabaseSeqUUID
from .lookups import CreatedIn

# Ids this process drew for SeqUUIDFields and has not seen saved yet (compared by value), with the
# target each was drawn for (its layout and adopted keys); only projects with several databases need them (see
# reissue_for_database).
_DRAWN: weakref.WeakKeyDictionary[uuid.UUID, Target] = weakref.WeakKeyDictionary()

# Bumped when the test runner changes DATABASES or SEQID, so kept decisions are made again.
_settings_version = 0


#: ``(alias, app_label.model, field)`` of the columns the ``migrate`` that runs now converts with a
#: ``ConvertUUIDStorage`` it has yet to apply: ``seqid.E005`` (the column's storage is not the field's)
#: does not stop that ``migrate``, which fixes what it reports (seqid's ``migrate`` command sets it).
CONVERTING: contextvars.ContextVar[frozenset[tuple[str, str, str]]] = contextvars.ContextVar(
    "seqid_converting", default=frozenset()
)


def _on_setting_changed(setting: str, **kwargs: Any) -> None:
    global _settings_version
    if setting in ("DATABASES", "SEQID", "DATABASE_ROUTERS"):
        _settings_version += 1


setting_changed.connect(_on_setting_changed)


def _invalid(exc: SeqIDError, value: object) -> ValidationError:
    """A core refusal as Django reports a field's bad value: code ``"invalid"``, the value in ``params``."""
    return ValidationError(str(exc), code="invalid", params={"value": value})


def seq_uuid_default() -> uuid.UUID:
    """Importable default of :class:`SeqUUIDField` (never a lambda, so migrations serialize it).

    Called on its own it returns a UUIDv7; the field replaces it with an id in the layout of
    the model's database.
    """
    return comb(Layout.TIME_FIRST)


class SeqUUIDField(models.UUIDField):
    """A ``UUIDField`` whose default is a time-ordered id in the layout of its database.

    A drop-in for ``UUIDField(default=uuid.uuid4)``: the same column on every backend, the same
    values accepted on every path (save, lookups, ``to_python``, ``clean``, forms, DRF: a
    ``uuid.UUID``, its text with or without hyphens, braces or ``urn:uuid:``, an ``int``), the same
    messages and codes, the same editability (write ``editable=False`` to hide it, as Django's docs
    show).  Stricter in two places no swap can rely on: ``True``/``False`` (which ``UUIDField`` reads
    as ``UUID(int=1)``/``UUID(int=0)``) and a ``uuid.UUID`` whose ``int`` is not 128 bits are refused.

    ``layout`` forces a :class:`~seqid_orm.Layout` where the database allows it (for example
    ``"time_last"`` on MariaDB's native ``UUID``); a layout that would scatter inserts on that
    database is not honoured.
    """

    description = "Time-ordered UUID in the layout of its database"

    def __init__(self, *args: Any, layout: Layout | str | None = None, **kwargs: Any) -> None:
        self.layout = None if layout is None else as_layout(layout)
        self._layouts = {}
        if isinstance(kwargs.get("db_default"), DatabaseSeqUUID):
            if django.VERSION < (5, 0):
                raise ImproperlyConfigured("DatabaseSeqUUID needs Django 5.0+ (db_default)")
            kwargs["db_default"] = kwargs["db_default"].bind(self)  # the column type picks its SQL
        if "db_default" not in kwargs:  # with db_default the database makes the id
            kwargs.setdefault("default", seq_uuid_default)
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> tuple[str, str, list[Any], dict[str, Any]]:
        name, _path, args, kwargs = super().deconstruct()
        if kwargs.get("default") is seq_uuid_default:
            del kwargs["default"]
        if self.layout is not None:
            kwargs["layout"] = self.layout.value
        return name, "seqid_orm.django.SeqUUIDField", args, kwargs

    # database alias -> (settings version, the target this field's values are written for there): the
    # column's own target is the live one, resolved per connection (column_target)
    _layouts: dict[str, tuple[int, Target]]

    def _where(self, alias: str, connection: Any) -> Target:
        """The target of this field's type on ``alias`` (its ``db_type`` there), kept per alias."""
        kept = self._layouts.get(alias)
        if kept is None or kept[0] != _settings_version:
            kept = self._layouts[alias] = (_settings_version, field_target(self, connection))
        return kept[1]

    def _decided(self, alias: str) -> Target:
        """The target of this field's column on ``alias``'s connection of this thread (:meth:`_decided_on`)."""
        return self._decided_on(connections[alias])

    def target_for(self, alias: str) -> Target:
        """Where this field's ids go on database ``alias``: the column's :class:`~seqid_orm.vendors.Target`,
        storage, layout and adopted keys included."""
        return self._decided_on(connections[alias])

    def time_bounds_for(self, alias: str, start: Any, end: Any) -> tuple[uuid.UUID, uuid.UUID]:
        """The keys between which rows made in ``[start, end)`` lie on database ``alias`` (``id__created_in``)."""
        return self._decided(alias).time_bounds(start, end)

    def time_prefix_bounds_for(
        self, alias: str, start: Any, end: Any, time_prefix: Any
    ) -> list[tuple[uuid.UUID, uuid.UUID]]:
        """The key ranges (both ends included) of :func:`~seqid_orm.uuid_time_nextval` keys made in
        ``[start, end)`` with ``time_prefix=(interval_length, interval_count)``, where this field's
        column on ``alias`` compares the prefix first (``id__created_in=(start, end, time_prefix)``)."""
        layout = self._decided(alias).prefix_layout
        return time_prefix_bounds(start, end, *check_time_prefix(time_prefix), layout=layout)

    def layout_for(self, alias: str) -> Layout:
        """The layout of ids for this field on database ``alias``; an adopted column's keys are made in
        it with one bits first (:meth:`target_for`)."""
        return self._decided(alias).layout

    def new_value(self, alias: str | None = None) -> uuid.UUID:
        """A new id for database ``alias`` (default: where the router writes this model)."""
        if alias is None:
            model = getattr(self, "model", None)
            alias = router.db_for_write(model) if model is not None else DEFAULT_DB_ALIAS
        where = self._decided_on(connections[alias or DEFAULT_DB_ALIAS])
        value = where.generator.id_function()
        _DRAWN[value] = where
        return value

    def get_default(self) -> Any:
        if self.default is seq_uuid_default:
            return self.new_value()
        return super().get_default()

    def to_python(self, value: Any) -> Any:
        """What ``UUIDField.to_python`` reads (forms, fixtures, lookups, values read back), with its
        message and code: a ``uuid.UUID`` or a subclass of it (asyncpg's, a library's) as it is, as
        ``UUIDField`` takes them; ``bool`` and a ``uuid.UUID`` whose ``int`` is not 128 bits are refused."""
        if value is None:
            return value
        if isinstance(value, uuid.UUID):
            number = value.int
            if isinstance(number, int) and 0 <= number < 1 << 128:
                return value
        elif isinstance(value, (str, int)) and not isinstance(value, bool):
            return super().to_python(value)
        # UUIDField would take True as UUID(int=1), pass a forged UUID on, and let bytes raise TypeError
        raise ValidationError(self.error_messages["invalid"], code="invalid", params={"value": value})

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        """Every bind goes through :meth:`to_python`: a bad key is a ``ValidationError`` before any SQL;
        and a key bound for a column whose values are in another form than this field writes (a
        ``char(32)`` column Django 4.2 made on MariaDB, upper-case text another program wrote) is
        refused (:class:`~seqid_orm.errors.StorageMismatchError`) rather than looked up and missed."""
        value = self.to_python(value)
        if value is not None:
            self._decided_on(connection)
        return super().get_db_prep_value(value, connection, prepared)

    def _decided_on(self, connection: Any) -> Target:
        """The target of this field's column as its name resolves on ``connection`` (:func:`column_target`:
        the adoption's record, the values' form; two dictionary look-ups once read), or the field's own
        where the column cannot be read now."""
        key = (self, _settings_version)  # a settings change (SEQID, DATABASES) decides the field's target again
        known = kept(connection, key)
        if known is not None:
            return known.target
        return column_target(self, connection, self._where(connection.alias, connection), key)[0]

    def contribute_to_class(self, cls: type[models.Model], name: str, private_only: bool = False) -> None:
        super().contribute_to_class(cls, name, private_only=private_only)
        if not cls._meta.abstract:
            pre_save.connect(
                _reissue_for_target_database, sender=cls, weak=False, dispatch_uid=f"seqid:{cls._meta.label}"
            )

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        return [*super().check(**kwargs), *self._check_databases(kwargs.get("databases") or [])]

    def _check_databases(self, databases: list[str]) -> list[checks.CheckMessage]:
        return [m for alias in databases for m in self.check_connection(alias, connections[alias])]

    def check_connection(self, alias: str, connection: Any) -> list[checks.CheckMessage]:
        """This field's checks against one database connection (``seqid.E003``, ``seqid.E005``,
        ``seqid.W001``)."""
        found: list[checks.CheckMessage] = []
        try:  # the column as it is there (read only where the check may use the database)
            column_target(self, connection)
        except StorageMismatchError as exc:
            if (alias, self.model._meta.label_lower, self.name) in CONVERTING.get():
                return found  # the migrate that runs now converts it (ConvertUUIDStorage): no reason to stop it
            found.append(
                checks.Error(
                    f"database {alias!r}: {exc}",
                    hint="Convert the column (ConvertUUIDStorage) or give the field the column's type; until then "
                    "seqid refuses to write a key there.",
                    obj=self,
                    id="seqid.E005",
                )
            )
        db_default = getattr(self, "db_default", None)
        if isinstance(db_default, DatabaseSeqUUID):
            try:
                db_default.for_connection(connection)
            except ServerDefaultUnavailableError as exc:
                found.append(
                    checks.Error(
                        f"database {alias!r} cannot generate this field's ids: {exc}",
                        hint="Drop db_default: SeqUUIDField then generates the id in Python for any database.",
                        obj=self,
                        id="seqid.E003",
                    )
                )
        try:
            storage = storage_of(self, connection)
            # a native UUID column on the mysql backend means MariaDB (MySQL has none); the server
            # version is not asked: a system check runs before anything needs the database
            vendor = normalize_vendor(connection.vendor, is_mariadb=storage is Storage.NATIVE)
            target(vendor, None, storage, self.layout).layout  # noqa: B018 - raises where none fits
        except UnknownLayoutError as exc:
            found.append(
                checks.Warning(
                    f"seqid_orm does not know how database {alias!r} orders UUIDs: {exc}",
                    hint="Run `seqid probe` against it, or pass layout= explicitly.",
                    obj=self,
                    id="seqid.W001",
                )
            )
        return found


def _reissue_for_target_database(sender: type, instance: models.Model, raw: bool, using: str, **kwargs: Any) -> None:
    if raw or not instance._state.adding:
        return
    reissue_for_database(instance, using)


def reissue_for_database(instance: models.Model, using: str) -> None:
    """Draw again the ``SeqUUIDField`` values seqid drew for ``instance`` in a layout other than database
    ``using``'s (the model was built before the router or ``using=`` chose where it goes); a value the
    user gave is never replaced."""
    for field in instance._meta.concrete_fields:
        if not isinstance(field, SeqUUIDField):
            continue
        value = getattr(instance, field.attname)
        drawn = _DRAWN.get(value) if value.__class__ is uuid.UUID else None  # text takes no weak reference
        if drawn is None:
            continue
        if drawn != field.target_for(using):
            setattr(instance, field.attname, field.new_value(using))


# --- Snowflake -------------------------------------------------------------------------

_generators: dict[str, Snowflake] = {}
# Held while a generator is looked up and built: two threads making the first call at once would
# otherwise build two generators on one configured worker id, and they could make the same id.
_generators_lock = threading.Lock()


#: What to add to the settings for SnowflakeField (in its errors and checks).
SNOWFLAKE_SETTING = (
    'add SEQID = {"SNOWFLAKE": {"worker_id": 1}} (an int unique to each running process, 0-31 with '
    "datacenter_id 0-31, or the dotted path of a callable returning it), or lease one instead: "
    'SEQID = {"SNOWFLAKE": {"lease": {"namespace": "myproject"}}} (needs "seqid_orm.django" in INSTALLED_APPS)'
)


def settings_snowflake() -> Snowflake:
    """The process's Snowflake built from ``settings.SEQID["SNOWFLAKE"]`` (created on first use).

    ``worker_id`` may be an int or the dotted path of a callable returning one.  Or lease it:
    ``{"lease": {"namespace": "orders-api", "using": "default", "ttl": 30}}`` takes a worker id
    from the ``seqid_orm.django`` app's lease table on that database alias, through a connection
    of its own (``"url": ...`` names a SQLAlchemy or Redis store instead); the other keys are the
    Snowflake profile's.  Forked children build their own generator (a leased one takes its own
    lease); one inherited from the parent refuses to run.
    """
    config = dict(getattr(settings, "SEQID", {}).get("SNOWFLAKE", {}))
    if "worker_id" not in config and "lease" not in config:
        raise ImproperlyConfigured(
            f"SnowflakeField needs a worker id, and settings.SEQID has none: {SNOWFLAKE_SETTING}"
        )
    key = repr(sorted((k, repr(v)) for k, v in config.items()))
    with _generators_lock:
        return _settings_snowflake(key, config)


def _settings_snowflake(key: str, config: dict[str, Any]) -> Snowflake:
    gen = _generators.get(key)
    if gen is not None and (not gen.forked or gen.source is not None):  # a leased one takes its own lease
        return gen
    lease = config.pop("lease", None)
    if lease is not None:
        if "worker_id" in config:
            raise ImproperlyConfigured("SEQID['SNOWFLAKE'] takes a worker_id or a lease, not both")
        options = dict(lease)
        namespace = options.pop("namespace", None)
        if not isinstance(namespace, str):
            raise ImproperlyConfigured("SEQID['SNOWFLAKE']['lease'] needs a 'namespace' (str)")
        url = options.pop("url", None)
        using = options.pop("using", "default")
        store = url if url is not None else DjangoLeaseStore(using, timeout=options.get("timeout", 5.0))
        gen = Snowflake(worker_id=WorkerLease(store, namespace, **options), **config)
    else:
        worker = config.get("worker_id", 0)
        if isinstance(worker, str):
            config["worker_id"] = import_string(worker)()
        gen = Snowflake(**config)
    _generators[key] = gen
    return gen


def close_snowflakes() -> None:
    """Close every leased Snowflake :func:`settings_snowflake` made in this process and forget them.

    Each gives its worker id back (a grant under way included) and closes its lease store's
    connection, so a test database can then be dropped; the next id leases again.  Call it in a
    test's teardown after changing ``SEQID``, as :func:`~seqid_orm.django.close_ticket_sequences`
    for ticket sequences.  A generator on a configured worker id stays: it holds nothing, and a
    second one on the same worker id could make its ids again within the same millisecond.
    """
    leases: list[WorkerLease] = []
    with _generators_lock:
        for key, gen in list(_generators.items()):
            if isinstance(gen.source, WorkerLease):
                leases.append(gen.source)
                del _generators[key]
    for lease in leases:
        lease.close()
        lease.store.close()  # built here (a DjangoLeaseStore), not by the lease


def snowflake_default() -> int:
    """Importable default of :class:`SnowflakeField` configured from settings."""
    return settings_snowflake().next_id()


class IntegerKeyField(models.BigIntegerField):
    """A BIGINT key validated as seqid's SQLAlchemy integer types are (``seqid_orm.ids.validate``).

    Django's integer fields take ``int(12.9) == 12`` and ``True``; this refuses them.  On SQLite
    the column is ``integer``, as for Django's own ``BigAutoField``: only a column declared
    exactly so makes a primary key the rowid (one B-tree ordered by the id); ``bigint`` adds a
    second index.  A primary key is not editable by default, as an ``AutoField`` is not.
    """

    _what = "an integer key value"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("primary_key"):
            kwargs.setdefault("editable", False)
        super().__init__(*args, **kwargs)

    def db_type(self, connection: Any) -> str | None:
        if rules_for(normalize_vendor(connection.vendor)).ROWID_INTEGER_KEY:  # a fact of the vendor
            return "integer"
        return super().db_type(connection)

    def to_python(self, value: Any) -> Any:
        """An ``int`` in ``[0, 2**63)`` or its decimal text, with ``IntegerField``'s messages and codes
        (``invalid``; ``min_value``/``max_value`` for a number a signed BIGINT key cannot be)."""
        if value is None:
            return None
        try:
            return coerce_int_id(value, self._what)
        except SeqIDError:
            number = value if isinstance(value, int) and not isinstance(value, bool) else None
            if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 40:
                number = int(value)
            if number is None:
                raise ValidationError(self.error_messages["invalid"], code="invalid", params={"value": value}) from None
            bound = validators.MinValueValidator(0) if number < 0 else validators.MaxValueValidator(BIGINT_MAX)
            bound(number)  # raises with Django's message
            raise  # pragma: no cover - coerce_int_id refuses only what the branches above name

    def get_prep_value(self, value: Any) -> Any:
        value = models.Field.get_prep_value(self, value)  # resolves lazy values, skips int()
        return self.to_python(value)

    def deconstruct(self) -> tuple[str, str, list[Any], dict[str, Any]]:
        name, path, args, kwargs = super().deconstruct()
        if self.primary_key and kwargs.get("editable") is False:
            del kwargs["editable"]
        return name, path, args, kwargs


class SnowflakeField(IntegerKeyField):
    """A BIGINT filled with Snowflake ids.

    ``generator``: a :class:`~seqid_orm.Snowflake`, or the dotted path of one (kept in
    migrations); by default the generator configured by ``settings.SEQID["SNOWFLAKE"]``.
    """

    description = "Snowflake id (time | datacenter | worker | sequence)"
    _what = "a SnowflakeField value"

    def __init__(self, *args: Any, generator: Snowflake | str | None = None, **kwargs: Any) -> None:
        if generator is not None and not isinstance(generator, (Snowflake, str)):
            raise ArgumentTypeError(f"generator must be a Snowflake or a dotted path, got {type(generator).__name__}")
        self.generator = generator
        self._bound: weakref.WeakSet[Snowflake] = weakref.WeakSet()
        self._last_bound: weakref.ref[Snowflake] | None = None  # the generator bound last: no set look-up a row
        if "default" not in kwargs:
            kwargs["default"] = self._next_from_generator
        super().__init__(*args, **kwargs)

    def _resolve(self) -> Snowflake:
        if isinstance(self.generator, str):
            gen = import_string(self.generator)
            if not isinstance(gen, Snowflake):
                raise ImproperlyConfigured(f"{self.generator} is not a seqid_orm.Snowflake")
            return gen
        assert isinstance(self.generator, Snowflake)
        return self.generator

    def contribute_to_class(self, cls: Any, name: str, private_only: bool = False) -> None:
        # a copy of this field (abstract models, migrations' state) fills its own model's column
        if getattr(getattr(self, "default", None), "__func__", None) is SnowflakeField._next_from_generator:
            setattr(self, "default", self._next_from_generator)  # noqa: B010 (the stubs leave `default` untyped)
            self._bound = weakref.WeakSet()
            self._last_bound = None
        super().contribute_to_class(cls, name, private_only=private_only)

    def time_bounds_for(self, alias: str, start: Any, end: Any) -> tuple[int, int]:
        """The ids between which rows made in ``[start, end)`` lie (``id__created_in``): the first id of
        each instant in this field's generator's profile."""
        return self._generator().time_bounds(start, end)

    def _generator(self) -> Snowflake:
        """The Snowflake filling this field: its own, or the one ``settings.SEQID`` configures."""
        return settings_snowflake() if self.generator is None else self._resolve()

    def _next_from_generator(self) -> int:
        gen = self._generator()
        last = self._last_bound
        if gen.source is not None and (last is None or last() is not gen) and hasattr(self, "model"):
            if gen not in self._bound:
                # a leased generator checks this column for keys another allocator stamped with its
                # worker id (two namespaces, or one on two stores, filling one column)
                from .columns import ModelFloor

                gen.bind_column(ModelFloor(self.model, self))
                self._bound.add(gen)
            self._last_bound = weakref.ref(gen)
        return gen.next_id()

    def deconstruct(self) -> tuple[str, str, list[Any], dict[str, Any]]:
        name, _path, args, kwargs = super().deconstruct()
        if kwargs.get("default") is snowflake_default or (
            getattr(kwargs.get("default"), "__func__", None) is SnowflakeField._next_from_generator
        ):
            del kwargs["default"]
        if isinstance(self.generator, str):
            kwargs["generator"] = self.generator
        return name, "seqid_orm.django.SnowflakeField", args, kwargs

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        """``seqid.W003`` when no worker id is configured (a warning: ``makemigrations`` needs none, and
        the first id says what to add), ``seqid.E002`` when the configuration is wrong."""
        found = list(super().check(**kwargs))
        if self.generator is None and getattr(self.default, "__func__", None) is SnowflakeField._next_from_generator:
            config = getattr(settings, "SEQID", {}).get("SNOWFLAKE", {})
            if "worker_id" not in config and "lease" not in config:
                found.append(
                    checks.Warning(
                        "SnowflakeField has no worker id: settings.SEQID['SNOWFLAKE'] is not set, so no id can be made",
                        hint=SNOWFLAKE_SETTING[0].upper() + SNOWFLAKE_SETTING[1:],
                        obj=self,
                        id="seqid.W003",
                    )
                )
                return found
            try:
                settings_snowflake()
            except (TypeError, ValueError, ImportError, ImproperlyConfigured) as exc:
                found.append(
                    checks.Error(
                        f"settings.SEQID['SNOWFLAKE'] is invalid: {exc}",
                        hint="worker_id and datacenter_id must fit their bit widths (5 bits each in Twitter's "
                        'profile), e.g. SEQID = {"SNOWFLAKE": {"worker_id": 1}}; a lease needs a namespace: '
                        'SEQID = {"SNOWFLAKE": {"lease": {"namespace": "myproject"}}}',
                        obj=self,
                        id="seqid.E002",
                    )
                )
        return found


# --- Sortable text ---------------------------------------------------------------------

_BINARY_NAMES = ("_bin", "_bin2", "binary")


def is_binary_collation(name: str) -> bool:
    """Whether a collation name compares code points (``*_bin``, ``*_BIN2``, ``C``, ``POSIX``)."""
    lowered = name.lower()
    return lowered in ("c", "posix", "binary", "ucs_basic") or lowered.endswith(_BINARY_NAMES)


class SortableTextField(models.CharField):
    """Text ids (``kind="bsv"`` or ``"base32"``) under a binary collation on every vendor.

    bsv ids mix cases: under MySQL/MariaDB's default case-insensitive collation two of them
    that differ only in case would collide.  The collation is chosen per vendor when the
    column is created; set ``db_collation`` only to another binary collation.
    """

    description = "Sortable text id"

    def __init__(self, *args: Any, kind: str = "bsv", **kwargs: Any) -> None:
        kwargs["max_length"], generator = text_id_kind(kind)
        self.kind = kind
        kwargs.setdefault("default", generator)
        if kwargs.get("primary_key"):
            kwargs.setdefault("editable", False)
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> tuple[str, str, list[Any], dict[str, Any]]:
        name, _path, args, kwargs = super().deconstruct()
        kwargs.pop("max_length", None)
        if kwargs.get("default") in (bsv, base32):
            del kwargs["default"]
        if self.primary_key and kwargs.get("editable") is False:
            del kwargs["editable"]
        if self.kind != "bsv":
            kwargs["kind"] = self.kind
        return name, "seqid_orm.django.SortableTextField", args, kwargs

    def db_type(self, connection: Any) -> str | None:
        spec = rules_for(normalize_vendor(connection.vendor)).TEXT_ID_COLUMN
        if spec.charset is not None:
            return f"char({self.max_length}) CHARACTER SET {spec.charset}"
        return super().db_type(connection)

    def time_bounds_for(self, alias: str, start: Any, end: Any) -> tuple[str, str]:
        """The ids between which rows made in ``[start, end)`` lie (``id__created_in``), by kind."""
        return text_bounds(self.kind, start, end)

    def db_parameters(self, connection: Any) -> dict[str, Any]:
        params = super().db_parameters(connection)
        if self.db_collation is None:
            params["collation"] = rules_for(normalize_vendor(connection.vendor)).TEXT_ID_COLUMN.collation
        return params

    def to_python(self, value: Any) -> Any:
        value = super().to_python(value)
        if value is None:
            return value
        try:
            return check_text_id(value, self.kind)
        except InvalidIDError as exc:
            raise _invalid(exc, value) from None

    def get_prep_value(self, value: Any) -> Any:
        return self.to_python(super().get_prep_value(value))

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        found = list(super().check(**kwargs))
        if self.db_collation is not None and not is_binary_collation(self.db_collation):
            found.append(
                checks.Error(
                    f"SortableTextField db_collation {self.db_collation!r} is not a binary collation: "
                    "ids differing only in case would collide or sort out of order.",
                    hint="Leave db_collation unset; seqid_orm picks the binary collation of each database.",
                    obj=self,
                    id="seqid.E001",
                )
            )
        return found


for _field in (SeqUUIDField, SortableTextField, SnowflakeField):
    _field.register_lookup(CreatedIn)  # id__created_in=(start, end)
