"""Tests of the report: files, images, determinism and the `report` command."""
