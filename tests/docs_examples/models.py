"""The app Django models defined in the documentation's examples belong to (their module is this one)."""
