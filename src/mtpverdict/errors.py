"""The exception tree: every error the library raises on purpose, each naming where the problem is.

    MtpverdictError
    ├── InputError          bad input: one or more Problems, each naming file, line and key
    │   ├── ResultsError    a results directory (campaign.json, records.jsonl, raw/)
    │   ├── PolicyError     a rules (policy) TOML file
    │   ├── CampaignError   a campaign TOML file for `collect`
    │   ├── EngineTextError engine text given to `parse` or an importer
    │   └── UnknownImporterError an importer name none is registered under (also a ValueError)
    ├── CollectError        a campaign could not be run (server, network, disk)
    └── UnknownArmError     a decision asked for an arm it does not hold (also a KeyError)

A caller that catches ``InputError`` prints ``str(problem)`` for each problem and exits 2; nothing
that raised it may be turned into a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from mtpverdict._text import terminal_safe


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with an input: where it is, what is wrong and how to fix it."""

    source: str
    message: str
    line: int | None = None
    key: str | None = None

    def __str__(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        if self.key:
            where = f"{where}: {self.key}"
        return printable(f"{where}: {self.message}")


def printable(text: str) -> str:
    """One line whatever the input held: control characters (newlines, escapes) shown escaped."""
    return terminal_safe(text)


class MtpverdictError(Exception):
    """Base of every error raised on purpose by mtpverdict."""


class InputError(MtpverdictError):
    """An input is malformed; ``problems`` lists every problem found (at least one)."""

    def __init__(self, problems: list[Problem] | tuple[Problem, ...], total: int | None = None) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        if not self.problems:
            raise ValueError("InputError needs at least one problem")
        # total counts problems beyond those kept (loaders stop collecting after a limit)
        self.total = max(total or 0, len(self.problems))
        super().__init__(str(self.problems[0]))


class ResultsError(InputError):
    """A results directory breaks results format v1."""


class PolicyError(InputError):
    """A rules file breaks policy format v1."""


class CampaignError(InputError):
    """A campaign file for `collect` is malformed."""


class EngineTextError(InputError):
    """Engine output (logs, metrics, bench JSON) could not be read."""


class CollectError(MtpverdictError):
    """A campaign could not be run or continued."""


class UnknownImporterError(InputError, ValueError):
    """An importer name none is registered under: an input error, and the ValueError the importers'
    callers caught before it was one."""


class UnknownArmError(MtpverdictError, KeyError):
    """A decision was asked for an arm it does not hold; the message names the arms it does."""

    def __init__(self, name: str, arms: tuple[str, ...]) -> None:
        self.name = name
        self.arms = arms
        super().__init__(f"no arm {name!r} in this decision; its arms are {', '.join(arms) or 'none'}")

    def __str__(self) -> str:  # KeyError would show the message quoted
        return str(self.args[0])
