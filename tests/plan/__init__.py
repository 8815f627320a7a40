"""Tests of the planner: designs, pilots, the way out of inconclusive."""
