"""The promotion gate: does the evidence support the speculative config a deployment will run, freshly?

What runs is proved first: a compose service is resolved by Compose itself (mtpverdict.compose) into
one argv, image and environment, and the program in front of the server's settings must be one the
gate models (mtpverdict.servecommand); anything it cannot tell is refused. What is proposed comes
from `--proposed` (off, k=N, METHOD:k=N or vLLM's config JSON), from the serve config itself
(serveconfig.extract_spec), or both, which must then agree. Three questions, all must pass.
(1) Evidence: some arm measured this configuration (method, depth and, when the serve config and the
boot argv both show them, every speculative setting); otherwise "no evidence for this configuration".
(2) Support: "off" is supported only by keep_mtp_disabled (keeping speculation off is a claim that needs
evidence too); a depth only by promote or keep_reference selecting that arm. A refusal cites the arm's
own failing rules. (3) Freshness: the serve arguments equal those every boot of the arm was collected
with, except the speculative flags (compared in (1)) and a literal listen address; the image is the
evidence's (repository and tag or digest), and every boot the decision relies on recorded the engine
version its tag names.

The logic runs over GateEvidence, a small typed view built in one place (evidence_from) from a
decision and its results directory. Modules: proposal, evidence, support (1-2), schedule, envelope,
fresh (3), run (evaluate, gate), ci (what CI sees).
"""

from __future__ import annotations

from mtpverdict.gate.ci import bad_input_summary, step_summary, write_ci_error, write_ci_files
from mtpverdict.gate.envelope import check_envelope, context_limit
from mtpverdict.gate.evidence import ArmEvidence, FailingRule, GateEvidence, evidence_from
from mtpverdict.gate.fresh import (
    LISTEN_FLAGS,
    argv_differences,
    check_fresh,
    image_version,
    normalise_argv,
    parse_image,
    short_flags,
)
from mtpverdict.gate.proposal import Proposal, ProposedSpec, parse_spec, resolve_proposal
from mtpverdict.gate.run import GateResult, cannot_tell, evaluate, gate
from mtpverdict.gate.schedule import data_parallel_refusal, differences, last_value, support_schedule
from mtpverdict.gate.support import support
from mtpverdict.serveconfig import read_serve_config

__all__ = [
    "LISTEN_FLAGS",
    "ArmEvidence",
    "FailingRule",
    "GateEvidence",
    "GateResult",
    "Proposal",
    "ProposedSpec",
    "argv_differences",
    "bad_input_summary",
    "cannot_tell",
    "check_envelope",
    "check_fresh",
    "context_limit",
    "data_parallel_refusal",
    "differences",
    "evaluate",
    "evidence_from",
    "gate",
    "image_version",
    "last_value",
    "normalise_argv",
    "parse_image",
    "parse_spec",
    "read_serve_config",  # re-exported: the reader lives in mtpverdict.serveconfig
    "resolve_proposal",
    "short_flags",
    "step_summary",
    "support",
    "support_schedule",
    "write_ci_error",
    "write_ci_files",
]
