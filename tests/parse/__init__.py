"""Tests of the engine-text parsers, the vllm bench importer and their commands."""
