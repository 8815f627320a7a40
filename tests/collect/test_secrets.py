"""Secrets never reach the results directory: the API key and the variables a campaign marks secret.

The fake server prints them as vLLM prints its non-default arguments, a few bytes per write (so the
collector reads each secret in pieces), and answers /version and /metrics with them; the boot command
carries one on its argv. No byte of any file under the results directory may hold one.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from mtpverdict.collect import Collector, load_campaign_file
from mtpverdict.collect.redact import REDACTED, Redactor

from .conftest import campaign_text, free_port

KEY_ENV = "MTPV_TEST_API_KEY"
TOKEN_ENV = "MTPV_TEST_TOKEN"


def _campaign(port: int) -> str:
    text = campaign_text(port, reps=1, concurrency="[1]")
    text = text.replace(
        '"--port", "{port}"',
        f'"--port", "{{port}}", "--token", "{{hf}}", "--leak-env", "{KEY_ENV}", "--leak-env", "{TOKEN_ENV}"',
        1,
    )
    assert "--leak-env" in text
    secret_keys = f'api_key_env = "{KEY_ENV}"\nsecrets = ["{TOKEN_ENV}", "hf"]\n'
    return text.replace("stall_seconds =", secret_keys + "stall_seconds =", 1)


def test_no_byte_under_the_results_directory_holds_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, token, hf = (f"sk-{secrets.token_hex(20)}" for _ in range(3))
    monkeypatch.setenv(KEY_ENV, key)
    monkeypatch.setenv(TOKEN_ENV, token)
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(_campaign(free_port()))
    out = tmp_path / "results"
    summary = Collector(
        load_campaign_file(campaign),
        out,
        variables={"hf": hf},
        resume=False,
        allow_argv_mismatch=False,
        on_event=lambda _: None,
    ).run()
    assert summary.boots == 4 and summary.failed_boots == 0
    files = [p for p in out.rglob("*") if p.is_file()]
    logs = [p for p in files if p.suffix == ".log"]
    assert len(logs) == 4
    for path in files:
        data = path.read_bytes()
        for secret in (key, token, hf):
            assert secret.encode() not in data, f"{path} holds a secret"
    log = logs[0].read_bytes()
    assert log.count(REDACTED.encode()) >= 3  # each was printed, and redacted: the test saw the leak
    boots = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    versions = {r["engine_version"] for r in boots if r["kind"] == "boot"}
    assert versions == {"0.0.0-fake" + REDACTED * 2}


def test_a_secret_split_at_every_byte_is_redacted() -> None:
    secret = "sk-0123456789"
    text = f"args: {{'api_key': '{secret}'}} and again {secret}{secret[:5]}".encode()
    for cut in range(len(text) + 1):
        for step in (1, 2, 3, 7):
            stream = Redactor([secret, "sk-01"]).stream()
            pieces = [text[:cut]] + [text[i : i + step] for i in range(cut, len(text), step)]
            written = b"".join(stream.feed(p) for p in pieces) + stream.flush()
            assert secret.encode() not in written and b"sk-01" not in written
            assert written.count(REDACTED.encode()) == 3, (cut, step, written)


def test_values_are_redacted_in_keys_lists_and_nested_records() -> None:
    redactor = Redactor(["s3cret"])
    record = {"argv": ["--token", "s3cret"], "error": "bad s3cret!", "s3cret": {"x": ("s3cret",)}, "n": 1}
    assert redactor.value(record) == {
        "argv": ["--token", REDACTED],
        "error": f"bad {REDACTED}!",
        REDACTED: {"x": (REDACTED,)},
        "n": 1,
    }
    assert not Redactor(["", ""]) and Redactor([]).value(record) is record


@pytest.mark.parametrize("keys", [(), ("sk-live-abc123",)])
def test_text_with_a_lone_surrogate_comes_out_utf8_and_still_redacted(keys: tuple[str, ...]) -> None:
    """A server's JSON can escape a lone surrogate into an error or a note: the text must still encode
    (a record or campaign.json holding it could not be written), whether or not a secret is set."""
    text = "bad \ud800 thing" + "".join(f" {s}\udcff" for s in keys)
    out = Redactor(keys).text(text)
    out.encode("utf-8")  # raised UnicodeEncodeError before
    assert "\\ud800" in out and all(s not in out for s in keys)
