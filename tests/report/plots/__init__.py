"""Tests of the report's plots: the registry of plot modules."""
