"""Tests of what each engine provides: serve configs and their speculative flags."""
