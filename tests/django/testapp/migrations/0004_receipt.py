from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("testapp", "0003_visit"),
    ]

    operations = [
        migrations.CreateModel(
            name="Receipt",
            fields=[
                ("id", models.UUIDField(primary_key=True, serialize=False)),
            ],
        ),
    ]
