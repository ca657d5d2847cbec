"""Multi-db router: LegacyRecord lives on the 'legacy' database, everything else on 'default'."""


class LegacyRouter:
    def _db(self, model):
        return "legacy" if model._meta.model_name == "legacyrecord" else "default"

    def db_for_read(self, model, **hints):
        return self._db(model)

    def db_for_write(self, model, **hints):
        return self._db(model)

    def allow_relation(self, obj1, obj2, **hints):
        return None

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        if app_label != "testapp":
            return db == "default"
        if model_name == "legacyrecord":
            return True  # on both, so explicit using= can be tested
        return db == "default"
