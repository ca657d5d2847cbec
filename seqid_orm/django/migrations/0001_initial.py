from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies: list[tuple[str, str]] = []

    operations = [
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
    ]
