"""Tests of the gate (src/mtpverdict/gate.py): support, schedules, the shipped CI example."""
