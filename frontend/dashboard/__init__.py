"""The support dashboard at ``/support/dashboard/``: plots of the figures in backend/notifications/aggregates.py."""
