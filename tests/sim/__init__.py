"""Tests of the campaign simulator's command and of campaign planning."""
