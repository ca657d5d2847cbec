"""``op.create_sequential_uuid_functions()`` and its drop: the sequential-uuids generators as SQL functions."""

from __future__ import annotations

from alembic.operations import MigrateOperation, Operations


@Operations.register_operation("create_sequential_uuid_functions")
class CreateSequentialUUIDFunctionsOp(MigrateOperation):
    """``op.create_sequential_uuid_functions(storage=None)``: the sequential-uuids generators as SQL
    functions (PL/pgSQL on PostgreSQL, stored functions on MariaDB; the vendor modules' ``sequential_functions``).

    ``storage`` (MariaDB): the storage of the columns they will fill, which decides where the prefix
    goes (MariaDB's ``UUID`` type compares its last group first); default: the vendor's default.
    """

    def __init__(self, storage: str | None = None, create: bool = True) -> None:
        self.storage = storage
        self.create = create

    @classmethod
    def create_sequential_uuid_functions(cls, operations: Operations, storage: str | None = None) -> None:
        operations.invoke(cls(storage))

    def reverse(self) -> CreateSequentialUUIDFunctionsOp:
        return DropSequentialUUIDFunctionsOp(self.storage, create=False)


@Operations.register_operation("drop_sequential_uuid_functions")
class DropSequentialUUIDFunctionsOp(CreateSequentialUUIDFunctionsOp):
    """``op.drop_sequential_uuid_functions()``."""

    def __init__(self, storage: str | None = None, create: bool = False) -> None:
        super().__init__(storage, create=False)

    @classmethod
    def drop_sequential_uuid_functions(cls, operations: Operations, storage: str | None = None) -> None:
        operations.invoke(cls(storage))

    def reverse(self) -> CreateSequentialUUIDFunctionsOp:
        return CreateSequentialUUIDFunctionsOp(self.storage)


@Operations.implementation_for(CreateSequentialUUIDFunctionsOp)
@Operations.implementation_for(DropSequentialUUIDFunctionsOp)
def _sequential_functions(operations: Operations, operation: CreateSequentialUUIDFunctionsOp) -> None:
    from ...vendors import as_storage
    from ..types import dialect_target

    storage = None if operation.storage is None else as_storage(operation.storage)
    where = dialect_target(operations.get_context().dialect, storage)
    statements = where.sequential_functions() if operation.create else where.drop_sequential_functions()
    for statement in statements:
        operations.execute(statement)
