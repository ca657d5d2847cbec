from django.db import migrations, models

from seqid_orm.django.operations import CreateTableUnlessThere


class Migration(migrations.Migration):
    initial = True

    dependencies: list[tuple[str, str]] = []

    # The table may be there already: a store opened with create_table=True makes it.
    operations = [
        CreateTableUnlessThere(
            migrations.CreateModel(
                name="TicketCounter",
                fields=[
                    ("name", models.CharField(max_length=64, primary_key=True, serialize=False)),
                    ("next_value", models.BigIntegerField()),
                    ("step", models.BigIntegerField()),
                    ("value_offset", models.BigIntegerField()),
                ],
                options={
                    "verbose_name": "ticket sequence",
                    "db_table": "seqid_tickets",
                },
            ),
            ["name", "next_value", "step", "value_offset"],
        ),
    ]
