import uuid

from django.db import models


def new_task_id() -> str:
    """django-q2's way: a random UUID as 32 hex digits."""
    return uuid.uuid4().hex


class Request(models.Model):
    """django-silk's key: a UUIDField filled by uuid4."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4)
    path = models.CharField(max_length=50, default="/")


class Task(models.Model):
    id = models.CharField(primary_key=True, max_length=32, default=new_task_id)
