"""The package version, single source for the build and the decision files."""

__version__ = "0.1.0"
