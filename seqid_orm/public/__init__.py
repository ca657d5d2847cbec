"""Public ids: a time-ordered key shown to the world without its creation time (:mod:`.masking`,
a keyed and reversible mask that turns the key into a well-formed UUIDv4 and back).

May import :mod:`seqid_orm.ids` and :mod:`seqid_orm.errors` (the standard library's ``hashlib``
does the cryptography).  The adapters' look-ups by public id live beside each ORM
(``seqid_orm.sqlalchemy.public_ids``, ``seqid_orm.django.public_ids``).
"""
