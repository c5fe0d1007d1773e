"""Registered estimators, one module each (see :mod:`dpaudit.bounds.registry`)."""
