"""The code examples of README.md and docs/, run as a user runs them (``make test-docs``).

Each page's ``python`` blocks run as one program in a process of its own (or pasted into ``python -m
asyncio``), a Django ``models.py`` block in a project made by ``django-admin startproject``, and the
examples a page includes from ``examples/`` as their docstrings say. The examples are written as a
user reads them: a PostgreSQL URL such as ``postgresql+psycopg://app@db/app``, a Redis at
``redis://cache:6379/0``, two MariaDB ticket servers; each URL an example writes is read as the test
server of its kind (:data:`harness.SERVERS`), in databases of the examples' own, emptied before each
run, so their sequences and namespaces meet no other test's.
"""
