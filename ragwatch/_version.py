"""The package version, in a module of its own so that modules needing it do not import the package root."""

__version__ = "0.1.0"
