"""A small REST API over the test models, as a user of Django REST framework would write it."""

from __future__ import annotations

from rest_framework import routers, serializers, viewsets

from seqid_orm.django.rest_framework import PublicIdField, PublicIdLookupMixin

from .models import Author, Book, Event

# newest first: the first masks, every one unmasks (key rotation)
PUBLIC_ID_KEYS = [b"public-id-key-2026-11-new-000000", b"public-id-key-2025-01-old-000000"]


class EventSerializer(serializers.ModelSerializer):
    class Meta:
        model = Event
        fields = ["id", "name"]


class AuthorSerializer(serializers.ModelSerializer):
    id = PublicIdField(PUBLIC_ID_KEYS, read_only=True)

    class Meta:
        model = Author
        fields = ["id", "name"]


class BookSerializer(serializers.ModelSerializer):
    id = PublicIdField(PUBLIC_ID_KEYS, read_only=True)
    author = PublicIdField(PUBLIC_ID_KEYS, model=Author, source="author_id")  # a reference by its public id

    class Meta:
        model = Book
        fields = ["id", "title", "author"]


class EventViewSet(viewsets.ModelViewSet):
    queryset = Event.objects.order_by("id")
    serializer_class = EventSerializer


class AuthorViewSet(PublicIdLookupMixin, viewsets.ModelViewSet):
    queryset = Author.objects.order_by("id")
    serializer_class = AuthorSerializer
    public_id_keys = PUBLIC_ID_KEYS


class BookViewSet(viewsets.ModelViewSet):
    queryset = Book.objects.order_by("id")
    serializer_class = BookSerializer


router = routers.DefaultRouter()
router.register("events", EventViewSet)
router.register("authors", AuthorViewSet)
router.register("books", BookViewSet)
