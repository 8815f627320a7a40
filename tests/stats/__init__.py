"""Tests of the pure statistics (src/mtpverdict/stats/), one file per module or procedure."""
