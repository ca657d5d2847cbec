"""Run Django's own test modules with every ``models.UUIDField`` replaced by ``SeqUUIDField``:
``python -m tests.peers.django_swap TESTS_DIR [runtests.py arguments]``.

The swap is made before Django's test apps are imported, so it reaches the models' fields (the primary
key and the plain ones) and the test modules' own instances alike.  At exit it prints which fields
were swapped, so the caller can check the run tested seqid's field and not Django's.
"""

from __future__ import annotations

import atexit
import os
import runpy
import sys


def main() -> None:
    tests_dir = sys.argv[1]
    os.chdir(tests_dir)
    sys.path.insert(0, tests_dir)
    from django.db import models

    from seqid_orm.django.fields import SeqUUIDField

    bound: list[str] = []
    made = [0]
    init, contribute = SeqUUIDField.__init__, SeqUUIDField.contribute_to_class

    def counting_init(self: SeqUUIDField, *args: object, **kwargs: object) -> None:
        made[0] += 1
        init(self, *args, **kwargs)  # type: ignore[arg-type]

    def recording_contribute(self: SeqUUIDField, cls: type, name: str, *args: object, **kwargs: object) -> None:
        bound.append(f"{cls._meta.label}.{name}")  # type: ignore[attr-defined]
        contribute(self, cls, name, *args, **kwargs)  # type: ignore[arg-type]

    SeqUUIDField.__init__ = counting_init  # type: ignore[method-assign]
    SeqUUIDField.contribute_to_class = recording_contribute  # type: ignore[method-assign]
    models.UUIDField = SeqUUIDField  # type: ignore[misc]
    atexit.register(lambda: print(f"seqid swap: {made[0]} SeqUUIDField made; bound: {' '.join(sorted(set(bound)))}"))
    sys.argv = ["runtests.py", *sys.argv[2:]]
    runpy.run_path("runtests.py", run_name="__main__")


if __name__ == "__main__":
    main()
