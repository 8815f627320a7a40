"""Tests of the decision engine (src/mtpverdict/decide/): schedules, labels, calibration, no evidence."""
