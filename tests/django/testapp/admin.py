from django.contrib import admin

from .models import Author, Book, Event

admin.site.register(Author)
admin.site.register(Book)
admin.site.register(Event)
