"""The looks file (raw/looks.jsonl): every decision taken on a results directory, and every resume.

One JSON object a line, appended, never rewritten:
- a look: {"kind": "look", "look": k, "boot_records": n, "records_sha256": s, "policy_sha256": p,
  "history_sha256": h, "alpha": a, "planned": L, "policy_alpha": f, "chain": c} — the k-th decision
  on the directory (f: the alpha of its policy, which caps what every later look may share),
  taken on its n boot records (records.jsonl's hash s) under the policy whose hash is p and the noise
  histories whose digest is h (`history_digest`), at alpha a of the planned L looks. A decision is
  that look again only when all three match: the same records under another policy or history are
  another look (lines written before p and h were recorded load with them empty, matching nothing).
  `mtpverdict decide` writes one when it decides on data no recorded look has seen, and so does
  `collect --until-resolved` before each round;
- a resume: {"kind": "resume", "boot_records": n, "chain": c} — collect raised `boots` and continued
  a directory holding n boot records (a look on those records is counted even when no decision on
  them was recorded: decide/looks.py);
- a handover: {"kind": "handover", "campaign": id, "taker": t, "chain": c} — campaign id began as
  this one's continuation (`collect --continues`; t: the results directory it was collected into,
  or `shards:` and the campaign file its shards share) and took the alpha its looks left: no later
  look here can promote, and a continuation by any other collect carries nothing.

The lines are a hash chain: c is the SHA-256 of the previous line's c (CHAIN_START for the first
line) followed by the line's canonical JSON without c. An edited, reordered or removed line breaks
every c after it, so alpha cannot be refunded by editing the file without the decision seeing it
(`LookLog.tampered`, which decide/looks.py turns into a provisional decision). Lines written before
the chain (no c) are read and reported the same way: nothing shows whether lines were removed.
A line that does not parse, or holds an unknown key, is refused with the file and line.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtpverdict.errors import Problem, ResultsError

LOOKS_FILE = "raw/looks.jsonl"
CHAIN_KEY = "chain"
CHAIN_START = "mtpverdict.looks/1"  # what the first line's chain hashes in front of its record
_LOOK_KEYS = {"kind", "look", "boot_records", "records_sha256", "alpha", "planned"}
_DIGEST_KEYS = {"policy_sha256", "history_sha256"}  # absent from lines written before them
_FAMILY_KEY = "policy_alpha"  # the alpha of the look's policy (absent from lines written before it)
_HANDOVER_KEYS = {"kind", "campaign", "taker"}
_RESUME_KEYS = {"kind", "boot_records"}
MAX_LOOKS_BYTES = 1 << 20  # a look is ~220 bytes: thousands of looks, never a reason to read more


@dataclass(frozen=True, slots=True)
class Look:
    """One recorded decision on the directory."""

    look: int
    boot_records: int
    records_sha256: str
    alpha: float
    planned: int
    policy_sha256: str = ""  # empty: recorded before policies were (matches no decision)
    history_sha256: str = ""
    policy_alpha: float | None = None  # the alpha of the policy it was decided under (None: not recorded)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": "look",
            "look": self.look,
            "boot_records": self.boot_records,
            "records_sha256": self.records_sha256,
            "policy_sha256": self.policy_sha256,
            "history_sha256": self.history_sha256,
            "alpha": self.alpha,
            "planned": self.planned,
        } | ({} if self.policy_alpha is None else {_FAMILY_KEY: self.policy_alpha})

    @property
    def seen(self) -> tuple[str, str, str]:
        """What makes a decision this look again: its records, policy and histories."""
        return (self.records_sha256, self.policy_sha256, self.history_sha256)


def history_digest(sha256s: Sequence[str]) -> str:
    """One digest of the noise histories a decision used (their records' hashes, in any order)."""
    return hashlib.sha256("\n".join(sorted(sha256s)).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class LookLog:
    """Every look and every resume recorded on a results directory, in order.

    `tampered` says where the hash chain breaks (a line edited, reordered or removed) or that the file
    predates it; empty when the chain holds or there is no file.
    """

    looks: tuple[Look, ...] = ()
    resumes: tuple[int, ...] = ()  # boot records present when collect resumed
    handovers: tuple[Handover, ...] = ()  # campaigns that continue this one (collect --continues)
    tampered: str = ""
    head: str = CHAIN_START  # the last line's chain (what the next line hashes in front of its record)


def chain_of(previous: str, record: dict[str, Any]) -> str:
    """The chain value of a line holding `record` (without its chain) after a line whose chain is
    `previous`."""
    body = json.dumps({k: v for k, v in record.items() if k != CHAIN_KEY}, sort_keys=True)
    return hashlib.sha256(f"{previous}\n{body}".encode()).hexdigest()


def _bad(path: Path, line: int, message: str) -> ResultsError:
    return ResultsError([Problem(str(path), f"{message}; fix or delete the line", line=line)])


@dataclass(frozen=True, slots=True)
class Handover:
    """A campaign that began as this one's continuation and took what its looks left; `taker` says
    which collect it was (its results directory, or the campaign file its shards share)."""

    campaign: str
    taker: str


def _handover(obj: dict[str, Any], path: Path, line: int) -> Handover:
    if set(obj) - {CHAIN_KEY} != _HANDOVER_KEYS:
        raise _bad(path, line, f"handover record keys must be {sorted(_HANDOVER_KEYS)}, not {sorted(obj)}")
    if any(not isinstance(obj[k], str) or not obj[k] for k in ("campaign", "taker")):
        raise _bad(path, line, "campaign and taker must be non-empty strings")
    if CHAIN_KEY in obj and not isinstance(obj[CHAIN_KEY], str):
        raise _bad(path, line, f"{CHAIN_KEY} must be a string")
    return Handover(str(obj["campaign"]), str(obj["taker"]))


def _parse(obj: Any, path: Path, line: int) -> Look | int | Handover:
    if not isinstance(obj, dict) or obj.get("kind") not in ("look", "resume", "handover"):
        raise _bad(path, line, "not a look, resume or handover record")
    if obj["kind"] == "handover":
        return _handover(obj, path, line)
    keys = _LOOK_KEYS if obj["kind"] == "look" else _RESUME_KEYS
    found = set(obj) - {CHAIN_KEY}
    later = (keys | _DIGEST_KEYS, keys | _DIGEST_KEYS | {_FAMILY_KEY}) if obj["kind"] == "look" else ()
    if found != keys and found not in later:
        allowed = sorted(keys | _DIGEST_KEYS | {_FAMILY_KEY}) if obj["kind"] == "look" else sorted(keys)
        raise _bad(path, line, f"{obj['kind']} record keys must be {allowed}, not {sorted(obj)}")
    if CHAIN_KEY in obj and not isinstance(obj[CHAIN_KEY], str):
        raise _bad(path, line, f"{CHAIN_KEY} must be a string")
    ints = ("look", "boot_records", "planned") if obj["kind"] == "look" else ("boot_records",)
    if any(not isinstance(obj[k], int) or isinstance(obj[k], bool) or obj[k] < 0 for k in ints):
        raise _bad(path, line, f"{', '.join(ints)} must be non-negative integers")
    if obj["kind"] == "resume":
        return int(obj["boot_records"])
    alpha = obj["alpha"]
    if not isinstance(alpha, int | float) or isinstance(alpha, bool) or not 0.0 <= float(alpha) < 1.0:
        raise _bad(path, line, "alpha must be a number in [0, 1)")
    digests = ("records_sha256", *sorted(_DIGEST_KEYS & set(obj)))
    if any(not isinstance(obj[k], str) for k in digests):
        raise _bad(path, line, f"{', '.join(digests)} must be strings")
    family = obj.get(_FAMILY_KEY)
    if family is not None and (
        not isinstance(family, int | float) or isinstance(family, bool) or not 0.0 < float(family) < 1.0
    ):
        raise _bad(path, line, f"{_FAMILY_KEY} must be a number in (0, 1)")
    return Look(
        obj["look"],
        obj["boot_records"],
        obj["records_sha256"],
        float(alpha),
        obj["planned"],
        obj.get("policy_sha256", ""),
        obj.get("history_sha256", ""),
        None if family is None else float(family),
    )


def read_looks(results_dir: str | os.PathLike[str]) -> LookLog:
    """The looks file of a results directory (empty when absent)."""
    path = Path(results_dir) / LOOKS_FILE
    if not path.is_file():
        return LookLog()
    if path.stat().st_size > MAX_LOOKS_BYTES:
        raise ResultsError([Problem(str(path), f"larger than {MAX_LOOKS_BYTES} bytes; not a looks file")])
    looks: list[Look] = []
    resumes: list[int] = []
    handovers: list[Handover] = []
    head, tampered = CHAIN_START, ""
    for i, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except ValueError:
            raise _bad(path, i, "not JSON") from None
        found = _parse(obj, path, i)
        if isinstance(found, Look):
            looks.append(found)
        elif isinstance(found, Handover):
            handovers.append(found)
        else:
            resumes.append(found)
        expected = chain_of(head, obj)
        if not tampered and obj.get(CHAIN_KEY) != expected:
            tampered = (
                f"{LOOKS_FILE} line {i} has no chain (written before looks were chained)"
                if CHAIN_KEY not in obj
                else f"{LOOKS_FILE} line {i} does not follow the line before it (edited, reordered or "
                "a line removed)"
            )
        head = str(obj.get(CHAIN_KEY, expected))
    return LookLog(tuple(looks), tuple(resumes), tuple(handovers), tampered, head)


def _append(results_dir: str | os.PathLike[str], obj: dict[str, Any]) -> str:
    """Append one line holding `obj` and return its chain value (the file's new head)."""
    path = Path(results_dir) / LOOKS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    chain = chain_of(read_looks(results_dir).head, obj)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({**obj, CHAIN_KEY: chain}, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return chain


def append_look(results_dir: str | os.PathLike[str], look: Look) -> None:
    """Record a look, unless a recorded look already saw the same records under the same policy and
    histories (then it is that look)."""
    # an interim look spent nothing: the same records decided again when complete spend, and count
    if any(
        x.seen == look.seen and (x.alpha > 0.0 or look.alpha <= 0.0) for x in read_looks(results_dir).looks
    ):
        return
    _append(results_dir, look.as_dict())


def holds_chain(path: Path, chain: str) -> bool | None:
    """Whether the looks file at `path` has a line whose chain value is `chain`; None when it cannot
    be read (a line that does not parse is passed over: this only tells one directory from another)."""
    try:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    found = json.loads(line)
                except ValueError:
                    continue
                if isinstance(found, dict) and found.get(CHAIN_KEY) == chain:
                    return True
    except OSError:
        return None
    return False


@contextlib.contextmanager
def held_looks(results_dir: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive lock on the directory's looks file: a decision planning and recording its
    look, and a continuation reading and handing over what is left, take it, so neither happens in
    the middle of the other. A directory that cannot take the file (read-only) is not locked: nothing
    can be recorded in it either."""
    path = Path(results_dir) / LOOKS_FILE
    try:
        if path.parent.parent.is_dir():
            path.parent.mkdir(exist_ok=True)  # a directory without raw/ is locked from the start too
        held = path.open("a", encoding="utf-8") if path.parent.is_dir() else None
    except OSError:
        held = None
    if held is None:
        yield
        return
    with held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        yield


def hand_over(source: str, campaign: str, taker: str) -> dict[str, Any]:
    """Begin campaign `campaign` (collected by `taker`: its results directory, or the campaign file
    its shards share) as a continuation of `source`: its `continues` (continuation), and, when
    `source` is a results directory whose alpha no collect took yet, a handover line there, so what
    it left is spent once: later looks on `source`, and a second continuation of it, carry nothing
    (decide/looks.py). The read and the append hold an exclusive lock on the looks file, so two
    continuations begun at once cannot both take it. `looks_chain` is the chain after the handover
    line, so a reviewer can tell the line was removed. Raises OSError when it cannot be written."""
    directory = Path(source)
    if _campaign_of(directory) is None:
        return continuation(source, taker)
    with held_looks(directory):
        found, log = _continuation(source, taker)
        if "handed_over" in found or (log is not None and log.handovers):
            return found  # taken by another collect, or by this one already (a restart, a shard)
        head = _append(directory, {"kind": "handover", "campaign": campaign, "taker": taker})
        return {**found, "looks_chain": head} if found.get("looks_chain") else found


def append_resume(results_dir: str | os.PathLike[str], boot_records: int) -> None:
    """Record that collect raised boots and continued a directory holding `boot_records` boot records."""
    _append(results_dir, {"kind": "resume", "boot_records": boot_records})


MAX_CAMPAIGN_BYTES = 1 << 22  # a campaign.json this large is not one


def _campaign_of(directory: Path) -> dict[str, Any] | None:
    path = directory / "campaign.json"
    try:
        if path.stat().st_size > MAX_CAMPAIGN_BYTES:
            return None
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) and isinstance(found.get("id"), str) else None


def continuation(source: str, taker: str | None = None) -> dict[str, Any]:
    """campaign.json's `continues` for a new campaign continuing `source`, begun by `taker`
    (hand_over): a results directory (its campaign id, and the alpha its recorded looks spent, with
    any campaign it continued in turn, and `handed_over` when another collect took what it left), or
    a campaign id whose directory is not at hand (its looks not available)."""
    return _continuation(source, taker)[0]


def _continuation(source: str, taker: str | None) -> tuple[dict[str, Any], LookLog | None]:
    """continuation, and the looks it read (None: no results directory with a campaign there)."""
    directory = Path(source)
    campaign = _campaign_of(directory) if directory.is_dir() else None
    if campaign is None:
        why = (
            f"{source} holds no readable campaign.json"
            if directory.is_dir()
            else f"no results directory {source} here: its looks were not available when this campaign began"
        )
        return {"campaign": directory.name or source, "spent_alpha": None, "unavailable": why}, None
    log = read_looks(directory)
    before = campaign.get("continues") if isinstance(campaign.get("continues"), dict) else {}
    carried = before.get("spent_alpha", 0.0) if before else 0.0
    out: dict[str, Any] = {"campaign": campaign["id"], "looks": len(log.looks), "looks_chain": None}
    # the first collect to continue it took what it left (the same one again: a restart, a shard)
    if log.handovers:
        first = log.handovers[0]
        gone = None if first.taker == taker else first.campaign
    else:
        gone = before.get("handed_over") if before else None
    if isinstance(gone, str) and gone:
        out["handed_over"] = gone  # what it left is that campaign's: this one carries nothing
    unseen = [r for r in log.resumes if r > 0 and all(x.boot_records != r for x in log.looks)]
    why = ""
    if log.tampered:
        why = log.tampered
    elif not log.looks:
        why = f"{source} has no recorded look ({LOOKS_FILE}): a decision taken on it cannot be counted"
    elif unseen:
        why = f"{source} was resumed after {unseen[0]} boot records without a recorded look there"
    elif before and carried is None:
        why = f"{source} continues {before.get('campaign')}, whose looks were not available"
    if why:
        return {**out, "spent_alpha": None, "unavailable": why}, log
    spent = float(carried) + sum(x.alpha for x in log.looks)
    return {**out, "spent_alpha": spent, "looks_chain": log.head}, log
