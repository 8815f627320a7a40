"""Blocked campaign layout: which arm boots when on which device (controls drawn too), and the boot numbers.

Pure functions. A campaign on D devices runs every arm on every device, `rounds` times. Each round on
a device puts every arm, the controls included, in an order drawn at random for that device and round
from the campaign's `order_seed` (numpy's PCG64 seeded with [order_seed, 0, device, round]), so a
device's slow start or warm end can line up neither with one depth nor with the controls: with off_A
always first and off_B always last, one round per device made "control" and "at an end of the
device" the same thing, and first and last boots 5% slow promoted a null depth in half of the
campaigns. collect lays out a campaign without devices as one device, drawn the same way; seed None
(the simulator's default) keeps the file's order, round-robin.

Numbers are interleaved so shards collected apart never collide: the k-th boot of an arm on device i
(from 0) is boot (k - 1) D + i + 1, and the k-th boot on device i is at order (k - 1) D + i + 1. With
one device both are k: the numbering of a campaign without devices.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SHUFFLE_STREAM = 0  # the first word after the seed in the generator's seed sequence: arm order


@dataclass(frozen=True, slots=True)
class LaidBoot:
    """One planned boot: its device (index from 0), round, arm, and the numbers it is recorded under."""

    device: int
    round: int
    arm: str
    boot: int
    order: int


def boot_number(seq: int, device: int, devices: int) -> int:
    """The boot number of an arm's seq-th boot (from 1) on device `device` (from 0) of `devices`."""
    if seq < 1 or not 0 <= device < devices:
        raise ValueError(f"no boot {seq} on device {device} of {devices}")
    return (seq - 1) * devices + device + 1


def device_of(number: int, devices: int) -> int:
    """The device index (from 0) a boot number or an order belongs to."""
    if number < 1 or devices < 1:
        raise ValueError(f"no device for number {number} of {devices} devices")
    return (number - 1) % devices


def seq_of(number: int, devices: int) -> int:
    """The position (from 1) of a boot number or an order in its device's sequence."""
    return (number - 1) // devices + 1


def round_order(arms: Sequence[str], *, seed: int | None, device: int, round_: int) -> list[str]:
    """The arms of one round on one device, every arm (controls too) in an order drawn for it.

    seed None keeps the given order (a campaign without devices). Control arms are drawn like any
    other arm (a uniform permutation), so each position of the round is as likely to hold a control as
    a candidate and no slow position can favour one role.
    """
    names = list(arms)
    if seed is None or len(names) < 2:
        return names
    rng = np.random.default_rng([seed, SHUFFLE_STREAM, device, round_])
    return [names[i] for i in rng.permutation(len(names))]


def layout(arms: Sequence[str], *, devices: int, rounds: int, seed: int | None) -> tuple[LaidBoot, ...]:
    """Every planned boot of the campaign, in order (devices interleaved)."""
    if devices < 1 or rounds < 1:
        raise ValueError(f"a layout needs a device and a round, not {devices} and {rounds}")
    out: list[LaidBoot] = []
    for device in range(devices):
        position = 0
        for round_ in range(1, rounds + 1):
            for arm in round_order(arms, seed=seed, device=device, round_=round_):
                position += 1
                out.append(
                    LaidBoot(
                        device=device,
                        round=round_,
                        arm=arm,
                        boot=boot_number(round_, device, devices),
                        order=boot_number(position, device, devices),
                    )
                )
    return tuple(sorted(out, key=lambda b: b.order))
