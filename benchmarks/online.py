"""Adding seqid's key column to a big table while the application reads and writes it: the plain SQL a DBA
would type for the same work in one transaction, beside seqid's online form (and, on request, its
single-transaction form, ``online=False``), on PostgreSQL and MariaDB, in rotated rounds.

For each server and form: a table of ``--rows`` rows (made server side), the application's traffic beside it
(``tests/traffic.py``: the old code inserting without the new column, a reader by key, and the new code
inserting with its own key once the column is there, each every 20 ms on connections of their own), then the
migration run by Alembic's command API in a process of its own.  Reported: the migration's time and peak
memory (its own ``ru_maxrss``), the longest wait of each kind of statement, the errors, and the writer's
latency over time as a chart.  Then the online form once more, killed at a random point of its batches and
run again, an audit trigger counting each row's key writes: every row written exactly once.

    python -m benchmarks.online [--rows 1000000] [--rounds 2] [--forms plain,online,offline] [--pg URL]
        [--mariadb URL] [--out bench-out/online]

About 6 minutes at 1,000,000 rows and two rounds on the project's two-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]

ENV_PY = """
from alembic import context
import sqlalchemy as sa
import seqid_orm.sqlalchemy.alembic  # noqa: F401

engine = sa.create_engine(context.config.get_main_option("sqlalchemy.url"), poolclass=sa.NullPool)
with engine.connect() as connection:
    context.configure(connection=connection, target_metadata=None, version_table="{table}_version")
    with context.begin_transaction():
        context.run_migrations()
"""

MIGRATION = """
revision = "0001"
down_revision = None
from alembic import op
import seqid_orm.sqlalchemy.alembic


def upgrade():
{body}


def downgrade():
    op.drop_seqid_column("{table}", "seq_id")
"""

#: What each form's migration does.  ``plain``: what a DBA would type for the same work, in the migration's one
#: transaction (PostgreSQL's) or one statement after another (MariaDB commits each DDL): the column, every
#: row's key made by the server from its time (the UUIDv7 expression seqid's server default uses, the
#: row's time for the clock), the unique constraint, NOT NULL, and the default for old code's inserts.
#: ``offline``: seqid's single-transaction form (``online=False``).  ``online``: seqid's default.
FORMS = ("plain", "online", "offline")
_SEQID = '    op.add_seqid_column("{table}", "seq_id", from_timestamp="created_at", online={online}{batch})'
_PLAIN_PG = """    key = seqid_orm.vendors.postgresql.ONLINE.key_at(Storage.NATIVE, Layout.TIME_FIRST, "created_at")
    default = seqid_orm.vendors.server_default("postgresql", (15,), "native").sql
    op.execute("ALTER TABLE {table} ADD COLUMN seq_id uuid")
    op.execute(f"UPDATE {table} SET seq_id = {{key}}")
    op.execute("ALTER TABLE {table} ADD CONSTRAINT uq_{table}_seq_id UNIQUE (seq_id)")
    op.execute(f"ALTER TABLE {table} ALTER COLUMN seq_id SET NOT NULL, ALTER COLUMN seq_id SET DEFAULT {{default}}")"""
# MariaDB commits each DDL statement: the default goes on before the rows are filled, or the old code's inserts
# meanwhile leave keys NULL and the NOT NULL fails at the end (as seqid's offline form did: see the docs)
_PLAIN_MARIADB = """    key = seqid_orm.vendors.mariadb.ONLINE.key_at(Storage.NATIVE, Layout.TIME_FIRST, "created_at")
    default = seqid_orm.vendors.server_default("mariadb", (10, 11, 19), "native").sql
    op.execute("ALTER TABLE {table} ADD COLUMN seq_id uuid NULL")
    op.execute(f"ALTER TABLE {table} ALTER COLUMN seq_id SET DEFAULT ({{default}})")
    op.execute(f"UPDATE {table} SET seq_id = {{key}} WHERE seq_id IS NULL")
    op.execute(
        f"ALTER TABLE {table} ADD UNIQUE INDEX uq_{table}_seq_id (seq_id), "
        f"MODIFY seq_id uuid NOT NULL DEFAULT ({{default}})"
    )"""
_IMPORTS = (
    "    import seqid_orm.vendors, seqid_orm.vendors.postgresql, seqid_orm.vendors.mariadb\n"
    "    from seqid_orm.vendors import Storage\n"
    "    from seqid_orm.ids.layout import Layout\n"
)

RUN = """
import resource, sys
from alembic import command
from alembic.config import Config
config = Config()
config.set_main_option("script_location", sys.argv[1])
config.set_main_option("sqlalchemy.url", sys.argv[2])
try:
    command.upgrade(config, "head")
finally:
    print("peak_rss_kb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""


def make_table(engine: sa.Engine, table: str, rows: int) -> None:
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}_version")
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}_audit")
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS seqid_fill_{table}_seq_id")
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql(f"CREATE TABLE {table} (id bigserial PRIMARY KEY, created_at timestamptz, note text)")
            for start in range(0, rows, 1_000_000):
                conn.exec_driver_sql(
                    f"INSERT INTO {table} (created_at, note) SELECT now() - g * interval '1 second', 'old' "
                    f"FROM generate_series({start + 1}, {min(start + 1_000_000, rows)}) g"
                )
            conn.exec_driver_sql(f"ANALYZE {table}")
        else:
            conn.exec_driver_sql(
                f"CREATE TABLE {table} (id bigint AUTO_INCREMENT PRIMARY KEY, created_at datetime(6), note varchar(20))"
            )
            for start in range(0, rows, 1_000_000):
                conn.exec_driver_sql(
                    f"INSERT INTO {table} (created_at, note) SELECT now(6) - INTERVAL seq SECOND, 'old' "
                    f"FROM seq_{start + 1}_to_{min(start + 1_000_000, rows)}"
                )
            conn.exec_driver_sql(f"ANALYZE TABLE {table}")


def project(
    tmp: Path,
    table: str,
    online: bool = True,
    form: str | None = None,
    vendor: str = "postgresql",
    batch_size: int | None = None,
) -> Path:
    """An Alembic project whose one migration adds the key column in ``form`` (:data:`FORMS`; by default
    seqid's online or offline form, as ``online`` says), in batches of ``batch_size`` rows where given."""
    form = form or ("online" if online else "offline")
    if form == "plain":
        body = _IMPORTS + (_PLAIN_PG if vendor == "postgresql" else _PLAIN_MARIADB).format(table=table)
    else:
        batch = "" if batch_size is None else f", batch_size={batch_size}"
        body = _SEQID.format(table=table, online=form == "online", batch=batch)
    where = tmp / f"{table}_{form}"
    (where / "versions").mkdir(parents=True, exist_ok=True)
    (where / "env.py").write_text(ENV_PY.format(table=table))
    (where / "script.py.mako").write_text("")
    (where / "versions" / "0001.py").write_text(MIGRATION.format(table=table, body=body))
    return where


def migration(where: Path, url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", RUN, str(where), url],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )


def measure(url: str, table: str, tmp: Path, where: Path, wait_ms: int = 600_000) -> dict:
    """The migration at ``where`` with the application's traffic beside it: what both saw (the traffic's
    statements may wait ``wait_ms`` for a lock: the benchmark lets them wait, to see how long; the tests
    give them the targets, so that a longer wait is an error the database reports)."""
    out, stop = tmp / f"{where.name}.json", tmp / f"{where.name}.stop"
    for stale in (out, stop, Path(str(out) + ".ready")):
        stale.unlink(missing_ok=True)
    traffic = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.traffic",
            url,
            table,
            str(out),
            str(stop),
            "--wait-ms=600000",
            "--new-code=seq_id",
        ],
        cwd=ROOT,
    )
    while not Path(str(out) + ".ready").exists():
        time.sleep(0.05)
    time.sleep(2)  # the traffic before the migration
    began = time.monotonic()
    run = migration(where, url)
    _out, err = run.communicate()
    took = time.monotonic() - began
    time.sleep(2)  # and after it
    stop.write_text("")
    traffic.wait()
    seen = json.loads(out.read_text())
    rss = next((int(line.split()[1]) for line in err.splitlines() if line.startswith("peak_rss_kb")), 0)
    return {
        "seconds": round(took, 1),
        "peak_rss_mb": round(rss / 1024, 1),
        "returncode": run.returncode,
        "said": err[-3000:],
        **seen,
    }


def kill_and_resume(engine: sa.Engine, url: str, table: str, tmp: Path, rows: int) -> dict:
    """The online form killed at a random point of its batches and run again: each row's key writes counted."""
    pg = engine.dialect.name == "postgresql"
    make_table(engine, table, rows)
    with engine.begin() as conn:
        kind = "uuid" if pg else "uuid NULL"
        conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN seq_id {kind}")
        conn.exec_driver_sql(f"CREATE TABLE {table}_audit (id bigint NOT NULL)")
        if pg:
            conn.exec_driver_sql(
                f"CREATE OR REPLACE FUNCTION {table}_audit() RETURNS trigger LANGUAGE plpgsql AS "
                f"$$ BEGIN INSERT INTO {table}_audit VALUES (NEW.id); RETURN NEW; END $$"
            )
            conn.exec_driver_sql(
                f"CREATE TRIGGER {table}_audit AFTER UPDATE OF seq_id ON {table} FOR EACH ROW "
                f"WHEN (OLD.seq_id IS DISTINCT FROM NEW.seq_id) EXECUTE FUNCTION {table}_audit()"
            )
        else:
            conn.exec_driver_sql(
                f"CREATE TRIGGER {table}_audit AFTER UPDATE ON {table} FOR EACH ROW "
                f"BEGIN IF NOT (OLD.seq_id <=> NEW.seq_id) THEN INSERT INTO {table}_audit VALUES (NEW.id); END IF; END"
            )
    # batches of a fixed 1 % of the rows: a kill lands between two of them wherever it falls (sized by time,
    # 100,000 rows made by the server took two batches, and the run could end before the kill was seen)
    where = project(tmp, table, online=True, batch_size=max(1, rows // 100))
    kill_at = random.randint(rows // 10, rows * 9 // 10)
    first = migration(where, url)
    while True:
        with engine.connect() as conn:
            done = conn.exec_driver_sql(f"SELECT count(*) FROM {table}_audit").scalar_one()
        if done >= kill_at or first.poll() is not None:
            break
        time.sleep(0.01)
    first.send_signal(signal.SIGKILL)
    first.wait()
    again = migration(where, url)
    _out, err = again.communicate()
    with engine.connect() as conn:
        twice = conn.exec_driver_sql(
            f"SELECT count(*) FROM (SELECT id FROM {table}_audit GROUP BY id HAVING count(*) > 1) d"
        ).scalar_one()
        written = conn.exec_driver_sql(f"SELECT count(DISTINCT id) FROM {table}_audit").scalar_one()
        missing = conn.exec_driver_sql(f"SELECT count(*) FROM {table} WHERE seq_id IS NULL").scalar_one()
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {table}_audit" + (f" ON {table}" if pg else ""))
        if pg:
            conn.exec_driver_sql(f"DROP FUNCTION IF EXISTS {table}_audit()")
    progress = sa.inspect(engine).has_table(f"seqid_fill_{table}_seq_id")
    return {
        "killed_after_rows": done,
        "progress_table_left": progress,
        "rerun_ok": again.returncode == 0,
        "rows_written_twice": twice,
        "rows_written": written,
        "rows_missing": missing,
        "rerun_said": [line for line in err.splitlines() if "resuming" in line][:1],
    }


def _last_error(said: str) -> str:
    """The exception a failed migration ended with: the last line naming one."""
    lines = [line for line in said.splitlines() if "Error" in line or "Exception" in line]
    return lines[-1].strip()[:300] if lines else said.strip().splitlines()[-1][:300]


def chart(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 1, figsize=(9, 3.2 * len(results)), squeeze=False)
    for ax, (server, forms) in zip(axes[:, 0], results.items(), strict=True):
        for form, seen in forms.items():
            if form not in FORMS:
                continue
            points = [(t, took) for t, kind, took in seen["timeline"] if kind == "insert"]
            ax.plot(
                [t for t, _ in points],
                [took for _, took in points],
                ".",
                ms=2,
                label=f"{form} ({seen['seconds']} s{', failed' if seen.get('failed') else ''})",
            )
        ax.set_yscale("log")
        ax.set_title(f"{server}: the old code's inserts while the column is added")
        ax.set_xlabel("seconds since the traffic began")
        ax.set_ylabel("insert latency (s)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2, help="rounds of every form, their order rotated")
    parser.add_argument("--forms", default="plain,online", help=f"which of {', '.join(FORMS)}")
    parser.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--mariadb", default="mysql+pymysql://root@127.0.0.1:3306/test")
    parser.add_argument("--out", default="bench-out/online")
    parser.add_argument("--only", choices=["postgresql", "mariadb"], default=None)
    parser.add_argument("--no-kill", action="store_true", help="skip the killed-and-resumed run")
    args = parser.parse_args(argv)
    forms = [f for f in args.forms.split(",") if f]
    if not forms or any(f not in FORMS for f in forms):
        parser.error(f"--forms takes {', '.join(FORMS)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    for server, url in (("postgresql", args.pg), ("mariadb", args.mariadb)):
        if args.only and server != args.only:
            continue
        engine = sa.create_engine(url, poolclass=sa.NullPool)
        table = f"seqid_online_{os.getpid()}"
        results[server] = {form: [] for form in forms}
        try:
            for round_ in range(args.rounds):
                for form in forms if round_ % 2 == 0 else list(reversed(forms)):  # rotated: neither always first
                    make_table(engine, table, args.rows)
                    seen = measure(url, table, out, project(out, table, form=form, vendor=server))
                    seen["failed"] = _last_error(seen["said"]) if seen["returncode"] != 0 else None
                    if seen["failed"] and form == "online":
                        raise SystemExit(f"the online migration failed on {server}: {seen['said']}")
                    results[server][form].append(seen)
                    failed = f" FAILED: {seen['failed']}" if seen["failed"] else ""
                    print(
                        f"{server} round {round_ + 1} {form}{failed}: {seen['seconds']} s, peak {seen['peak_rss_mb']} "
                        f"MB, longest waits: insert {seen['slowest_insert']:.3f} s, read {seen['slowest_read']:.3f} s, "
                        f"new-code insert {seen['slowest_new_insert']:.3f} s; {len(seen['errors'])} errors",
                        flush=True,
                    )
            if "plain" in forms and "online" in forms:
                ratios = [
                    round(o["seconds"] / p["seconds"], 2)
                    for o, p in zip(results[server]["online"], results[server]["plain"], strict=True)
                ]
                results[server]["online_over_plain"] = ratios
                print(f"{server}: online / plain, round by round: {ratios}", flush=True)
            if not args.no_kill:
                results[server]["kill"] = kill_and_resume(engine, url, table, out, args.rows)
                print(f"{server} killed and run again: {results[server]['kill']}", flush=True)
        finally:
            with engine.begin() as conn:
                for name in (table, f"{table}_version", f"{table}_audit", f"seqid_fill_{table}_seq_id"):
                    conn.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")
            engine.dispose()
    (out / "online.json").write_text(json.dumps(results))
    chart(
        {
            server: {form: runs[-1] for form, runs in found.items() if form in FORMS}
            for server, found in results.items()
        },
        out / "online.png",
    )
    print(f"wrote {out / 'online.json'} and {out / 'online.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
