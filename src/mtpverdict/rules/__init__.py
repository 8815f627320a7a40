"""Rules: the rule kinds (one module each under rules/kinds/), their registry and the shipped policies."""

from mtpverdict.rules.registry import KINDS, RULE_KINDS, evaluate, load_policy, parse_rules, shipped_policies

__all__ = ["KINDS", "RULE_KINDS", "evaluate", "load_policy", "parse_rules", "shipped_policies"]
