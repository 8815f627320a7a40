"""Policies as data: TOML rules files, their validation, and the fixed set of rule kinds."""

from mtpverdict.rules.policy import POLICY_VERSION, RULE_KINDS, Policy, Rule, load_policy, shipped_policies

__all__ = ["POLICY_VERSION", "RULE_KINDS", "Policy", "Rule", "load_policy", "shipped_policies"]
