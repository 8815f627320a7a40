"""Tests of the file formats (src/mtpverdict/formats/): results, policies, the JSON Schemas."""
