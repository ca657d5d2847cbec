from django.contrib import admin
from django.urls import path
from library.views import lend

urlpatterns = [path("admin/", admin.site.urls), path("lend/", lend)]
