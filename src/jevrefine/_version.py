"""The installed version of jevrefine."""

__version__ = "0.1.0"
