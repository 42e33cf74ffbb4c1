from django.urls import path

from notify import views

urlpatterns = [
    path("notifications/", views.notifications, name="notifications"),
    path("notifications/channels/", views.channel_add, name="notify_channel_add"),
    path("notifications/channels/<int:pk>/test/", views.channel_test, name="notify_channel_test"),
    path(
        "notifications/channels/<int:pk>/rotate/",
        views.channel_rotate,
        name="notify_channel_rotate",
    ),
    path(
        "notifications/channels/<int:pk>/delete/",
        views.channel_delete,
        name="notify_channel_delete",
    ),
    path("notifications/subscriptions/", views.subscription_add, name="notify_subscription_add"),
    path(
        "notifications/subscriptions/<int:pk>/delete/",
        views.subscription_delete,
        name="notify_subscription_delete",
    ),
    path("jobs/<int:pk>/notify/", views.notify_me, name="job_notify"),
]
