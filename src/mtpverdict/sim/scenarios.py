"""The synthetic fixture scenarios (fixtures/synthetic-*): each names the truth it encodes."""

from __future__ import annotations

import math

from mtpverdict.sim.campaign import Scenario, SimArm

SCENARIOS: dict[str, Scenario] = {
    "clean-win": Scenario(
        name="clean-win",
        description="every depth is faster than off at every concurrency; k2 is best",
        arms=(
            SimArm("off_A"),
            SimArm("k1", 1, 0.10),
            SimArm("k2", 2, 0.18),
            SimArm("k3", 3, 0.14),
            SimArm("off_B"),
        ),
        boots_per_arm=3,
    ),
    "crossover": Scenario(
        name="crossover",
        description=(
            "the best depth depends on concurrency: k2 is +30% at c=1 and -15% at c=8, k1 +12% and -3%, "
            "k3 +25% and -30% (log-linear in concurrency doublings)"
        ),
        arms=(
            SimArm("off_A"),
            SimArm("k1", 1, math.log(1.12), (math.log(0.97) - math.log(1.12)) / 3),
            SimArm("k2", 2, math.log(1.30), (math.log(0.85) - math.log(1.30)) / 3),
            SimArm("k3", 3, math.log(1.25), (math.log(0.70) - math.log(1.25)) / 3),
            SimArm("off_B"),
        ),
        boots_per_arm=3,
        concurrency=(1, 2, 4, 8),
    ),
    "null": Scenario(
        name="null",
        description="no effect anywhere: every depth runs exactly as fast as off",
        arms=(SimArm("off_A"), SimArm("k1", 1), SimArm("k2", 2), SimArm("k3", 3), SimArm("off_B")),
        boots_per_arm=3,
    ),
    "void-arm": Scenario(
        name="void-arm",
        description="k2's head is broken: it drafts but accepts nothing; k1 and k3 win",
        arms=(
            SimArm("off_A"),
            SimArm("k1", 1, 0.10),
            SimArm("k2", 2, -0.05, first_position_rate=0.0),
            SimArm("k3", 3, 0.14),
            SimArm("off_B"),
        ),
        boots_per_arm=3,
    ),
    "drift": Scenario(
        name="drift",
        description="the seat drifts 12% faster from the first boot to the last; no true effect",
        arms=(SimArm("off_A"), SimArm("k1", 1), SimArm("k2", 2), SimArm("k3", 3), SimArm("off_B")),
        boots_per_arm=1,
        drift_total=0.12,
    ),
    "blind": Scenario(
        name="blind",
        description="the harness serialises requests: aggregate throughput is flat in concurrency",
        arms=(
            SimArm("off_A"),
            SimArm("k1", 1, 0.10),
            SimArm("k2", 2, 0.18),
            SimArm("k3", 3, 0.14),
            SimArm("off_B"),
        ),
        boots_per_arm=3,
        stream_scaling=-1.0,
    ),
}
