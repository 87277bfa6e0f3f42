"""The version, below everything (the login side writes it into every job it renders)."""

__version__ = "0.1.0"
