"""The public path of `verify` and `Verification` (docs/python-api.md); the code is decide/verify.py."""

from mtpverdict.decide.verify import Verification, verify

__all__ = ["Verification", "verify"]
