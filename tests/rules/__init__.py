"""Unit tests of the rule kinds on small hand-made evidence, one module per kind, and of their registry."""
