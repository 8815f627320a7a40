"""Importers: turn other tools' result files into results format v1 records."""

from mtpverdict.importers.vllm_bench import ImportReport, import_vllm_bench

__all__ = ["ImportReport", "import_vllm_bench"]
