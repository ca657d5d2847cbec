"""Running the code examples of README.md and docs/ (the root conftest.py collects them with Sybil).

The examples are written as a user reads them: a PostgreSQL URL such as
``postgresql+psycopg://app@db/app``, a Redis at ``redis://cache:6379/0``, two MariaDB ticket servers.
They run for real, on the servers they name: each URL an example writes is read as the test server
of its kind (:data:`harness.SERVERS`), in databases of the examples' own, emptied before each run,
so their sequences and namespaces meet no other test's.  Django models defined in an example
belong to this package's app (``docs_examples``), on an in-memory SQLite database.
"""
