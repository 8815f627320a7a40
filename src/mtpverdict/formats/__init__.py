"""On-disk formats: one module per format, each owning its typed models in both directions and its version.

formats/_check.py      the one validation mechanism (msgspec models, located problems, shared limits)
formats/results.py     results format v1: campaign.json and records.jsonl models
formats/results_io/    loading a results directory into tables (load, decode, checks); the crash-safe writer
formats/schemas.py     the JSON Schemas generated from the models
"""
