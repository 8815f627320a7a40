"""The stats core: pure functions over record tables and arrays; no I/O, explicit seeds."""
