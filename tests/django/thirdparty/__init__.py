"""An app the project cannot edit, as django-silk and django-q2 are: its keys are random UUIDs, and
the test settings name it in ``SEQID["SWAP_RANDOM_KEY_APPS"]``."""
