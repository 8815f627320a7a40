"""Tests of the gate (src/mtpverdict/gate/): support, schedules, the shipped CI example."""
