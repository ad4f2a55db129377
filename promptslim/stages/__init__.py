"""Pipeline stages: each a small class behind the ``Stage`` protocol (see ``base``)."""
